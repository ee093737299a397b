"""Notebook 05's linear Functions: LinearFunctionFunc (exercise 1) and the batched LinearFunction
(exercise 2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.core import Check, Evidence, case_seed, freeze, register, run_check
from autograder.checks.function_contract import collect_contract
from autograder.checks.functions import FunctionRun, label_of, tensor

#: N, D_in, D_out pairwise distinct; B is the number of stacked weights for vmap.
FUNC_SIZES = {"N": 4, "D": 3, "M": 5, "B": 2}


#: Each case's (N, D_in, D_out): the main one, then the size-1 edge of every dimension (docs/checks.md
#: items 2 and 22: a careless .squeeze() shows only there).
FUNC_CASES: dict[str, tuple[int, int, int]] = {
    "N=4": (FUNC_SIZES["N"], FUNC_SIZES["D"], FUNC_SIZES["M"]),
    "N=1": (1, FUNC_SIZES["D"], FUNC_SIZES["M"]),
    "in=1": (FUNC_SIZES["N"], 1, FUNC_SIZES["M"]),
    "out=1": (FUNC_SIZES["N"], FUNC_SIZES["D"], 1),
}


def func_inputs(
    seed: int, n: int, d: int = FUNC_SIZES["D"], m: int = FUNC_SIZES["M"]
) -> dict[str, np.ndarray]:
    """x (n, d), W (m, d), b (m,), upstream g (n, m) and a stack of weights Ws (B, m, d)."""
    rng = np.random.default_rng(seed)
    b = FUNC_SIZES["B"]
    return {
        "x": rng.standard_normal((n, d)),
        "W": rng.standard_normal((m, d)) + 0.5,
        "b": rng.standard_normal(m),
        "g": rng.standard_normal((n, m)),
        "Ws": rng.standard_normal((b, m, d)),
    }


def _linear_steps(run: FunctionRun, data: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """The steps every linear case shares: ``forward`` (apply) and ``autograd`` (dx, dW, db)."""
    leaves = {"dx": tensor(data["x"], True), "dW": tensor(data["W"], True), "db": tensor(data["b"], True)}
    out = run.apply("forward", list(leaves.values()))
    run.snapshot("forward", {"x": leaves["dx"], "W": leaves["dW"], "b": leaves["db"]})
    g = tensor(data["g"])
    run.grads("autograd", out, leaves, g, after=("forward",))
    run.snapshot("autograd", {"grad_output": g})
    return leaves


def _direct_step(run: FunctionRun, leaves: dict[str, torch.Tensor], g: np.ndarray) -> None:
    """``direct``: backward called directly on the output of a fresh apply, with ``g`` upstream."""
    out = run.apply("direct: apply", list(leaves.values()), after=("forward",), record=False)
    upstream = tensor(g)
    run.direct("direct", out, upstream, after=("direct: apply",), inspect=False)
    run.snapshot("direct", {"grad_output": upstream})


def _stack(value: np.ndarray) -> np.ndarray:
    """A stack of B distinct values shaped like ``value``, for vmap over that argument."""
    return np.stack([value * (1.0 + 0.5 * k) - 0.25 * k for k in range(FUNC_SIZES["B"])])


def collect_linear_function_func(fn_cls: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``LinearFunctionFunc`` with autograd, a direct backward call, vmap and grad."""
    label = label_of(fn_cls, "LinearFunctionFunc")
    cases = {}
    for index, (case, dims) in enumerate(FUNC_CASES.items()):
        data = func_inputs(case_seed(seed, index), *dims)
        run = FunctionRun(fn_cls, label)
        leaves = _linear_steps(run, data)
        _direct_step(run, leaves, data["g"])
        if index == 0:

            def no_bias_step(data: dict[str, np.ndarray] = data) -> dict[str, Any]:
                # weight only requires grad, bias omitted both ways
                xs, Ws = tensor(data["x"]), tensor(data["W"], True)
                out = fn_cls.apply(xs, Ws)
                (dW,) = torch.autograd.grad(out, [Ws], tensor(data["g"]))
                out2 = fn_cls.apply(xs, Ws, None)
                (dW2,) = torch.autograd.grad(out2, [Ws], tensor(data["g"]))
                # input only, then bias only: a needs_input_grad index mix-up shows in one of them
                xr = tensor(data["x"], True)
                (dx_only,) = torch.autograd.grad(
                    fn_cls.apply(xr, tensor(data["W"]), tensor(data["b"])), [xr], tensor(data["g"])
                )
                br = tensor(data["b"], True)
                (db_only,) = torch.autograd.grad(
                    fn_cls.apply(xs, tensor(data["W"]), br), [br], tensor(data["g"])
                )
                return {
                    "nobias_out": freeze(out),
                    "nobias_dW": freeze(dW),
                    "none_out": freeze(out2),
                    "none_dW": freeze(dW2),
                    "input_only_dx": freeze(dx_only),
                    "bias_only_db": freeze(db_only),
                }

            def vmap_step(data: dict[str, np.ndarray] = data) -> dict[str, Any]:
                xs, bs = tensor(data["x"]), tensor(data["b"])
                out = torch.func.vmap(lambda w: fn_cls.apply(xs, w, bs))(tensor(data["Ws"]))
                return {"vmap_out": freeze(out)}

            def func_grad_step(data: dict[str, np.ndarray] = data) -> dict[str, Any]:
                xs, bs, gs = tensor(data["x"]), tensor(data["b"]), tensor(data["g"])
                dW = torch.func.grad(lambda w: (fn_cls.apply(xs, w, bs) * gs).sum())(tensor(data["W"]))
                return {"func_grad_dW": freeze(dW)}

            run.collect("no_bias", no_bias_step, after=("forward",), name=f"{label}.apply without bias")
            run.collect("vmap", vmap_step, after=("forward",), name=f"torch.func.vmap over {label}")
            run.collect("func_grad", func_grad_step, after=("forward",), name=f"torch.func.grad of {label}")
        run.snapshot("backward", {"x": leaves["dx"], "W": leaves["dW"], "b": leaves["db"]})
        spec = [("x", data["x"], True), ("W", data["W"], True), ("b", data["b"], True)]
        if index == 0:  # the contract once, as in notebook 04: the size-1 edges have their own item
            stacks = {"x": _stack(data["x"]), "W": data["Ws"], "b": _stack(data["b"])}
            collect_contract(run, spec, data["g"], vmap=stacks)
        cases[case] = run.record
    return {"check": "linear_function_func", "seed": seed, "cases": cases}


LINEAR_FUNCTION_FUNC = register(
    Check("linear_function_func", "LinearFunctionFunc", 4.0, collect_linear_function_func)
)


def check_linear_function_func(fn_cls: Any, *, seed: int = 0) -> float:
    """Grade ``LinearFunctionFunc`` (autograd, direct backward, vmap, torch.func.grad); return points."""
    return run_check(LINEAR_FUNCTION_FUNC, fn_cls, seed=seed)


BATCHED_D, BATCHED_M = 5, 6


#: Leading shapes: pairwise distinct and distinct from D and M; a 1-D input has no leading axis.
BATCHED_CASES: dict[str, tuple[int, ...]] = {
    "input (2, 3, 4, D)": (2, 3, 4),
    "input (N=7, D)": (7,),
    "input (N=1, D)": (1,),
    "input (D,)": (),
}


def batched_inputs(seed: int, lead: tuple[int, ...]) -> dict[str, np.ndarray]:
    """x (*lead, D), W (M, D), b (M,) and an upstream g (*lead, M)."""
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((*lead, BATCHED_D)),
        "W": rng.standard_normal((BATCHED_M, BATCHED_D)) + 0.5,
        "b": rng.standard_normal(BATCHED_M),
        "g": rng.standard_normal((*lead, BATCHED_M)),
    }


def collect_batched_linear(fn_cls: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``LinearFunction`` on inputs with 0 to 3 leading axes."""
    label = label_of(fn_cls, "LinearFunction")
    cases = {}
    for index, (case, lead) in enumerate(BATCHED_CASES.items()):
        data = batched_inputs(case_seed(seed, index), lead)
        run = FunctionRun(fn_cls, label)
        leaves = _linear_steps(run, data)
        if index == 0:
            _direct_step(run, leaves, data["g"])

            def weight_only_step(data: dict[str, np.ndarray] = data) -> dict[str, Any]:
                Ws = tensor(data["W"], True)
                out = fn_cls.apply(tensor(data["x"]), Ws)
                (dW,) = torch.autograd.grad(out, [Ws], tensor(data["g"]))
                return {"weight_only_out": freeze(out), "weight_only_dW": freeze(dW)}

            run.collect("weight_only", weight_only_step, after=("forward",), name=f"{label}.apply(x, W)")
            spec = [("x", data["x"], True), ("W", data["W"], True), ("b", data["b"], True)]
            collect_contract(run, spec, data["g"])
        run.snapshot("backward", {"x": leaves["dx"], "W": leaves["dW"], "b": leaves["db"]})
        cases[case] = run.record
    return {"check": "batched_linear", "seed": seed, "cases": cases}


BATCHED_LINEAR = register(
    Check(
        "batched_linear",
        "LinearFunction with leading batch dimensions",
        3.0,
        collect_batched_linear,
    )
)


def check_batched_linear(fn_cls: Any, *, seed: int = 0) -> float:
    """Grade a ``LinearFunction`` on inputs (..., D) with 0 to 3 leading axes; return points."""
    return run_check(BATCHED_LINEAR, fn_cls, seed=seed)
