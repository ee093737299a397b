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

The recognisers of likely mistakes are in :mod:`autograder.checks.mistakes`.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from autograder.checks.mistakes import named_mistake, shape_diagnosis, value_diagnosis
from autograder.checks.tolerances import FLOAT16, FLOAT32, FLOAT64, Tolerance
from autograder.checks.values import as_array, fmt, fmt_index, fmt_pair, fmt_shape

#: Problems in the order they are looked for: the first one found is the one reported.
PROBLEMS = ("missing", "type", "shape", "dtype", "nonfinite", "values")


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
    magnitude = fmt(abs(first))
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
    # Extreme learner values (1e300, inf) overflow intermediate products; that must not print. The
    # warnings' filters are one list per process (Python 3.11): threads scoring at once take turns, or
    # one's exit would put back a list saved inside another's, leaving "ignore" first for good.
    with _WARNINGS, np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _compare(name, actual, expected_arr, tol, dtype, mistakes or {}, batch_size)


#: Held while :func:`compare` has the process's warning filters set to "ignore".
_WARNINGS = threading.RLock()


def _compare(
    name: str,
    actual: Any,
    expected_arr: np.ndarray,
    tol: Tolerance,
    dtype: Any,
    mistakes: Mapping[str, Any],
    batch_size: int | None,
) -> Verdict:
    """The first of :data:`PROBLEMS` that ``actual`` has, as its verdict; else the verdict that it is ok."""
    tol = _widened(tol, expected_arr.dtype)
    expected_arr = expected_arr.astype(np.float64)
    if actual is None:
        return Verdict(name, False, "missing", f"{name} is None: nothing was returned for it.")
    arr = as_array(actual)
    if arr is None:
        return _type_verdict(name, actual, expected_arr)
    if arr.shape != expected_arr.shape:
        return _shape_verdict(name, arr, expected_arr, tol, mistakes)
    dtype_ok = arr.dtype.kind == "f" if dtype is None else arr.dtype == np.dtype(dtype)
    if not dtype_ok:
        wanted = np.dtype(dtype).name if dtype is not None else "a floating dtype"
        detail = f"{name} has dtype {arr.dtype.name}, expected {wanted}."
        return Verdict(name, False, "dtype", detail, _dtype_hint(arr.dtype))
    tol = _widened(tol, arr.dtype)
    a = arr.astype(np.float64)
    return _nonfinite_verdict(name, a, expected_arr, tol, mistakes) or _values_verdict(
        name, a, arr.dtype, expected_arr, tol, mistakes, batch_size
    )


def _type_verdict(name: str, actual: Any, expected_arr: np.ndarray) -> Verdict:
    """A value that is not array-like at all (a list of arrays, a string, an object...)."""
    type_name = getattr(actual, "type_name", None) or type(actual).__name__
    detail = f"{name} is a {type_name}, expected an array of shape {fmt_shape(expected_arr.shape)}."
    return Verdict(name, False, "type", detail, likely=_type_hint(type_name))


def _shape_verdict(
    name: str, arr: np.ndarray, expected_arr: np.ndarray, tol: Tolerance, mistakes: Mapping[str, Any]
) -> Verdict:
    """An array of another shape: a named mistake of that shape, else what the shapes say (numbers only)."""
    likely = None
    if arr.dtype.kind in "fiu":
        likely = named_mistake(arr, mistakes, tol) or shape_diagnosis(arr, expected_arr, tol)
    detail = f"{name} has shape {fmt_shape(arr.shape)}, expected {fmt_shape(expected_arr.shape)}."
    return Verdict(name, False, "shape", detail, likely=likely)


def _nonfinite_verdict(
    name: str, a: np.ndarray, expected_arr: np.ndarray, tol: Tolerance, mistakes: Mapping[str, Any]
) -> Verdict | None:
    """NaN or inf where the expected value is finite (the first one located), or None when there is none."""
    bad = ~np.isfinite(a) & np.isfinite(expected_arr)
    if not np.any(bad):
        return None
    first = tuple(int(i) for i in np.argwhere(bad)[0])
    nan = np.isnan(a[bad])
    kinds = "NaN" if np.all(nan) else "inf" if not np.any(nan) else "NaN or inf"
    where = f" (first at {fmt_index(first)})" if a.ndim else ""
    finite = "every expected value is" if np.all(np.isfinite(expected_arr)) else "the expected values are"
    return Verdict(
        name,
        False,
        "nonfinite",
        f"{name} has {int(bad.sum())} {kinds} value(s) of {a.size}{where}, where {finite} finite.",
        likely=named_mistake(a, mistakes, tol)
        or "an overflow, e.g. exp of a large number, or 0/0: is the computation numerically stable?",
        worst_index=first,
    )


def _values_verdict(
    name: str,
    a: np.ndarray,
    dtype: np.dtype,
    expected_arr: np.ndarray,
    tol: Tolerance,
    mistakes: Mapping[str, Any],
    batch_size: int | None,
) -> Verdict:
    """Values close to the expected ones (ok), else the worst element beyond the tolerance and the likely
    mistake: a named one first, then what the values' pattern says (:func:`value_diagnosis`)."""
    # Equal values (inf included) and NaN where NaN is expected have no error; inf - inf would be NaN.
    same = (a == expected_arr) | (np.isnan(a) & np.isnan(expected_arr))
    abs_err = np.where(same, 0.0, np.abs(a - expected_arr))
    rel = np.where(same, 0.0, abs_err / np.maximum(np.abs(a) + np.abs(expected_arr), 1e-8))
    max_abs = float(np.max(abs_err)) if a.size else 0.0
    max_rel = float(np.max(rel)) if a.size else 0.0
    close = same | np.isclose(a, expected_arr, rtol=tol.rtol, atol=tol.atol)
    if np.all(close):
        detail = f"{name}: shape {fmt_shape(a.shape)} {dtype.name}, max abs error {max_abs:.1e}."
        return Verdict(name, True, None, detail, None, max_abs, max_rel)
    excess = np.where(close, -np.inf, np.nan_to_num(abs_err - tol.rtol * np.abs(expected_arr), nan=np.inf))
    worst_t = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), a.shape)) if a.ndim else ()
    at = f" at {fmt_index(worst_t)}" if a.ndim else ""
    got_text, expected_text = fmt_pair(float(a[worst_t]), float(expected_arr[worst_t]))
    n_wrong = int((~close).sum())
    detail = (
        f"{name} values differ"
        + (f" in {n_wrong} of {a.size} elements; worst{at}:" if a.size > 1 else ":")
        + f" got {got_text}, expected {expected_text}"
        + f" (max abs error {max_abs:.3g}, max rel error {max_rel:.3g})."
    )
    likely = named_mistake(a, mistakes, tol)
    factor = None
    if likely is None:
        likely, factor = value_diagnosis(a, expected_arr, tol, batch_size)
    return Verdict(name, False, "values", detail, likely, max_abs, max_rel, worst_t, factor)
