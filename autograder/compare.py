"""The comparison primitive: every check in the course is built from :func:`compare`.

It compares one learner value with its reference (computed by PyTorch autograd in float64) and
returns a :class:`Verdict` that says which tensor, what is wrong (missing, type, shape, dtype,
NaN/inf, values), the worst element with its expected value, and, when the pattern is
recognisable, the likely mistake: transposed, sign flipped, off by a factor (of N), not reduced
over an axis, or one of the plausible wrong answers a check passes in as ``mistakes``.

Everything here works on plain numpy data, so a verdict can be recomputed from recorded evidence
outside the learner's kernel.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.tolerances import FLOAT64, Tolerance

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


def as_array(value: Any) -> np.ndarray | None:
    """Return ``value`` as a numpy array, or None when it is not numeric array-like data.

    Accepts numpy arrays and scalars, torch tensors (detached, moved to the CPU) and Python
    numbers. Lists, None and other objects are not accepted: an exercise that asks for an array
    must return one.
    """
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, float, np.number)):
        return np.asarray(value)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a pinned dependency
        return None
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().resolve_conj().resolve_neg().numpy()
    return None


def _fmt(x: float) -> str:
    return f"{x:.6g}"


def _fmt_shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _fmt_index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def _close(a: np.ndarray, b: np.ndarray, tol: Tolerance) -> bool:
    return a.shape == b.shape and bool(np.all(np.isclose(a, b, rtol=tol.rtol, atol=tol.atol)))


def _named_mistake(actual: np.ndarray, mistakes: Mapping[str, Any], tol: Tolerance) -> str | None:
    for description, wrong in mistakes.items():
        wrong_arr = np.asarray(wrong, dtype=np.float64)
        if _close(actual.astype(np.float64), wrong_arr, tol):
            return description
    return None


def _shape_diagnosis(actual: np.ndarray, expected: np.ndarray, tol: Tolerance) -> str | None:
    a = actual.astype(np.float64)
    if a.ndim == 2 and a.shape == expected.shape[::-1]:
        if _close(a.T, expected, tol):
            return "transposed (the values are right, the axes are swapped)"
        return "the shape is the transpose of the expected one"
    if np.squeeze(a).shape == np.squeeze(expected).shape:
        if _close(a.reshape(expected.shape), expected, tol):
            return "an extra or missing axis of size 1 (keepdims=True, or a missing reshape/squeeze)"
        return "an extra or missing axis of size 1, and the values differ too"
    if a.ndim == expected.ndim + 1:
        for axis in range(a.ndim):
            if _close(a.sum(axis=axis), expected, tol):
                return f"not reduced: summing it over axis {axis} gives the expected values"
    if a.size == expected.size:
        return "the right number of elements in the wrong layout (reshape where a transpose belongs?)"
    return None


def _value_diagnosis(
    a: np.ndarray, expected: np.ndarray, tol: Tolerance, batch_size: int | None
) -> str | None:
    if not np.any(a):
        return "all zeros: is the computation missing, or a placeholder left in?"
    if _close(a, -expected, tol):
        return "sign flipped"
    if a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 1 and _close(a.T, expected, tol):
        return "transposed (the values are right, the axes are swapped)"
    denom = float(np.vdot(expected, expected))
    if denom > 0:
        factor = float(np.vdot(a, expected)) / denom
        if abs(factor - 1) > 1e-6 and factor != 0 and _close(a, factor * expected, tol):
            return _describe_factor(factor, batch_size)
    offset = a - expected
    if a.size > 1 and np.ptp(offset) <= tol.atol + tol.rtol * float(np.max(np.abs(expected))):
        return f"off by a constant {_fmt(float(offset.flat[0]))} in every element"
    return None


def _describe_factor(factor: float, batch_size: int | None) -> str:
    if batch_size and batch_size > 1:
        if np.isclose(factor, batch_size, rtol=1e-6):
            return (
                f"{batch_size} times too large, a factor of the batch size N={batch_size}: "
                "a sum over the batch where the mean belongs (a missing 1/N)?"
            )
        if np.isclose(factor, 1 / batch_size, rtol=1e-6):
            return (
                f"{batch_size} times too small, a factor of 1/N with N={batch_size}: "
                "divided by N twice, or where no mean is taken?"
            )
    if np.isclose(factor, 2, rtol=1e-6):
        return "twice too large (a factor 2 too many, e.g. from the derivative of a square?)"
    if np.isclose(factor, 0.5, rtol=1e-6):
        return "half the expected value (a missing factor 2, e.g. from the derivative of a square?)"
    if factor < 0:
        return f"sign flipped and scaled by {_fmt(-factor)}"
    return f"off by a constant factor of {_fmt(factor)}"


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
        expected: the reference value, float64.
        tol: the closeness rule; see :mod:`autograder.tolerances`.
        dtype: the dtype the value must have, or None to accept any floating dtype.
        mistakes: plausible wrong answers a check knows for this value, as
            ``{description: wrong_value}``; a match is reported as the likely mistake.
        batch_size: N, so that a factor of N or 1/N is named as such.

    Returns:
        A :class:`Verdict`; ``verdict.ok`` is True when shape, dtype and every value match.
    """
    mistakes = mistakes or {}
    expected_arr = as_array(expected)
    if expected_arr is None:
        raise TypeError(f"reference for {name!r} is not array-like: {type(expected).__name__}")
    expected_arr = expected_arr.astype(np.float64)

    if actual is None:
        return Verdict(name, False, "missing", f"{name} is None: nothing was returned for it.")
    arr = as_array(actual)
    if arr is None:
        return Verdict(
            name,
            False,
            "type",
            f"{name} is a {getattr(actual, 'type_name', type(actual).__name__)}, expected an array of shape "
            f"{_fmt_shape(expected_arr.shape)}.",
        )

    if arr.shape != expected_arr.shape:
        if arr.dtype.kind in "fiu":
            likely = _named_mistake(arr, mistakes, tol) or _shape_diagnosis(arr, expected_arr, tol)
        else:
            likely = None
        return Verdict(
            name,
            False,
            "shape",
            f"{name} has shape {_fmt_shape(arr.shape)}, expected {_fmt_shape(expected_arr.shape)}.",
            likely=likely,
        )

    if arr.dtype.kind not in "fc" or (dtype is not None and arr.dtype != np.dtype(dtype)):
        wanted = np.dtype(dtype).name if dtype is not None else "a floating dtype"
        hint = None
        if arr.dtype.kind in "iub":
            hint = "an integer or boolean array: created with an integer dtype, or an integer division?"
        elif arr.dtype == np.float32:
            hint = "computed in single precision: an array or tensor created as float32 somewhere?"
        return Verdict(name, False, "dtype", f"{name} has dtype {arr.dtype.name}, expected {wanted}.", hint)

    a = arr.astype(np.float64)
    bad = ~np.isfinite(a) & np.isfinite(expected_arr)
    if np.any(bad):
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        kinds = "NaN" if np.all(np.isnan(a[bad])) else "NaN or inf"
        where = f" (first at {_fmt_index(first)})" if a.ndim else ""
        return Verdict(
            name,
            False,
            "nonfinite",
            f"{name} has {int(bad.sum())} {kinds} value(s) of {a.size}{where}, where every expected "
            "value is finite.",
            likely=_named_mistake(a, mistakes, tol)
            or "an overflow, e.g. exp of a large number, or 0/0: is the computation numerically stable?",
            worst_index=first,
        )

    abs_err = np.abs(a - expected_arr)
    max_abs = float(abs_err.max()) if a.size else 0.0
    rel = abs_err / np.maximum(np.abs(a) + np.abs(expected_arr), 1e-8)
    max_rel = float(rel.max()) if a.size else 0.0
    close = np.isclose(a, expected_arr, rtol=tol.rtol, atol=tol.atol)
    shape_text = f"shape {_fmt_shape(a.shape)} {arr.dtype.name}"
    if np.all(close):
        return Verdict(
            name, True, None, f"{name}: {shape_text}, max abs error {max_abs:.1e}.", None, max_abs, max_rel
        )

    excess = abs_err - tol.rtol * np.abs(expected_arr)
    worst = np.unravel_index(int(np.argmax(excess)), a.shape) if a.ndim else ()
    worst_t = tuple(int(i) for i in worst)
    at = f" at {_fmt_index(worst_t)}" if a.ndim else ""
    n_wrong = int((~close).sum())
    detail = (
        f"{name} values differ"
        + (f" in {n_wrong} of {a.size} elements" if a.size > 1 else "")
        + f"; worst{at}: got {_fmt(float(a[worst]))}, expected {_fmt(float(expected_arr[worst]))}"
        + f" (max abs error {max_abs:.3g}, max rel error {max_rel:.3g})."
    )
    likely = _named_mistake(a, mistakes, tol) or _value_diagnosis(a, expected_arr, tol, batch_size)
    return Verdict(name, False, "values", detail, likely, max_abs, max_rel, worst_t)
