"""The course's facts: its assignments, a clear error without its sources, its cells' roles."""

from __future__ import annotations

from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

from autograder.course import (
    SOLUTIONS,
    CourseError,
    assignments,
    grade_id,
    is_grade,
    is_locked,
    is_solution,
    nbgrader_metadata,
    points,
)
from autograder.course.build import source_notebook


def test_the_assignments_are_the_numbered_solutions_in_order() -> None:
    found = assignments()
    assert [a.source for a in found] == sorted(SOLUTIONS.glob("[0-9][0-9]_*.py"))
    assert found and all(a.notebook == f"{a.name}.ipynb" for a in found)


def test_without_the_sources_the_error_says_where_they_were_looked_for(tmp_path: Path) -> None:
    with pytest.raises(CourseError, match="no course sources at .*missing.*solutions/\\*\\.py"):
        assignments(tmp_path / "missing")


def test_an_empty_sources_folder_has_no_assignments(tmp_path: Path) -> None:
    assert assignments(tmp_path) == []


def test_the_roles_of_a_built_notebooks_cells() -> None:
    nb = source_notebook(assignments()[0].source)
    setup = [c for c in nb.cells if grade_id(c) == "setup"]
    tests = [c for c in nb.cells if is_grade(c)]
    answers = [c for c in nb.cells if is_solution(c)]
    assert len(setup) == 1 and is_locked(setup[0]) and not is_grade(setup[0])
    assert tests and all(points(c) > 0 and is_locked(c) for c in tests)
    assert answers and not any(is_grade(c) or is_locked(c) or points(c) for c in answers)
    plain = [c for c in nb.cells if not nbgrader_metadata(c)]
    assert plain and not any(is_grade(c) or is_solution(c) or is_locked(c) or grade_id(c) for c in plain)


@pytest.mark.parametrize(
    "metadata",
    [
        {},
        {"nbgrader": None},
        {"nbgrader": "grade"},
        {"nbgrader": ["grade"]},
        {"nbgrader": {"grade_id": ["x"]}},
    ],
)
def test_metadata_a_learner_mangled_has_no_role(metadata: dict) -> None:
    cell = new_code_cell("x = 1", metadata=metadata)
    assert not (is_grade(cell) or is_solution(cell) or is_locked(cell))
    assert grade_id(cell) is None and points(cell) == 0.0


def test_a_cell_without_metadata_has_no_role() -> None:
    assert nbgrader_metadata({"cell_type": "code", "source": ""}) == {}
    assert nbgrader_metadata({"metadata": "nonsense"}) == {}


def test_the_command_line_says_where_the_sources_are_missing(tmp_path: Path, capsys) -> None:
    from autograder.__main__ import main

    assert main(["report", "--course", str(tmp_path), "--solutions", str(tmp_path / "missing")]) == 2
    assert "no course sources at" in capsys.readouterr().err
