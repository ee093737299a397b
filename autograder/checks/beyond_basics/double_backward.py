"""Notebook 05's exercise 3: double backward (Cube) and once_differentiable (NumpyCube)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.core import Check, Evidence, freeze, register, run_check
from autograder.checks.function_contract import collect_contract
from autograder.checks.functions import FunctionRun, label_of, tensor

DOUBLE_SHAPE = (4, 3)


def double_inputs(seed: int) -> dict[str, np.ndarray]:
    """x, an upstream gradient g and a direction v, all (4, 3)."""
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(DOUBLE_SHAPE) for k in ("x", "g", "v")}


def collect_double_backward(cube_cls: Any, numpy_cube_cls: Any, *, seed: int = 0) -> Evidence:
    """Second derivatives of the learner's ``Cube``; first derivative and the error of ``NumpyCube``."""
    data = double_inputs(seed)
    cube = FunctionRun(cube_cls, label_of(cube_cls, "Cube"))
    x, _ = cube.forward_and_autograd(data["x"], data["g"])

    def cube_second_step() -> dict[str, Any]:
        g = tensor(data["g"], True)
        (dx,) = torch.autograd.grad(cube_cls.apply(x), [x], g, create_graph=True)
        # d/dx and d/dg of <dx, v>: the two halves of what gradgradcheck checks
        hx, hg = torch.autograd.grad(dx, [x, g], tensor(data["v"]), allow_unused=True)
        return {"hx": freeze(hx), "hg": freeze(hg)}

    cube.collect(
        "second", cube_second_step, after=("forward",), name=f"the second derivative of {cube.label}"
    )
    out = cube.apply("direct: apply", [x], after=("forward",), record=False)
    cube.direct("direct", out, tensor(data["g"]), after=("direct: apply",), inspect=False)
    cube.snapshot("backward", {"x": x})
    collect_contract(cube, [("x", data["x"], True)], data["g"])

    npc = FunctionRun(numpy_cube_cls, label_of(numpy_cube_cls, "NumpyCube"))
    xn, _ = npc.forward_and_autograd(data["x"], data["g"])

    def twice_step() -> dict[str, Any]:
        # the upstream gradient requires grad, so a second derivative is asked for through backward
        g = tensor(data["g"], True)
        (dx,) = torch.autograd.grad(numpy_cube_cls.apply(xn), [xn], g, create_graph=True)
        try:
            (dx * tensor(data["v"])).sum().backward()
        except Exception as exc:  # noqa: BLE001 - the exception is the evidence
            return {"twice_error_type": type(exc).__name__, "twice_error": str(exc)[:300]}
        return {"twice_error_type": None, "twice_error": None}

    npc.collect("twice", twice_step, after=("forward",), name=f"differentiating {npc.label} twice")
    npc.snapshot("backward", {"x": xn})
    collect_contract(npc, [("x", data["x"], True)], data["g"])
    return {"check": "double_backward", "seed": seed, "cases": {"Cube": cube.record, "NumpyCube": npc.record}}


DOUBLE_BACKWARD = register(Check("double_backward", "Cube and NumpyCube", 3.0, collect_double_backward))


def check_double_backward(cube_cls: Any, numpy_cube_cls: Any, *, seed: int = 0) -> float:
    """Grade ``Cube``'s second derivatives and ``NumpyCube``'s once_differentiable error; return points."""
    return run_check(DOUBLE_BACKWARD, cube_cls, numpy_cube_cls, seed=seed)
