"""Read a submitted notebook file, bounded before it is parsed and parsed once.

A notebook file comes from a learner, so every measure of it is bounded before the grader holds it
as Python objects:

1. its size in bytes (:data:`MAX_NOTEBOOK_BYTES`), from ``stat``, before it is read;
2. a pre-scan of its text, with no parse: a few passes of C-speed string operations that drop the
   JSON strings and keep the brackets and commas, which give the number of JSON values
   (:data:`MAX_JSON_VALUES`) and the nesting depth (:data:`MAX_DEPTH`) exactly for valid JSON (an
   invalid file is refused by the parser where it stops being JSON);
3. one ``json.loads``, then the number of cells, of outputs and the size of the metadata
   (:data:`MAX_CELLS`, :data:`MAX_OUTPUTS`, :data:`MAX_METADATA_BYTES`), before nbformat builds its
   notebook from the parsed data (no second parse) and validates it.

A file over any bound is refused with a sentence naming the bound, never with ``RecursionError`` or
``MemoryError``. The pre-scan and the parse hold at most a few copies of a file within the size
bound, and the number of Python objects is bounded by the value bound: docs/guarantees.md states the
grader's measured peak (``tests/test_intake_attacks.py`` measures it).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from nbformat import NotebookNode

#: The largest notebook file read, in bytes (a course notebook with its outputs is well under 5 MB).
MAX_NOTEBOOK_BYTES = 50 * 1024**2
#: The most JSON values (objects, arrays, strings, numbers, literals) in a notebook. A notebook of this
#: course with its outputs has a few thousand; a million-line output has a million (as lists of lines).
MAX_JSON_VALUES = 1_000_000
#: The most arrays and objects among them (each costs the grader about 200 bytes once parsed; a course
#: notebook has a few hundred).
MAX_CONTAINERS = 100_000
#: The deepest nesting of JSON arrays and objects (a notebook is 6 deep; widget state about 12).
MAX_DEPTH = 64
#: The most cells, and outputs of all cells together.
MAX_CELLS = 5_000
MAX_OUTPUTS = 20_000
#: The most bytes of metadata (the notebook's and its cells', as compact JSON).
MAX_METADATA_BYTES = 4 * 1024**2

#: Every byte but the brackets and commas of JSON's structure.
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b"[]{},")
#: Both kinds of bracket as one: in valid JSON they nest alike, so the depth is unchanged.
_ONE_BRACKET = bytes.maketrans(b"[]{}", b"()()")
#: How much of the text is split at quotes at a time (the pieces of one chunk are held at once).
_SCAN_CHUNK = 1024**2


class NotebookError(ValueError):
    """A file that cannot be read as a notebook; the message is the exact reason."""


def _is_utf16(data: bytes) -> bool:
    return data.startswith((b"\xff\xfe", b"\xfe\xff")) or (
        len(data) >= 2 and (data[0] == 0) != (data[1] == 0)
    )


def _decode(data: bytes) -> tuple[str, str]:
    """The text of a notebook file in whatever encoding an editor saved it, and a note saying it was
    not UTF-8 (empty when it was), used in the reason when the text is no notebook either."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8"), ""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16"), ""
    if _is_utf16(data):  # UTF-16 without a byte-order mark
        return data.decode("utf-16-be" if data[0] == 0 else "utf-16-le"), ""
    try:
        return data.decode("utf-8"), ""
    except UnicodeDecodeError as exc:
        return data.decode("latin-1"), f"not UTF-8 text ({exc}), nor Latin-1 notebook JSON"


def json_shape(
    data: bytes, max_containers: int = MAX_CONTAINERS, max_depth: int = MAX_DEPTH
) -> tuple[int, int, int]:
    """The number of JSON values in ``data`` (UTF-8, or any encoding that keeps ASCII as ASCII), of
    arrays and objects among them, and its nesting depth, without parsing it: exact for valid JSON;
    for invalid JSON, exact up to where it stops being JSON. The depth is only measured when there
    are at most ``max_containers`` arrays and objects (else 0), and only up to ``max_depth + 1``.

    Escaped backslashes and quotes go first, so that every string lies between two quotes; the text
    is then split at quotes a chunk at a time, and each string becomes ``0`` (C-speed byte operations:
    no regular expression, whose list of pieces would cost more than the file). Each value but the
    outermost is an element of one array or object, and one with ``k`` elements has ``k - 1``
    commas, so the values are the commas, plus the non-empty containers, plus one. Each pass that
    removes the innermost empty pairs lowers the depth by one.
    """
    bare = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept, inside = [], False
    for start in range(0, len(bare), _SCAN_CHUNK):
        pieces = bare[start : start + _SCAN_CHUNK].split(b'"')
        outside = (b"0" if inside else b"") + b"0".join(pieces[1 if inside else 0 :: 2])
        kept.append(outside.translate(None, b" \t\r\n"))
        inside ^= len(pieces) % 2 == 0
    del bare
    compact = b"".join(kept)
    del kept
    empty = compact.count(b"[]") + compact.count(b"{}")
    structure = compact.translate(None, _NOT_STRUCTURE)
    del compact
    containers = structure.count(b"[") + structure.count(b"{")
    values = structure.count(b",") + containers - empty + 1
    if containers > max_containers:
        return values, containers, 0
    brackets = structure.translate(_ONE_BRACKET, b",")
    depth = 0
    while brackets and depth <= max_depth:
        inner = brackets.replace(b"()", b"")
        if inner == brackets:
            break  # unbalanced: not JSON, which the parser says
        brackets, depth = inner, depth + 1
    return values, containers, depth


def _check_shape(data: bytes) -> None:
    values, containers, depth = json_shape(data)
    if values > MAX_JSON_VALUES or containers > MAX_CONTAINERS:
        raise NotebookError(
            f"too large a notebook: {values} JSON values ({containers} arrays and objects), over the limit "
            f"of {MAX_JSON_VALUES} ({MAX_CONTAINERS}); clear its outputs and submit it again"
        )
    if depth > MAX_DEPTH:
        raise NotebookError(f"too deeply nested a notebook: JSON nested over {MAX_DEPTH} levels deep")


def _check_counts(data: dict[str, Any]) -> None:
    """Refuse a parsed notebook with too many cells or outputs, or too much metadata."""
    cells = data.get("cells")
    if cells is None and isinstance(data.get("worksheets"), list):  # nbformat 3
        cells = [c for w in data["worksheets"] if isinstance(w, dict) for c in w.get("cells") or []]
    cells = cells if isinstance(cells, list) else []
    if len(cells) > MAX_CELLS:
        raise NotebookError(f"too many cells: {len(cells)}, over the limit of {MAX_CELLS}")
    outputs = sum(len(c.get("outputs") or []) for c in cells if isinstance(c, dict))
    if outputs > MAX_OUTPUTS:
        raise NotebookError(
            f"too many outputs: {outputs}, over the limit of {MAX_OUTPUTS} (clear its outputs and submit "
            "it again)"
        )
    metadata = [data.get("metadata")] + [c.get("metadata") for c in cells if isinstance(c, dict)]
    size = sum(len(json.dumps(m, separators=(",", ":"))) for m in metadata if m)
    if size > MAX_METADATA_BYTES:
        raise NotebookError(
            f"too much metadata: {size} bytes of notebook and cell metadata, over the limit of "
            f"{MAX_METADATA_BYTES}"
        )


def parse_notebook(data: bytes) -> NotebookNode:
    """A notebook's bytes as nbformat 4, converting what is recoverable (UTF-8 with a byte-order mark,
    UTF-16, Latin-1, nbformat 3); raise :class:`NotebookError` naming the exact reason otherwise."""
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise NotebookError(
            f"file of {len(data)} bytes is over the {MAX_NOTEBOOK_BYTES} byte limit for a notebook"
        )
    utf16 = _is_utf16(data)
    if not utf16:  # UTF-8 or Latin-1: scanned before it is decoded (to four bytes a character, at worst)
        _check_shape(data)
    try:
        text, not_utf8 = _decode(data)
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not readable text ({exc})") from None
    if utf16:
        _check_shape(text.encode("utf-8", "surrogatepass"))
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise NotebookError(not_utf8 or f"not valid notebook JSON ({type(exc).__name__}: {exc})") from None
    del text
    if not isinstance(parsed, dict):
        raise NotebookError(f"not a notebook: the file holds a JSON {type(parsed).__name__}, not an object")
    major = parsed.get("nbformat")
    if major not in (3, 4):
        raise NotebookError(f"not a notebook: nbformat version {major!r}, expected 4 (or 3)")
    _check_counts(parsed)
    return _to_notebook(parsed, major)


def _to_notebook(parsed: dict[str, Any], major: int) -> NotebookNode:
    """nbformat's notebook from the parsed JSON, as ``nbformat.reads`` makes it, without parsing again."""
    import nbformat
    from nbformat import versions

    try:
        nb = versions[major].to_notebook_json(parsed, minor=parsed.get("nbformat_minor", 0))
        nb = nbformat.convert(nb, 4)
        try:
            nbformat.validate(nb)
        except nbformat.ValidationError:
            pass  # as nbformat.reads: an invalid notebook is read, and prepare takes what it can
        return nb
    except Exception as exc:  # noqa: BLE001 - any conversion failure is a stated rejection
        first_line = str(exc).splitlines()[0][:160] if str(exc) else ""
        raise NotebookError(f"not a readable notebook ({type(exc).__name__}: {first_line})") from None


def read_notebook(path: Path) -> NotebookNode:
    """Read a notebook file (see :func:`parse_notebook`); its size is checked before it is read."""
    return parse_notebook(_bounded_bytes(path))


def read_submission(path: Path) -> tuple[NotebookNode, str]:
    """Read a submitted notebook file as :func:`read_notebook` does, and the SHA-256 of the very bytes
    parsed (which tells a re-run whether the submission changed): the file is read once for both."""
    data = _bounded_bytes(path)
    return parse_notebook(data), hashlib.sha256(data).hexdigest()


def _bounded_bytes(path: Path) -> bytes:
    size = path.stat().st_size
    if size > MAX_NOTEBOOK_BYTES:
        raise NotebookError(
            f"file of {size} bytes is over the {MAX_NOTEBOOK_BYTES} byte limit for a notebook"
        )
    with path.open("rb") as f:
        return f.read(MAX_NOTEBOOK_BYTES + 1)
