"""A learner's own check: one notebook, graded with the tests they can see, as fast as running it.

The class path (:mod:`autograder.engine.grade`) pays once for machinery that pays for itself over
many notebooks: runner processes, warm zygotes, the jail, a course directory built by nbgrader. For
one notebook on the learner's own machine each of those is pure overhead, so this path has none of
them. The kernel starts the ordinary way and this process drives it with the runner's own loop
(:func:`autograder.engine.runner.run`); the verdicts are the grader's (:class:`Grader`, the same
scoring from evidence outside the kernel), and each test cell's result is printed as soon as its
cell has run.

The student version the tests come from is the committed one in ``notebooks/`` (CI keeps it equal to
a fresh build), so no nbgrader command runs either; without it the course is built as before.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import nbformat

from autograder.course import SOLUTIONS, Assignment, assignments, grade_id
from autograder.engine import runner
from autograder.engine.contract import (
    CellEvent,
    Event,
    Job,
    KernelEvent,
    Limits,
    Stop,
    StopReason,
    parse_line,
    read_events,
)
from autograder.engine.executor import Executed, Work, timing_breakdown
from autograder.engine.grade import Grader
from autograder.engine.intake import Submission
from autograder.engine.outcome import Outcome
from autograder.engine.untrusted import clean, terminal
from autograder.grading.prepare import GradeCell, grade_cells

#: A cell still running after this many seconds is announced (and again every as many seconds).
SLOW_CELL_SECONDS = 5.0
#: How often the watcher looks for new events.
POLL_SECONDS = 0.1


class Progress:
    """What the learner sees while the check runs: each test cell's result as soon as it has run, and a
    line while a cell has been running for a while."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.graded: dict[str, GradeCell] = {}
        self.cells: list[Any] = []
        self.running: int | None = None
        """The index of the cell running now; None before the kernel has started and after the last."""
        self.started = False
        self.since = time.monotonic()
        self.announced = 0.0

    def start(self, notebook: Any) -> None:
        """The prepared notebook (its test cells' seeds as drawn for this run), about to run."""
        self.cells = notebook.cells
        self.graded = {c.grade_id: c for c in grade_cells(notebook)}
        self.since, self.announced = time.monotonic(), 0.0

    def _next(self, after: int) -> None:
        code = (i for i in range(after + 1, len(self.cells)) if self.cells[i].cell_type == "code")
        self.running = next((i for i in code if self.cells[i].source.strip()), None)
        self.since, self.announced = time.monotonic(), 0.0

    def event(self, event: Event) -> None:
        """One event of the runner: a test cell's result is graded and printed at once."""
        if isinstance(event, CellEvent):
            cell = self.graded.get(event.id) if event.id is not None else None
            if cell is not None and event.status in ("ok", "error", "interrupted"):
                self._show(cell, event)  # a stop is told with the whole result, in the stop's own words
            self._next(event.index)
        elif isinstance(event, KernelEvent):
            self.started = True
            self._next(-1)

    def _show(self, cell: GradeCell, event: CellEvent) -> None:
        from autograder.grading.verdicts import grade_cell

        result = grade_cell(cell, event, None)
        feedback = result.feedback
        if not result.passed and feedback.startswith("not graded"):
            feedback = f"{result.grade_id}: 0 / {result.points:g} points, {feedback}"
        print(clean(feedback) + "\n", file=self.out, flush=True)

    def tick(self) -> None:
        """Say which cell is still running, every :data:`SLOW_CELL_SECONDS` it goes on."""
        waited = time.monotonic() - self.since
        if not self.cells or waited < self.announced + SLOW_CELL_SECONDS:
            return
        self.announced = waited
        if not self.started:
            print(f"... the kernel is still starting after {waited:.0f} s", file=self.out, flush=True)
            return
        if self.running is None:
            return
        source = self.cells[self.running].source
        first = terminal(next((line.strip() for line in source.splitlines() if line.strip()), ""), 60)
        print(
            f"... cell {self.running + 1} still running after {waited:.0f} s: {first}",
            file=self.out,
            flush=True,
        )


class InProcessExecutor:
    """Runs one notebook at a time in this process, with the runner's loop and an ordinary kernel (no
    runner process, no zygote, no jail), showing ``progress`` as the events are written."""

    def __init__(self, progress: Progress | None = None) -> None:
        self.progress = progress
        self.work = Path(tempfile.mkdtemp(prefix="check-run-"))

    def run(self, work: Work) -> Executed:
        """Run the notebook in the calling thread while a watcher thread shows its events."""
        job_dir = self.work / "job"
        job_dir.mkdir()
        notebook = self.work / "prepared.ipynb"
        notebook.write_text(work.notebook, encoding="utf-8")
        events_path = self.work / "events.jsonl"
        job = Job(
            notebook=str(notebook),
            workdir=str(job_dir),
            events=str(events_path),
            grade_cells=list(work.grade_cells),
            cell_seconds=work.limits.cell_seconds,
            notebook_seconds=work.limits.notebook_seconds,
            output_bytes=work.limits.output_bytes,
            kernel=work.kernel,
        )
        if self.progress:
            self.progress.start(nbformat.reads(work.notebook, as_version=4))
        done = threading.Event()
        watcher = threading.Thread(target=self._watch, args=(events_path, done), daemon=True)
        environ = dict(os.environ)  # the runner sets the kernel's variables in its own process
        spawned = time.time()
        watcher.start()
        try:
            runner.run(job)
        finally:
            done.set()
            watcher.join()
            os.environ.clear()
            os.environ.update(environ)
        events = read_events(events_path).ended(Stop(StopReason.RUNNER_FAILED))
        return Executed(events, None, timing_breakdown(events, spawned, time.time()))

    def _watch(self, path: Path, done: threading.Event) -> None:
        """Pass each new event to the progress; first load the graders, while the kernel starts."""
        if self.progress is None:
            return
        from autograder.grading import checks_called, warm_up

        # while the kernel starts: the first test cell's result then shows at once
        warm_up(checks_called(self.progress.graded.values()))

        offset, partial = 0, b""
        while True:
            finished = done.is_set()
            new = b""
            if path.exists():
                with path.open("rb") as log:  # only what was appended since the last look
                    log.seek(offset)
                    new = log.read()
                offset += len(new)
            *lines, partial = (partial + new).split(b"\n")
            for event in filter(None, map(parse_line, lines)):
                self.progress.event(event)
            if finished:
                return
            if not lines:  # nothing new since the last look: the cell is still running
                self.progress.tick()
            done.wait(POLL_SECONDS)

    def threads(self, workers: int, notebooks: int) -> int:
        """One thread per notebook running at once: the learner's one notebook."""
        return workers

    def stop(self) -> None:
        """Nothing waits to start: one notebook runs at once."""

    def kill(self) -> None:
        """Nothing to do: Ctrl-C reaches the runner's loop in this process directly."""

    def close(self, kill: bool = False) -> None:
        """Remove the scratch folder."""
        shutil.rmtree(self.work, ignore_errors=True)


def _assignment_by_cells(path: Path, course: list[Assignment]) -> Assignment:
    """The assignment whose answer and test cells the notebook has the most of (every notebook has a
    set-up cell: it tells none apart); a clear error when none or several fit equally."""
    from autograder.course.build import source_notebook

    nb = nbformat.read(path, as_version=4)
    ids = {grade_id(c) for c in nb.cells} - {None, "setup"}
    overlap = {a.name: len(ids & {grade_id(c) for c in source_notebook(a.source).cells}) for a in course}
    best = max(overlap.values(), default=0)
    fits = [a for a in course if overlap[a.name] == best]
    if best == 0 or len(fits) > 1:
        names = ", ".join(a.notebook for a in course)
        raise SystemExit(
            f"{path} does not tell which notebook of the course it is: name it after one of {names}"
        )
    return fits[0]


def _assignment(path: Path, course: list[Assignment]) -> Assignment:
    named = [a for a in course if a.name in path.name]
    if named:
        return max(named, key=lambda m: len(m.name))
    return _assignment_by_cells(path, course)


def _course_root(a: Assignment, solutions: Path, root: Path) -> None:
    """A course directory holding only this assignment's student version, as both its source and its
    release: the learner's check runs the tests they can see."""
    student = solutions.parent / "notebooks" / a.notebook
    if not student.exists():
        from autograder.engine.pipeline import ensure_course

        ensure_course(root, solutions, only=[a.name])
        student = root / "release" / a.name / a.notebook
    for kind in ("source", "release"):
        folder = root / kind / a.name
        folder.mkdir(parents=True, exist_ok=True)
        if student != folder / a.notebook:
            shutil.copyfile(student, folder / a.notebook)


def check_notebook(
    path: Path, solutions: Path = SOLUTIONS, out: TextIO | None = None, limits: Limits | None = None
) -> Outcome:
    """Grade one learner's notebook with the tests they can see (not the hidden ones); return the outcome.

    The assignment is the one whose name the file name contains, or else the one whose answer cells
    the notebook has. With ``out``, each test cell's result is written there as soon as it has run.
    """
    a = _assignment(path, assignments(solutions))
    root = Path(tempfile.mkdtemp(prefix="check-"))
    try:
        _course_root(a, solutions, root)
        executor = InProcessExecutor(Progress(out) if out is not None else None)
        grader = Grader(root, [a], limits or Limits(), 1, use_jail=False, zygote=False, executor=executor)
        try:
            return grader.grade_one(Submission("you", a.name, path, str(path)))
        finally:
            grader.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
