"""Notebook 04's three elementwise Functions, MulConstant, Exp and MyReLU: one check each."""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np

from autograder.checks.core import Check, Evidence, case_seed, register, run_check
from autograder.checks.function_contract import collect_contract
from autograder.checks.functions import Arg, run_function

#: For each elementwise Function: its class name, its cases as (label, x shape, constant), and the
#: label of its special case (the third).
ELEMENTWISE: dict[str, dict[str, Any]] = {
    "mul_constant": {
        "label": "MulConstant",
        "cases": (
            ("x (3, 4), constant 2.5", (3, 4), 2.5),
            ("N=1", (1, 4), -1.5),
            ("int constant -3, 3-D x", (2, 3, 2), -3),
        ),
    },
    "exp": {
        "label": "Exp",
        "cases": (
            ("x (3, 4)", (3, 4), None),
            ("N=1", (1, 4), None),
            ("in-place edit of the output", (3, 4), None),
        ),
    },
    "my_relu": {
        "label": "MyReLU",
        "cases": (("x (3, 4)", (3, 4), None), ("N=1", (1, 4), None), ("x with exact zeros", (3, 4), None)),
    },
}


#: The Function contract's items these exercises judge with items of their own, and which.
ELEMENTWISE_OPT_OUT: dict[str, dict[str, str]] = {
    "mul_constant": {"ctx": "judged by the item 'tensors via save_for_backward'"},
    "exp": {"ctx": "judged by the item 'saves its output' (what Exp saves is its lesson)"},
    "my_relu": {"ctx": "judged by the item 'tensors via save_for_backward'"},
}


def elementwise_inputs(kind: str, seed: int) -> dict[str, dict[str, Any]]:
    """Every case of an elementwise check: ``{label: {"x", "grad_output", "constant"}}``; x never 0
    except in MyReLU's special case, where it has exact zeros (the gradient there is 0, as in torch)."""
    cases = {}
    for index, (label, shape, constant) in enumerate(ELEMENTWISE[kind]["cases"]):
        rng = np.random.default_rng(case_seed(seed, index))
        x = rng.standard_normal(shape)
        if kind == "exp":
            x = 0.7 * x
        if kind == "my_relu" and index == 2:
            x[rng.random(shape) < 0.4] = 0.0
            x[0, 0], x[1, 1], x[2, 2], x[0, 1] = 0.0, -0.0, 0.0, 0.5
        cases[label] = {"x": x, "grad_output": rng.standard_normal(shape), "constant": constant}
    return cases


def _elementwise_spec(kind: str, data: dict[str, Any]) -> list[Arg]:
    spec: list[Arg] = [("x", data["x"], True)]
    if kind == "mul_constant":
        spec.append(("constant", data["constant"], False))
    return spec


def collect_elementwise(kind: str, fn_cls: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's Function on every case of ``kind`` and record the results."""
    label = ELEMENTWISE[kind]["label"]
    cases = {}
    for index, (case, data) in enumerate(elementwise_inputs(kind, seed).items()):
        stages = ("direct", "autograd", "sum", "jacobian") if index == 0 else ("direct", "autograd")
        if kind == "exp" and index == 2:
            stages = ("direct", "inplace")
        spec, g = _elementwise_spec(kind, data), data["grad_output"]
        then = partial(collect_contract, spec=spec, grad_output=g, opt_out=ELEMENTWISE_OPT_OUT[kind])
        cases[case] = run_function(fn_cls, spec, g, label, stages, then=then if index == 0 else None)
    return {"check": kind, "seed": seed, "cases": cases}


def _elementwise_check(kind: str) -> Check:
    label = ELEMENTWISE[kind]["label"]

    def collect(fn_cls: Any, *, seed: int = 0) -> Evidence:
        return collect_elementwise(kind, fn_cls, seed=seed)

    collect.__doc__ = f"Run the learner's {label} on every case and record the results."
    return register(Check(kind, label, 1.0, collect))


MUL_CONSTANT = _elementwise_check("mul_constant")


EXP = _elementwise_check("exp")


MY_RELU = _elementwise_check("my_relu")


def check_mul_constant(MulConstant: Any, *, seed: int = 0) -> float:
    """Grade ``MulConstant`` (a tensor times a Python number); print feedback; return points."""
    return run_check(MUL_CONSTANT, MulConstant, seed=seed)


def check_exp(Exp: Any, *, seed: int = 0) -> float:
    """Grade ``Exp``, which must save its output for backward; print feedback; return points."""
    return run_check(EXP, Exp, seed=seed)


def check_my_relu(MyReLU: Any, *, seed: int = 0) -> float:
    """Grade ``MyReLU`` (gradient 0 at exactly 0, like torch.relu); print feedback; return points."""
    return run_check(MY_RELU, MyReLU, seed=seed)
