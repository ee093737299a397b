"""Grade a class: every submission in its own jailed kernel, in parallel; trusted scores into the gradebook.

For each submission the engine

1. prepares the notebook to run (the learner's answers, the course's test cells, see
   :mod:`autograder.grading.prepare`) in a fresh job folder holding only that notebook;
2. runs it in a separate runner process (:mod:`autograder.engine.runner`) whose kernel is jailed
   (:mod:`autograder.engine.jail`), under per-cell, per-notebook, memory and output limits, and
   kills the runner's whole process tree if it overruns its hard limit: an :class:`Executor` does
   this step, on this machine (:class:`LocalExecutor`) or on a Dask cluster's workers
   (:mod:`autograder.engine.distributed`), and gives back the evidence; all else happens here;
3. recomputes every graded cell's score from the evidence the cell recorded, in this process
   (:mod:`autograder.grading.verdicts`);
4. stores the result (a JSON file per submission, keyed by the submission's hash and the course
   version, so a re-run skips what is done, an interrupted run resumes, and a changed check or
   hidden test regrades), writes the scores into nbgrader's gradebook and the feedback HTML.

Ctrl-C (:meth:`Grader.cancel`) stops new notebooks from starting; the running ones finish, or are
cancelled on a second Ctrl-C, and a cancelled notebook leaves no stored result, so a re-run grades it.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import Any

import nbformat

from autograder.course import Assignment, grade_id, is_grade, is_solution, points
from autograder.engine import exchange, jail, method, untrusted
from autograder.engine.contract import CellEvent, EventLog, Limits, Stop
from autograder.engine.executor import Executor, ExecutorLost, LocalExecutor, NotStarted, Work, kernel_kind
from autograder.engine.intake import Submission, read_notebook
from autograder.engine.outcome import CellResult, OldFormat, Outcome, result_store
from autograder.engine.versions import code_version
from autograder.grading import checks_called, seeds
from autograder.grading.prepare import Prepared, grade_cells, prepare
from autograder.grading.verdicts import clean_event, grade_notebook


def sha256(path: Path) -> str:
    """The file's SHA-256, which tells a re-run whether a submission changed."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def course_version(source_notebook: bytes) -> str:
    """A hash of what a score depends on besides the submission: the assignment's source notebook
    (its tests, hidden ones included, as bytes) and the grading code (:func:`code_version`). A stored
    result with another version is graded again."""
    return hashlib.sha256(source_notebook + b"\0" + code_version().encode()).hexdigest()


class Grader:
    """Grades submissions of one course directory; one instance per command run."""

    def __init__(
        self,
        course_root: Path,
        assignments: list[Assignment],
        limits: Limits | None = None,
        workers: int | None = None,
        use_jail: bool | None = None,
        zygote: bool = True,
        seeds: dict[tuple[str, str], dict[str, int]] | None = None,
        withhold_flagged: bool = False,
        executor: Executor | None = None,
    ) -> None:
        """``seeds`` (by student and assignment: the ``seeds`` of an earlier outcome) reproduce that
        grading's inputs; every other submission gets fresh ones. ``executor`` runs the notebooks
        (default: a :class:`LocalExecutor`, runner processes on this machine)."""
        self.root = course_root
        self.seeds = seeds or {}
        self.withhold_flagged = withhold_flagged
        self.assignments = {a.name: a for a in assignments}
        self.limits = limits or Limits()
        self.workers = max(1, workers or os.cpu_count() or 1)
        self.jailed = jail.jail_available() if use_jail is None else use_jail
        self.executor = executor or LocalExecutor(zygote=zygote)
        self.stored = result_store(course_root)
        self._sources: dict[str, tuple[Any, Any, str]] = {}
        self.regrade_reasons: dict[tuple[str, str], str] = {}
        self.stopping = threading.Event()
        """Set by :meth:`cancel`: no new notebook starts."""
        self.cancelled = threading.Event()
        """Set by :meth:`cancel` with ``running=True``: running notebooks are killed and not stored."""
        self.warmed = threading.Event()
        """Clear while :func:`_warm_graders` runs: scoring waits for it, so that the two never import the
        same modules at once."""
        self.warmed.set()
        self.lost: str | None = None
        """Why the executor could run nothing more (:class:`ExecutorLost`), when it could not."""

    def close(self) -> None:
        """Stop the executor (its runners finish, or are killed after a cancel) and its scratch space."""
        self.executor.close(kill=self.cancelled.is_set())

    def cancel(self, running: bool = False) -> None:
        """Start no new notebook; with ``running``, also kill the running ones (not stored)."""
        self.stopping.set()
        self.executor.stop()
        if running:
            self.cancelled.set()
            self.executor.kill()

    def version(self, assignment: str) -> str:
        """:func:`course_version` of an assignment, computed once per run."""
        return self._course(assignment)[2]

    def answer_cells(self, assignment: str) -> set[str]:
        """The grade ids of the assignment's answer cells (what intake looks for in a notebook)."""
        source = self._course(assignment)[0]
        return {grade_id(c) for c in source.cells if is_solution(c)} - {None}

    # -- per submission -------------------------------------------------------------------------

    def result_path(self, sub: Submission) -> Path:
        """Where a submission's outcome is stored (:meth:`ResultStore.path`)."""
        return self.stored.path(sub.student, sub.assignment)

    def done(self, sub: Submission, digest: str) -> Outcome | None:
        """The stored outcome of an unchanged submission graded by this version of the course, or None
        (with the reason in :attr:`regrade_reasons` when the course changed since)."""
        path = self.result_path(sub)
        if not path.exists():
            return None
        try:
            stored = self.stored.read(path)
        except OldFormat:
            self.regrade_reasons[(sub.student, sub.assignment)] = (
                "graded again: its stored result was written by an older version of the grader"
            )
            return None
        except (OSError, TypeError, ValueError, RecursionError):
            return None  # graded again, and stored anew
        if stored.sha256 != digest:
            return None
        if stored.course_version != self.version(sub.assignment):
            self.regrade_reasons[(sub.student, sub.assignment)] = (
                "graded again: the assignment's tests or the checks changed since it was graded"
            )
            return None
        return stored

    def _course(self, assignment: str) -> tuple[Any, Any, str]:
        """The assignment's source and release notebooks and its :func:`course_version`, each file read
        once per run."""
        if assignment not in self._sources:
            a = self.assignments[assignment]
            text = (self.root / "source" / a.name / a.notebook).read_bytes()
            source = nbformat.reads(text.decode("utf-8"), as_version=4)
            release = nbformat.read(self.root / "release" / a.name / a.notebook, as_version=4)
            self._sources[assignment] = (source, release, course_version(text))
        return self._sources[assignment]

    def _checks(self, submissions: list[Submission]) -> set[str] | None:
        """The names of the checks the assignments of ``submissions`` call; None when a source notebook
        cannot be read (grading each submission meets that again and says so)."""
        try:
            sources = [self._course(a)[0] for a in {sub.assignment for sub in submissions}]
            return checks_called(cell for source in sources for cell in grade_cells(source))
        except Exception:  # noqa: BLE001 - the warm-up then covers every check
            return None

    def grade_one(self, sub: Submission) -> Outcome | None:
        """Run and grade one submission; never raises: a failure becomes an outcome with its reason.

        Returns None, storing nothing, when the run was cancelled (Ctrl-C) before it finished."""
        if self.stopping.is_set():
            return None
        start = time.monotonic()
        digest = sub.sha256
        try:
            digest = digest or sha256(sub.path)
            outcome = self._grade(sub, digest)
        except ExecutorLost as exc:
            # Nothing can run any more (a lost scheduler): stop the run, store nothing for this one.
            self.lost = self.lost or str(exc)
            self.stopping.set()
            return None
        except NotStarted:
            return None  # handed to the executor before Ctrl-C, not started by then: a re-run grades it
        except Exception as exc:  # noqa: BLE001 - one bad submission must not stop the class
            outcome = self._failed(sub, digest, f"the grader could not grade this notebook: {_why(exc)}")
        if self.cancelled.is_set():
            return None
        outcome.seconds = round(time.monotonic() - start, 3)
        outcome.jailed = self.jailed
        outcome.lms, outcome.lms_id, outcome.name = sub.lms, sub.lms_id, sub.name
        outcome.late, outcome.timestamp = sub.late, sub.timestamp
        outcome.course_version = self.version(sub.assignment)
        outcome.regraded = self.regrade_reasons.get((sub.student, sub.assignment), "")
        try:
            self.store(sub, outcome)
        except Exception as exc:  # noqa: BLE001 - the others are still graded and stored
            failed = self._failed(
                sub, digest, f"the grader could not store this notebook's result: {_why(exc)}"
            )
            failed.course_version, failed.seconds = outcome.course_version, outcome.seconds
            failed.lms, failed.lms_id, failed.name = sub.lms, sub.lms_id, sub.name
            failed.late, failed.timestamp = sub.late, sub.timestamp
            # kept where the report finds it, under a name of the grader's own; a re-run grades it again
            try:
                self.stored.write(self.stored.fallback_path(sub.student, sub.assignment), failed)
            except Exception:  # noqa: BLE001, S110 - the gradebook and this run's outputs still have it
                pass
            return failed
        return outcome

    def _failed(self, sub: Submission, digest: str, reason: str) -> Outcome:
        """The outcome of a submission the grader could not grade (or store), with the reason."""
        try:
            most = self.max_score(sub)
        except Exception:  # noqa: BLE001 - the course's notebook is unreadable: the reason still stands
            most = 0.0
        return Outcome(sub.student, sub.assignment, sub.origin, digest, "failed", 0.0, most, failure=reason)

    def store(self, sub: Submission, outcome: Outcome) -> None:
        """Keep a submission's outcome, so that a re-run skips it."""
        self.stored.write(self.result_path(sub), outcome)
        self.stored.fallback_path(sub.student, sub.assignment).unlink(missing_ok=True)

    def forget(self, sub: Submission) -> None:
        """Drop a submission's stored outcome, so that a re-run grades it again."""
        for path in (self.result_path(sub), self.stored.fallback_path(sub.student, sub.assignment)):
            if path.is_file():
                path.unlink()

    def max_score(self, sub: Submission) -> float:
        """The points a notebook of the submission's assignment is worth."""
        source = self._course(sub.assignment)[0]
        return sum(points(c) for c in source.cells if is_grade(c))

    def _grade(self, sub: Submission, digest: str) -> Outcome:
        """Prepare, run, score: the steps of grading one submission."""
        source, release, _ = self._course(sub.assignment)
        recorded = self.seeds.get((sub.student, sub.assignment))
        prepared, drawn = seeds.fresh(prepare(read_notebook(sub.path), source, release), recorded)
        kind = kernel_kind(source)
        work = Work(
            name=f"{sub.student}-{sub.assignment}",
            notebook=nbformat.writes(prepared.notebook),
            grade_cells=[c.grade_id for c in prepared.grade_cells],
            kernel=kind,
            limits=self.limits,
            jailed=self.jailed,
        )
        ran = self.executor.run(work)
        self._write_executed(sub, ran.notebook, release)
        self.warmed.wait(timeout=WARM_UP_SECONDS)
        return self._outcome(sub, digest, prepared, ran.events, ran.timing, drawn, kind)

    def _write_executed(self, sub: Submission, executed: bytes | None, release: Any) -> None:
        """Write the executed notebook into ``autograded/``, which formgrader shows and nbgrader's feedback
        renders, with the student version's test cells in it: no hidden test source is left in it."""
        if executed is None:
            return
        visible = {c.get("id"): c.source for c in release.cells if is_grade(c)}
        notebook = nbformat.reads(executed.decode("utf-8"), as_version=4)
        for cell in notebook.cells:
            if cell.get("id") in visible:
                cell.source = visible[cell.get("id")]
        path = self._autograded_path(sub)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, path)
        exchange.carry(sub.path, sub.timestamp, path.parent)

    def _outcome(
        self,
        sub: Submission,
        digest: str,
        prepared: Prepared,
        events: EventLog,
        timing: dict,
        drawn: dict[str, int],
        kind: str,
    ) -> Outcome:
        """Recompute the scores from the cells' evidence, outside the kernel, and assemble the outcome."""
        result = grade_notebook(prepared.grade_cells, events, getattr(self.executor, "scorer", None))
        answers = [
            {"id": c.get("id", ""), "source": c.source} for c in prepared.notebook.cells if is_solution(c)
        ]
        # The kernel saw the hidden tests' code as it ran them: what it says afterwards may echo it.
        hidden = seeds.hidden_lines(prepared.notebook)
        errors = [seeds.redact(e, hidden) for e in _learner_errors(events, prepared)]
        cells = [replace(c, feedback=seeds.redact(c.feedback, hidden)) for c in result.cells]
        flagged = method.flags(answers, numpy_only=kind == "numpy")
        if self.withhold_flagged and flagged:
            _withhold(cells, flagged, prepared.notebook)
        return Outcome(
            student=sub.student,
            assignment=sub.assignment,
            origin=sub.origin,
            sha256=digest,
            status="stopped" if result.stopped else "graded",
            score=round(sum(c.score for c in cells), 2),
            max_score=result.max_score,
            stop=_redacted(result.stopped, hidden),
            cells=cells,
            restored=prepared.restored,
            errors=errors,
            answers=answers,
            run_seconds=round(sum(e.seconds for e in events.cells), 3),
            timing=timing,
            seeds=drawn,
            flags=[f.describe() for f in flagged],
        )

    def _autograded_path(self, sub: Submission) -> Path:
        a = self.assignments[sub.assignment]
        return self.root / "autograded" / sub.student / a.name / a.notebook

    # -- a whole class --------------------------------------------------------------------------

    def grade_all(
        self,
        submissions: list[Submission],
        force: bool = False,
        on_done: Callable[[Outcome, bool], None] | None = None,
    ) -> list[Outcome]:
        """Grade every submission (skipping unchanged, already graded ones unless ``force``).

        On Ctrl-C no new notebook starts and the running ones finish (a second Ctrl-C cancels them);
        the outcomes so far are returned and :attr:`stopping` is set."""
        outcomes: list[Outcome] = []
        todo: list[Submission] = []
        for sub in submissions:
            try:
                previous = None if force else self.done(sub, sub.sha256 or sha256(sub.path))
            except OSError:
                previous = None  # grade_one meets it again and makes it this submission's outcome
            if previous is not None:
                outcomes.append(previous)
                if on_done:
                    on_done(previous, True)
            else:
                todo.append(sub)
        if todo and getattr(self.executor, "scorer", None) is None:
            # The graders' first calls import more of PyTorch (seconds): done while the first kernels run
            # (a resident service that scores has done them already).
            self.warmed.clear()
            threading.Thread(
                target=_warm_graders, args=(self.warmed, self._checks(todo)), name="warm-graders", daemon=True
            ).start()
        pool = ThreadPoolExecutor(max_workers=self.executor.threads(self.workers, len(todo)))
        futures = [pool.submit(self.grade_one, sub) for sub in sorted(todo, key=_file_size, reverse=True)]
        try:
            for future in as_completed(futures):
                self._collect(future.result(), outcomes, on_done)
        except KeyboardInterrupt:
            try:  # a second Ctrl-C from here on cancels, even one pressed while this says so
                self.cancel()
                # threads beyond the workers hold a notebook that has not started, and never will
                running = min(self.workers, sum(1 for f in futures if f.running()))
                sys.stderr.write(
                    f"\nInterrupted: no new notebook starts; finishing the {running} running "
                    "(Ctrl-C again to cancel them).\n"
                )
                for future in futures:
                    if not future.cancelled():
                        self._collect(future.result(), outcomes, on_done)
            except KeyboardInterrupt:
                self.cancel(running=True)
                sys.stderr.write("Cancelling the running notebooks.\n")
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return sorted(outcomes, key=lambda o: (o.assignment, o.student))

    @staticmethod
    def _collect(outcome: Outcome | None, outcomes: list[Outcome], on_done) -> None:
        if outcome is not None and outcome not in outcomes:
            outcomes.append(outcome)
            if on_done:
                on_done(outcome, False)


def _file_size(sub: Submission) -> int:
    """The size of a submission's file, what the grader orders its notebooks by, the largest first.

    The time a notebook takes grows with the work in it (a blank notebook 04 ran in about three
    quarters of the time of a solved one): starting the longest first and ending on the shortest
    leaves the fewest workers idle at the end of a run (longest processing time first). The size
    stands for it without reading the file; only the order changes, never how a notebook is graded.
    """
    try:
        return sub.path.stat().st_size
    except OSError:
        return 0  # grade_one meets the error again and makes it this submission's outcome


#: The longest scoring waits for the graders' warm-up (it takes seconds; past this, scoring goes on).
WARM_UP_SECONDS = 60.0


def _warm_graders(done: threading.Event, checks: set[str] | None) -> None:
    """In a thread of its own, while the first kernels run: :func:`autograder.grading.warm_up` for the
    run's ``checks``; ``done`` is set at the end, however it ends. A failure here is the grading's to
    report. (nbgrader's API, which the gradebook step needs, is imported by the thread that registers the
    assignments meanwhile: :func:`autograder.engine.pipeline.register`; importing it here as well made
    two threads import the same modules at once.)"""
    try:
        from autograder.grading import warm_up

        warm_up(checks)
    except Exception:  # noqa: BLE001, S110 - grading meets it again and says so
        pass
    finally:
        done.set()


def _withhold(cells: list[CellResult], flagged: list[method.Flag], notebook: Any) -> None:
    """Set to zero every graded cell that grades a flagged definition, saying why."""
    names = {name for f in flagged for name in f.name.split(", ")}
    sources = {grade_id(c): c.source for c in notebook.cells}
    for cell in cells:
        hit = method.graded_names(sources.get(cell.grade_id, "")) & names
        if hit and cell.score > 0:
            why = "; ".join(f.describe() for f in flagged if set(f.name.split(", ")) & hit)
            cell.feedback = f"points withheld by the instructor's method check: {why}\n\n{cell.feedback}"
            cell.score, cell.passed = 0.0, False


def _learner_errors(events: EventLog, prepared: Prepared) -> list[str]:
    """The errors the learner's own (ungraded) cells raised, as the runner's events have them (cleaned),
    each cell named as the learner sees it: its number in their notebook and its first line."""
    graded = {c.grade_id for c in prepared.grade_cells}
    return [
        f"{_cell_name(prepared.notebook.cells, e)} raised {e.error}"
        for e in map(clean_event, events.cells)
        if e.error and e.id not in graded
    ]


def _cell_name(cells: list[Any], event: CellEvent) -> str:
    """``cell 12 (def linear_forward(x, W, b):)``, or the cell's id when the event's index names no cell
    of the notebook it ran."""
    index = event.index
    if 0 <= index < len(cells) and cells[index].get("id") == event.id:
        first = next((line.strip() for line in cells[index].source.splitlines() if line.strip()), "")
        return f"cell {index + 1} ({untrusted.one_line(first, 60)})"
    return f"cell {event.id!r}"


def _redacted(stop: Stop | None, hidden: list[str]) -> Stop | None:
    """The stop as an outcome keeps it, with no hidden test line in its detail."""
    if stop is None or stop.detail is None:
        return stop
    return replace(stop, detail=seeds.redact(stop.detail, hidden))


def _why(exc: BaseException) -> str:
    """An exception as a reason: its type and its first line, cut to 300 characters."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")
