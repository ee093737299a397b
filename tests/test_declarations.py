"""Each check is declared once: every test cell names a declared check, with the declaration's points."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.checks import ENTRY_POINTS, all_checks
from autograder.checks.core import MODULES
from autograder.course.build import assignments, source_notebook
from autograder.grading import load
from autograder.grading.prepare import check_calls, grade_cells
from autograder.grading.seeds import hidden_blocks

COURSE = assignments()
ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("assignment", COURSE, ids=lambda a: a.name)
def test_every_test_cell_names_a_declared_check_with_its_points(assignment) -> None:
    checks = all_checks()
    for cell in grade_cells(source_notebook(assignment.source)):
        assert cell.calls, f"{cell.grade_id} calls no check"
        names = {call.function for call in cell.calls}
        assert len(names) == 1, f"{cell.grade_id} calls several checks: {names}"
        check = checks.get(cell.final_call.function.removeprefix("check_"))
        assert check is not None, f"{cell.grade_id} calls {cell.final_call.function}, which is not declared"
        assert cell.points == check.points, (
            f"{cell.grade_id}: {cell.points} points, {check.name}: {check.points}"
        )


@pytest.mark.parametrize("assignment", COURSE, ids=lambda a: a.name)
def test_every_test_cell_ends_with_a_hidden_test_on_a_seed(assignment) -> None:
    for cell in source_notebook(assignment.source).cells:
        if not cell.get("metadata", {}).get("nbgrader", {}).get("grade"):
            continue
        grade_id = cell.metadata.nbgrader.grade_id
        fix = "end the cell with check_X(..., seed=N) between ### BEGIN HIDDEN TESTS and ### END HIDDEN TESTS"
        hidden = [call for block in hidden_blocks(cell.source) for call in check_calls(block)]
        assert hidden, f"{grade_id} has no hidden test: {fix}"
        assert hidden[-1] == check_calls(cell.source)[-1], (
            f"{grade_id}: its last check call is not hidden: {fix}"
        )
        assert hidden[-1].seed, f"{grade_id}: its hidden check call names no seed=: {fix}"


def test_every_declared_check_is_graded_used_and_has_an_entry_point() -> None:
    checks = all_checks()
    assert set(load()) == set(checks), "a check without a grader, or a grader without a check"
    used = {
        call.function.removeprefix("check_")
        for a in COURSE
        for cell in grade_cells(source_notebook(a.source))
        for call in cell.calls
    }
    assert not set(checks) - used, (
        f"declared but called by no test cell: {sorted(set(checks) - used)}: "
        "call each from its notebook's test cell"
    )
    assert not used - set(checks), (
        f"called by a test cell but not declared: {sorted(used - set(checks))}: "
        "register a Check(...) for each in its collect module (CONTRIBUTING.md, step 2)"
    )
    entry_points = {name.removeprefix("check_") for names in ENTRY_POINTS.values() for name in names}
    assert entry_points == set(checks), (
        f"ENTRY_POINTS in autograder/checks/__init__.py lists {sorted(entry_points - set(checks))} without a "
        f"declared check and leaves out {sorted(set(checks) - entry_points)}: list each check_X there"
    )


def defined_check_functions(module: str) -> set[str]:
    """The ``check_*`` functions a collect module (or package, with its modules) of ``autograder.checks``
    offers test cells: what ``from autograder.checks.<module> import check_x`` finds."""
    namespace = vars(importlib.import_module(f"autograder.checks.{module}"))
    return {name for name, value in namespace.items() if name.startswith("check_") and callable(value)}


@pytest.mark.parametrize("module", MODULES)
def test_entry_points_list_exactly_the_check_functions_each_module_defines(module: str) -> None:
    """``ENTRY_POINTS`` is the map ``from autograder.checks import check_x`` follows: a name missing there
    fails only in a learner's kernel, a name listed there that the module lacks fails at import."""
    listed, defined = set(ENTRY_POINTS.get(module, ())), defined_check_functions(module)
    fix = f'in autograder/checks/__init__.py, make ENTRY_POINTS["{module}"] list exactly {sorted(defined)}'
    assert listed == defined, (
        f"autograder.checks.{module} defines {sorted(defined - listed)} not in ENTRY_POINTS and lacks "
        f"{sorted(listed - defined)} listed there: {fix}"
    )


def test_entry_points_name_every_collect_module() -> None:
    assert set(ENTRY_POINTS) == set(MODULES), (
        "ENTRY_POINTS (autograder/checks/__init__.py) and MODULES (autograder/checks/core.py) must name the "
        f"same collect modules: add {sorted(set(MODULES) ^ set(ENTRY_POINTS))} to the one that lacks it"
    )


def test_a_learners_copy_under_another_name_is_told_apart_by_its_cells(tmp_path) -> None:
    import shutil

    import nbformat

    from autograder.course.build import NOTEBOOKS
    from autograder.engine.check import _assignment_by_cells

    for a in COURSE:
        copy = tmp_path / "mywork.ipynb"
        shutil.copyfile(NOTEBOOKS / a.notebook, copy)
        assert _assignment_by_cells(copy, COURSE).name == a.name
    empty = tmp_path / "empty.ipynb"
    nbformat.write(nbformat.v4.new_notebook(), empty)
    with pytest.raises(SystemExit, match="name it after one of"):
        _assignment_by_cells(empty, COURSE)


_HEADING = re.compile(r"^## Exercise (\d+):.*\(([\d.]+) points?\)\s*$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\| (\d+) \| .* \| ([\d.]+) \|\s*$", re.MULTILINE)


def _points_by_exercise(assignment) -> dict[int, float]:
    """Each exercise's points as its test cells declare them: the cells between its heading and the next."""
    points: dict[int, float] = {}
    exercise = None
    for cell in source_notebook(assignment.source).cells:
        if cell.cell_type == "markdown" and (m := _HEADING.search(cell.source)):
            exercise = int(m.group(1))
            points.setdefault(exercise, 0.0)
        nbgrader = cell.get("metadata", {}).get("nbgrader", {})
        if nbgrader.get("grade"):
            assert exercise is not None, f"{nbgrader['grade_id']} comes before the first exercise heading"
            points[exercise] += float(nbgrader["points"])
    return points


@pytest.mark.parametrize("assignment", COURSE, ids=lambda a: a.name)
def test_the_points_the_texts_state_are_the_declared_points(assignment) -> None:
    """The exercise headings, the notebook's own table and the README's table agree with the test cells."""
    declared = _points_by_exercise(assignment)
    cells = source_notebook(assignment.source).cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    headings = {int(n): float(p) for n, p in _HEADING.findall(text)}
    assert headings == declared, f"{assignment.name}: the headings say {headings}, the test cells {declared}"
    table = {int(n): float(p) for n, p in _TABLE_ROW.findall(text) if float(p) or int(n) in declared}
    if table:  # not every notebook opens with a table of its exercises
        assert table == declared, f"{assignment.name}: its table says {table}, the test cells {declared}"
    readme = (ROOT / "README.md").read_text()
    row = re.search(rf"^\| {assignment.name[:2]} \| \[.*\| ([\d.]+) \| [^|]* \|\s*$", readme, re.MULTILINE)
    assert row, f"README.md has no row for {assignment.name} in its table of notebooks"
    assert float(row.group(1)) == sum(declared.values()), (
        f"README.md gives {assignment.name} {row.group(1)} points, its test cells {sum(declared.values())}"
    )


def _import_grader_with_an_undeclared_kind(change: str) -> subprocess.CompletedProcess[str]:
    """Import notebook 04's elementwise grader in a fresh interpreter after ``change`` edits the
    collect side's ELEMENTWISE, as a contributor adding (or removing) an exercise would."""
    program = (
        "from autograder.checks.custom_functions.elementwise import ELEMENTWISE\n"
        f"{change}\n"
        "import autograder.grading.custom_functions.elementwise\n"
    )
    return subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, cwd=ROOT, timeout=120
    )


def test_an_elementwise_kind_without_a_declaration_fails_at_import_naming_the_fix() -> None:
    added = 'ELEMENTWISE["leaky_relu"] = {"label": "LeakyReLU", "cases": (("x (3, 4)", (3, 4), None),)}'
    result = _import_grader_with_an_undeclared_kind(added)
    assert result.returncode != 0, "a kind without a declaration was imported silently"
    assert "RuntimeError: elementwise kinds without a declaration: ['leaky_relu']" in result.stderr
    assert "add an Elementwise(" in result.stderr
    assert "to KINDS in autograder/grading/custom_functions/elementwise.py" in result.stderr


def test_a_declaration_without_an_elementwise_kind_fails_at_import_naming_the_fix() -> None:
    result = _import_grader_with_an_undeclared_kind('del ELEMENTWISE["exp"]')
    assert result.returncode != 0, "a declaration of a kind that does not exist was imported silently"
    assert "KINDS in autograder/grading/custom_functions/elementwise.py declares ['exp']" in result.stderr
    assert "add their label and cases there, or remove them from KINDS" in result.stderr
