"""prepare(): the learner's answers and cells, the course's tests, whatever the submission did to them.

The source notebook is built from the tiny fixture by the real build step; the student version is made
from it as nbgrader's generate_assignment makes it (solutions replaced by the stub, hidden tests deleted),
without running nbgrader, so these tests take milliseconds.
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell, new_markdown_cell, new_output

from autograder.course.build import STUB, source_notebook
from autograder.course.demo import solved
from autograder.grading.prepare import CheckCall, GradeCell, Prepared, check_calls, grade_cells, prepare

FIXTURE = Path(__file__).parent / "fixtures" / "solutions" / "01_tiny.py"
TESTS = ("test_linear_layer", "test_mse_loss")
ANSWERS = ("linear_layer", "mse_loss")


def student_version(source: NotebookNode) -> NotebookNode:
    """What nbgrader's generate_assignment makes of ``source``: each ``### BEGIN/END SOLUTION`` block
    becomes the stub at the block's indentation, each ``### BEGIN/END HIDDEN TESTS`` block goes."""
    nb = copy.deepcopy(source)
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines, skipping = [], False
        for line in cell.source.split("\n"):
            marker = line.strip()
            if marker in ("### BEGIN SOLUTION", "### BEGIN HIDDEN TESTS"):
                skipping = True
                if marker == "### BEGIN SOLUTION":
                    indent = line[: len(line) - len(line.lstrip())]
                    lines += [indent + stub_line for stub_line in STUB.split("\n")]
            elif marker in ("### END SOLUTION", "### END HIDDEN TESTS"):
                skipping = False
            elif not skipping:
                lines.append(line)
        cell.source = "\n".join(lines)
    return nb


@pytest.fixture(scope="module")
def source() -> NotebookNode:
    return source_notebook(FIXTURE)


@pytest.fixture(scope="module")
def release(source: NotebookNode) -> NotebookNode:
    return student_version(source)


@pytest.fixture(name="solved")
def solved_fixture(source: NotebookNode, release: NotebookNode) -> NotebookNode:
    """The student version with the reference answers typed in."""
    return solved(source, release)


def ids(nb: NotebookNode) -> list[str]:
    return [c.get("id") for c in nb.cells]


def index(nb: NotebookNode, cell_id: str) -> int:
    return ids(nb).index(cell_id)


def cell(nb: NotebookNode, cell_id: str) -> NotebookNode:
    return nb.cells[index(nb, cell_id)]


def helper(cell_id: str, code: str = "helper = 1") -> NotebookNode:
    new = new_code_cell(code)
    new.id = cell_id
    return new


def run_prepare(submitted: NotebookNode, source: NotebookNode, release: NotebookNode) -> Prepared:
    """prepare(), with what must hold for every submission: the inputs untouched, the course's test cells
    exactly as the source has them, the graded cells those of the source, no outputs, a valid notebook."""
    before = (nbformat.writes(submitted), nbformat.writes(source), nbformat.writes(release))
    prepared = prepare(copy.deepcopy(submitted), source, release)
    assert (nbformat.writes(submitted), nbformat.writes(source), nbformat.writes(release)) == before
    nb = prepared.notebook
    for original in source.cells:
        if original.metadata.get("nbgrader", {}).get("locked"):
            copies = [c for c in nb.cells if c.get("id") == original.id]
            assert len(copies) == 1, original.id
            assert copies[0].source == original.source
            assert copies[0].metadata == original.metadata
    assert prepared.grade_cells == grade_cells(source)
    for c in nb.cells:
        if c.cell_type == "code":
            assert c.outputs == [] and c.execution_count is None
    assert nb.metadata == source.metadata
    nbformat.validate(nb)
    return prepared


def test_the_student_version_is_what_nbgrader_makes(source: NotebookNode, release: NotebookNode) -> None:
    assert ids(release) == ids(source)
    assert cell(release, "test_linear_layer").source == (
        '"""linear_forward and linear_backward match PyTorch."""\n'
        "score = check_linear_layer(linear_forward, linear_backward)\n"
        "score"
    )
    assert cell(release, "mse_loss").source == (
        "def mse_loss(pred, target):\n"
        '    """(loss, dpred), mean over all elements."""\n'
        "    # YOUR CODE HERE\n"
        "    raise NotImplementedError()"
    )


# ---------------------------------------------------------------------------------------------
# Untouched and ordinary submissions
# ---------------------------------------------------------------------------------------------


def test_an_untouched_release_needs_no_restoring_and_runs_the_hidden_tests(
    source: NotebookNode, release: NotebookNode
) -> None:
    prepared = run_prepare(release, source, release)
    nb = prepared.notebook
    assert prepared.restored == []
    assert ids(nb) == ids(source)
    for test in TESTS:
        assert cell(nb, test).source == cell(source, test).source
        assert "seed=7" in cell(nb, test).source and "seed=7" not in cell(release, test).source
    for answer in ANSWERS:
        # the learner's (blank) answer, never the solution
        assert cell(nb, answer).source == cell(release, answer).source
        assert "raise NotImplementedError()" in cell(nb, answer).source
        assert cell(nb, answer).metadata == cell(release, answer).metadata


def test_a_solved_notebook_keeps_its_answers(source: NotebookNode, release: NotebookNode, solved) -> None:
    prepared = run_prepare(solved, source, release)
    assert prepared.restored == []
    assert ids(prepared.notebook) == ids(source)
    for answer in ANSWERS:
        assert cell(prepared.notebook, answer).source == cell(source, answer).source


def test_outputs_and_execution_counts_are_cleared(
    source: NotebookNode, release: NotebookNode, solved
) -> None:
    nb = copy.deepcopy(solved)
    for number, c in enumerate(nb.cells):
        if c.cell_type == "code":
            c.execution_count = number
            c.outputs = [
                new_output("execute_result", {"text/plain": "4.0"}, execution_count=number),
                new_output("stream", name="stdout", text="linear_forward and linear_backward: 4 / 4 points"),
            ]
    prepared = run_prepare(nb, source, release)  # run_prepare asserts every code cell has no output
    assert prepared.restored == []


# nbformat warns while it gives the learner's cells the ids that nbformat 4.5 requires
@pytest.mark.filterwarnings("ignore::nbformat.warnings.MissingIDFieldWarning")
def test_a_submission_without_cell_ids_nbformat_4_4(
    source: NotebookNode, release: NotebookNode, solved
) -> None:
    nb = copy.deepcopy(solved)
    nb.nbformat_minor = 4
    for c in nb.cells:
        del c["id"]
    prepared = prepare(nb, source, release)
    assert prepared.restored == []
    expected = [(cell(source, c.id) if c.id in TESTS else c).source for c in solved.cells]
    assert [c.source for c in prepared.notebook.cells] == expected
    assert all(c.get("id") for c in prepared.notebook.cells)
    nbformat.validate(prepared.notebook)


# ---------------------------------------------------------------------------------------------
# Test cells: edited, deleted, moved
# ---------------------------------------------------------------------------------------------


def test_an_edited_test_cell_is_run_as_the_source_has_it(source: NotebookNode, release: NotebookNode) -> None:
    nb = copy.deepcopy(release)
    cell(nb, "test_linear_layer").source = "score = 4.0\nscore"
    cell(nb, "test_linear_layer").metadata["nbgrader"]["points"] = 100
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == ["test cell 'test_linear_layer' was edited; the original was run"]
    assert ids(prepared.notebook) == ids(source)
    assert cell(prepared.notebook, "test_linear_layer").source == cell(source, "test_linear_layer").source


def test_a_test_cell_with_the_hidden_tests_pasted_in_counts_as_edited(
    source: NotebookNode, release: NotebookNode
) -> None:
    """Edited means "not what the learner was given": the source text is not what they were given."""
    nb = copy.deepcopy(release)
    cell(nb, "test_mse_loss").source = cell(source, "test_mse_loss").source
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == ["test cell 'test_mse_loss' was edited; the original was run"]


@pytest.mark.parametrize("test", TESTS)
def test_a_deleted_test_cell_is_put_back_before_the_next_source_cell(
    source: NotebookNode, release: NotebookNode, test: str
) -> None:
    nb = copy.deepcopy(release)
    del nb.cells[index(nb, test)]
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == [f"test cell {test!r} was deleted; it was put back and run"]
    assert ids(prepared.notebook) == ids(source)


def test_a_deleted_test_cell_goes_after_the_learners_cells_before_the_next_answer(
    source: NotebookNode, release: NotebookNode
) -> None:
    nb = copy.deepcopy(release)
    del nb.cells[index(nb, "test_linear_layer")]
    nb.cells.insert(index(nb, "mse_loss"), helper("mine-1"))
    nb.cells.insert(index(nb, "mse_loss"), helper("mine-2"))
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == ["test cell 'test_linear_layer' was deleted; it was put back and run"]
    order = ids(prepared.notebook)
    assert order[index(prepared.notebook, "linear_layer") :][:5] == [
        "linear_layer",
        "mine-1",
        "mine-2",
        "test_linear_layer",
        "mse_loss",
    ]


def test_both_test_cells_deleted(source: NotebookNode, release: NotebookNode) -> None:
    nb = copy.deepcopy(release)
    nb.cells = [c for c in nb.cells if c.id not in TESTS]
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == [f"test cell {t!r} was deleted; it was put back and run" for t in TESTS]
    assert ids(prepared.notebook) == ids(source)


def test_a_test_cell_moved_to_the_top_runs_in_its_place(source: NotebookNode, release: NotebookNode) -> None:
    nb = copy.deepcopy(release)
    nb.cells.insert(0, nb.cells.pop(index(nb, "test_linear_layer")))
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == ["test cell 'test_linear_layer' was moved; it ran in its original place"]
    assert ids(prepared.notebook) == ids(source)


def test_a_test_cell_moved_past_the_next_answer_runs_in_its_place(
    source: NotebookNode, release: NotebookNode
) -> None:
    nb = copy.deepcopy(release)
    nb.cells.append(nb.cells.pop(index(nb, "test_linear_layer")))
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == ["test cell 'test_linear_layer' was moved; it ran in its original place"]
    assert ids(prepared.notebook) == ids(source)


def test_a_test_cell_moved_above_its_own_answer_runs_after_it(
    source: NotebookNode, release: NotebookNode
) -> None:
    nb = copy.deepcopy(release)
    test = nb.cells.pop(index(nb, "test_mse_loss"))
    nb.cells.insert(index(nb, "mse_loss"), test)
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == ["test cell 'test_mse_loss' was moved; it ran in its original place"]
    assert ids(prepared.notebook) == ids(source)


def test_a_learner_cell_between_an_answer_and_its_test_stays_before_the_test(
    source: NotebookNode, release: NotebookNode
) -> None:
    nb = copy.deepcopy(release)
    nb.cells.insert(index(nb, "test_linear_layer"), helper("mine-before-test"))
    nb.cells.insert(index(nb, "mse_loss"), helper("mine-after-test"))
    nb.cells.insert(0, helper("mine-at-top"))
    nb.cells.append(helper("mine-at-end"))
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == []
    assert ids(prepared.notebook) == ids(nb)


def test_a_test_cell_moved_below_a_learner_cell_but_still_after_its_answer_stays(
    source: NotebookNode, release: NotebookNode
) -> None:
    nb = copy.deepcopy(release)
    nb.cells.insert(index(nb, "test_linear_layer") + 1, helper("mine"))
    # swap the test cell and the learner's cell: the test still sits between linear_layer and mse_loss
    i = index(nb, "test_linear_layer")
    nb.cells[i], nb.cells[i + 1] = nb.cells[i + 1], nb.cells[i]
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == []
    assert ids(prepared.notebook) == ids(nb)


def test_a_locked_cell_that_is_not_graded_is_restored_too(
    source: NotebookNode, release: NotebookNode
) -> None:
    """Locked cells (instructions, imports the tests need) come from the source like the test cells."""
    src, rel = copy.deepcopy(source), copy.deepcopy(release)
    for nb in (src, rel):
        locked = new_markdown_cell("Run every cell in order.")
        locked.id = "instructions"
        locked.metadata["nbgrader"] = {
            "grade": False,
            "grade_id": "instructions",
            "locked": True,
            "schema_version": 3,
            "solution": False,
        }
        nb.cells.insert(index(nb, "linear_layer"), locked)
    edited = copy.deepcopy(rel)
    cell(edited, "instructions").source = "Skip the tests."
    prepared = run_prepare(edited, src, rel)
    assert prepared.restored == ["read-only cell 'instructions' was edited; the original was run"]
    assert cell(prepared.notebook, "instructions").source == "Run every cell in order."

    deleted = copy.deepcopy(rel)
    del deleted.cells[index(deleted, "instructions")]
    prepared = run_prepare(deleted, src, rel)
    assert prepared.restored == ["read-only cell 'instructions' was deleted; it was put back and run"]
    assert ids(prepared.notebook) == ids(src)


# ---------------------------------------------------------------------------------------------
# Forged metadata
# ---------------------------------------------------------------------------------------------


def forged(cell_id: str, grade_id: str, code: str = "score = 100.0\nscore") -> NotebookNode:
    new = helper(cell_id, code)
    new.metadata["nbgrader"] = {
        "grade": True,
        "grade_id": grade_id,
        "locked": True,
        "points": 100,
        "schema_version": 3,
        "solution": False,
    }
    return new


def test_a_forged_graded_cell_is_stripped_of_its_metadata(
    source: NotebookNode, release: NotebookNode
) -> None:
    nb = copy.deepcopy(release)
    nb.cells.insert(index(nb, "mse_loss"), forged("mine", "bonus"))
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == [
        "cell 'bonus' claims to be a test cell of the course but is not; it ran as your code"
    ]
    assert ids(prepared.notebook) == ids(nb)
    mine = cell(prepared.notebook, "mine")
    assert "nbgrader" not in mine.metadata
    assert mine.source == "score = 100.0\nscore"
    assert [c.grade_id for c in prepared.grade_cells] == list(TESTS)


def test_an_answer_cell_that_claims_to_be_graded_keeps_only_its_answer_metadata(
    source: NotebookNode, release: NotebookNode
) -> None:
    nb = copy.deepcopy(release)
    meta = cell(nb, "linear_layer").metadata["nbgrader"]
    meta.update(grade=True, points=100)
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == [
        "cell 'linear_layer' claims to be a test cell of the course but is not; it ran as your code"
    ]
    assert cell(prepared.notebook, "linear_layer").metadata == cell(release, "linear_layer").metadata


def test_a_copied_answer_cell_does_not_get_the_answer_metadata_twice(
    source: NotebookNode, release: NotebookNode, solved
) -> None:
    nb = copy.deepcopy(solved)
    copied = copy.deepcopy(cell(nb, "linear_layer"))
    copied.id = "copy-of-linear_layer"
    copied.source = "# my first attempt"
    nb.cells.insert(index(nb, "linear_layer") + 1, copied)
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == []
    assert ids(prepared.notebook) == ids(nb)
    answers = [c.get("id") for c in prepared.notebook.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert answers == list(ANSWERS)
    assert "nbgrader" not in cell(prepared.notebook, "copy-of-linear_layer").metadata


def test_a_cell_with_malformed_nbgrader_metadata_is_the_learners_own(
    source: NotebookNode, release: NotebookNode
) -> None:
    nb = copy.deepcopy(release)
    nb.cells.insert(index(nb, "mse_loss"), helper("odd"))
    cell(nb, "odd").metadata["nbgrader"] = "graded, honestly"
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == []
    assert ids(prepared.notebook) == ids(nb)
    assert "nbgrader" not in cell(prepared.notebook, "odd").metadata


# ---------------------------------------------------------------------------------------------
# Answer cells
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ANSWERS)
def test_a_deleted_answer_cell_comes_back_as_the_stub_before_its_test(
    source: NotebookNode, release: NotebookNode, solved, answer: str
) -> None:
    nb = copy.deepcopy(solved)
    del nb.cells[index(nb, answer)]
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == [f"answer cell {answer!r} was missing; it was graded as blank"]
    assert ids(prepared.notebook) == ids(source)
    stub = cell(prepared.notebook, answer)
    assert stub.source == cell(release, answer).source
    assert stub.metadata == cell(release, answer).metadata


def test_a_deleted_answer_is_graded_as_blank_even_if_defined_elsewhere(
    source: NotebookNode, release: NotebookNode, solved
) -> None:
    """The note says "graded as blank": the stub must run after the learner's cells and before the test."""
    nb = copy.deepcopy(solved)
    moved = nb.cells.pop(index(nb, "linear_layer"))
    moved.metadata.pop("nbgrader")
    moved.id = "my-own-linear-layer"
    nb.cells.insert(index(nb, "test_linear_layer"), moved)
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == ["answer cell 'linear_layer' was missing; it was graded as blank"]
    order = ids(prepared.notebook)
    assert order.index("my-own-linear-layer") < order.index("linear_layer") < order.index("test_linear_layer")
    assert order.index("test_linear_layer") == order.index("linear_layer") + 1


def test_an_answer_and_its_test_both_deleted(source: NotebookNode, release: NotebookNode, solved) -> None:
    nb = copy.deepcopy(solved)
    nb.cells = [c for c in nb.cells if c.id not in ("mse_loss", "test_mse_loss")]
    prepared = run_prepare(nb, source, release)
    assert prepared.restored == [
        "answer cell 'mse_loss' was missing; it was graded as blank",
        "test cell 'test_mse_loss' was deleted; it was put back and run",
    ]
    assert ids(prepared.notebook) == ids(source)


def test_everything_deleted(source: NotebookNode, release: NotebookNode) -> None:
    empty = copy.deepcopy(release)
    empty.cells = []
    prepared = run_prepare(empty, source, release)
    restored_ids = [c.get("id") for c in source.cells if c.metadata.get("nbgrader")]
    assert ids(prepared.notebook) == restored_ids
    assert sorted(prepared.restored) == sorted(
        [f"answer cell {a!r} was missing; it was graded as blank" for a in ANSWERS]
        + [
            f"{'test cell' if c.metadata['nbgrader']['grade'] else 'read-only cell'} {c.id!r} was deleted; "
            "it was put back and run"
            for c in source.cells
            if c.metadata.get("nbgrader", {}).get("locked")
        ]
    )


# ---------------------------------------------------------------------------------------------
# check_calls and grade_cells
# ---------------------------------------------------------------------------------------------


def test_check_calls_of_a_test_cell_with_a_visible_and_a_hidden_call(source: NotebookNode) -> None:
    assert check_calls(cell(source, "test_linear_layer").source) == (
        CheckCall("check_linear_layer", 0),
        CheckCall("check_linear_layer", 7),
    )
    assert check_calls(cell(source, "test_mse_loss").source) == (
        CheckCall("check_mse_loss", 0),
        CheckCall("check_mse_loss", 7),
    )


@pytest.mark.parametrize(
    ("code", "calls"),
    [
        ("score = 1.0\nscore", ()),
        ("check_relu(relu, seed=3)", (CheckCall("check_relu", 3),)),
        ("check_relu(relu, seed=0)", (CheckCall("check_relu", 0),)),
        ("a = check_b(f)\nb = check_a(g, seed=2)", (CheckCall("check_b", 0), CheckCall("check_a", 2))),
        ("x = [check_a(f, seed=1), check_b(f, seed=2)]", (CheckCall("check_a", 1), CheckCall("check_b", 2))),
        ("print(check_b(f)); check_a(g, seed=5)", (CheckCall("check_b", 0), CheckCall("check_a", 5))),
        ("if True:\n    check_a(f, seed=4)\ncheck_b(f)", (CheckCall("check_a", 4), CheckCall("check_b", 0))),
        ("np.allclose(check(1), checks(2))", ()),
        ("check_a(\n    f,\n    seed=12,\n)", (CheckCall("check_a", 12),)),
    ],
)
def test_check_calls(code: str, calls: tuple[CheckCall, ...]) -> None:
    assert check_calls(code) == calls


def test_grade_cells_of_the_source(source: NotebookNode) -> None:
    cells = grade_cells(source)
    assert cells == [
        GradeCell(
            "test_linear_layer",
            4.0,
            (CheckCall("check_linear_layer", 0), CheckCall("check_linear_layer", 7)),
        ),
        GradeCell("test_mse_loss", 3.0, (CheckCall("check_mse_loss", 0), CheckCall("check_mse_loss", 7))),
    ]
    assert [type(c.points) for c in cells] == [float, float]
    assert [c.final_call for c in cells] == [
        CheckCall("check_linear_layer", 7),
        CheckCall("check_mse_loss", 7),
    ]
    assert sum(c.points for c in cells) == 7.0


def test_grade_cells_of_the_release_have_only_the_visible_calls(release: NotebookNode) -> None:
    assert [c.final_call for c in grade_cells(release)] == [
        CheckCall("check_linear_layer", 0),
        CheckCall("check_mse_loss", 0),
    ]


def test_a_grade_cell_without_a_check_call_has_no_final_call() -> None:
    assert GradeCell("t", 1.0, ()).final_call is None
