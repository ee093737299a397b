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
import sys
import sysconfig
import tempfile
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # autograder/
_UTILS_DIR = os.path.join(os.path.dirname(_PACKAGE_DIR), "utils")

# A frame in one of these folders is library code (the standard library, numpy, torch, this course's
# own packages), never the learner's: an error is located at the innermost frame outside them.
_LIBRARY_DIRS = tuple(
    os.path.join(os.path.realpath(p), "")
    for p in {
        *(sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib", "purelib", "platlib")),
        _PACKAGE_DIR,
        _UTILS_DIR,
    }
    if p
)

# Notes quote at most this much of a warning or of stderr output: enough to recognise it.
_NOTE_LENGTH = 200
#: A learner's object may be named with megabytes: feedback repeats at most this much of its name.
NAME_LENGTH = 100
_MESSAGE_LENGTH = 500
# Only the first line of stderr output becomes a note; a learner's loop may have written megabytes.
_FD2_READ_LIMIT = 64 * 1024


@dataclass
class Call:
    """What happened when a learner function was called."""

    result: Any = None
    error: str | None = None
    """``"ExceptionType: message (in fn, line N: source)"`` when the call raised, else None."""
    notes: list[str] = field(default_factory=list)
    """Warnings and stderr output the call produced."""

    @property
    def ok(self) -> bool:
        """True when the call returned without raising."""
        return self.error is None


def _is_library(filename: str) -> bool:
    if filename.startswith("<frozen"):
        return True  # Python's own frozen modules (importlib)
    return os.path.join(os.path.realpath(filename), "").startswith(_LIBRARY_DIRS)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _safe_str(obj: Any) -> str:
    try:
        return str(obj)
    except Exception:  # noqa: BLE001 - a learner-defined __str__ may itself be broken
        return f"<{type(obj).__name__} that cannot be printed>"


def describe_exception(exc: BaseException) -> str:
    """One line naming the exception and the innermost line of learner code that raised it.

    Frames in the standard library, in installed packages (numpy, torch) and in this course's own
    packages are skipped: the location shown is where the learner's code went wrong.
    """
    message = _shorten(_safe_str(exc).strip(), _MESSAGE_LENGTH)
    text = f"{type(exc).__name__}: {message}".strip().rstrip(":")
    try:
        frames = traceback.extract_tb(exc.__traceback__)
    except Exception:  # noqa: BLE001 - a traceback whose source cannot be read still names the error
        return text
    learner = [f for f in frames if not _is_library(f.filename)]
    if learner:
        last = learner[-1]
        if last.line:
            text += f" (in {last.name}, line {last.lineno}: {last.line.strip()})"
    return text


def _raised_by_learner(exc: BaseException) -> bool:
    """True when the innermost frame of the traceback is learner code (a stub's ``raise``)."""
    try:
        frames = traceback.extract_tb(exc.__traceback__)
    except Exception:  # noqa: BLE001 - when in doubt, the stub is the likely source
        return True
    return not frames or not _is_library(frames[-1].filename)


@contextlib.contextmanager
def _captured_fd2() -> Iterator[Callable[[], str]]:
    """Redirect file descriptor 2 to a temporary file for the duration, then restore it.

    ``contextlib.redirect_stderr`` only replaces ``sys.stderr``; C code (OpenMP, BLAS, torch's C++
    side), ``sys.__stderr__`` and subprocesses write to descriptor 2 directly, which the Jupyter
    kernel also forwards to the notebook as stderr output. Yields a function returning what was
    written, valid after the block.
    """
    captured = {"text": ""}
    try:
        for stream in (sys.stderr, sys.__stderr__):
            if stream is not None:
                stream.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no descriptor 2 here: nothing to redirect
        yield lambda: captured["text"]
        return
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield lambda: captured["text"]
        finally:
            with contextlib.suppress(Exception):
                if sys.__stderr__ is not None:
                    sys.__stderr__.flush()
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            captured["text"] = tmp.read(_FD2_READ_LIMIT).decode("utf-8", errors="replace")


def name_of(obj: Any, default: str, attribute: str = "__name__") -> str:
    """The name feedback uses for a learner's object: its ``attribute``, else ``default``; at most
    :data:`NAME_LENGTH` characters, and ``default`` when reading it fails."""
    try:
        return _shorten(str(getattr(obj, attribute, None) or default), NAME_LENGTH)
    except Exception:  # noqa: BLE001 - a learner's attribute lookup or __str__ may raise
        return default


def _label(fn: Any, name: str | None) -> str:
    return name or name_of(fn, "the function")


def call(fn: Any, *args: Any, name: str | None = None, **kwargs: Any) -> Call:
    """Call ``fn(*args, **kwargs)`` and report the outcome as a :class:`Call`; never raises.

    Warnings are recorded as notes (not printed), including numpy floating-point warnings
    (overflow, invalid value, division by zero), whatever ``np.seterr`` the learner set; writes to
    ``sys.stderr`` and to descriptor 2 are captured as notes; an exception, ``sys.exit()`` included,
    becomes ``error``. So a test cell that calls learner code writes nothing to stderr. Only
    ``KeyboardInterrupt`` passes through, so that a time limit can still stop a learner's endless loop.
    """
    label = _label(fn, name)
    outcome = Call()
    if not callable(fn):
        got = type(fn).__name__
        outcome.error = f"{name} is not a function (got {got})" if name else f"expected a function, got {got}"
        return outcome
    captured = io.StringIO()
    with (
        _captured_fd2() as fd2_text,
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stderr(captured),
        np.errstate(over="warn", divide="warn", invalid="warn", under="ignore"),
    ):
        warnings.simplefilter("always")
        try:
            outcome.result = fn(*args, **kwargs)
        except NotImplementedError as exc:
            if _raised_by_learner(exc):
                outcome.error = f"{label} is not implemented yet (it raises NotImplementedError)"
            else:  # a library's "not supported" (an unknown mode, a missing backward) is a real error
                outcome.error = f"{label} raised {describe_exception(exc)}"
        except SystemExit as exc:
            outcome.error = f"{label} called sys.exit({_safe_str(exc.code) if exc.code is not None else ''})"
        except Exception as exc:  # noqa: BLE001 - any learner error becomes feedback
            outcome.error = f"{label} raised {describe_exception(exc)}"
    seen: set[str] = set()
    for w in caught:
        text = _shorten(f"{label} warned: {w.category.__name__}: {_safe_str(w.message)}", _NOTE_LENGTH)
        if text not in seen:
            seen.add(text)
            outcome.notes.append(text)
    for stream_text in (captured.getvalue(), fd2_text()):
        if stream_text.strip():
            first = stream_text.strip().splitlines()[0]
            outcome.notes.append(_shorten(f"{label} wrote to stderr: {first}", _NOTE_LENGTH))
    return outcome


def _copy(value: Any) -> Any:
    # Never import torch here: a numpy notebook's graded kernel has none, and no tensor without it.
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        # deepcopy refuses non-leaf tensors that require grad; their data is what matters here
        return value.detach().clone()
    try:
        return copy.deepcopy(value)
    except Exception:  # noqa: BLE001 - an object that cannot be copied cannot be compared either
        return value


def snapshot(*arrays: Any) -> list[Any]:
    """Copies of the arguments (numpy arrays, torch tensors, anything deep-copyable), to check
    afterwards that learner code left them unchanged."""
    return [_copy(a) for a in arrays]


def _same_data(before: Any, after: Any) -> bool:
    from autograder.checks.compare import as_array

    b, a = as_array(before), as_array(after)
    if b is None or a is None:
        return b is None and a is None
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    try:
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    except (TypeError, ValueError):  # object arrays holding things that do not compare
        return False


def unchanged(before: list[Any], after: list[Any]) -> bool:
    """True when every array or tensor in ``after`` still equals its copy in ``before``.

    Equal means same shape, same dtype and the same values, NaN equal to NaN. Entries of
    ``before`` that are neither numpy arrays nor torch tensors are not compared.
    """
    torch = sys.modules.get("torch")
    array_types: tuple[type, ...] = (np.ndarray,) if torch is None else (np.ndarray, torch.Tensor)
    for b, a in zip(before, after, strict=True):
        if isinstance(b, array_types) and not _same_data(b, a):
            return False
    return True
