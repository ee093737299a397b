"""Notebook 04's max_jacobian_error: analytical against numerical Jacobian, float64 and float32
(the layers are in :mod:`autograder.checks.jacobian_layers`)."""

from __future__ import annotations

from typing import Any, TypedDict

import torch

from autograder.checks.calling import call
from autograder.checks.core import Check, Evidence, freeze, register, run_check
from autograder.checks.jacobian_layers import DTYPES, PLANTED, jacobian_inputs, planted_layer, tanh_linear


class JacobianCase(TypedDict):
    """The evidence of one call of ``max_jacobian_error``: its error (None when it returned), the
    warnings it printed, and what it returned, frozen (None when it raised)."""

    error: str | None
    notes: list[str]
    value: Any


def collect_max_jacobian_error(max_jacobian_error: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``max_jacobian_error(fn, inputs)`` with float64 and float32 inputs, on
    :func:`tanh_linear` and on the same layer with the seed's planted error."""
    arrays = jacobian_inputs(seed)
    cases: dict[str, JacobianCase] = {}
    for label, dtype in DTYPES.items():
        for case, fn in ((label, tanh_linear), (PLANTED[label], planted_layer(seed, label))):
            tensors = tuple(torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays.values())
            outcome = call(max_jacobian_error, fn, tensors, name="max_jacobian_error")
            cases[case] = {
                "error": outcome.error,
                "notes": outcome.notes,
                "value": freeze(outcome.result) if outcome.ok else None,
            }
    return {"check": "max_jacobian_error", "seed": seed, "cases": cases}


MAX_JACOBIAN_ERROR = register(
    Check("max_jacobian_error", "max_jacobian_error", 2.0, collect_max_jacobian_error)
)


def check_max_jacobian_error(max_jacobian_error: Any, *, seed: int = 0) -> float:
    """Grade ``max_jacobian_error`` in float64 and float32 against the course's own errors."""
    return run_check(MAX_JACOBIAN_ERROR, max_jacobian_error, seed=seed)
