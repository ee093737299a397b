"""Notebook 04's backward_by_hand: what ``out.grad_fn.apply(grad)`` returns."""

from __future__ import annotations

from typing import Any, TypedDict

import numpy as np
import torch

from autograder.checks.calling import call
from autograder.checks.core import Check, Evidence, case_seed, freeze, register, run_check
from autograder.checks.functions import Returned, returned


class RawLinear(torch.autograd.Function):
    """``x @ W.T + b`` whose backward hands back ``grad_output`` itself as the bias gradient, unsummed.

    Returning an (N, out) bias gradient is the mistake of docs/checks.md item 8, used here on purpose:
    ``.backward()`` sum-reduces it to (out,), while ``grad_fn.apply`` shows exactly what backward
    returned, so the two ways of running backward give visibly different answers.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        """Save the inputs and return ``x @ W.T (+ b)``."""
        ctx.save_for_backward(x, W, b)
        out = x.mm(W.t())
        return out if b is None else out + b

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The gradients asked for by ``ctx.needs_input_grad``, the bias one of shape (N, out)."""
        x, W, b = ctx.saved_tensors
        gx = grad_output.mm(W) if ctx.needs_input_grad[0] else None
        gW = grad_output.t().mm(x) if ctx.needs_input_grad[1] else None
        gb = grad_output.clone() if b is not None and ctx.needs_input_grad[2] else None
        return gx, gW, gb


#: (label, which of x/W/b require grad, whether b is passed at all)
BY_HAND_CASES = (
    ("x, W and b require grad", (True, True, True), True),
    ("b is None", (True, True, False), False),
    ("W does not require grad", (True, False, True), True),
)


def by_hand_inputs(seed: int) -> dict[str, dict[str, Any]]:
    """Every case: x (4, 3), W (5, 3), b (5,) or None, grad (4, 5), and which require grad."""
    cases = {}
    for index, (label, requires, has_bias) in enumerate(BY_HAND_CASES):
        rng = np.random.default_rng(case_seed(seed, index))
        cases[label] = {
            "x": rng.standard_normal((4, 3)),
            "W": rng.standard_normal((5, 3)) + 0.5,
            "b": rng.standard_normal(5) if has_bias else None,
            "grad": rng.standard_normal((4, 5)),
            "requires": requires,
        }
    return cases


class ByHandCase(TypedDict):
    """The evidence of one case of backward_by_hand: ``error`` (the first call's error, or None),
    ``notes``, ``results`` (what each of the two calls returned), ``grads_after`` and ``inputs_after``
    (each tensor's ``.grad`` and value after the calls; ``b`` absent when the case passes None)."""

    error: str | None
    notes: list[str]
    results: list[Returned]
    grads_after: dict[str, Any]
    inputs_after: dict[str, Any]


def collect_backward_by_hand(backward_by_hand: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``backward_by_hand(RawLinear, x, W, b, grad)`` twice per case; record both
    results and every ``.grad`` afterwards."""
    cases = {}
    for label, data in by_hand_inputs(seed).items():
        rx, rw, rb = data["requires"]
        x = torch.tensor(data["x"], requires_grad=rx)
        W = torch.tensor(data["W"], requires_grad=rw)
        b = None if data["b"] is None else torch.tensor(data["b"], requires_grad=rb)
        g = torch.tensor(data["grad"])
        record: ByHandCase = {
            "error": None,
            "notes": [],
            "results": [],
            "grads_after": {},
            "inputs_after": {},
        }
        for _ in range(2):
            outcome = call(backward_by_hand, RawLinear, x, W, b, g, name="backward_by_hand")
            record["notes"] += [n for n in outcome.notes if n not in record["notes"]]
            if not outcome.ok:
                record["error"] = outcome.error
                break
            record["results"].append(returned(outcome.result))
        tensors = {"x": x, "W": W, "grad": g} | ({} if b is None else {"b": b})
        record["grads_after"] = {k: freeze(t.grad) for k, t in tensors.items()}
        record["inputs_after"] = {k: freeze(t) for k, t in tensors.items()}
        cases[label] = record
    return {"check": "backward_by_hand", "seed": seed, "cases": cases}


BACKWARD_BY_HAND = register(Check("backward_by_hand", "backward_by_hand", 2.0, collect_backward_by_hand))


def check_backward_by_hand(backward_by_hand: Any, *, seed: int = 0) -> float:
    """Grade ``backward_by_hand`` on a Function whose backward returns an unsummed bias gradient."""
    return run_check(BACKWARD_BY_HAND, backward_by_hand, seed=seed)
