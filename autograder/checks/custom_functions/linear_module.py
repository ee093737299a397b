"""Notebook 04's Linear: an ``nn.Module`` built on LinearFunction, initialised like ``nn.Linear``."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

import numpy as np
import torch

from autograder.checks.calling import call
from autograder.checks.core import Check, Evidence, case_seed, freeze, register, run_check

#: (label, in_features, out_features, bias)
MODULE_CASES = (
    ("Linear(3, 5)", 3, 5, True),
    ("Linear(7, 2)", 7, 2, True),
    ("Linear(3, 5, bias=False)", 3, 5, False),
    # one input and one output feature: a .squeeze() in LinearFunction's backward shows only here
    ("Linear(1, 1)", 1, 1, True),
)


def module_inputs(seed: int) -> dict[str, dict[str, Any]]:
    """Every case: the torch seed the module is made under, x (4, in) and grad_output (4, out)."""
    cases = {}
    for index, (label, d, m, bias) in enumerate(MODULE_CASES):
        rng = np.random.default_rng(case_seed(seed, index))
        cases[label] = {
            "torch_seed": case_seed(seed, index),
            "in": d,
            "out": m,
            "bias": bias,
            "x": rng.standard_normal((4, d)),
            "grad_output": rng.standard_normal((4, m)),
        }
    return cases


class ModuleCase(TypedDict):
    """The evidence of one case of linear_module: three steps, each with its own error (None when it ran;
    a later step's is "not checked: ..." when an earlier one failed), and what each step recorded."""

    error: str | None
    """Making the module and reading its parameters."""
    forward_error: str | None
    backward_error: str | None
    notes: list[str]
    names: NotRequired[list[str]]
    """What ``named_parameters()`` named, once the module was made."""
    params: NotRequired[dict[str, Any]]
    """The parameters as made (float32), by name."""
    out: NotRequired[Any]
    """The float64 forward's output, and the class name of its ``grad_fn`` (``"None"`` when none)."""
    grad_fn: NotRequired[str]
    params64: NotRequired[dict[str, Any]]
    """After backward: the float64 parameters, and ``x``'s and each parameter's ``.grad``."""
    grads: NotRequired[dict[str, Any]]


def _module_forward(record: ModuleCase, module: Any, x: np.ndarray) -> Any:
    """Convert the module to float64 and run forward; record the output and its grad_fn's name."""
    module.double()
    xt = torch.tensor(x, requires_grad=True)
    out = module(xt)
    record["out"] = freeze(out)
    record["grad_fn"] = (
        type(out.grad_fn).__name__ if isinstance(out, torch.Tensor) and out.grad_fn else "None"
    )
    return xt, out


def _module_backward(record: ModuleCase, module: Any, xt: Any, out: Any, grad_output: np.ndarray) -> None:
    """Run backward and record the float64 parameters and every gradient as plain data."""
    out.backward(torch.tensor(grad_output))
    record["params64"] = {n: freeze(p) for n, p in module.named_parameters()}
    record["grads"] = {"x": freeze(xt.grad)} | {n: freeze(p.grad) for n, p in module.named_parameters()}


def collect_linear_module(Linear: Any, *, seed: int = 0) -> Evidence:
    """Make the learner's ``Linear`` under fixed torch seeds and run forward and backward in float64.

    Three steps, each with its own error (``error``: making the module and reading its parameters,
    ``forward_error``, ``backward_error``), so that a backward that fails does not cost the items
    about the parameters and their initialisation.
    """
    cases = {}
    for label, data in module_inputs(seed).items():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(data["torch_seed"])
            if data["bias"]:
                made = call(Linear, data["in"], data["out"], name="Linear")
            else:
                made = call(Linear, data["in"], data["out"], bias=False, name="Linear")
        unmade = "not checked: Linear could not be made"
        record: ModuleCase = {
            "error": made.error,
            "forward_error": unmade,
            "backward_error": unmade,
            "notes": list(made.notes),
        }
        if made.ok:
            module = made.result
            named = call(
                lambda module=module: list(module.named_parameters()), name="Linear.named_parameters"
            )
            record["error"] = named.error
            if named.ok:
                record["names"] = [n for n, _ in named.result]
                record["params"] = {n: freeze(p) for n, p in named.result}
                forward = call(_module_forward, record, module, data["x"], name="Linear")
                record["forward_error"] = forward.error
                record["backward_error"] = forward.error
                record["notes"] += forward.notes
                if forward.ok:
                    backward = call(
                        _module_backward, record, module, *forward.result, data["grad_output"], name="Linear"
                    )
                    record["backward_error"] = backward.error
                    record["notes"] += [n for n in backward.notes if n not in record["notes"]]
        cases[label] = record
    return {"check": "linear_module", "seed": seed, "cases": cases}


LINEAR_MODULE = register(Check("linear_module", "Linear", 2.0, collect_linear_module))


def check_linear_module(Linear: Any, *, seed: int = 0) -> float:
    """Grade the learner's ``Linear`` module against ``nn.Linear`` and ``F.linear``; return points."""
    return run_check(LINEAR_MODULE, Linear, seed=seed)
