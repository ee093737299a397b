"""The grader of notebook 04's Linear module: parameters, nn.Linear's initialisation, F.linear's values."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.custom_functions.linear_module import LINEAR_MODULE, ModuleCase, module_inputs
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference
from autograder.grading.toolkit import SQUEEZED_BIAS, ItemOf, judge


def _nn_linear_params(data: dict[str, Any]) -> dict[str, np.ndarray]:
    with reference.torch_seeded(data["torch_seed"]):
        ref = nn.Linear(data["in"], data["out"], bias=data["bias"])
    return {n: p.detach().numpy().copy() for n, p in ref.named_parameters()}


def _bias_first_params(data: dict[str, Any]) -> dict[str, np.ndarray]:
    """nn.Linear's initialisation with the two draws in the wrong order: a mistake feedback can name."""
    with reference.torch_seeded(data["torch_seed"]):
        params = {}
        if data["bias"]:
            bound = 1 / math.sqrt(data["in"])
            params["bias"] = torch.empty(data["out"]).uniform_(-bound, bound).numpy()
        weight = torch.empty(data["out"], data["in"])
        nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
        params["weight"] = weight.numpy()
    return params


#: What a wrong initialisation most likely is, when no named mistake explains it.
INIT_ORDER = (
    " Likely mistake: a different initialisation or order of draws: nn.Linear makes torch.empty(out, in) and "
    "torch.empty(out), then calls kaiming_uniform_(weight, a=math.sqrt(5)) and, for the bias, "
    "uniform_(-1/sqrt(in), 1/sqrt(in)), in that order."
)

#: Why a case fails an item (its label, inputs and record), as the learner reads it; None when it passes.
CaseProblem = Callable[[str, dict[str, Any], ModuleCase], str | None]

F_LINEAR = "out and every gradient match F.linear in float64"

#: The steps of a case, in order: each one's error field in :class:`ModuleCase`.
STEPS = ("error", "forward_error", "backward_error")


@dataclass(frozen=True)
class _Run:
    """What every item reads: the recorded cases and the inputs remade from the evidence's seed."""

    cases: dict[str, ModuleCase]
    inputs: dict[str, dict[str, Any]]

    def labels(self, bias: bool) -> list[str]:
        """The cases made with a bias (or, with ``bias`` False, the one made without)."""
        return [label for label, data in self.inputs.items() if data["bias"] == bias]

    def failed(self, name: str, labels: Sequence[str], weight: float, step: str = "error") -> Item | None:
        """The item, failed with the first error of ``step`` or a step before it in ``labels``; else None."""
        for label in labels:
            for key in STEPS[: STEPS.index(step) + 1]:
                if self.cases[label][key]:
                    return Item(name, False, f"{label}: {self.cases[label][key]}", weight)
        return None


def _cases_item(
    name: str, weight: float, passed: str, problem: CaseProblem, step: str = "error", bias: bool | None = None
) -> ItemOf[_Run]:
    """An item over the cases (those with a bias, or the one without, when ``bias`` says which): failed
    with the first error of ``step`` or a step before it, else with the first case's ``problem``."""

    def item(run: _Run) -> Item:
        labels = list(run.inputs) if bias is None else run.labels(bias)
        failed = run.failed(name, labels, weight, step)
        if failed:
            return failed
        for label in labels:
            why = problem(label, run.inputs[label], run.cases[label])
            if why:
                return Item(name, False, why, weight)
        return Item(name, True, passed, weight)

    return item


def _parameters_problem(label: str, data: dict[str, Any], record: ModuleCase) -> str | None:
    """named_parameters() gives weight, and bias unless bias=False."""
    names, wanted = record["names"], ["weight", "bias"] if data["bias"] else ["weight"]
    if sorted(names) == sorted(wanted):
        return None
    return (
        f"{label}: named_parameters() gives {names or 'nothing'}, expected {wanted}: wrap each tensor in "
        "nn.Parameter and assign it as self.weight / self.bias (with bias=False, "
        "self.register_parameter('bias', None))."
    )


def _init_problem(label: str, data: dict[str, Any], record: ModuleCase) -> str | None:
    """The same weight and bias as nn.Linear made under the same torch seed."""
    swapped = _bias_first_params(data)
    for n, want in _nn_linear_params(data).items():
        mistakes = {
            "the bias drawn before the weight: nn.Linear initialises the weight first, so the same seed "
            "gives other numbers": swapped[n]
        }
        verdict = compare(
            f"{n} of {label}", record["params"].get(n), want, dtype=np.float32, mistakes=mistakes
        )
        if not verdict.ok:
            unnamed = verdict.problem == "values" and not verdict.likely
            return verdict.message() + (INIT_ORDER if unnamed else "")
    return None


def _linear_problem(label: str, data: dict[str, Any], record: ModuleCase) -> str | None:
    """Out and every gradient match F.linear's with the module's own float64 parameters."""
    W, b = record["params64"].get("weight"), record["params64"].get("bias")
    if not isinstance(W, np.ndarray) or W.shape != (data["out"], data["in"]):
        return f"{label}: not checked, weight is not an (out, in) parameter."
    b = b if data["bias"] else np.zeros(data["out"])
    if not isinstance(b, np.ndarray) or b.shape != (data["out"],):
        return f"{label}: not checked, bias is not an (out,) parameter."
    ref, n, grads = (
        reference.linear(data["x"], W, b, data["grad_output"]),
        data["x"].shape[0],
        record["grads"],
    )
    wanted = {"x.grad": ("x", "dx"), "weight.grad": ("weight", "dW")}
    if data["bias"]:
        wanted["bias.grad"] = ("bias", "db")
    verdicts = [compare("out", record["out"], ref["out"], batch_size=n)] + [
        compare(title, grads.get(key), ref[want], batch_size=n) for title, (key, want) in wanted.items()
    ]
    return next((f"{label}: {v.message()}" for v in verdicts if not v.ok), None)


def _uses_function_item(run: _Run) -> Item:
    """The output's grad_fn is LinearFunction's (0.5)."""
    name, with_bias = "uses LinearFunction", run.labels(True)
    failed = run.failed(name, with_bias, 0.5, "forward_error")
    if failed:
        return failed
    grad_fn = run.cases[with_bias[0]]["grad_fn"]
    if grad_fn == "LinearFunctionBackward":
        return Item(name, True, "the output's grad_fn is LinearFunctionBackward", 0.5)
    return Item(
        name,
        False,
        f"the output's grad_fn is {grad_fn}: forward should return LinearFunction.apply(x, self.weight, "
        "self.bias).",
        0.5,
    )


#: Autograd refusing a 0-d gradient for the bias (apply's third input) of a module with one output.
_ZERO_D_BIAS = re.compile(r"invalid gradient at index 2 - got \[\] but expected shape compatible with \[1\]")


def _squeezed_bias_named(cases: dict[str, ModuleCase]) -> dict[str, ModuleCase]:
    """The cases, a backward error that is autograd refusing a 0-d bias gradient with out_features = 1
    ending with its mistake, named only when every other case's backward ran (a bias gradient summed over
    every axis, .sum(), is 0-d at every size and fails the other cases too)."""
    refused = [
        label for label, case in cases.items() if _ZERO_D_BIAS.search(case.get("backward_error") or "")
    ]
    if len(refused) != 1 or any(c.get("backward_error") for lab, c in cases.items() if lab != refused[0]):
        return cases
    case = cases[refused[0]]
    named = f"{case['backward_error']}. Likely mistake: {SQUEEZED_BIAS}."
    return {**cases, refused[0]: {**case, "backward_error": named}}


#: What is checked, in order: each item fails with the first error of the step it needs.
ITEMS: tuple[ItemOf[_Run], ...] = (
    _cases_item(
        "parameters registered",
        0.5,
        "named_parameters() gives weight (out, in) and bias (out,)",
        _parameters_problem,
    ),
    _cases_item(
        "initialised like nn.Linear",
        1.0,
        "the same weight and bias as nn.Linear from the same torch.manual_seed",
        _init_problem,
    ),
    _cases_item("forward and backward", 1.0, F_LINEAR, _linear_problem, "backward_error", bias=True),
    _cases_item("bias=False", 0.5, F_LINEAR, _linear_problem, "backward_error", bias=False),
    _uses_function_item,
)


@grader(LINEAR_MODULE)
def grade_linear_module(evidence: Evidence) -> Report:
    """Grade recorded evidence: parameters registered (0.5), initialised exactly like nn.Linear (1),
    forward and backward match F.linear in float64 (1), bias=False (0.5), uses LinearFunction (0.5)."""
    run = _Run(_squeezed_bias_named(evidence["cases"]), module_inputs(evidence["seed"]))
    return judge(LINEAR_MODULE, ITEMS, run, run.cases.values())
