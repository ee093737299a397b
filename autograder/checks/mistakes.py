"""The likely mistakes :func:`autograder.checks.compare.compare` recognises in a wrong value: one per
branch, each returning the sentence the learner reads (a wrong diagnosis misleads more than none)."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import numpy as np

from autograder.checks.tolerances import Tolerance
from autograder.checks.values import Overflow, as_array, fmt, fmt_axes, fmt_shape, near

# Axis permutations and reductions are tried exhaustively; beyond this many axes that costs too much
# and no exercise in the course has such tensors.
MAX_NDIM_SEARCHED = 5


def named_mistake(actual: np.ndarray, mistakes: Mapping[str, Any], tol: Tolerance) -> str | None:
    """The first of the check's plausible wrong answers that ``actual`` equals, if any.

    Where ``actual`` holds NaN or inf, a wrong answer must have them in the same places; and when
    ``actual`` has no finite element at all, only an :class:`Overflow` is named: two answers that
    both overflow by accident say nothing about which mistake was made (an unstable ``-log(p)``
    giving an infinite loss is not "normalised over the wrong axis" because that answer's loss is
    infinite too), while a check that computed an unstable formula on purpose knows what it is.
    """
    a = actual.astype(np.float64)
    only_overflows = bool(a.size) and not np.isfinite(a).any()
    for description, wrong in mistakes.items():
        if only_overflows and not isinstance(description, Overflow):
            continue
        wrong_arr = as_array(wrong)
        if wrong_arr is None:
            try:
                wrong_arr = np.asarray(wrong, dtype=np.float64)
            except (TypeError, ValueError):  # a ragged list: it cannot match any array
                continue
        if wrong_arr.dtype.kind not in "fiub":
            continue
        # equal_nan: a wrong answer that is known to overflow (a naive softmax) must still be named
        if near(a, wrong_arr.astype(np.float64), tol, equal_nan=True):
            return description
    return None


def _axis_subsets(ndim: int, remove: int) -> list[tuple[int, ...]]:
    if ndim > MAX_NDIM_SEARCHED or remove <= 0:
        return []
    return list(itertools.combinations(range(ndim), remove))


def _reduction_diagnosis(a: np.ndarray, expected: np.ndarray, tol: Tolerance) -> str | None:
    """A sum or mean too few or too many: one of the two arrays reduced over some axes is the other."""
    if a.ndim > expected.ndim:
        for axes in _axis_subsets(a.ndim, a.ndim - expected.ndim):
            if any(a.shape[i] < 2 for i in axes):  # size-1 axes are the keepdims case, size 0 is void
                continue
            if tuple(s for i, s in enumerate(a.shape) if i not in axes) != expected.shape:
                continue
            if near(a.sum(axis=axes), expected, tol):
                return f"not reduced: summing it over {fmt_axes(axes)} gives the expected values"
            if near(a.mean(axis=axes), expected, tol):
                return f"not reduced: averaging it over {fmt_axes(axes)} gives the expected values"
    elif a.ndim < expected.ndim:
        for axes in _axis_subsets(expected.ndim, expected.ndim - a.ndim):
            if any(expected.shape[i] < 2 for i in axes):
                continue
            if tuple(s for i, s in enumerate(expected.shape) if i not in axes) != a.shape:
                continue
            if near(a, expected.sum(axis=axes), tol):
                return f"summed over {fmt_axes(axes)}, which the expected value keeps"
            if near(a, expected.mean(axis=axes), tol):
                return f"averaged over {fmt_axes(axes)}, which the expected value keeps"
    return None


def shape_diagnosis(actual: np.ndarray, expected: np.ndarray, tol: Tolerance) -> str | None:
    a = actual.astype(np.float64)
    if a.ndim == 2 and a.shape == expected.shape[::-1]:
        if near(a.T, expected, tol):
            return "transposed (the values are right, the axes are swapped)"
        if near(a.reshape(expected.shape), expected, tol):
            return "the right values reshaped to the transposed shape (a reshape where none belongs?)"
        return "the shape is the transpose of the expected one"
    if np.squeeze(a).shape == np.squeeze(expected).shape:
        if near(a.reshape(expected.shape), expected, tol):
            return "an extra or missing axis of size 1 (keepdims=True, or a missing reshape/squeeze)"
        return "an extra or missing axis of size 1, and the values differ too"
    if 2 < a.ndim == expected.ndim <= MAX_NDIM_SEARCHED and sorted(a.shape) == sorted(expected.shape):
        for perm in itertools.permutations(range(a.ndim)):
            moved = a.transpose(perm)
            if moved.shape == expected.shape and near(moved, expected, tol):
                return (
                    f"axes in the wrong order: transposing it with axes {fmt_shape(perm)} "
                    "gives the expected values"
                )
    reduced = _reduction_diagnosis(a, expected, tol)
    if reduced:
        return reduced
    if a.size == expected.size:
        if near(a.reshape(expected.shape), expected, tol):
            return "the right values in the wrong shape: a reshape is missing"
    return None


def _describe_factor(factor: float, batch_size: int | None, several: bool) -> str | None:
    """Name ``actual = factor * expected`` when a known mistake or a constant in the code explains it.

    Recognised: N, 1/N, N² and 1/N² (only when the caller passes the batch size N, so that one
    mistake always gets one name), 2 and 1/2, each with or without a sign flip; and, when the ratio
    holds over ``several`` significant elements, any simple fraction (a wrong numeric constant).
    A factor is always given the same way ("4 times too small", never "0.25"); only the reason
    differs, and it is specific only when N is known. Any other factor says nothing by itself: it
    may be a coincidence of one case's inputs (a bias gradient computed from the input is a
    multiple of the right one when N = 1), so it is named only by :func:`with_common_factor`.
    """
    magnitude, sign = abs(factor), "sign flipped and " if factor < 0 else ""
    if np.isclose(magnitude, 2, rtol=1e-6) and batch_size != 2:
        return f"{sign}twice too large (a factor 2 too many, e.g. from the derivative of a square?)"
    if np.isclose(magnitude, 0.5, rtol=1e-6) and batch_size != 2:
        return f"{sign}half the expected value (a missing factor 2, e.g. from the derivative of a square?)"
    size = f"{fmt(max(magnitude, 1 / magnitude))} times too {'large' if magnitude > 1 else 'small'}"
    n = batch_size or 0
    if n > 1:
        mean = "a sum over the batch where the mean belongs (a missing 1/N)?"
        for value, reason in (
            (n, f"a factor of the batch size N={n}: {mean}"),
            (1 / n, f"a factor of 1/N with N={n}: divided by N twice, or where no mean is taken?"),
            (n * n, f"a factor of N² with N={n}: multiplied by N where 1/N belongs?"),
            (1 / (n * n), f"a factor of 1/N² with N={n}: divided by N where N belongs?"),
        ):
            if np.isclose(magnitude, value, rtol=1e-6):
                return f"{sign}{size}, {reason}"
    fraction = _simple_fraction(magnitude) if several else None
    if fraction is None:
        return None
    of = "" if fraction == fmt(magnitude) else f" of {fraction}"
    return f"{sign}{size}, a constant factor{of}: a wrong numeric constant, or a scale applied twice?"


#: A factor that is a simple fraction p/q (p up to _MAX_NUMERATOR, q up to _MAX_DENOMINATOR, or its
#: inverse) comes from a constant in the code, not from the data: a data-dependent ratio lands
#: within 1e-9 of such a fraction with negligible probability.
_MAX_NUMERATOR, _MAX_DENOMINATOR = 200, 12


def _simple_fraction(magnitude: float) -> str | None:
    """``magnitude`` written as a simple fraction ("3/2", "16", "1/4"), or None when it is not one."""
    for value, inverted in ((magnitude, False), (1 / magnitude, True)):
        if not 1 < value <= _MAX_NUMERATOR:
            continue
        fraction = Fraction(value).limit_denominator(_MAX_DENOMINATOR)
        if abs(float(fraction) - value) <= 1e-9 * value:
            p, q = fraction.numerator, fraction.denominator
            if inverted:
                p, q = q, p
            return str(p) if q == 1 else f"{p}/{q}"
    return None


#: Fewest significant elements that must carry a ratio before a factor no known mistake explains
#: can be named at all: a single non-zero element fits some factor whatever the mistake.
_MIN_FACTOR_ELEMENTS = 2


def _fitted_factor(a: np.ndarray, expected: np.ndarray, tol: Tolerance) -> float | None:
    """The factor f (not 0 or 1) with ``a == f * expected`` within ``tol``, or None."""
    scale = float(np.max(np.abs(expected))) if expected.size else 0.0
    if not 0 < scale < np.inf:
        return None
    # Least-squares factor, computed on rescaled arrays so that huge values cannot overflow it.
    e_unit, a_unit = expected / scale, a / scale
    factor = float(np.vdot(a_unit, e_unit)) / float(np.vdot(e_unit, e_unit))
    if not np.isfinite(factor) or factor == 0 or abs(factor - 1) <= 1e-6:
        return None
    return factor if near(a, factor * expected, tol) else None


def value_diagnosis(
    a: np.ndarray, expected: np.ndarray, tol: Tolerance, batch_size: int | None
) -> tuple[str | None, float | None]:
    """The likely mistake behind same-shape, finite, wrong values (or None when none fits), and the
    constant factor no known mistake explains that relates them, if there is one."""
    if not np.any(a):
        return "all zeros: is the computation missing, or a placeholder left in?", None
    if near(a, -expected, tol):
        return "sign flipped", None
    if a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 1 and near(a.T, expected, tol):
        return "transposed (the values are right, the axes are swapped)", None
    if a.ndim == 2 and a.shape[0] != a.shape[1] and near(a.reshape(expected.shape[::-1]).T, expected, tol):
        return "reshaped where a transpose belongs (the values are right, in the wrong order)", None

    factor = _fitted_factor(a, expected, tol)
    if factor is not None:
        # A recognised factor is named even for a scalar (a loss twice too large), a simple
        # fraction only over several elements; any other factor is left to with_common_factor.
        several = int(np.count_nonzero(np.abs(expected) > tol.atol)) >= _MIN_FACTOR_ELEMENTS
        described = _describe_factor(factor, batch_size, several)
        if described or not several:
            return described, None
        return None, factor

    if a.size > 1:
        offset = float(np.mean(a - expected))
        if np.isfinite(offset) and near(a - offset, expected, tol):
            return f"off by a constant {fmt(offset)} in every element", None
    return None, None
