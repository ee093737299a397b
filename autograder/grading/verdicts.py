"""The trusted half of grading: scores recomputed from evidence, outside the learner's kernel.

A test cell's score here never comes from anything the kernel claims (printed scores, the cell's
value, its reply status). For each graded cell the engine takes the evidence of the cell's final
``check_*`` call, with the check and seed that the course's own cell source names, and grades it
with the check's ``grade`` function in this process (or in the process of a resident runner service
whose code and libraries are this command's, where the command runs on its runners: :func:`grade_cell`).
A cell without that evidence scores 0, and the reason says why (it never ran, it raised, the kernel
died...).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from autograder.checks import all_checks, check_name
from autograder.checks.evidence import EvidenceError, loads
from autograder.checks.report import Report
from autograder.engine import untrusted
from autograder.engine.contract import CellEvent, Event, EventLog, Stop, StopReason
from autograder.engine.outcome import CellResult
from autograder.grading import grade
from autograder.grading.prepare import GradeCell

#: How the runner's stop reasons read in feedback, by code (the wording is :class:`StopReason`'s).
STOP_REASONS = {reason.value: reason.wording for reason in StopReason}


@dataclass
class NotebookResult:
    """The trusted outcome of one submitted notebook."""

    cells: list[CellResult]
    stopped: Stop | None = None
    """Why execution stopped early, as the runner recorded it; None when every cell ran."""
    notes: list[str] = field(default_factory=list)

    @property
    def stop(self) -> str | None:
        """Why execution stopped early, in words; None when every cell ran."""
        return self.stopped.sentence() if self.stopped else None

    @property
    def score(self) -> float:
        """Total points."""
        return round(sum(c.score for c in self.cells), 2)

    @property
    def max_score(self) -> float:
        """Total points available."""
        return sum(c.points for c in self.cells)


def check_for(function: str):
    """The registered check that a ``check_*`` function runs, or None."""
    return all_checks().get(function.removeprefix("check_"))


def describe_stop(end: dict[str, Any]) -> str | None:
    """The runner's stop event in words, or None when the notebook ran to the end."""
    stop = Stop.from_dict(end)
    return stop.sentence() if stop else None


Scorer = Callable[[str, str], "dict[str, Any] | None"]
"""Grades one graded call's evidence elsewhere: ``(check, evidence text)`` to what :func:`score_evidence`
gives, or None when it could not (the cell is then graded in this process)."""


def grade_cell(
    cell: GradeCell, event: CellEvent | None, stop: str | None, scorer: Scorer | None = None
) -> CellResult:
    """Score one graded cell from the runner's event for it (None when the cell never ran); its evidence
    is graded by ``scorer`` where one is given and answers (a resident service's warm graders), else here
    (:func:`score_evidence`), with the same outcome."""
    if event is None:
        why = f"not graded: {stop}" if stop else "not graded: the cell did not run"
        return CellResult(cell.grade_id, cell.points, 0.0, why)
    call = cell.final_call
    check = check_name(call.function) if call else None
    if check is None:
        return CellResult(cell.grade_id, cell.points, 0.0, "this test cell names no known check")
    matching, malformed = [], None
    for text in event.evidence or []:
        try:
            evidence = loads(text)
        except EvidenceError as exc:
            malformed = str(exc)
            continue
        if (
            isinstance(evidence, dict)
            and evidence.get("check") == check
            and evidence.get("seed") == call.seed
        ):
            matching.append((evidence, text))
    if not matching:
        if event.status in ("timeout", "dead", "output_limit") and stop:
            return CellResult(cell.grade_id, cell.points, 0.0, f"not graded: {stop}")
        if event.error:
            why = f"the test cell raised {event.error}"
        elif malformed:
            why = f"the evidence its check recorded is malformed ({malformed})"
        else:
            why = "the test cell recorded no result for its check"
        return CellResult(cell.grade_id, cell.points, 0.0, f"not graded: {why}")
    evidence, text = matching[-1]
    scored = scorer(check, text) if scorer is not None else None
    if scored is None:
        scored = _scored(lambda: grade(check, evidence))
    if "error" in scored:  # malformed evidence from the kernel scores 0, with the reason
        return CellResult(
            cell.grade_id, cell.points, 0.0, f"not graded: unusable evidence ({scored['error']})"
        )
    score = _scaled(scored["score"], scored["points"], cell.points)
    return CellResult(cell.grade_id, cell.points, score, scored["text"], passed=score >= cell.points)


def score_evidence(check: str, text: str) -> dict[str, Any]:
    """The evidence ``text`` graded with the grader of ``check``: ``{"score", "points", "text"}`` (the
    report's score, its points and its rendered feedback), or ``{"error": NAME}`` when the grader raised
    (evidence the kernel made up). What a resident service answers a command's scoring request with."""
    return _scored(lambda: grade(check, loads(text)))


def _scored(report: Callable[[], Report]) -> dict[str, Any]:
    try:
        made = report()
    except Exception as exc:  # noqa: BLE001 - malformed evidence from the kernel scores 0, with the reason
        return {"error": type(exc).__name__}
    return {"score": made.score, "points": made.points, "text": made.render()}


def _scaled(score: float, points: float, cell_points: float) -> float:
    """A report's ``score`` of ``points`` on the cell's scale (they agree when the course is consistent)."""
    if points <= 0:
        return 0.0
    return round(min(max(score * cell_points / points, 0.0), cell_points), 2)


#: The longest a text of the kernel's may be in an event, by field: a learner's error (the runner cuts
#: it to 500 characters), a stop's detail (a kernel's ``msg_type``, the runner's last log line), ids.
EVENT_TEXT = {"error": 2_000, "detail": 500, "id": 200, "cell": 200, "reason": 200, "status": 50}

E = TypeVar("E", bound=Event)


def _cleaned(record: Any) -> dict[str, Any]:
    """The texts of ``record`` that :data:`EVENT_TEXT` bounds, made renderable and cut."""
    return {
        key: untrusted.clean(getattr(record, key), limit)
        for key, limit in EVENT_TEXT.items()
        if isinstance(getattr(record, key, None), str)
    }


def clean_event(event: E) -> E:
    """An event with every text the kernel could choose made renderable (:func:`untrusted.clean`) and cut:
    this is where the kernel's words cross into the grader, before any of them is stored or shown."""
    if isinstance(event, CellEvent):
        return replace(event, **_cleaned(event))
    stop = getattr(event, "stop", None)
    if stop is not None:
        return replace(event, stop=replace(stop, **_cleaned(stop)))
    return event


def grade_notebook(cells: list[GradeCell], events: EventLog, scorer: Scorer | None = None) -> NotebookResult:
    """Score every graded cell of one notebook from the runner's events (:func:`clean_event` first), with
    ``scorer`` where one is given (:func:`grade_cell`)."""
    by_id = {e.id: e for e in map(clean_event, events.cells)}
    end = events.end
    stopped = clean_event(end).stop if end else Stop(StopReason.KILLED)
    stop = stopped.sentence() if stopped else None
    results = [grade_cell(cell, by_id.get(cell.grade_id), stop, scorer) for cell in cells]
    return NotebookResult(results, stopped)
