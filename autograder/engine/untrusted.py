"""Text from outside the grader, made safe once where it comes in and escaped for each format it goes out in.

Names (from LMS file names and rosters), file names and everything a learner's kernel says (error
messages, a message's ``msg_type``, the strings of its evidence) are untrusted. Where they come in,
:func:`clean` makes them renderable: a lone surrogate (which no UTF-8 file can hold) becomes U+FFFD,
control characters and bidirectional overrides go, and the text is cut to a length. Where they go
out, each format has its own escape, and every writer uses it:

* :func:`csv_row`: a CSV cell that a spreadsheet would read as a formula (one starting with ``=``,
  ``+``, ``-``, ``@``, a tab or a carriage return) gets a leading ``'``, as OWASP recommends; the
  numbers the engine writes are passed as numbers and stay numbers.
* :func:`markdown`: one line of Markdown text that cannot end a table row, start a heading, or
  hold a link, an image, raw HTML or code.
* :func:`terminal`: one line with no escape sequence or other control character, for the
  instructor's terminal.

(HTML output uses :func:`html.escape`, which also quotes for attributes.)
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterable
from typing import IO, Any

#: Text a kernel or a file name may bring in: cut to this many characters unless a caller says less.
TEXT_LENGTH = 20_000

_SURROGATE = re.compile("[\ud800-\udfff]")
# C0 controls but tab and newline, DEL and the C1 controls, and the bidirectional overrides and isolates
# (which make a terminal or an editor show text in another order than it is).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_LINE_BREAKS = re.compile("[\t\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]+")


def clean(value: Any, limit: int = TEXT_LENGTH) -> str:
    """``value`` as text that any UTF-8 output can hold: lone surrogates replaced by U+FFFD, control
    characters (but tab and newline) removed, cut to ``limit`` characters (with ``...`` at the cut)."""
    text = value if isinstance(value, str) else str(value)
    text = _CONTROL.sub("", _SURROGATE.sub("\ufffd", text))
    return text if len(text) <= limit else text[: max(limit - 3, 0)] + "..."


def clean_tree(data: Any) -> Any:
    """A copy of JSON-like data (dicts, lists, strings, numbers) with every string :func:`clean`, keys
    included, but not cut: stored outcomes keep their full feedback."""
    if isinstance(data, str):
        return clean(data, limit=len(data))
    if isinstance(data, dict):
        return {clean_tree(k): clean_tree(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [clean_tree(v) for v in data]
    return data


def one_line(value: Any, limit: int = TEXT_LENGTH) -> str:
    """:func:`clean` text on one line: every line break or tab becomes one space."""
    return _LINE_BREAKS.sub(" ", clean(_LINE_BREAKS.sub(" ", str(value)), limit)).strip()


def terminal(value: Any, limit: int = TEXT_LENGTH) -> str:
    """Text to print on the instructor's terminal: one line, no escape sequence or control character."""
    return one_line(value, limit)


#: What starts a formula in Excel, LibreOffice or Google Sheets (OWASP's list).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> str:
    """One CSV cell: a number the engine computed as a number (``{:g}``); text cleaned, and with a
    leading ``'`` when a spreadsheet would read it as a formula; None as an empty cell."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{value:g}"
    text = clean(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def csv_row(values: Iterable[Any]) -> list[str]:
    """A row for :mod:`csv`'s writer, every cell through :func:`csv_cell`."""
    return [csv_cell(v) for v in values]


class CsvWriter:
    """:func:`csv.writer` whose every row goes through :func:`csv_row`: every CSV the engine writes is
    written with one."""

    def __init__(self, file: IO[str]) -> None:
        self._writer = csv.writer(file)

    def writerow(self, values: Iterable[Any]) -> None:
        """Write one row, its cells safe to open in a spreadsheet."""
        self._writer.writerow(csv_row(values))


_MARKDOWN = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "|": "&#124;",
    "[": "&#91;",
    "]": "&#93;",
    "`": "&#96;",
}
_MARKDOWN_RE = re.compile("[&<>|\\[\\]`]")


def markdown(value: Any, limit: int = 2_000) -> str:
    """Untrusted text as one line of Markdown (a table cell, a list item): no line break, and every
    character that could close a cell, start a link, an image, raw HTML or code written as an
    HTML character reference; a leading ``#``, ``-``, ``+``, ``>``, ``!`` or digit-and-dot cannot start
    a heading, a list, a quote or an image either."""
    text = _MARKDOWN_RE.sub(lambda m: _MARKDOWN[m.group()], one_line(value, limit))
    if text[:1] in ("#", "-", "+", ">", "!", "=", "~") or re.match(r"\d+[.)]", text):
        text = f"&#{ord(text[0])};{text[1:]}"
    return text


# -- records read back from disk ----------------------------------------------------------------------

_PLAIN = {
    "str": (str,),
    "float": (int, float),
    "int": (int,),
    "bool": (bool,),
    "str | None": (str, type(None)),
    "dict | None": (dict, type(None)),
}


def _check_type(what: str, value: Any, kind: str) -> None:
    expected = _PLAIN.get(kind) or ((list,) if kind.startswith("list") else (dict,))
    if not isinstance(value, expected) or (isinstance(value, bool) and bool not in expected):
        raise ValueError(f"its {what} is a {type(value).__name__}, not {kind}")


def check_record(
    data: Any, annotations: dict[str, str], required: set[str], items: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``data`` (JSON read back from a file) as keyword arguments for a dataclass whose fields have
    ``annotations`` (as strings), or :class:`ValueError` saying why it cannot be one: not an object, an
    unknown or missing field, a field of the wrong type, or text that no UTF-8 file can hold.

    ``items`` names the type of each item of a list field: a kind (``"str"``), or for a list of objects
    the kind of each key they must have."""
    if not isinstance(data, dict):
        raise ValueError(f"it holds a JSON {type(data).__name__}, not an object")
    unknown = sorted(set(data) - set(annotations))
    missing = sorted(required - set(data))
    if unknown or missing:
        raise ValueError(f"fields {unknown} are unknown and {missing} missing")
    for name, value in data.items():
        _check_type(f"field {name!r}", value, annotations[name])
        item = (items or {}).get(name)
        for i, element in enumerate(value if item is not None else []):
            if isinstance(item, str):
                _check_type(f"{name}[{i}]", element, item)
                continue
            _check_type(f"{name}[{i}]", element, "dict")
            for key, kind in item.items():
                if key not in element:
                    raise ValueError(f"its {name}[{i}] has no {key!r}")
                _check_type(f"{name}[{i}][{key!r}]", element[key], kind)
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("it holds text no UTF-8 file can hold (a lone surrogate)") from None
    return data
