"""The grader of notebook 04's max_jacobian_error: the course's own errors, float64 and float32."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from autograder.checks.core import Evidence
from autograder.checks.custom_functions.max_jacobian_error import MAX_JACOBIAN_ERROR, JacobianCase
from autograder.checks.jacobian_layers import (
    DTYPES,
    PLANTED,
    jacobian_inputs,
    planted_error,
    planted_layer,
    tanh_linear,
)
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import JACOBIAN_FLOAT32, JACOBIAN_FLOAT64
from autograder.grading import grader
from autograder.grading.toolkit import ItemOf, describe, judge

JACOBIAN_EPS = 1e-6


def jacobian_error(
    fn: Callable[..., torch.Tensor],
    arrays: Sequence[np.ndarray],
    dtype: torch.dtype,
    eps: float = JACOBIAN_EPS,
    scheme: str = "centred",
) -> float:
    """The course's own max |analytical - numerical| over every Jacobian entry, computed in ``dtype``
    with centred differences of step ``eps`` (what gradcheck compares).

    ``scheme`` computes a known mistake's value instead, to name it: ``"forward"`` differences
    (f(x + eps) - f(x)) / eps, or ``"not_restored"``, centred differences that leave each element at
    old - eps, so that every later column is taken at a shifted point."""
    tensors = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    # The analytical side from PyTorch's own routine, not from a copy of the exercise's loop.
    blocks = torch.autograd.functional.jacobian(fn, tuple(tensors))
    worst = 0.0
    for k, t in enumerate(tensors):
        analytical = blocks[k].reshape(-1, t.numel()).double().numpy()
        numerical = np.zeros_like(analytical)
        with torch.no_grad():
            values = [s.detach().clone() for s in tensors]
            flat = values[k].view(-1)
            base = fn(*values).reshape(-1).double()
            for j in range(t.numel()):
                old = flat[j].item()
                flat[j] = old + eps
                plus = fn(*values).reshape(-1).double()
                if scheme == "forward":
                    flat[j] = old
                    numerical[:, j] = ((plus - base) / eps).numpy()
                    continue
                flat[j] = old - eps
                minus = fn(*values).reshape(-1).double()
                if scheme != "not_restored":
                    flat[j] = old
                numerical[:, j] = ((plus - minus) / (2 * eps)).numpy()
        worst = max(worst, float(np.max(np.abs(analytical - numerical))))
    return worst


def _jacobian_value(record: JacobianCase) -> tuple[float | None, str | None]:
    if record["error"]:
        return None, record["error"]
    value = record["value"]
    if not isinstance(value, np.ndarray) or value.size != 1 or value.dtype.kind not in "fiu":
        return None, f"max_jacobian_error returned {describe(value)}; expected one number (a Python float)."
    number = float(value.reshape(()))
    if not math.isfinite(number) or number < 0:
        return (
            None,
            f"max_jacobian_error returned {number}: a maximum absolute difference is finite and >= 0.",
        )
    return number, None


_FORWARD_DIFFERENCES = (
    "forward differences (f(x + eps) - f(x)) / eps, whose error is ~eps * f''; centred differences "
    "(f(x + eps) - f(x - eps)) / (2 eps) are accurate to ~eps**2"
)


_NOT_RESTORED = (
    "an element not put back to its old value after its two evaluations, so that every later column "
    "of the numerical Jacobian is taken at a point shifted by eps"
)


def _small_jacobian_hint(value: float, arrays: Sequence[np.ndarray]) -> str:
    """Name the mistake whose float64 error, recomputed on the same inputs, is the learner's (within 1%);
    both candidates when neither matches: each gives an error of order eps."""
    for scheme, mistake in (("forward", _FORWARD_DIFFERENCES), ("not_restored", _NOT_RESTORED)):
        if math.isclose(
            value, jacobian_error(tanh_linear, arrays, torch.float64, scheme=scheme), rel_tol=0.01
        ):
            return f" Likely mistake: {mistake}."
    return (
        f" Likely mistake, one of two that give an error of this size: {_FORWARD_DIFFERENCES}; "
        f"or {_NOT_RESTORED}."
    )


def _planted_problem(evidence: Evidence, label: str, tolerance: float) -> str | None:
    """Why the learner's answer on the layer with the seed's planted error is not the course's (within
    ``tolerance``), or None. Without this case a number that is right in size for any inputs (one
    computed on the notebook's own inputs, or none at all) would pass: this one is the seed's."""
    seed = evidence["seed"]
    value, problem = _jacobian_value(evidence["cases"][PLANTED[label]])
    size = planted_error(seed)["sizes"][label]
    where = f"on the same layer with one Jacobian entry's analytical value off by {size:.6g}"
    if problem:
        return f"{where}: {problem}"
    arrays = list(jacobian_inputs(seed).values())
    expected = jacobian_error(planted_layer(seed, label), arrays, DTYPES[label])
    if abs(value - expected) <= tolerance:
        return None
    return (
        f"{where}, your {label} error is {value:.6g}, the course's {expected:.6g} (to {tolerance:.2g}): the "
        "largest difference is that entry's. Likely mistake: the error is not computed on the fn and "
        "inputs given (a fixed function, fixed inputs, or a remembered number)."
    )


@dataclass(frozen=True)
class _Run:
    """What both items read: the evidence (its seed and cases) and the inputs remade from its seed."""

    evidence: Evidence
    arrays: list[np.ndarray]

    @property
    def cases(self) -> dict[str, JacobianCase]:
        return self.evidence["cases"]


def _float64_problem(value: float, ref64: float, arrays: Sequence[np.ndarray]) -> str | None:
    """Why a float64 error is not small (or, exactly 0, too small to be real), else None."""
    if value > JACOBIAN_FLOAT64.atol:
        hint = (
            _small_jacobian_hint(value, arrays)
            if value < 1e-4
            else " Likely mistake: the analytical and numerical Jacobians are not laid out alike "
            "(transposed?), or a gradient is wrong."
        )
        return (
            f"your float64 error is {value:.3g}, the course's {ref64:.3g}; it should be below "
            f"{JACOBIAN_FLOAT64.atol:g}.{hint}"
        )
    if value == 0.0:
        # Finite differences never agree with the analytical Jacobian to the last bit: an error of exactly 0
        # means the two were not both computed in float64 (or one was compared with itself).
        return (
            f"your float64 error is exactly 0, the course's {ref64:.3g}: centred differences in float64 "
            "differ from the analytical Jacobian by rounding at least. Likely mistake: a Jacobian stored "
            "in another dtype (torch.zeros(...) without dtype= is float32), or a Jacobian compared with "
            "itself."
        )
    return None


def _float64_item(run: _Run) -> Item:
    """The float64 error is at most 1e-8, and the course's on the layer with the planted error (1)."""
    name = "float64: small"
    ref64 = jacobian_error(tanh_linear, run.arrays, torch.float64)
    value, problem = _jacobian_value(run.cases["float64"])
    problem = problem or _float64_problem(value, ref64, run.arrays)
    if problem:
        return Item(name, False, problem)
    planted = _planted_problem(run.evidence, "float64", JACOBIAN_FLOAT64.atol)
    return Item(name, planted is None, planted or f"{value:.3g} (the course's own: {ref64:.3g})")


def _float32_item(run: _Run) -> Item:
    """The float32 error is large, within a factor 10 of the course's, and the course's on the layer with
    the planted error (1)."""
    name = "float32: large"
    ref32 = jacobian_error(tanh_linear, run.arrays, torch.float32)
    value, problem = _jacobian_value(run.cases["float32"])
    low, high = max(JACOBIAN_FLOAT32.atol, ref32 / JACOBIAN_FLOAT32.rtol), ref32 * JACOBIAN_FLOAT32.rtol
    if problem:
        return Item(name, False, problem)
    if not low <= value <= high:
        hint = (
            " Likely mistake: the computation is not done in the inputs' dtype (converted to float64?): "
            "keep every tensor in the dtype it arrives in, so that float32 rounding shows."
            if value < low
            else " Likely mistake: a gradient or the finite-difference formula is wrong."
        )
        expected = f"expected between {low:.3g} and {high:.3g} (the course's: {ref32:.3g})"
        return Item(name, False, f"your float32 error is {value:.3g}; {expected}.{hint}")
    planted = _planted_problem(run.evidence, "float32", high)
    text = f"{value:.3g} (the course's own: {ref32:.3g}), far above gradcheck's atol 1e-5"
    return Item(name, planted is None, planted or text)


#: What is checked, in order.
ITEMS: tuple[ItemOf[_Run], ...] = (_float64_item, _float32_item)


@grader(MAX_JACOBIAN_ERROR)
def grade_max_jacobian_error(evidence: Evidence) -> Report:
    """Grade recorded evidence: the float64 error is at most 1e-8 (1), the float32 one is large, within a
    factor 10 of the course's own float32 error (1); on the layer with the seed's planted error each
    dtype's answer is the course's, to 1e-8 and to that factor (part of each item). Every reference is
    recomputed here."""
    run = _Run(evidence, list(jacobian_inputs(evidence["seed"]).values()))
    return judge(MAX_JACOBIAN_ERROR, ITEMS, run, run.cases.values())
