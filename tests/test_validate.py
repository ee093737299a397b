"""nbgrader's Validator on every notebook: solutions earn full marks; student versions fail cleanly."""

from __future__ import annotations

import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbgrader.utils import determine_grade

from autograder.course.build import assignments
from autograder.course.validate import validate_solution, validate_student

ASSIGNMENTS = [a.name for a in assignments()]


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_solution_passes_the_validator_with_full_marks(built_course: Path, name: str) -> None:
    result = validate_solution(built_course / "source" / name / f"{name}.ipynb")
    print(f"{name}: solution validated in {result.seconds:.1f} s")
    assert result.problems == []


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_student_version_fails_every_graded_cell(built_course: Path, name: str) -> None:
    result = validate_student(built_course / "notebooks" / f"{name}.ipynb")
    assert result.problems == []


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_student_version_fails_cleanly(built_course: Path, name: str, tmp_path: Path) -> None:
    """Run untouched: only the stubs raise, and every graded cell prints feedback and scores 0."""
    nb = nbformat.read(built_course / "notebooks" / f"{name}.ipynb", as_version=4)
    start = time.perf_counter()
    NotebookClient(
        nb, timeout=300, allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    print(f"{name}: student version ran in {time.perf_counter() - start:.1f} s")
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        errors = [o for o in cell.outputs if o.output_type == "error"]
        for error in errors:
            assert error.ename == "NotImplementedError", f"{cell.id}: {error.ename}: {error.evalue}"
        if cell.metadata.get("nbgrader", {}).get("grade"):
            assert not errors, f"graded cell {cell.id} raised instead of scoring 0"
            assert not [o for o in cell.outputs if o.get("name") == "stderr"], f"{cell.id} wrote to stderr"
            score, _ = determine_grade(cell)
            assert score == 0, f"graded cell {cell.id} gave {score} points to a blank notebook"
            feedback = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            assert "not implemented" in feedback, f"{cell.id} should say what is missing"
