"""Notebook 05's exercise 4: mark_non_differentiable, mark_dirty, set_materialize_grads."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.core import Check, Evidence, freeze, register, run_check
from autograder.checks.functions import FAILED, FunctionRecord, FunctionRun, label_of, observed, tensor

CTX_N, CTX_C = 4, 5


def ctx_inputs(seed: int) -> dict[str, np.ndarray]:
    """Scores (4, 5) for MaxWithIndex with an upstream (4,), and scores with a tie at each row's
    maximum; a (4, 5) input with exact zeros for the in-place ReLU with an upstream; a (6,) input for
    SquareAndCube with two upstreams."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((CTX_N, CTX_C))
    a[0, :2] = 0.0
    data = {
        "s": rng.standard_normal((CTX_N, CTX_C)),
        "gv": rng.standard_normal(CTX_N),
        "a": a,
        "ga": rng.standard_normal((CTX_N, CTX_C)),
        "z": rng.standard_normal(6),
        "g2": rng.standard_normal(6),
        "g3": rng.standard_normal(6),
    }
    # each row's maximum twice, at two positions drawn per seed (docs/checks.md item 32)
    ties = rng.standard_normal((CTX_N, CTX_C))
    for row in ties:
        i, j = rng.choice(CTX_C, 2, replace=False)
        row[i] = row[j] = np.abs(row).max() + 1.0
    data["ties"] = ties
    return data


def _collect_max(max_cls: Any, data: dict[str, np.ndarray]) -> FunctionRecord:
    """MaxWithIndex: values and indices, whether forward marked them non-differentiable, the gradient
    through autograd and from backward called directly, and rows with a tie at their maximum."""
    seen: dict[str, Any] = {}
    mx = FunctionRun(observed(max_cls, seen), label_of(max_cls, "MaxWithIndex"))
    s = tensor(data["s"], True)
    result = mx.apply("forward", [s], outputs=("values", "indices"))
    if result is not FAILED:
        values, indices = result
        mx.record["outputs"].update(
            {
                "indices_requires_grad": bool(indices.requires_grad),
                "values_requires_grad": bool(values.requires_grad),
                "marked_non_differentiable": list(seen.get("non_differentiable", [])),
            }
        )
    values = result[0] if result is not FAILED else FAILED
    mx.grads("autograd", values, {"ds": s}, tensor(data["gv"]), after=("forward",))
    out = mx.apply("direct: apply", [s], outputs=("values", "indices"), after=("forward",), record=False)
    values, zeros = (out[0], torch.zeros_like(out[1])) if out is not FAILED else (FAILED, None)
    mx.direct("direct", values, tensor(data["gv"]), zeros, after=("direct: apply",))
    mx.snapshot("backward", {"s": s})

    def ties_step() -> dict[str, Any]:
        st = tensor(data["ties"], True)
        values, indices = max_cls.apply(st)
        (grad,) = torch.autograd.grad(values, [st], tensor(data["gv"]))
        return {"ties": {"values": freeze(values), "indices": freeze(indices), "grad": freeze(grad)}}

    mx.collect("ties", ties_step, after=("forward",), name=f"{mx.label} on rows with a tie")
    return mx.record


def _collect_relu(relu_cls: Any, data: dict[str, np.ndarray]) -> FunctionRecord:
    """InplaceReLU on a non-leaf (an in-place operation on a leaf that requires grad is refused): whether
    it returned its input object with the version counter bumped, the input after the call, the gradient."""
    rl = FunctionRun(relu_cls, label_of(relu_cls, "InplaceReLU"))
    a = tensor(data["a"], True)
    h = a * 1.0
    version = h._version
    out = rl.apply("forward", [h])
    if out is not FAILED:
        rl.record["outputs"].update(
            {"same_object": out is h, "version_bumped": h._version > version, "h_after": freeze(h)}
        )
    rl.grads("autograd", out, {"da": a}, tensor(data["ga"]), after=("forward",))
    return rl.record


def _collect_square_cube(sc_cls: Any, data: dict[str, np.ndarray]) -> FunctionRecord:
    """SquareAndCube: the gradients when both, only the square or only the cube is used (and whether
    backward then received None for the unused one), and backward called directly with a None gradient."""
    seen: dict[str, Any] = {}
    sc_seen = observed(sc_cls, seen)
    sc = FunctionRun(sc_seen, label_of(sc_cls, "SquareAndCube"))
    z = tensor(data["z"], True)

    def fresh(key: str) -> torch.Tensor:  # an upstream gradient per call: backward may write into one
        return tensor(data[key])

    sc.apply("forward", [z], outputs=("sq", "cu"))
    sc.snapshot("forward", {"z": z})

    def sc_step() -> dict[str, Any]:
        sq, cu = sc_seen.apply(z)
        (d_both,) = torch.autograd.grad([sq, cu], [z], [fresh("g2"), fresh("g3")])
        sq, cu = sc_seen.apply(z)
        seen.pop("grads_none", None)
        (d_sq,) = torch.autograd.grad(sq, [z], fresh("g2"))
        unused = seen.get("grads_none")
        sq, cu = sc_seen.apply(z)
        (d_cu,) = torch.autograd.grad(cu, [z], fresh("g3"))
        frozen = {"d_both": freeze(d_both), "d_sq": freeze(d_sq), "d_cu": freeze(d_cu)}
        return frozen | {"grads_none_square_only": unused}

    sc.collect("autograd", sc_step, after=("forward",), name=sc.label)
    out = sc.apply("direct: apply", [z], outputs=("sq", "cu"), after=("forward",), record=False)
    square = out[0] if out is not FAILED else FAILED
    label = f"{sc.label}.backward with a None gradient"
    for step, grads in (("direct_sq", (fresh("g2"), None)), ("direct_cu", (None, fresh("g3")))):
        sc.direct(step, square, *grads, after=("direct: apply",), inspect=False, name=label)
    sc.snapshot("backward", {"z": z})
    return sc.record


def collect_ctx_features(max_cls: Any, relu_cls: Any, sc_cls: Any, *, seed: int = 0) -> Evidence:
    """Run ``MaxWithIndex``, ``InplaceReLU`` and ``SquareAndCube``; record outputs, gradients, what
    forward told ``ctx`` and what backward received, one :class:`FunctionRecord` per Function
    (``cases``: ``max``, ``relu``, ``square_cube``).

    Each lesson is recorded by its effect: ``mark_non_differentiable`` by the indices being flagged
    so (int64 indices never require grad, so their ``requires_grad`` alone cannot tell),
    ``mark_dirty`` by the output being the input object with its version counter bumped, and
    ``set_materialize_grads(False)`` by backward receiving None, not zeros, for an unused output.
    """
    data = ctx_inputs(seed)
    cases = {
        "max": _collect_max(max_cls, data),
        "relu": _collect_relu(relu_cls, data),
        "square_cube": _collect_square_cube(sc_cls, data),
    }
    return {"check": "ctx_features", "seed": seed, "cases": cases}


CTX_FEATURES = register(
    Check("ctx_features", "MaxWithIndex, InplaceReLU and SquareAndCube", 3.0, collect_ctx_features)
)


def check_ctx_features(max_cls: Any, relu_cls: Any, sc_cls: Any, *, seed: int = 0) -> float:
    """Grade ``MaxWithIndex``, ``InplaceReLU`` and ``SquareAndCube``; print feedback; return points."""
    return run_check(CTX_FEATURES, max_cls, relu_cls, sc_cls, seed=seed)
