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
    """Rebuild evidence from :func:`encode`'s output; raise :class:`EvidenceError` on anything else."""
    if depth > 32:
        raise EvidenceError("evidence nested too deeply")
    if isinstance(data, dict):
        if "__ndarray__" in data:
            return _decode_array(data)
        if "__not_an_array__" in data:
            return NotAnArray(str(data["__not_an_array__"]))
        return {str(k): decode(v, depth + 1) for k, v in data.items()}
    if isinstance(data, list):
        return [decode(v, depth + 1) for v in data]
    if data is None or isinstance(data, (str, int, float, bool)):
        return data
    raise EvidenceError(f"unexpected {type(data).__name__} in evidence")


def _decode_array(data: dict[str, Any]) -> np.ndarray:
    try:
        dtype = np.dtype(str(data["dtype"]))
        shape = tuple(int(s) for s in data["shape"])
        raw = base64.b64decode(str(data["__ndarray__"]), validate=True)
    except (KeyError, TypeError, ValueError) as exc:
        raise EvidenceError(f"malformed array in evidence: {exc}") from None
    if dtype.kind not in _ALLOWED_KINDS:
        raise EvidenceError(f"array of dtype {dtype} is not allowed in evidence")
    if any(s < 0 for s in shape) or math.prod(shape) * dtype.itemsize != len(raw):
        raise EvidenceError("array bytes do not match its shape and dtype")
    try:
        # an empty array may still name a shape numpy cannot make (over 64 axes, an axis of 10**30)
        return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()
    except ValueError as exc:
        raise EvidenceError(f"malformed array in evidence: {exc}") from None


def dumps(evidence: Any) -> str:
    """Evidence as a JSON string."""
    return json.dumps(encode(evidence), allow_nan=True, separators=(",", ":"))


def loads(text: str) -> Any:
    """Evidence from a JSON string, refusing oversized or malformed input."""
    if len(text) > MAX_EVIDENCE_BYTES:
        raise EvidenceError(f"evidence of {len(text)} bytes is over the {MAX_EVIDENCE_BYTES} byte limit")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        # ValueError: JSONDecodeError, or an integer of more digits than Python converts;
        # RecursionError: nesting deeper than the parser's stack
        raise EvidenceError(f"evidence is not valid JSON: {exc}") from None
    return decode(data)


def emit(evidence: Any) -> None:
    """Publish evidence as a display output of the running cell, when the grading engine asked for it.

    Outside the engine (a learner working in JupyterLab) this does nothing, so notebooks stay clean.
    """
    if not os.environ.get(EVIDENCE_ENV):
        return
    from IPython.display import publish_display_data

    publish_display_data({EVIDENCE_MIME: dumps(evidence)})
