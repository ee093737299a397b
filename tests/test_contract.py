"""The engine's contract: the job, the events and the stop reasons are written and read one way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autograder.__main__ import build_parser, limits_from
from autograder.engine.contract import (
    Events,
    Job,
    Limits,
    Stop,
    StopReason,
    cell_event,
    end_event,
    read_events,
)
from autograder.engine.outcome import Outcome
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
    events.write(end_event(stop, 1.5))
    (end,) = read_events(tmp_path / "events.jsonl")
    assert Stop.from_dict(end) == stop
    assert end["seconds"] == 1.5


def test_an_end_event_without_a_stop_reads_as_none() -> None:
    assert Stop.from_dict(end_event(None, 2.0)) is None


def test_events_are_read_back_skipping_a_cut_last_line(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    events = Events(path)
    events.write({"event": "start"})
    events.write(cell_event(0, "setup", "ok", 0.12345))
    with path.open("a") as f:
        f.write('{"event": "cell", "ind')
    read = read_events(path)
    assert [e["event"] for e in read] == ["start", "cell"]
    assert read[1]["seconds"] == 0.123 and "error" not in read[1] and "evidence" not in read[1]
    assert all(isinstance(e["t"], float) for e in read)


def test_the_grades_table_shows_the_stop_from_its_code_not_from_the_sentence() -> None:
    stop = Stop(StopReason.CELL_TIMEOUT, "slow_cell", limit=8)
    result = grade_notebook([], [end_event(stop, 9.0)])
    assert result.stopped == stop
    outcome = Outcome(
        "ada", "01_linear_layer", "x", "0", "stopped", 0.0, 7.0, result.stop, stop=stop.to_dict()
    )
    # A sentence worded otherwise (an older wording, say) does not change what the table shows.
    reworded = Outcome(
        "bob", "01_linear_layer", "y", "1", "stopped", 0.0, 7.0, "too slow!", stop=stop.to_dict()
    )
    lines = table([outcome, reworded]).splitlines()
    for line in lines[1:]:
        assert line.endswith(
            "stopped early (01_linear_layer): a cell ran longer than the 8 s a cell may take"
        )


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
        return Outcome("ada", "01_linear_layer", "x", "0", "stopped", 0.0, 7.0, "why", stop=stop.to_dict())

    failed = stopped(Stop(StopReason.KERNEL_FAILED, detail="jail: 12 mounts failed"))
    assert failure_signature(failed) == "the kernel could not be started"
    # a learner's loop or os._exit stops their own notebook: never the environment's signature
    assert failure_signature(stopped(Stop(StopReason.CELL_TIMEOUT, "slow_cell", limit=8))) is None
    assert failure_signature(stopped(Stop(StopReason.DEAD, detail="exit 3"))) is None
