"""Prove the course is gradable: every solution earns full marks, every student version zero.

``nbgrader validate`` exits 0 even when cells fail, so this module calls nbgrader's ``Validator``
from Python and turns its results into a list of problems; an empty list means valid.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.course.build import nbgrader_config, write_sources
from autograder.course import COURSE, NOTEBOOKS, assignments, is_grade


@dataclass
class Validation:
    """The outcome of validating one notebook."""

    notebook: Path
    kind: str
    """``"solution"`` (must pass every graded cell) or ``"student"`` (must fail every one)."""
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing is wrong."""
        return not self.problems


def _validator(timeout: int):
    from nbgrader.validator import Validator

    config = nbgrader_config()
    config.Execute.timeout = timeout
    return Validator(config=config)


def grade_cell_count(path: Path) -> int:
    """How many graded cells a notebook has."""
    nb = nbformat.read(path, as_version=4)
    return sum(1 for c in nb.cells if is_grade(c))


def validate_solution(path: Path, timeout: int = 300) -> Validation:
    """Run a notebook with solutions through nbgrader's Validator: every graded cell must get full marks."""
    start = time.perf_counter()
    results = _validator(timeout).validate(str(path))
    result = Validation(path, "solution", seconds=time.perf_counter() - start)
    for kind in ("type_changed", "changed", "failed"):
        for cell in results.get(kind, []):
            first = cell["source"].splitlines()[0] if cell["source"] else ""
            error = cell.get("raw_error", "").strip().splitlines()
            result.problems.append(f"{kind} cell {first!r}: {error[-1] if error else ''}".rstrip(": "))
    return result


def validate_student(path: Path, timeout: int = 300) -> Validation:
    """Run an untouched student version through the Validator: every graded cell must fail."""
    start = time.perf_counter()
    results = _validator(timeout).validate(str(path))
    result = Validation(path, "student", seconds=time.perf_counter() - start)
    if results.get("changed") or results.get("type_changed"):
        result.problems.append("cells changed since generation (checksums differ)")
    failed = len(results.get("failed", []))
    expected = grade_cell_count(path)
    if failed != expected:
        result.problems.append(
            f"{failed} of {expected} graded cells fail; a blank notebook must fail them all"
        )
    return result


def validate_course(root: Path = COURSE, notebooks: Path = NOTEBOOKS) -> list[Validation]:
    """Validate every assignment: its built source (with solutions) and its student version."""
    write_sources(root)
    out = []
    for a in assignments():
        out.append(validate_solution(root / "source" / a.name / a.notebook))
        out.append(validate_student(notebooks / a.notebook))
    return out
