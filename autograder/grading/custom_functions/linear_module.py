"""The grader of notebook 04's Linear module: parameters, nn.Linear's initialisation, F.linear's values."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.custom_functions.linear_module import LINEAR_MODULE, module_inputs
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference, report_for
from autograder.grading.toolkit import add_notes


def _nn_linear_params(data: dict[str, Any]) -> dict[str, np.ndarray]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(data["torch_seed"])
        ref = nn.Linear(data["in"], data["out"], bias=data["bias"])
    return {n: p.detach().numpy().copy() for n, p in ref.named_parameters()}


def _bias_first_params(data: dict[str, Any]) -> dict[str, np.ndarray]:
    """nn.Linear's initialisation with the two draws in the wrong order: a mistake feedback can name."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(data["torch_seed"])
        params = {}
        if data["bias"]:
            bound = 1 / math.sqrt(data["in"])
            params["bias"] = torch.empty(data["out"]).uniform_(-bound, bound).numpy()
        weight = torch.empty(data["out"], data["in"])
        nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
        params["weight"] = weight.numpy()
    return params


@grader(LINEAR_MODULE)
def grade_linear_module(evidence: Evidence) -> Report:
    """Grade recorded evidence: parameters registered (0.5), initialised exactly like nn.Linear (1),
    forward and backward match F.linear in float64 (1), bias=False (0.5), uses LinearFunction (0.5)."""
    report = report_for(LINEAR_MODULE)
    cases = evidence["cases"]
    inputs = module_inputs(evidence["seed"])
    with_bias = [label for label, d in inputs.items() if d["bias"]]
    no_bias = [label for label, d in inputs.items() if not d["bias"]][0]

    def failing(name: str, labels: Sequence[str], weight: float, step: str = "error") -> Item | None:
        """The item, failed with the first error of the step it needs (or of an earlier one), if any."""
        steps = ("error", "forward_error", "backward_error")
        for label in labels:
            for key in steps[: steps.index(step) + 1]:
                if cases[label][key]:
                    return Item(name, False, f"{label}: {cases[label][key]}", weight)
        return None

    item = failing("parameters registered", list(inputs), 0.5)
    if item is None:
        item = Item(
            "parameters registered", True, "named_parameters() gives weight (out, in) and bias (out,)", 0.5
        )
        for label, data in inputs.items():
            names = cases[label]["names"]
            wanted = ["weight", "bias"] if data["bias"] else ["weight"]
            if sorted(names) != sorted(wanted):
                item = Item(
                    item.name,
                    False,
                    f"{label}: named_parameters() gives {names or 'nothing'}, expected {wanted}: wrap each "
                    "tensor in nn.Parameter and assign it as self.weight / self.bias (with bias=False, "
                    "self.register_parameter('bias', None)).",
                    0.5,
                )
                break
    report.add(item)

    init = failing("initialised like nn.Linear", list(inputs), 1.0)
    if init is None:
        init = Item(
            "initialised like nn.Linear",
            True,
            "the same weight and bias as nn.Linear from the same torch.manual_seed",
            1.0,
        )
        for label, data in inputs.items():
            ref = _nn_linear_params(data)
            got = cases[label]["params"]
            swapped = _bias_first_params(data)
            for n, want in ref.items():
                mistakes = {
                    "the bias drawn before the weight: nn.Linear initialises the weight first, so the "
                    "same seed gives other numbers": swapped[n]
                }
                verdict = compare(f"{n} of {label}", got.get(n), want, dtype=np.float32, mistakes=mistakes)
                if not verdict.ok:
                    hint = (
                        " Likely mistake: a different initialisation or order of draws: nn.Linear makes "
                        "torch.empty(out, in) and torch.empty(out), then calls kaiming_uniform_(weight, "
                        "a=math.sqrt(5)) and, for the bias, uniform_(-1/sqrt(in), 1/sqrt(in)), in that order."
                        if verdict.problem == "values" and not verdict.likely
                        else ""
                    )
                    init = Item(init.name, False, verdict.message() + hint, 1.0)
                    break
            if not init.passed:
                break
    report.add(init)

    def forward_item(name: str, labels: Sequence[str], weight: float) -> Item:
        item = failing(name, labels, weight, "backward_error")
        if item is not None:
            return item
        for label in labels:
            data, record = inputs[label], cases[label]
            params = record["params64"]
            W = params.get("weight")
            if not isinstance(W, np.ndarray) or W.shape != (data["out"], data["in"]):
                return Item(
                    name, False, f"{label}: not checked, weight is not an (out, in) parameter.", weight
                )
            b = params.get("bias") if data["bias"] else np.zeros(data["out"])
            if not isinstance(b, np.ndarray) or b.shape != (data["out"],):
                return Item(name, False, f"{label}: not checked, bias is not an (out,) parameter.", weight)
            ref = reference.linear(data["x"], W, b, data["grad_output"])
            n = data["x"].shape[0]
            verdicts = [
                compare("out", record["out"], ref["out"], batch_size=n),
                compare("x.grad", record["grads"].get("x"), ref["dx"], batch_size=n),
                compare("weight.grad", record["grads"].get("weight"), ref["dW"], batch_size=n),
            ]
            if data["bias"]:
                verdicts.append(compare("bias.grad", record["grads"].get("bias"), ref["db"], batch_size=n))
            bad = [v for v in verdicts if not v.ok]
            if bad:
                return Item(name, False, f"{label}: {bad[0].message()}", weight)
        return Item(name, True, "out and every gradient match F.linear in float64", weight)

    report.add(forward_item("forward and backward", with_bias, 1.0))
    report.add(forward_item("bias=False", [no_bias], 0.5))

    item = failing("uses LinearFunction", with_bias, 0.5, "forward_error")
    if item is None:
        name = cases[with_bias[0]]["grad_fn"]
        if name == "LinearFunctionBackward":
            item = Item("uses LinearFunction", True, "the output's grad_fn is LinearFunctionBackward", 0.5)
        else:
            item = Item(
                "uses LinearFunction",
                False,
                f"the output's grad_fn is {name}: forward should return "
                "LinearFunction.apply(x, self.weight, self.bias).",
                0.5,
            )
    report.add(item)
    add_notes(report, cases.values())
    return report
