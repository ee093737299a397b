"""The engine's contract: the job, the events and the stop reasons are written and read one way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograder.__main__ import build_parser, limits_from
from autograder.engine.contract import (
    CellEvent,
    EndEvent,
    EventLog,
    Events,
    Job,
    KernelEvent,
    Limits,
    StartEvent,
    Stop,
    StopReason,
    event_dict,
    parse_event,
    read_events,
)
from autograder.engine.grade import Grader
from autograder.engine.intake import Submission
from autograder.engine.outcome import CellResult, OldFormat, Outcome
from autograder.engine.outputs import table
from autograder.engine.systemic import failure_signature
from autograder.grading.verdicts import grade_notebook


def a_job(**changes) -> Job:
    fields = {
        "notebook": "/jobs/job-1.ipynb",
        "workdir": "/jobs/job-1",
        "events": "/jobs/job-1.events.jsonl",
        "grade_cells": ["test_linear_layer"],
        "cell_seconds": 8.0,
        "notebook_seconds": 90.0,
        "output_bytes": 200_000,
    }
    return Job(**{**fields, **changes})


def test_a_job_reads_back_as_it_was_written(tmp_path: Path) -> None:
    job = a_job(kernel="numpy", executed="/course/autograded/x.ipynb", jail_prefix=["jail", "--"])
    job.write(tmp_path / "job.json")
    assert Job.read(tmp_path / "job.json") == job


def test_a_job_uses_the_limits_names(tmp_path: Path) -> None:
    a_job().write(tmp_path / "job.json")
    written = json.loads((tmp_path / "job.json").read_text())
    assert {"cell_seconds", "notebook_seconds", "output_bytes"} <= set(written)
    assert {"cell_seconds", "notebook_seconds", "output_bytes"} <= set(vars(Limits()))


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda d: d.update(cell_timeout=8), "cell_timeout"),
        (lambda d: d.pop("events"), "events"),
    ],
)
def test_a_job_with_a_wrong_key_is_refused_by_name(tmp_path: Path, edit, named: str) -> None:
    a_job().write(tmp_path / "job.json")
    data = json.loads((tmp_path / "job.json").read_text())
    edit(data)
    (tmp_path / "job.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match=named):
        Job.read(tmp_path / "job.json")


def test_every_stop_reason_has_a_sentence_that_starts_with_its_headline() -> None:
    for reason in StopReason:
        stop = Stop(reason, cell="mine", limit=8, bytes=100, detail="why")
        assert stop.sentence().startswith(stop.headline())
        assert stop.sentence().endswith(" (in cell 'mine')")
        assert "{" not in stop.sentence()


@pytest.mark.parametrize(
    "stop",
    [
        Stop(StopReason.CELL_TIMEOUT, "mine", limit=8),
        Stop(StopReason.OUTPUT_LIMIT, "chatty", bytes=200_000),
        Stop(StopReason.DEAD, "mine", detail="the kernel died from signal SIGSEGV"),
        Stop(StopReason.KILLED, detail=""),
        Stop("a reason from a newer runner", "x"),
    ],
)
def test_an_end_event_reads_back_as_the_stop_it_records(tmp_path: Path, stop: Stop) -> None:
    events = Events(tmp_path / "events.jsonl")
    events.write(EndEvent(stop, 1.5))
    (end,) = read_events(tmp_path / "events.jsonl").events
    assert isinstance(end, EndEvent) and end.stop == stop
    assert end.seconds == 1.5


def test_an_end_event_without_a_stop_reads_as_none() -> None:
    written = event_dict(EndEvent(None, 2.0))
    assert written == {"event": "end", "reason": None, "seconds": 2.0}
    assert parse_event(written) == EndEvent(None, 2.0)


@pytest.mark.parametrize(
    "line",
    [
        {"event": "cell", "index": 1, "id": "x", "status": "ok"},  # no seconds
        {"event": "cell", "index": "1", "id": "x", "status": "ok", "seconds": 1.0},
        {"event": "cell", "index": 1, "id": "x", "status": "ok", "seconds": 1.0, "evidence": [3]},
        {"event": "kernel", "seconds": 0.5, "evidence": ["{}"]},  # only a cell's event carries evidence
        {"event": "end", "reason": "dead", "detail": 7},
        {"event": "later", "seconds": 1.0},
        ["cell"],
    ],
)
def test_an_object_the_runner_does_not_write_is_no_event(line) -> None:
    assert parse_event(line) is None


def test_events_are_read_back_skipping_a_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events = Events(path)
    events.write(StartEvent())
    events.write(CellEvent(0, "setup", "ok", 0.12345))
    with path.open("a") as f:
        f.write('{"event": "cell", "ind')
    read = read_events(path).events
    assert [type(e) for e in read] == [StartEvent, CellEvent]
    assert read[1] == CellEvent(0, "setup", "ok", 0.123, t=read[1].t)
    assert '"error"' not in path.read_text().splitlines()[1]
    assert all(isinstance(e.t, float) for e in read)


def test_a_log_without_an_end_event_ends_with_the_executors_stop() -> None:
    log = EventLog([StartEvent(1.0), KernelEvent(0.5, t=2.0), CellEvent(0, "a", "ok", 1.0, t=3.0)])
    assert log.end is None and log.stamp(KernelEvent) == 2.0 and [c.id for c in log.cells] == ["a"]
    assert log.ended(Stop(StopReason.KILLED)).end == EndEvent(Stop(StopReason.KILLED))
    assert log.ended(Stop(StopReason.RUNNER_FAILED)).end == EndEvent(Stop(StopReason.KILLED))


def test_the_stop_is_stored_once_and_its_words_are_made_from_it() -> None:
    stop = Stop(StopReason.CELL_TIMEOUT, "slow_cell", limit=8)
    result = grade_notebook([], EventLog([EndEvent(stop, 9.0)]))
    assert result.stopped == stop
    cell = CellResult("test_linear_layer", 4.0, 0.0, f"not graded: {stop.sentence()}")
    outcome = Outcome("ada", "01_linear_layer", "x", "0", "stopped", 0.0, 7.0, cells=[cell], stop=stop)
    stored = json.loads(outcome.to_json())
    assert stored["stop"] == {"reason": "cell_timeout", "cell": "slow_cell", "limit": 8}
    assert stored["failure"] is None and stop.sentence() not in json.dumps(stored["stop"])
    assert Outcome.from_json(outcome.to_json()) == outcome
    assert outcome.reason == stop.sentence()
    (line,) = table([outcome]).splitlines()[1:]
    assert line.endswith("stopped early (01_linear_layer): a cell ran longer than the 8 s a cell may take")


#: A result as the grader stored it before the format was versioned: the stop as a sentence beside
#: its code, no ``format``.
FORMAT_1 = {
    "student": "ada", "assignment": "01_tiny", "origin": "ada_01_tiny.ipynb", "sha256": "ab",
    "status": "stopped", "score": 0.0, "max_score": 7.0,
    "reason": "the kernel died (exit 3) (in cell 'mine')",
    "cells": [
        {"grade_id": "test_linear_layer", "points": 4.0, "score": 0.0, "feedback": "no", "passed": False}
    ],
    "stop": {"reason": "dead", "cell": "mine", "detail": "exit 3"}, "course_version": "v",
}  # fmt: skip


def test_a_result_stored_in_an_older_format_is_graded_again_not_read(tmp_path: Path) -> None:
    with pytest.raises(OldFormat, match="format 1, not 2"):
        Outcome.from_json(json.dumps(FORMAT_1))
    with pytest.raises(OldFormat, match="format 3, not 2"):
        Outcome.from_json(json.dumps({**FORMAT_1, "format": 3}))
    grader = Grader(tmp_path, [], workers=1, use_jail=False)
    try:
        sub = Submission("ada", "01_tiny", tmp_path / "ada_01_tiny.ipynb", "ada_01_tiny.ipynb")
        grader.result_path(sub).parent.mkdir(parents=True)
        grader.result_path(sub).write_text(json.dumps(FORMAT_1), encoding="utf-8")
        assert grader.done(sub, "ab") is None
        assert grader.regrade_reasons[("ada", "01_tiny")] == (
            "graded again: its stored result was written by an older version of the grader"
        )
    finally:
        grader.close()


def test_a_failure_without_a_stop_shows_its_reason_in_the_table() -> None:
    failed = Outcome(
        "ada", "01_linear_layer", "x", "0", "failed", 0.0, 7.0, "the grader could not grade this"
    )
    assert (
        table([failed])
        .splitlines()[1]
        .endswith("stopped early (01_linear_layer): the grader could not grade this")
    )


def test_the_command_lines_defaults_are_the_limits() -> None:
    args = build_parser().parse_args(["grade", "all", "submissions"])
    assert limits_from(args) == Limits()


def test_the_command_line_sets_the_limits_it_names() -> None:
    args = build_parser().parse_args(
        ["grade", "all", "s", "--cell-timeout", "5", "--notebook-timeout", "50", "--memory-gb", "1.5",
         "--output-mb", "0.5"]
    )  # fmt: skip
    assert limits_from(args) == Limits(
        cell_seconds=5, notebook_seconds=50, memory_bytes=1536 * 1024**2, output_bytes=512 * 1024
    )


def test_a_stops_signature_comes_from_its_code_and_only_a_stop_no_notebook_causes_counts() -> None:
    def stopped(stop: Stop) -> Outcome:
        return Outcome("ada", "01_linear_layer", "x", "0", "stopped", 0.0, 7.0, stop=stop)

    failed = stopped(Stop(StopReason.KERNEL_FAILED, detail="jail: 12 mounts failed"))
    assert failure_signature(failed) == "the kernel could not be started"
    # a learner's loop or os._exit stops their own notebook: never the environment's signature
    assert failure_signature(stopped(Stop(StopReason.CELL_TIMEOUT, "slow_cell", limit=8))) is None
    assert failure_signature(stopped(Stop(StopReason.DEAD, detail="exit 3"))) is None
