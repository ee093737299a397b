"""Trusted verdicts: a cell's score comes only from evidence of the check and seed its own source names."""

from __future__ import annotations

import json

import pytest
from check_helpers import solution_cells

from autograder.checks.evidence import EvidenceError, dumps, loads
from autograder.checks.linear_layer import LINEAR_LAYER, collect_linear_layer, collect_mse_loss
from autograder.engine.contract import CellEvent, EventLog, parse_event
from autograder.engine.outcome import CellResult
from autograder.grading.linear_layer import grade_linear_layer, grade_mse_loss
from autograder.grading.prepare import CheckCall, GradeCell
from autograder.grading.verdicts import (
    STOP_REASONS,
    NotebookResult,
    check_for,
    describe_stop,
    grade_cell,
    grade_notebook,
)

LINEAR = GradeCell(
    "test_linear_layer", 4.0, (CheckCall("check_linear_layer", 0), CheckCall("check_linear_layer", 7))
)
MSE = GradeCell("test_mse_loss", 3.0, (CheckCall("check_mse_loss", 0), CheckCall("check_mse_loss", 7)))
NO_RESULT = "not graded: the test cell recorded no result for its check"


SOLUTION = solution_cells("01_linear_layer")  # the references: the course's own solutions
linear_forward, linear_backward = SOLUTION["linear_forward"], SOLUTION["linear_backward"]
mse_loss = SOLUTION["mse_loss"]


def backward_wrong_axis(dout, cache):
    x, W = cache
    return dout @ W, dout.T @ x, dout.sum(axis=1)


def linear_evidence(seed: int, backward=linear_backward) -> str:
    return dumps(collect_linear_layer(linear_forward, backward, seed=seed))


def cell_event(grade_id: str, *evidence: str, status: str = "ok", error: str | None = None) -> CellEvent:
    return CellEvent(3, grade_id, status, 0.1, error, list(evidence))


def log(*events: CellEvent | dict) -> EventLog:
    """The events as the grader reads them back: an object the runner would not write is no event."""
    return EventLog([e for e in (parse_event(e) if isinstance(e, dict) else e for e in events) if e])


@pytest.fixture(scope="module")
def correct() -> dict[int, str]:
    """Evidence of a correct linear layer, as the test cell publishes it, for seeds 0 and 7."""
    return {seed: linear_evidence(seed) for seed in (0, 7)}


@pytest.fixture(scope="module")
def wrong() -> dict[int, str]:
    """Evidence of a linear layer whose db sums over the wrong axis."""
    return {seed: linear_evidence(seed, backward_wrong_axis) for seed in (0, 7)}


# ---------------------------------------------------------------------------------------------
# grade_cell
# ---------------------------------------------------------------------------------------------


def test_correct_evidence_earns_full_points(correct) -> None:
    result = grade_cell(LINEAR, cell_event(LINEAR.grade_id, correct[0], correct[7]), None)
    assert result == CellResult(
        "test_linear_layer",
        4.0,
        4.0,
        grade_linear_layer(collect_linear_layer(linear_forward, linear_backward, seed=7)).render(),
        passed=True,
    )
    assert result.feedback.startswith("linear_forward and linear_backward: 4 / 4 points\n")


def test_wrong_evidence_earns_partial_points(wrong) -> None:
    result = grade_cell(LINEAR, cell_event(LINEAR.grade_id, wrong[0], wrong[7]), None)
    report = grade_linear_layer(collect_linear_layer(linear_forward, backward_wrong_axis, seed=7))
    assert (result.score, result.passed, result.points) == (2.77, False, 4.0)
    assert result.feedback == report.render()
    assert (
        "[FAIL] db" in result.feedback and "summed over axis 1 instead of the batch axis 0" in result.feedback
    )


def test_only_the_final_calls_evidence_counts(correct, wrong) -> None:
    """A correct visible call and a wrong hidden one: the hidden one is the cell's score, and back."""
    assert grade_cell(LINEAR, cell_event(LINEAR.grade_id, correct[0], wrong[7]), None).score == 2.77
    assert grade_cell(LINEAR, cell_event(LINEAR.grade_id, wrong[0], correct[7]), None).score == 4.0


def test_the_last_matching_evidence_counts(correct, wrong) -> None:
    assert grade_cell(LINEAR, cell_event(LINEAR.grade_id, correct[7], wrong[7]), None).score == 2.77
    assert grade_cell(LINEAR, cell_event(LINEAR.grade_id, wrong[7], correct[7]), None).score == 4.0


def test_evidence_with_the_wrong_seed_is_ignored(correct) -> None:
    # only the visible call's evidence (seed 0): the hidden call (seed 7) recorded nothing
    result = grade_cell(LINEAR, cell_event(LINEAR.grade_id, correct[0]), None)
    assert result == CellResult("test_linear_layer", 4.0, 0.0, NO_RESULT)
    forged = dumps({**collect_linear_layer(linear_forward, linear_backward, seed=0), "seed": 8})
    assert grade_cell(LINEAR, cell_event(LINEAR.grade_id, forged), None).feedback == NO_RESULT


def test_evidence_of_another_check_is_ignored(correct) -> None:
    mse = dumps(collect_mse_loss(mse_loss, seed=7))
    relabelled = dumps({**json.loads(correct[7]), "check": "mse_loss"})
    for text in (mse, relabelled):
        assert grade_cell(LINEAR, cell_event(LINEAR.grade_id, text), None) == CellResult(
            "test_linear_layer", 4.0, 0.0, NO_RESULT
        )
    # and mse_loss's own cell grades it
    result = grade_cell(MSE, cell_event(MSE.grade_id, mse), None)
    assert (result.score, result.passed) == (3.0, True)
    assert result.feedback == grade_mse_loss(collect_mse_loss(mse_loss, seed=7)).render()


@pytest.mark.parametrize(
    "evidence",
    [
        [7, "linear_layer"],
        "just a string",
        {"check": "linear_layer"},
        {"seed": 7},
        {"check": "linear_layer", "seed": "7"},
        None,
    ],
)
def test_evidence_that_does_not_name_the_check_and_seed_is_ignored(evidence) -> None:
    result = grade_cell(LINEAR, cell_event(LINEAR.grade_id, json.dumps(evidence)), None)
    assert result == CellResult("test_linear_layer", 4.0, 0.0, NO_RESULT)


MALFORMED = [
    "",
    "not json",
    '{"check": "linear_layer", "seed": 7',
    "[" * 200_000 + "]" * 200_000,
    "9" * 5000,
    json.dumps(
        {"check": "linear_layer", "seed": 7, "x": {"__ndarray__": "!!", "dtype": "<f8", "shape": [1]}}
    ),
    json.dumps({"check": "linear_layer", "seed": 7, "x": {"__ndarray__": "", "dtype": "|O", "shape": [0]}}),
    json.dumps(
        {"check": "linear_layer", "seed": 7, "x": {"__ndarray__": "", "dtype": "<f8", "shape": [0] * 70}}
    ),
    " " * (8 * 1024 * 1024 + 1),
    # these raised OverflowError or a numpy parser's SyntaxError, which failed the whole notebook
    '{"check": "linear_layer", "seed": 7, "x": {"__ndarray__": "", "dtype": "<f8", "shape": [Infinity]}}',
    '{"check": "linear_layer", "seed": 7, "x": {"__ndarray__": "", "dtype": "<f8", "shape": [NaN, 0]}}',
    '{"check": "linear_layer", "seed": 7, "x": {"__ndarray__": "", "dtype": "<f8", "shape": [1e400]}}',
    '{"check": "linear_layer", "seed": 7, "x": {"__ndarray__": "", "dtype": "(08)f8", "shape": [0]}}',
]


@pytest.mark.parametrize("text", MALFORMED, ids=[f"malformed-{i}" for i in range(len(MALFORMED))])
def test_malformed_evidence_text_is_ignored_with_the_reason(correct, text: str) -> None:
    with pytest.raises(EvidenceError) as info:
        loads(text)
    alone = grade_cell(LINEAR, cell_event(LINEAR.grade_id, text), None)
    why = f"not graded: the evidence its check recorded is malformed ({info.value})"
    assert alone == CellResult("test_linear_layer", 4.0, 0.0, why)
    # it neither crashes the grading nor hides well-formed evidence beside it
    before = grade_cell(LINEAR, cell_event(LINEAR.grade_id, text, correct[7]), None)
    after = grade_cell(LINEAR, cell_event(LINEAR.grade_id, correct[7], text), None)
    assert before.score == after.score == 4.0


@pytest.mark.parametrize(
    "evidence",
    [
        {"check": "linear_layer", "seed": 7},
        {"check": "linear_layer", "seed": 7, "cases": {}},
        {"check": "linear_layer", "seed": 7, "cases": "none"},
        {"check": "linear_layer", "seed": 7, "cases": {"N=4, D=3, M=5": {}, "N=1, D=3, M=5": {}}},
    ],
    ids=["no cases", "empty cases", "cases not a dict", "empty case records"],
)
def test_evidence_whose_grading_raises_scores_zero_with_the_reason(evidence) -> None:
    with pytest.raises(Exception) as info:
        grade_linear_layer(evidence)
    result = grade_cell(LINEAR, cell_event(LINEAR.grade_id, dumps(evidence)), None)
    assert result == CellResult(
        "test_linear_layer", 4.0, 0.0, f"not graded: unusable evidence ({type(info.value).__name__})"
    )


def test_a_cell_that_never_ran() -> None:
    assert grade_cell(LINEAR, None, None) == CellResult(
        "test_linear_layer", 4.0, 0.0, "not graded: the cell did not run"
    )
    stop = "the kernel died (the kernel exited with status 3) (in cell 'mine')"
    assert grade_cell(LINEAR, None, stop) == CellResult("test_linear_layer", 4.0, 0.0, f"not graded: {stop}")


def test_a_cell_that_raised_before_recording(correct) -> None:
    event = cell_event(
        LINEAR.grade_id, correct[0], status="error", error="NameError: name 'x' is not defined"
    )
    assert grade_cell(LINEAR, event, None) == CellResult(
        "test_linear_layer", 4.0, 0.0, "not graded: the test cell raised NameError: name 'x' is not defined"
    )


def test_an_error_after_the_final_evidence_does_not_cost_the_points(correct) -> None:
    event = cell_event(LINEAR.grade_id, correct[0], correct[7], status="error", error="ValueError: later")
    assert grade_cell(LINEAR, event, None).score == 4.0


@pytest.mark.parametrize("status", ["timeout", "dead", "output_limit"])
def test_a_cell_stopped_before_recording_gives_the_stop_reason(correct, status: str) -> None:
    stop = "a cell ran longer than the 8 s a cell may take, and was stopped (in cell 'test_linear_layer')"
    event = cell_event(LINEAR.grade_id, correct[0], status=status)
    assert grade_cell(LINEAR, event, stop) == CellResult("test_linear_layer", 4.0, 0.0, f"not graded: {stop}")
    # without a stop reason, it reads as no result
    assert grade_cell(LINEAR, event, None).feedback == NO_RESULT


def test_a_cell_naming_no_known_check() -> None:
    for cell in (
        GradeCell("t", 2.0, ()),
        GradeCell("t", 2.0, (CheckCall("check_nothing_like_this", 0),)),
    ):
        assert grade_cell(cell, cell_event("t"), None) == CellResult(
            "t", 2.0, 0.0, "this test cell names no known check"
        )


def test_check_for_finds_registered_checks() -> None:
    assert check_for("check_linear_layer") is LINEAR_LAYER
    assert check_for("check_unknown") is None


def test_the_score_is_scaled_to_the_cells_points(correct, wrong) -> None:
    """When a cell's points differ from the check's (an inconsistent course), the cell's points rule."""
    double = GradeCell("test_linear_layer", 8.0, LINEAR.calls)
    assert grade_cell(double, cell_event(double.grade_id, correct[7]), None).score == 8.0
    assert grade_cell(double, cell_event(double.grade_id, wrong[7]), None).score == 5.54


# ---------------------------------------------------------------------------------------------
# describe_stop
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("end", "text"),
    [
        ({"event": "end", "reason": None}, None),
        ({"event": "end"}, None),
        (
            {"reason": "cell_timeout", "cell": "mine", "limit": 8},
            "a cell ran longer than the 8 s a cell may take, and was stopped (in cell 'mine')",
        ),
        (
            {"reason": "notebook_timeout", "cell": "test_mse_loss"},
            "the notebook ran longer than its time limit, and was stopped (in cell 'test_mse_loss')",
        ),
        (
            {"reason": "output_limit", "cell": "chatty", "bytes": 200000},
            "the notebook printed more than the 200000 bytes of output allowed, and was stopped "
            "(in cell 'chatty')",
        ),
        (
            {"reason": "dead", "cell": "mine", "detail": "the kernel died from signal SIGSEGV"},
            "the kernel died (the kernel died from signal SIGSEGV) (in cell 'mine')",
        ),
        (
            {"reason": "kernel_failed", "detail": "RuntimeError: no kernel"},
            "the kernel could not be started (RuntimeError: no kernel)",
        ),
        ({"reason": "killed", "detail": ""}, "the grader stopped the notebook at its hard time limit"),
        (
            {"reason": "runner_failed", "detail": "Traceback: boom"},
            "the grader's runner failed (Traceback: boom)",
        ),
        ({"reason": "cell_timeout"}, "a cell ran longer than the ? s a cell may take, and was stopped"),
        ({"reason": "dead"}, "the kernel died (?)"),
        ({"reason": "something new", "cell": "x"}, "something new (in cell 'x')"),
    ],
)
def test_describe_stop(end: dict, text: str | None) -> None:
    assert describe_stop(end) == text


def test_every_stop_reason_reads_as_words() -> None:
    for reason in STOP_REASONS:
        text = describe_stop({"reason": reason, "limit": 8, "bytes": 100, "detail": "why"})
        assert text and "{" not in text and reason not in text


# ---------------------------------------------------------------------------------------------
# grade_notebook
# ---------------------------------------------------------------------------------------------


def mse_evidence(seed: int) -> str:
    return dumps(collect_mse_loss(mse_loss, seed=seed))


def test_grade_notebook_totals(correct, wrong) -> None:
    events = [
        {"event": "kernel", "seconds": 0.5},
        {"event": "cell", "index": 1, "id": "setup", "status": "ok", "seconds": 0.1},
        cell_event(LINEAR.grade_id, wrong[0], wrong[7]),
        cell_event(MSE.grade_id, mse_evidence(0), mse_evidence(7)),
        {"event": "end", "reason": None, "seconds": 3.0},
    ]
    result = grade_notebook([LINEAR, MSE], log(*events))
    assert isinstance(result, NotebookResult)
    assert [(c.grade_id, c.score, c.passed) for c in result.cells] == [
        ("test_linear_layer", 2.77, False),
        ("test_mse_loss", 3.0, True),
    ]
    assert (result.score, result.max_score, result.stop, result.notes) == (5.77, 7.0, None, [])


def test_grade_notebook_full_marks(correct) -> None:
    events = [
        cell_event(LINEAR.grade_id, correct[0], correct[7]),
        cell_event(MSE.grade_id, mse_evidence(0), mse_evidence(7)),
        {"event": "end", "reason": None},
    ]
    result = grade_notebook([LINEAR, MSE], log(*events))
    assert (result.score, result.max_score, result.stop) == (7.0, 7.0, None)
    assert all(c.passed for c in result.cells)


def test_grade_notebook_stopped_keeps_the_cells_that_ran(correct) -> None:
    end = {"event": "end", "reason": "dead", "cell": "mine", "detail": "the kernel exited with status 3"}
    stop = "the kernel died (the kernel exited with status 3) (in cell 'mine')"
    result = grade_notebook([LINEAR, MSE], log(cell_event(LINEAR.grade_id, correct[0], correct[7]), end))
    assert result.stop == stop
    assert result.cells == [
        CellResult(
            "test_linear_layer",
            4.0,
            4.0,
            grade_linear_layer(collect_linear_layer(linear_forward, linear_backward, seed=7)).render(),
            passed=True,
        ),
        CellResult("test_mse_loss", 3.0, 0.0, f"not graded: {stop}"),
    ]
    assert (result.score, result.max_score) == (4.0, 7.0)


def test_grade_notebook_without_an_end_event_says_the_grader_stopped_it(correct) -> None:
    result = grade_notebook([LINEAR, MSE], log(cell_event(LINEAR.grade_id, correct[0], correct[7])))
    assert result.stop == "the grader stopped the notebook at its hard time limit"
    assert [c.score for c in result.cells] == [4.0, 0.0]
    assert result.cells[1].feedback == "not graded: the grader stopped the notebook at its hard time limit"


def test_grade_notebook_uses_the_last_end_event_and_the_last_event_of_a_cell(correct, wrong) -> None:
    events = [
        cell_event(LINEAR.grade_id, correct[7]),
        cell_event(LINEAR.grade_id, wrong[7]),
        {"event": "end", "reason": "killed"},
        {"event": "end", "reason": None},
    ]
    result = grade_notebook([LINEAR], log(*events))
    assert (result.stop, result.cells[0].score) == (None, 2.77)


def test_grade_notebook_ignores_evidence_in_events_of_other_cells(correct) -> None:
    events = [
        {"event": "cell", "index": 2, "id": "mine", "status": "ok", "seconds": 0.1, "evidence": [correct[7]]},
        cell_event(LINEAR.grade_id),
        {"event": "kernel", "id": LINEAR.grade_id, "evidence": [correct[7]]},
        {"event": "end", "reason": None},
    ]
    result = grade_notebook([LINEAR], log(*events))
    assert result.cells == [CellResult("test_linear_layer", 4.0, 0.0, NO_RESULT)]
    assert (result.score, result.max_score) == (0.0, 4.0)


def test_grade_notebook_of_no_cells() -> None:
    result = grade_notebook([], log({"event": "end", "reason": None}))
    assert (result.cells, result.score, result.max_score, result.stop) == ([], 0.0, 0, None)
