"""Evidence as JSON: how a check's record leaves the learner's kernel for the trusted grader.

Only plain data crosses: dicts with string keys, lists, strings, numbers, None, numpy arrays of
numeric or boolean dtype (base64 of their bytes) and :class:`NotAnArray`.
Decoding never evaluates or unpickles anything, rejects other dtypes, and refuses oversized input,
because the text comes from code the grader does not trust.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

#: The MIME type of the display output a test cell emits when the grading engine asks for evidence.
EVIDENCE_MIME = "application/x-backprop-course-evidence"
#: The environment variable the grading engine sets in the learner's kernel to ask for evidence.
EVIDENCE_ENV = "BACKPROP_COURSE_EVIDENCE"
#: Evidence larger than this is refused: a check records a handful of small arrays.
MAX_EVIDENCE_BYTES = 8 * 1024 * 1024

_ALLOWED_KINDS = "biuf"


@dataclass(frozen=True)
class NotAnArray:
    """Stands in the evidence for a learner value that is not numeric data (a list, a string...)."""

    type_name: str


class EvidenceError(ValueError):
    """Evidence that is not well-formed plain data."""


def encode(value: Any) -> Any:
    """Turn evidence into JSON-compatible data."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in _ALLOWED_KINDS:
            return {"__not_an_array__": f"ndarray of dtype {value.dtype}"}
        arr = np.ascontiguousarray(value)
        return {
            "__ndarray__": base64.b64encode(arr.tobytes()).decode("ascii"),
            "dtype": arr.dtype.str,
            # value's shape, not arr's: ascontiguousarray turns a 0-d array (a loss) into shape (1,)
            "shape": list(value.shape),
        }
    if isinstance(value, NotAnArray):
        return {"__not_an_array__": value.type_name}
    if isinstance(value, dict):
        return {str(k): encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode(v) for v in value]
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return {"__not_an_array__": type(value).__name__}


def decode(data: Any, depth: int = 0) -> Any:
    """Rebuild evidence from :func:`encode`'s output; raise :class:`EvidenceError` on anything else.

    Strings come back renderable (:func:`_text`): the evidence is the learner kernel's text."""
    if depth > 32:
        raise EvidenceError("evidence nested too deeply")
    if isinstance(data, dict):
        if "__ndarray__" in data:
            return _decode_array(data)
        if "__not_an_array__" in data:
            name = data["__not_an_array__"]
            plain = name is None or isinstance(name, (str, int, float, bool))
            return NotAnArray(_text(str(name) if plain else type(name).__name__, 200))
        return {_text(k, 200): decode(v, depth + 1) for k, v in data.items()}
    if isinstance(data, list):
        return [decode(v, depth + 1) for v in data]
    if isinstance(data, str):
        return _text(data)
    if data is None or isinstance(data, (int, float, bool)):
        return data
    raise EvidenceError(f"unexpected {type(data).__name__} in evidence")


#: A string of evidence is cut to this many characters (a check records names, notes and messages).
MAX_TEXT = 20_000
#: The most axes and the largest axis an array of evidence may have (numpy's own limits are 64 and
#: the platform's index size; a check's arrays have a few axes of a few hundred elements).
MAX_NDIM, MAX_AXIS = 32, 2**31
_UNSAFE_TEXT = re.compile("[\ud800-\udfff\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _text(text: str, limit: int = MAX_TEXT) -> str:
    """A string of the evidence as the grader may show it: lone surrogates (which no UTF-8 file can
    hold) as U+FFFD, control characters but tab and newline removed, cut to ``limit`` characters."""
    text = _UNSAFE_TEXT.sub(lambda m: "\ufffd" if "\ud800" <= m.group() <= "\udfff" else "", text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _shape(value: Any) -> tuple[int, ...]:
    """An array's shape as the evidence states it: a list of at most :data:`MAX_NDIM` plain integers,
    each from 0 to :data:`MAX_AXIS` (JSON's ``Infinity``, ``NaN``, ``2.5`` or ``true`` are none)."""
    if not isinstance(value, list) or len(value) > MAX_NDIM:
        raise EvidenceError(
            f"malformed array in evidence: its shape is not a list of at most {MAX_NDIM} sizes"
        )
    for s in value:
        if not isinstance(s, int) or isinstance(s, bool) or not 0 <= s <= MAX_AXIS:
            held = _text(repr(s), 50)
            raise EvidenceError(
                f"malformed array in evidence: its shape holds {held}, not a size from 0 to {MAX_AXIS}"
            )
    return tuple(value)


def _decode_array(data: dict[str, Any]) -> np.ndarray:
    dtype_name, raw_text = data.get("dtype"), data.get("__ndarray__")
    if not isinstance(dtype_name, str) or not isinstance(raw_text, str) or len(dtype_name) > 32:
        raise EvidenceError("malformed array in evidence: its dtype and its bytes must be strings")
    shape = _shape(data.get("shape"))
    try:
        # numpy parses a dtype string with a grammar of its own (``ast`` for a subarray's shape): any
        # exception of it, a SyntaxError included, is a malformed record
        dtype = np.dtype(dtype_name)
        raw = base64.b64decode(raw_text, validate=True)
    except Exception as exc:  # noqa: BLE001 - see above
        raise EvidenceError(f"malformed array in evidence: {_text(str(exc), 200)}") from None
    if dtype.kind not in _ALLOWED_KINDS:
        raise EvidenceError(f"array of dtype {dtype} is not allowed in evidence")
    if math.prod(shape) * dtype.itemsize != len(raw):
        raise EvidenceError("array bytes do not match its shape and dtype")
    try:
        # an empty array may still name a shape numpy cannot make (an axis of 2**31 beside a 0)
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    except (ValueError, OverflowError, MemoryError) as exc:
        raise EvidenceError(f"malformed array in evidence: {_text(str(exc), 200)}") from None


def dumps(evidence: Any) -> str:
    """Evidence as a JSON string."""
    return json.dumps(encode(evidence), allow_nan=True, separators=(",", ":"))


def loads(text: str) -> Any:
    """Evidence from a JSON string, refusing oversized or malformed input."""
    if len(text) > MAX_EVIDENCE_BYTES:
        raise EvidenceError(f"evidence of {len(text)} bytes is over the {MAX_EVIDENCE_BYTES} byte limit")
    if not isinstance(text, str):
        raise EvidenceError(f"evidence must be text, not {type(text).__name__}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        # ValueError: JSONDecodeError, or an integer of more digits than Python converts;
        # RecursionError: nesting deeper than the parser's stack
        raise EvidenceError(f"evidence is not valid JSON: {_text(str(exc), 200)}") from None
    return decode(data)


def emit(evidence: Any) -> None:
    """Publish evidence as a display output of the running cell, when the grading engine asked for it.

    Outside the engine (a learner working in JupyterLab) this does nothing, so notebooks stay clean.
    """
    if not os.environ.get(EVIDENCE_ENV):
        return
    from IPython.display import publish_display_data

    publish_display_data({EVIDENCE_MIME: dumps(evidence)})
