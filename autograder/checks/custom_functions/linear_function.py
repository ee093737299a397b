"""Notebook 04's LinearFunction, PyTorch's own example: every gradient, every requires_grad mix."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from autograder.checks.core import Check, Evidence, case_seed, register, run_check
from autograder.checks.function_contract import collect_contract
from autograder.checks.functions import Arg, run_function

#: The same for LinearFunction, whose mixed requires_grad cases are items of their own.
LINEAR_OPT_OUT = {
    "ctx": "judged by the item 'tensors via save_for_backward'",
    "needs_input_grad": "judged by the items 'needs_input_grad' and 'mixed requires_grad' over four cases",
}


GRAD_NAMES = ("grad_input", "grad_weight", "grad_bias")


INPUT_NAMES = ("input", "weight", "bias")


#: (label, N, in, out, which of input/weight/bias require grad, how the bias is passed). Sizes are
#: pairwise distinct, so a transposed weight gradient or a bias summed over the wrong axis has the
#: wrong shape; N = 1 hides batch-scaling bugs.
LINEAR_CASES: tuple[tuple[str, int, int, int, tuple[bool, bool, bool], str], ...] = (
    ("N=4, in=3, out=5", 4, 3, 5, (True, True, True), "bias"),
    ("N=1", 1, 3, 5, (True, True, True), "bias"),
    ("apply(x, W)", 4, 3, 5, (True, True, False), "omitted"),
    ("apply(x, W, None)", 4, 3, 5, (True, True, False), "None"),
    ("only weight requires grad", 4, 3, 5, (False, True, False), "bias"),
    ("only input requires grad", 4, 3, 5, (True, False, False), "bias"),
    ("only bias requires grad", 4, 3, 5, (False, False, True), "bias"),
    ("input does not require grad", 4, 3, 5, (False, True, True), "bias"),
    # the size-1 edges of the other two dimensions (docs/checks.md item 22): a .squeeze() shows only there
    ("in=1", 4, 1, 5, (True, True, True), "bias"),
    ("out=1", 4, 3, 1, (True, True, True), "bias"),
)


MAIN, SINGLE, OMITTED, NONE_BIAS = (c[0] for c in LINEAR_CASES[:4])


MIXED = tuple(c[0] for c in LINEAR_CASES[4:8])


SIZE_ONE = tuple(c[0] for c in LINEAR_CASES[8:])


def linear_function_inputs(seed: int) -> dict[str, dict[str, Any]]:
    """Every case: non-trivial x (N, in), W (out, in), b (out,), a random grad_output (N, out)."""
    cases = {}
    for index, (label, n, d, m, requires, bias) in enumerate(LINEAR_CASES):
        rng = np.random.default_rng(case_seed(seed, index))
        cases[label] = {
            "x": rng.standard_normal((n, d)),
            "W": rng.standard_normal((m, d)) + 0.5,
            "b": rng.standard_normal(m),
            "grad_output": rng.standard_normal((n, m)),
            "requires": requires,
            "bias": bias,
        }
    return cases


def _linear_spec(data: dict[str, Any]) -> list[Arg]:
    rx, rw, rb = data["requires"]
    spec: list[Arg] = [("x", data["x"], rx), ("W", data["W"], rw)]
    if data["bias"] == "bias":
        spec.append(("b", data["b"], rb))
    elif data["bias"] == "None":
        spec.append(("b", None, False))
    return spec


def collect_linear_function(LinearFunction: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``LinearFunction`` on every case and record the results."""
    cases = {}
    for label, data in linear_function_inputs(seed).items():
        stages = ("direct", "autograd", "sum", "jacobian") if label == MAIN else ("direct", "autograd")
        spec, g = _linear_spec(data), data["grad_output"]
        then = partial(collect_contract, spec=spec, grad_output=g, opt_out=LINEAR_OPT_OUT)
        cases[label] = run_function(
            LinearFunction, spec, g, "LinearFunction", stages, then=then if label == MAIN else None
        )
    return {"check": "linear_function", "seed": seed, "cases": cases}


LINEAR_FUNCTION = register(Check("linear_function", "LinearFunction", 6.0, collect_linear_function))


def check_linear_function(LinearFunction: Any, *, seed: int = 0) -> float:
    """Grade ``LinearFunction`` (forward, every gradient's exact shape and value, needs_input_grad,
    the bias omitted both ways, save_for_backward); print feedback; return points."""
    return run_check(LINEAR_FUNCTION, LinearFunction, seed=seed)
