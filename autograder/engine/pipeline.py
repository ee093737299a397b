"""The grading commands end to end: ``grade`` (a class) and ``check`` (one learner's own notebook)."""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

from autograder.build import COURSE, SOLUTIONS, Assignment, generate, sync_sources
from autograder.engine import outputs
from autograder.engine.grade import Grader, Limits, Outcome
from autograder.engine.intake import Rejected, Submission, discover


def ensure_course(
    root: Path = COURSE, solutions: Path = SOLUTIONS, db_url: str | None = None, only: list[str] | None = None
) -> list[Assignment]:
    """Make sure ``root`` holds the current source and release of every assignment (or of ``only``),
    and its gradebook."""
    course, changed = sync_sources(root, solutions, only)
    if changed:
        generate(root, changed, db_url=db_url)
    return course


@dataclass
class ClassResult:
    """Everything a grading run produced."""

    outcomes: list[Outcome]
    rejected: list[Rejected]
    inputs: int
    summary: Path
    grades_csv: Path


class Progress:
    """A one-line progress bar on stderr (a line per submission when stderr is not a terminal)."""

    def __init__(self, total: int) -> None:
        self.total, self.count, self.start = total, 0, time.monotonic()
        self.tty = sys.stderr.isatty()

    def __call__(self, outcome: Outcome, skipped: bool) -> None:
        self.count += 1
        width = 30
        filled = int(width * self.count / max(self.total, 1))
        what = "already graded" if skipped else f"{outcome.score:g}/{outcome.max_score:g} {outcome.status}"
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.count}/{self.total} "
            f"{outcome.student}/{outcome.assignment}: {what} ({time.monotonic() - self.start:.0f} s)"
        )
        if self.tty:
            sys.stderr.write("\r" + line[:150].ljust(150))
            if self.count == self.total:
                sys.stderr.write("\n")
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()


def grade_class(
    inputs: Path,
    assignment: str = "all",
    root: Path = COURSE,
    solutions: Path = SOLUTIONS,
    workers: int | None = None,
    force: bool = False,
    db_url: str | None = None,
    limits: Limits | None = None,
    use_jail: bool | None = None,
    out: Path | None = None,
    progress: bool = True,
) -> ClassResult:
    """Grade every submission in ``inputs`` for one assignment (or ``all``); write every output."""
    course = ensure_course(root, solutions, db_url)
    by_name = {a.name: a for a in course}
    if assignment != "all" and assignment not in by_name:
        raise SystemExit(f"unknown assignment {assignment!r}; the course has: {', '.join(by_name)}")
    wanted = list(by_name) if assignment == "all" else [assignment]
    answer_cells = {
        name: {
            c.metadata["nbgrader"]["grade_id"]
            for c in nbformat.read(root / "source" / name / by_name[name].notebook, as_version=4).cells
            if c.metadata.get("nbgrader", {}).get("solution")
        }
        for name in wanted
    }
    scratch = Path(tempfile.mkdtemp(prefix="intake-"))
    grader = Grader(root, [by_name[n] for n in wanted], limits, workers, use_jail)
    try:
        submissions, rejected = discover(inputs, wanted, answer_cells, scratch)
        n_inputs = len(submissions) + len(rejected)
        outcomes = grader.grade_all(submissions, force, Progress(len(submissions)) if progress else None)
    finally:
        grader.close()
        shutil.rmtree(scratch, ignore_errors=True)

    db = db_url or f"sqlite:///{root / 'gradebook.db'}"
    outputs.write_gradebook(db, outcomes, by_name)
    outputs.write_feedback(root, outcomes, by_name)
    out = out or root / "grading"
    out.mkdir(parents=True, exist_ok=True)
    grades_csv = out / "grades.csv"
    outputs.write_csv(grades_csv, outcomes, rejected)
    outputs.histogram(out / "scores.png", outcomes)
    summary = out / "summary.md"
    summary.write_text(outputs.summary_text(outcomes, rejected, n_inputs), encoding="utf-8")
    return ClassResult(outcomes, rejected, n_inputs, summary, grades_csv)


def check_notebook(path: Path, solutions: Path = SOLUTIONS, use_jail: bool | None = None) -> Outcome:
    """Grade one learner's notebook with the tests they can see (not the hidden ones); return the outcome.

    The assignment is the one whose name the file name contains, or else the one whose answer
    cells the notebook has.
    """
    from autograder.build import assignments, source_notebook

    course = assignments(solutions)
    matches = [a for a in course if a.name in path.name]
    if not matches:
        nb = nbformat.read(path, as_version=4)
        ids = {c.get("metadata", {}).get("nbgrader", {}).get("grade_id") for c in nb.cells}
        matches = [
            a
            for a in course
            if ids & {c.metadata.get("nbgrader", {}).get("grade_id") for c in source_notebook(a.source).cells}
        ]
    if not matches:
        raise SystemExit(f"{path} is not a notebook of this course")
    a = max(matches, key=lambda m: len(m.name))
    root = Path(tempfile.mkdtemp(prefix="check-"))
    try:
        ensure_course(root, solutions, only=[a.name])
        # The learner's own check runs the tests they can see: the student version's test cells.
        shutil.copyfile(root / "release" / a.name / a.notebook, root / "source" / a.name / a.notebook)
        grader = Grader(root, [a], Limits(), 1, use_jail)
        try:
            return grader.grade_one(Submission("you", a.name, path, str(path)))
        finally:
            grader.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
