"""Learner values as numpy arrays, and numbers and shapes as the comparison's sentences write them."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from autograder.checks.tolerances import Tolerance


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


def fmt(x: float) -> str:
    return f"{x:.6g}"


def fmt_pair(got: float, expected: float) -> tuple[str, str]:
    """Both numbers with just enough digits to tell them apart (never "got 1, expected 1")."""
    for digits in (6, 9, 12, 17):
        g, e = f"{got:.{digits}g}", f"{expected:.{digits}g}"
        if g != e:
            break
    return g, e


def fmt_shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def fmt_index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def fmt_axes(axes: tuple[int, ...]) -> str:
    return f"axis {axes[0]}" if len(axes) == 1 else "axes " + fmt_shape(axes)


def near(a: Any, b: Any, tol: Tolerance, equal_nan: bool = False) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(
        np.all(np.isclose(a, b, rtol=tol.rtol, atol=tol.atol, equal_nan=equal_nan))
    )


class Overflow(str):
    """The description of a wrong answer that is known to overflow where it is given (a check
    computed it to be NaN or inf on purpose): the only kind named for an answer with no finite value."""
