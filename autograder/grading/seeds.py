"""Fresh inputs for every graded call, in every grading run.

A test cell's score comes from its final ``check_*`` call (the hidden test, where there is one). The
seed written in the course's source is public, so the engine replaces it, in the prepared notebook
only, with one drawn here for this run: every learner, class and year meets inputs nobody could
have computed answers for in advance. The seed reaches the kernel only as part of the cell's code,
when the cell runs; it is recorded with the result, and passing the recorded seeds back reproduces
a grading exactly.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import secrets

from nbformat import NotebookNode

from autograder import course
from autograder.grading.prepare import CheckCall, GradeCell, Prepared

#: Fresh seeds come from this range: wide enough that no answer can be precomputed for each, small
#: enough that a check's case seeds (1000 * seed + case) stay below 2**32 for every random generator.
SEED_RANGE = range(1000, 4_000_000)


def draw() -> int:
    """A fresh seed for one graded call, from the operating system's randomness."""
    return SEED_RANGE.start + secrets.randbelow(len(SEED_RANGE))


def with_seed(source: str, seed: int) -> str:
    """``source`` with the seed of its final ``check_*`` call set to ``seed`` (added when absent)."""
    calls = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id.startswith("check_")
    ]
    if not calls:
        return source
    final = max(calls, key=lambda n: (n.lineno, n.col_offset))
    lines = source.splitlines(keepends=True)
    keyword = next((k for k in final.keywords if k.arg == "seed"), None)
    if keyword is not None:
        node = keyword.value
        line = lines[node.lineno - 1]
        start, end = _offsets(line, node.col_offset), _offsets(line, node.end_col_offset)
        if node.end_lineno != node.lineno:
            raise ValueError("a seed spread over several lines")
        lines[node.lineno - 1] = line[:start] + str(seed) + line[end:]
    else:
        line = lines[final.end_lineno - 1]
        end = _offsets(line, final.end_col_offset) - 1  # the closing parenthesis
        separator = ", " if final.args or final.keywords else ""
        lines[final.end_lineno - 1] = line[:end] + f"{separator}seed={seed}" + line[end:]
    return "".join(lines)


def _offsets(line: str, utf8_offset: int) -> int:
    """The character offset of an AST column (which counts UTF-8 bytes)."""
    return len(line.encode()[:utf8_offset].decode(errors="ignore"))


def fresh(prepared: Prepared, seeds: dict[str, int] | None = None) -> tuple[Prepared, dict[str, int]]:
    """The prepared notebook with every graded cell's final call on a fresh seed, and those seeds.

    ``seeds`` (grade id -> seed, as recorded by an earlier run) reproduces that run instead.
    """
    chosen: dict[str, int] = {}
    cells: list[GradeCell] = []
    by_id = {c.grade_id: c for c in prepared.grade_cells}
    notebook = prepared.notebook
    for cell in notebook.cells:
        grade_id = course.grade_id(cell)
        graded = by_id.get(grade_id) if cell.get("cell_type") == "code" else None
        if graded is None or graded.final_call is None:
            continue
        seed = (seeds or {}).get(grade_id) or draw()
        cell.source = with_seed(cell.source, seed)
        chosen[grade_id] = seed
    for graded in prepared.grade_cells:
        if graded.grade_id in chosen:
            final = CheckCall(graded.final_call.function, chosen[graded.grade_id])
            graded = dataclasses.replace(graded, calls=(*graded.calls[:-1], final))
        cells.append(graded)
    return dataclasses.replace(prepared, grade_cells=cells), chosen


_HIDDEN_BLOCK = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.DOTALL)
#: A hidden test's line shorter than this (``score``, ``)``) is too common to be an echo of it.
_MIN_ECHO = 6
REDACTED = "[hidden test text removed]"


def hidden_blocks(source: str) -> list[str]:
    """The code between each ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS`` of a cell."""
    return _HIDDEN_BLOCK.findall(source)


def hidden_lines(notebook: NotebookNode) -> list[str]:
    """Every line of the hidden tests in ``notebook`` and every seed they name, longest first: the
    text a kernel that ran them may echo (for :func:`redact`)."""
    lines = {
        line.strip()
        for cell in notebook.cells
        if cell.get("cell_type") == "code"
        for block in hidden_blocks(cell.source)
        for line in block.splitlines()
        if len(line.strip()) >= _MIN_ECHO
    }
    numbers = {m for line in lines for m in re.findall(r"seed\s*=\s*(\d{4,})", line)}
    return sorted(lines | numbers, key=len, reverse=True)


def redact(text: str, hidden: list[str]) -> str:
    """``text`` (which the learner's kernel may have chosen) with every hidden test line and seed
    taken out; a seed only where it stands as a number of its own."""
    for item in hidden:
        if item.isdigit():
            text = re.sub(rf"(?<!\d){item}(?!\d)", REDACTED, text)
        else:
            text = text.replace(item, REDACTED)
    return text
