"""Calling learner code from a check without letting it break the test cell.

nbgrader gives zero to a test cell that writes anything to stderr, so a check calls learner code
through :func:`call`, which turns an exception into a message, records warnings and stderr output
as notes instead of letting them reach stderr, and never raises itself.
"""

from __future__ import annotations

import contextlib
import copy
import io
import os
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


@dataclass
class Call:
    """What happened when a learner function was called."""

    result: Any = None
    error: str | None = None
    """``"ExceptionType: message (line N: source)"`` when the call raised, else None."""
    notes: list[str] = field(default_factory=list)
    """Warnings and stderr output the call produced."""

    @property
    def ok(self) -> bool:
        """True when the call returned without raising."""
        return self.error is None


def describe_exception(exc: BaseException) -> str:
    """One line naming the exception and the innermost line of learner code that raised it."""
    text = f"{type(exc).__name__}: {exc}".strip().rstrip(":")
    frames = traceback.extract_tb(exc.__traceback__)
    learner = [f for f in frames if not f.filename.startswith(_PACKAGE_DIR)]
    if learner:
        last = learner[-1]
        if last.line:
            text += f" (in {last.name}, line {last.lineno}: {last.line.strip()})"
    return text


def call(fn: Any, *args: Any, name: str | None = None, **kwargs: Any) -> Call:
    """Call ``fn(*args, **kwargs)`` and report the outcome as a :class:`Call`; never raises.

    Warnings are recorded (not printed), writes to ``sys.stderr`` are captured, and numpy
    floating-point errors are silenced, so a correct answer never writes to stderr.
    """
    label = name or getattr(fn, "__name__", "the function")
    outcome = Call()
    if not callable(fn):
        outcome.error = f"{label} is not a function (got {type(fn).__name__})"
        return outcome
    captured = io.StringIO()
    with (
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stderr(captured),
        np.errstate(all="ignore"),
    ):
        warnings.simplefilter("always")
        try:
            outcome.result = fn(*args, **kwargs)
        except NotImplementedError:
            outcome.error = f"{label} is not implemented yet (it raises NotImplementedError)"
        except Exception as exc:  # noqa: BLE001 - any learner error becomes feedback
            outcome.error = f"{label} raised {describe_exception(exc)}"
    seen: set[str] = set()
    for w in caught:
        text = f"{label} warned: {w.category.__name__}: {w.message}"
        if text not in seen:
            seen.add(text)
            outcome.notes.append(text)
    if captured.getvalue().strip():
        first = captured.getvalue().strip().splitlines()[0][:200]
        outcome.notes.append(f"{label} wrote to stderr: {first}")
    return outcome


def snapshot(*arrays: Any) -> list[Any]:
    """Deep copies of the arguments, to check afterwards that learner code left them unchanged."""
    return [copy.deepcopy(a) for a in arrays]


def unchanged(before: list[Any], after: list[Any]) -> bool:
    """True when every array in ``after`` still equals its copy in ``before`` (NaN equal to NaN)."""
    for b, a in zip(before, after, strict=True):
        if isinstance(b, np.ndarray):
            if not (
                isinstance(a, np.ndarray) and a.shape == b.shape and np.array_equal(a, b, equal_nan=True)
            ):
                return False
    return True
