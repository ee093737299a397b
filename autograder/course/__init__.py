"""The course's facts, in one place: where its folders are, its assignments, and its cells' roles.

The folders are those of a checkout of the course's repository: ``solutions/`` (the hand-edited
sources, one ``NN_*.py`` file per assignment), ``notebooks/`` (the student versions) and ``course/``
(the nbgrader course directory). Installed without a checkout (``pip install .``), the engine still
grades a course directory given on the command line, but whatever needs the sources says so
(:class:`CourseError`) rather than finding no assignments.

A cell's role is nbgrader's cell metadata (``metadata.nbgrader``: ``grade``, ``solution``,
``locked``, ``grade_id``, ``points``), read here the way nbgrader's own ``is_grade``,
``is_solution`` and ``is_locked`` read it, but defensively: nbformat does not validate that
metadata, and a learner's edit can make it any JSON value.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The repository's root, when this package is used from a checkout of it.
REPO = Path(__file__).resolve().parents[2]
SOLUTIONS = REPO / "solutions"
NOTEBOOKS = REPO / "notebooks"
COURSE = REPO / "course"
#: The course's id in nbgrader (its gradebook, its exchange).
COURSE_ID = "backprop-course"


class CourseError(Exception):
    """The course's sources are not where they were looked for (used outside a checkout, say)."""


@dataclass(frozen=True)
class Assignment:
    """One notebook of the course, which is one nbgrader assignment of the same name."""

    name: str
    source: Path

    @property
    def notebook(self) -> str:
        """The notebook's file name, in every nbgrader folder and in ``notebooks/``."""
        return f"{self.name}.ipynb"


def assignments(solutions: Path = SOLUTIONS) -> list[Assignment]:
    """The course's assignments, in notebook order: one per ``solutions/NN_*.py`` file.

    Raises :class:`CourseError` when ``solutions`` is not a folder: the course's sources are in a
    checkout of its repository, not in an installed package.
    """
    if not Path(solutions).is_dir():
        where = "" if Path(solutions) != SOLUTIONS else " (this package is not in a checkout of the course)"
        raise CourseError(
            f"no course sources at {solutions}{where}: run from a checkout of the course's repository, "
            "or give the folder of its solutions/*.py files"
        )
    return [Assignment(p.stem, p) for p in sorted(Path(solutions).glob("[0-9][0-9]_*.py"))]


def nbgrader_metadata(cell: Mapping[str, Any]) -> dict[str, Any]:
    """A cell's nbgrader metadata; empty when it has none or has something other than a mapping."""
    metadata = cell.get("metadata")
    meta = metadata.get("nbgrader") if isinstance(metadata, Mapping) else None
    return meta if isinstance(meta, dict) else {}


def is_grade(cell: Mapping[str, Any]) -> bool:
    """True for a graded cell (a test cell, or an answer graded by hand)."""
    return bool(nbgrader_metadata(cell).get("grade"))


def is_solution(cell: Mapping[str, Any]) -> bool:
    """True for an answer cell, which the learner writes."""
    return bool(nbgrader_metadata(cell).get("solution"))


def is_locked(cell: Mapping[str, Any]) -> bool:
    """True for a read-only cell (set-up cells; nbgrader also locks test cells)."""
    return bool(nbgrader_metadata(cell).get("locked"))


def grade_id(cell: Mapping[str, Any]) -> str | None:
    """The cell's nbgrader grade id, or None."""
    value = nbgrader_metadata(cell).get("grade_id")
    return value if isinstance(value, str) else None


def points(cell: Mapping[str, Any]) -> float:
    """The points a graded cell is worth (0 for any other cell)."""
    return float(nbgrader_metadata(cell).get("points", 0)) if is_grade(cell) else 0.0
