"""Notebook 05's exercise 4: mark_non_differentiable, mark_dirty, set_materialize_grads."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.core import Check, Evidence, freeze, register, run_check
from autograder.checks.functions import FAILED, FunctionRun, label_of, observed, tensor

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


def collect_ctx_features(max_cls: Any, relu_cls: Any, sc_cls: Any, *, seed: int = 0) -> Evidence:
    """Run ``MaxWithIndex``, ``InplaceReLU`` and ``SquareAndCube``; record outputs, gradients, what
    forward told ``ctx`` and what backward received.

    Each lesson is recorded by its effect: ``mark_non_differentiable`` by the indices being flagged
    so (int64 indices never require grad, so their ``requires_grad`` alone cannot tell),
    ``mark_dirty`` by the output being the input object with its version counter bumped, and
    ``set_materialize_grads(False)`` by backward receiving None, not zeros, for an unused output.
    """
    data = ctx_inputs(seed)
    seen_max: dict[str, Any] = {}
    mx = FunctionRun(observed(max_cls, seen_max), label_of(max_cls, "MaxWithIndex"))
    s = tensor(data["s"], True)
    result = mx.apply("forward", [s], outputs=("values", "indices"))
    if result is not FAILED:
        values, indices = result
        mx.record["outputs"].update(
            {
                "indices_requires_grad": bool(indices.requires_grad),
                "values_requires_grad": bool(values.requires_grad),
                "marked_non_differentiable": list(seen_max.get("non_differentiable", [])),
            }
        )
    mx.grads(
        "autograd",
        result[0] if result is not FAILED else FAILED,
        {"ds": s},
        tensor(data["gv"]),
        after=("forward",),
    )
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

    rl = FunctionRun(relu_cls, label_of(relu_cls, "InplaceReLU"))
    a = tensor(data["a"], True)
    h = a * 1.0  # a non-leaf: an in-place operation on a leaf that requires grad is refused
    version = h._version
    out = rl.apply("forward", [h])
    if out is not FAILED:
        rl.record["outputs"].update(
            {"same_object": out is h, "version_bumped": h._version > version, "h_after": freeze(h)}
        )
    rl.grads("autograd", out, {"da": a}, tensor(data["ga"]), after=("forward",))

    seen_sc: dict[str, Any] = {}
    sc_seen = observed(sc_cls, seen_sc)
    sc = FunctionRun(sc_seen, label_of(sc_cls, "SquareAndCube"))
    z = tensor(data["z"], True)
    sc.apply("forward", [z], outputs=("sq", "cu"))
    sc.snapshot("forward", {"z": z})

    def sc_step() -> dict[str, Any]:
        sq, cu = sc_seen.apply(z)
        (d_both,) = torch.autograd.grad([sq, cu], [z], [tensor(data["g2"]), tensor(data["g3"])])
        sq, cu = sc_seen.apply(z)
        seen_sc.pop("grads_none", None)
        (d_sq,) = torch.autograd.grad(sq, [z], tensor(data["g2"]))
        unused = seen_sc.get("grads_none")
        sq, cu = sc_seen.apply(z)
        (d_cu,) = torch.autograd.grad(cu, [z], tensor(data["g3"]))
        return {
            "d_both": freeze(d_both),
            "d_sq": freeze(d_sq),
            "d_cu": freeze(d_cu),
            "grads_none_square_only": unused,
        }

    sc.collect("autograd", sc_step, after=("forward",), name=sc.label)
    out = sc.apply("direct: apply", [z], outputs=("sq", "cu"), after=("forward",), record=False)
    square = out[0] if out is not FAILED else FAILED
    label = f"{sc.label}.backward with a None gradient"
    for step, grads in (("direct_sq", (tensor(data["g2"]), None)), ("direct_cu", (None, tensor(data["g3"])))):
        sc.direct(step, square, *grads, after=("direct: apply",), inspect=False, name=label)
    sc.snapshot("backward", {"z": z})
    return {
        "check": "ctx_features",
        "seed": seed,
        "cases": {"max": mx.record, "relu": rl.record, "square_cube": sc.record},
    }


CTX_FEATURES = register(
    Check("ctx_features", "MaxWithIndex, InplaceReLU and SquareAndCube", 3.0, collect_ctx_features)
)


def check_ctx_features(max_cls: Any, relu_cls: Any, sc_cls: Any, *, seed: int = 0) -> float:
    """Grade ``MaxWithIndex``, ``InplaceReLU`` and ``SquareAndCube``; print feedback; return points."""
    return run_check(CTX_FEATURES, max_cls, relu_cls, sc_cls, seed=seed)
