"""The comparison primitive: every check in the course is built from :func:`compare`.

It compares one learner value with its reference (computed by PyTorch autograd in float64) and
returns a :class:`Verdict` that says which tensor, what is wrong (missing, type, shape, dtype,
NaN/inf, values), the worst element with its expected value, and, when the pattern is
recognisable, the likely mistake: transposed, sign flipped, off by a factor of N, 1/N, N², 2 or 1/2
or by a simple fraction (a wrong constant), not reduced over an axis, or one of the plausible wrong
answers a check passes in as ``mistakes``. A diagnosis is given only for a pattern that a known
mistake produces; anything else gets none (a wrong diagnosis misleads more than no diagnosis). Any
other constant factor is named only by :func:`with_common_factor`, when it is the same over several
cases.

Everything here works on plain numpy data, so a verdict can be recomputed from recorded evidence
outside the learner's kernel. :func:`compare` never writes to stderr (nbgrader gives zero to a test
cell that does): floating-point warnings from extreme learner values are silenced inside it.
"""

from __future__ import annotations

import itertools
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np

from autograder.checks.tolerances import FLOAT16, FLOAT32, FLOAT64, Tolerance

#: Problems in the order they are looked for: the first one found is the one reported.
PROBLEMS = ("missing", "type", "shape", "dtype", "nonfinite", "values")

# Axis permutations and reductions are tried exhaustively; beyond this many axes that costs too much
# and no exercise in the course has such tensors.
_MAX_NDIM_SEARCHED = 5


@dataclass(frozen=True)
class Verdict:
    """The outcome of comparing one named value with its reference."""

    name: str
    ok: bool
    problem: str | None
    """None when ok, else one of :data:`PROBLEMS`."""
    detail: str
    """One sentence on what was found (shape and error when ok, the problem otherwise)."""
    likely: str | None = None
    """The likely mistake, when the pattern is recognisable."""
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    worst_index: tuple[int, ...] | None = None
    factor: float | None = None
    """When the values are a constant multiple of the expected ones by a factor no known mistake
    explains: that factor (see :func:`with_common_factor`); None otherwise."""

    @property
    def shape_ok(self) -> bool:
        """True when the value is an array of the expected shape (whatever its dtype or values)."""
        return self.problem not in ("missing", "type", "shape")

    def message(self) -> str:
        """The detail followed by the likely mistake, as one line of feedback."""
        if self.likely:
            end = "" if self.likely.endswith(("?", ".")) else "."
            return f"{self.detail} Likely mistake: {self.likely}{end}"
        return self.detail


def _torch_to_numpy(value: Any) -> np.ndarray | None:
    import torch

    try:
        t = value.detach()
        if t.layout != torch.strided:  # sparse tensors have no numpy view
            t = t.to_dense()
        t = t.cpu().resolve_conj().resolve_neg()
        if t.is_floating_point() and t.dtype not in (torch.float16, torch.float32, torch.float64):
            # bfloat16 and the float8 types have no numpy dtype; float32 holds them exactly.
            t = t.float()
        return t.numpy()
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        # meta tensors, nested tensors and other exotic layouts: not numeric data we can compare
        return None


def as_array(value: Any) -> np.ndarray | None:
    """Return ``value`` as a numpy array, or None when it is not numeric array-like data.

    Accepts numpy arrays and scalars, torch tensors (detached, so one that requires grad is fine,
    moved to the CPU) and Python numbers. Lists, None, bools and other objects are not accepted: an
    exercise that asks for an array must return one. Subclasses such as ``np.matrix`` become plain
    arrays, so that axis arithmetic behaves as for any array.
    """
    if isinstance(value, np.ndarray):
        return np.asarray(value)
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, float, complex, np.number)):
        return np.asarray(value)
    # A tensor exists only once torch is imported: never import it here, where a numpy notebook's
    # graded kernel has no torch at all.
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    if isinstance(value, torch.Tensor):
        return _torch_to_numpy(value)
    return None


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _fmt_pair(got: float, expected: float) -> tuple[str, str]:
    """Both numbers with just enough digits to tell them apart (never "got 1, expected 1")."""
    for digits in (6, 9, 12, 17):
        g, e = f"{got:.{digits}g}", f"{expected:.{digits}g}"
        if g != e:
            break
    return g, e


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _fmt_index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def _fmt_axes(axes: tuple[int, ...]) -> str:
    return f"axis {axes[0]}" if len(axes) == 1 else "axes " + _fmt_shape(axes)


def _close(a: Any, b: Any, tol: Tolerance, equal_nan: bool = False) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(
        np.all(np.isclose(a, b, rtol=tol.rtol, atol=tol.atol, equal_nan=equal_nan))
    )


def _widened(tol: Tolerance, *dtypes: np.dtype) -> Tolerance:
    """``tol``, loosened to the precision of any lower-precision floating dtype among ``dtypes``.

    A value that is accepted in float32 (``dtype=None``) or a float32 reference cannot be held to
    float64 rounding: a correct float32 computation would be reported wrong.
    """
    for dt in dtypes:
        if dt.kind == "f" and dt.itemsize < 8:
            low = FLOAT16 if dt.itemsize <= 2 else FLOAT32
            if low.rtol > tol.rtol or low.atol > tol.atol:
                tol = Tolerance(max(tol.rtol, low.rtol), max(tol.atol, low.atol), low.reason)
    return tol


class Overflow(str):
    """The description of a wrong answer that is known to overflow where it is given (a check
    computed it to be NaN or inf on purpose): the only kind named for an answer with no finite value."""


def _named_mistake(actual: np.ndarray, mistakes: Mapping[str, Any], tol: Tolerance) -> str | None:
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
        if _close(a, wrong_arr.astype(np.float64), tol, equal_nan=True):
            return description
    return None


def _axis_subsets(ndim: int, remove: int) -> list[tuple[int, ...]]:
    if ndim > _MAX_NDIM_SEARCHED or remove <= 0:
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
            if _close(a.sum(axis=axes), expected, tol):
                return f"not reduced: summing it over {_fmt_axes(axes)} gives the expected values"
            if _close(a.mean(axis=axes), expected, tol):
                return f"not reduced: averaging it over {_fmt_axes(axes)} gives the expected values"
    elif a.ndim < expected.ndim:
        for axes in _axis_subsets(expected.ndim, expected.ndim - a.ndim):
            if any(expected.shape[i] < 2 for i in axes):
                continue
            if tuple(s for i, s in enumerate(expected.shape) if i not in axes) != a.shape:
                continue
            if _close(a, expected.sum(axis=axes), tol):
                return f"summed over {_fmt_axes(axes)}, which the expected value keeps"
            if _close(a, expected.mean(axis=axes), tol):
                return f"averaged over {_fmt_axes(axes)}, which the expected value keeps"
    return None


def _shape_diagnosis(actual: np.ndarray, expected: np.ndarray, tol: Tolerance) -> str | None:
    a = actual.astype(np.float64)
    if a.ndim == 2 and a.shape == expected.shape[::-1]:
        if _close(a.T, expected, tol):
            return "transposed (the values are right, the axes are swapped)"
        if _close(a.reshape(expected.shape), expected, tol):
            return "the right values reshaped to the transposed shape (a reshape where none belongs?)"
        return "the shape is the transpose of the expected one"
    if np.squeeze(a).shape == np.squeeze(expected).shape:
        if _close(a.reshape(expected.shape), expected, tol):
            return "an extra or missing axis of size 1 (keepdims=True, or a missing reshape/squeeze)"
        return "an extra or missing axis of size 1, and the values differ too"
    if 2 < a.ndim == expected.ndim <= _MAX_NDIM_SEARCHED and sorted(a.shape) == sorted(expected.shape):
        for perm in itertools.permutations(range(a.ndim)):
            moved = a.transpose(perm)
            if moved.shape == expected.shape and _close(moved, expected, tol):
                return (
                    f"axes in the wrong order: transposing it with axes {_fmt_shape(perm)} "
                    "gives the expected values"
                )
    reduced = _reduction_diagnosis(a, expected, tol)
    if reduced:
        return reduced
    if a.size == expected.size:
        if _close(a.reshape(expected.shape), expected, tol):
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
    size = f"{_fmt(max(magnitude, 1 / magnitude))} times too {'large' if magnitude > 1 else 'small'}"
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
    of = "" if fraction == _fmt(magnitude) else f" of {fraction}"
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
    return factor if _close(a, factor * expected, tol) else None


def _value_diagnosis(
    a: np.ndarray, expected: np.ndarray, tol: Tolerance, batch_size: int | None
) -> tuple[str | None, float | None]:
    """The likely mistake behind same-shape, finite, wrong values (or None when none fits), and the
    constant factor no known mistake explains that relates them, if there is one."""
    if not np.any(a):
        return "all zeros: is the computation missing, or a placeholder left in?", None
    if _close(a, -expected, tol):
        return "sign flipped", None
    if a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 1 and _close(a.T, expected, tol):
        return "transposed (the values are right, the axes are swapped)", None
    if a.ndim == 2 and a.shape[0] != a.shape[1] and _close(a.reshape(expected.shape[::-1]).T, expected, tol):
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
        if np.isfinite(offset) and _close(a - offset, expected, tol):
            return f"off by a constant {_fmt(offset)} in every element", None
    return None, None


def with_common_factor(verdicts: Sequence[Verdict]) -> list[Verdict]:
    """The verdicts of one value over several cases, with a factor named where it is the same in all.

    :func:`compare` names only the factors a known mistake produces (N, 1/N, N², 2, 1/2, simple
    fractions). Any other constant factor is named when it relates the learner's values to the
    expected ones in every failing case (at least two) and none of those cases has another
    diagnosis: a factor that holds across several elements and several inputs is the learner's,
    not a coincidence of one input.
    Verdicts that pass, or that this does not concern, are returned unchanged.
    """
    failing = [v for v in verdicts if not v.ok]
    factors = [v.factor for v in failing]
    if len(failing) < 2 or any(f is None or v.likely for f, v in zip(factors, failing, strict=True)):
        return list(verdicts)
    first = factors[0]
    if not all(np.isclose(f, first, rtol=1e-6) for f in factors):
        return list(verdicts)
    magnitude = _fmt(abs(first))
    likely = (
        f"sign flipped and scaled by {magnitude} in every case"
        if first < 0
        else f"off by a constant factor of {magnitude} in every case"
    )
    return [replace(v, likely=likely) if not v.ok else v for v in verdicts]


_DTYPE_HINTS = {
    "i": "an integer array: created with an integer dtype (np.array of ints, np.zeros_like of an int array), "
    "or an integer division?",
    "u": "an unsigned integer array: created with an integer dtype, or an integer division?",
    "b": "a boolean array: a mask (e.g. x > 0) returned where the values it selects belong?",
    "c": "a complex array: is one of the inputs complex, or a negative Python number raised to a "
    "fractional power?",
    "O": "an array of Python objects: built from a list of arrays of different shapes, or holding None?",
}


def _dtype_hint(dt: np.dtype) -> str | None:
    if dt.kind == "f" and dt.itemsize == 4:
        return "computed in single precision: an array or tensor created as float32 somewhere?"
    if dt.kind == "f" and dt.itemsize == 2:
        return "computed in half precision: an array or tensor created as float16 somewhere?"
    return _DTYPE_HINTS.get(dt.kind)


def _type_hint(type_name: str) -> str | None:
    if type_name in ("list", "tuple"):
        return f"a Python {type_name}: return a numpy array (np.array(...)) of the expected shape"
    return None


def compare(
    name: str,
    actual: Any,
    expected: Any,
    *,
    tol: Tolerance = FLOAT64,
    dtype: Any = np.float64,
    mistakes: Mapping[str, Any] | None = None,
    batch_size: int | None = None,
) -> Verdict:
    """Compare a learner's value with its reference and explain any difference.

    Args:
        name: what the value is called in feedback, e.g. ``"dW"``.
        actual: the learner's value (numpy array or scalar, torch tensor, Python number).
        expected: the reference value, float64 (numpy or torch).
        tol: the closeness rule; see :mod:`autograder.checks.tolerances`. It is loosened to float32 (or
            float16) precision when ``dtype=None`` accepts such a value, or when ``expected`` has
            that precision, since rounding alone would otherwise fail a correct value.
        dtype: the dtype the value must have, or None to accept any real floating dtype.
        mistakes: plausible wrong answers a check knows for this value, as
            ``{description: wrong_value}``; a match is reported as the likely mistake, ahead of the
            generic diagnoses. A wrong value may have a different shape than the expected one.
        batch_size: N, so that a factor of N or 1/N is named as such. Pass it wherever a factor
            of N can appear: without it such a factor gets no diagnosis at all.

    Returns:
        A :class:`Verdict`; ``verdict.ok`` is True when shape, dtype and every value match.

    Raises:
        TypeError: when ``expected`` is not array-like (a bug in the check, not the learner's).
    """
    expected_arr = as_array(expected)
    if expected_arr is None:
        raise TypeError(f"reference for {name!r} is not array-like: {type(expected).__name__}")
    with np.errstate(all="ignore"), warnings.catch_warnings():
        # Extreme learner values (1e300, inf) overflow intermediate products; that must not print.
        warnings.simplefilter("ignore")
        return _compare(name, actual, expected_arr, tol, dtype, mistakes or {}, batch_size)


def _compare(
    name: str,
    actual: Any,
    expected_arr: np.ndarray,
    tol: Tolerance,
    dtype: Any,
    mistakes: Mapping[str, Any],
    batch_size: int | None,
) -> Verdict:
    tol = _widened(tol, expected_arr.dtype)
    expected_arr = expected_arr.astype(np.float64)

    if actual is None:
        return Verdict(name, False, "missing", f"{name} is None: nothing was returned for it.")
    arr = as_array(actual)
    if arr is None:
        type_name = getattr(actual, "type_name", None) or type(actual).__name__
        return Verdict(
            name,
            False,
            "type",
            f"{name} is a {type_name}, expected an array of shape {_fmt_shape(expected_arr.shape)}.",
            likely=_type_hint(type_name),
        )

    if arr.shape != expected_arr.shape:
        likely = None
        if arr.dtype.kind in "fiu":
            likely = _named_mistake(arr, mistakes, tol) or _shape_diagnosis(arr, expected_arr, tol)
        return Verdict(
            name,
            False,
            "shape",
            f"{name} has shape {_fmt_shape(arr.shape)}, expected {_fmt_shape(expected_arr.shape)}.",
            likely=likely,
        )

    dtype_ok = arr.dtype.kind == "f" if dtype is None else arr.dtype == np.dtype(dtype)
    if not dtype_ok:
        wanted = np.dtype(dtype).name if dtype is not None else "a floating dtype"
        return Verdict(
            name,
            False,
            "dtype",
            f"{name} has dtype {arr.dtype.name}, expected {wanted}.",
            _dtype_hint(arr.dtype),
        )

    tol = _widened(tol, arr.dtype)
    a = arr.astype(np.float64)
    bad = ~np.isfinite(a) & np.isfinite(expected_arr)
    if np.any(bad):
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        nan = np.isnan(a[bad])
        kinds = "NaN" if np.all(nan) else "inf" if not np.any(nan) else "NaN or inf"
        where = f" (first at {_fmt_index(first)})" if a.ndim else ""
        finite = "every expected value is" if np.all(np.isfinite(expected_arr)) else "the expected values are"
        return Verdict(
            name,
            False,
            "nonfinite",
            f"{name} has {int(bad.sum())} {kinds} value(s) of {a.size}{where}, where {finite} finite.",
            likely=_named_mistake(a, mistakes, tol)
            or "an overflow, e.g. exp of a large number, or 0/0: is the computation numerically stable?",
            worst_index=first,
        )

    # Equal values (inf included) and NaN where NaN is expected have no error; inf - inf would be NaN.
    same = (a == expected_arr) | (np.isnan(a) & np.isnan(expected_arr))
    abs_err = np.where(same, 0.0, np.abs(a - expected_arr))
    rel = np.where(same, 0.0, abs_err / np.maximum(np.abs(a) + np.abs(expected_arr), 1e-8))
    max_abs = float(np.max(abs_err)) if a.size else 0.0
    max_rel = float(np.max(rel)) if a.size else 0.0
    close = same | np.isclose(a, expected_arr, rtol=tol.rtol, atol=tol.atol)
    shape_text = f"shape {_fmt_shape(a.shape)} {arr.dtype.name}"
    if np.all(close):
        return Verdict(
            name, True, None, f"{name}: {shape_text}, max abs error {max_abs:.1e}.", None, max_abs, max_rel
        )

    excess = np.where(close, -np.inf, np.nan_to_num(abs_err - tol.rtol * np.abs(expected_arr), nan=np.inf))
    worst_t = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), a.shape)) if a.ndim else ()
    at = f" at {_fmt_index(worst_t)}" if a.ndim else ""
    got_text, expected_text = _fmt_pair(float(a[worst_t]), float(expected_arr[worst_t]))
    n_wrong = int((~close).sum())
    detail = (
        f"{name} values differ"
        + (f" in {n_wrong} of {a.size} elements; worst{at}:" if a.size > 1 else ":")
        + f" got {got_text}, expected {expected_text}"
        + f" (max abs error {max_abs:.3g}, max rel error {max_rel:.3g})."
    )
    likely = _named_mistake(a, mistakes, tol)
    factor = None
    if likely is None:
        likely, factor = _value_diagnosis(a, expected_arr, tol, batch_size)
    return Verdict(name, False, "values", detail, likely, max_abs, max_rel, worst_t, factor)
