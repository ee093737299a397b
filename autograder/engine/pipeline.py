"""The grading commands end to end: ``grade`` (a class), ``report`` (the outputs again, from the
gradebook, without grading) and ``check`` (one learner's own notebook).

``grade`` checks the gradebook and the roster before it grades anything, then: intake, grading,
the gradebook step (register the assignments, record the scores), the course's outputs. The outputs
are written even when the gradebook step fails or the run is interrupted, and say so.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder.course import COURSE, SOLUTIONS, Assignment, CourseError, assignments, grade_id, is_solution
from autograder.course.build import generate, sync_sources
from autograder.engine import gradebook, outputs, untrusted
from autograder.engine.grade import Grader, Limits
from autograder.engine.intake import Rejected, Submission, discover, intake_warnings, release_times
from autograder.engine.outcome import Outcome
from autograder.engine.roster import Roster, load_roster
from autograder.engine.systemic import systemic_failure


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
    """This run's submissions (graded now or already graded), with the gradebook's final scores."""
    rejected: list[Rejected]
    """This run's rejected files and files of other assignments."""
    inputs: int
    summary: Path
    grades_csv: Path
    files: dict[str, Path] = field(default_factory=dict)
    interrupted: bool = False
    systemic: str | None = None
    """The sentence saying most of the run failed the same way, or None."""
    gradebook_error: str | None = None
    lost: str | None = None
    """Why the run stopped before its end when the executor could run nothing more (a lost Dask
    scheduler), or None; the run is then also :attr:`interrupted`."""
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What the run must tell that changes none of its scores (a Dask worker it could not use)."""

    @property
    def ok(self) -> bool:
        """Whether the run finished, recorded its scores and needs no attention at class level."""
        return not (self.interrupted or self.systemic or self.gradebook_error)


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
        who = untrusted.terminal(f"{outcome.student}/{outcome.assignment}", 200)
        line = (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.count}/{self.total} "
            f"{who}: {untrusted.terminal(what)} ({time.monotonic() - self.start:.0f} s)"
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
    roster: Path | None = None,
    due: str | None = None,
    late_penalty: str = "none",
    withhold_flagged: bool = False,
    scheduler: str | None = None,
    seeds: dict[tuple[str, str], dict[str, int]] | None = None,
) -> ClassResult:
    """Grade every submission in ``inputs`` for one assignment (or ``all``); write every output.

    With ``scheduler`` (a Dask scheduler's address) the notebooks run on that cluster's workers
    (:mod:`autograder.engine.distributed`; ``workers`` is then how many are in flight at once, by
    default the cluster's worker threads); everything else stays here. ``seeds`` reproduce an earlier
    grading's inputs (see :class:`~autograder.engine.grade.Grader`).

    Raises :class:`~autograder.engine.gradebook.GradebookError`,
    :class:`~autograder.engine.roster.RosterError` or (with a scheduler that cannot be reached)
    :class:`~autograder.engine.distributed.ClusterUnavailable` before grading anything.
    """
    if db_url is None:
        root.mkdir(parents=True, exist_ok=True)
    db = gradebook.check_database(db_url or f"sqlite:///{root / 'gradebook.db'}")
    people = load_roster(roster) if roster else None
    if roster:
        (root / "autograder").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(roster, root / "autograder" / outputs.ROSTER_COPY)
    course = ensure_course(root, solutions, db)
    by_name = {a.name: a for a in course}
    if assignment != "all" and assignment not in by_name:
        raise SystemExit(f"unknown assignment {assignment!r}; the course has: {', '.join(by_name)}")
    wanted = list(by_name) if assignment == "all" else [assignment]
    answer_cells = {
        name: {
            grade_id(c)
            for c in nbformat.read(root / "source" / name / by_name[name].notebook, as_version=4).cells
            if is_solution(c)
        }
        for name in wanted
    }
    executor = None
    if scheduler:
        from autograder.engine.distributed import DaskExecutor

        # The workers jail their kernels (a worker that cannot gets no notebook) unless told not to.
        use_jail = True if use_jail is None else use_jail
        executor = DaskExecutor(scheduler, jailed=use_jail)
        workers = workers or executor.slots()
    started = dt.datetime.now(dt.UTC).replace(microsecond=0)
    scratch = Path(tempfile.mkdtemp(prefix="intake-"))
    grader = Grader(
        root,
        [by_name[n] for n in wanted],
        limits,
        workers,
        use_jail,
        seeds=seeds,
        withhold_flagged=withhold_flagged,
        executor=executor,
    )
    result = ClassResult([], [], 0, Path(), Path())
    try:
        submissions, rejected = discover(inputs, wanted, answer_cells, scratch, course=list(by_name))
        n_inputs = len(submissions) + len(rejected)
        submissions = _check_roster(submissions, rejected, people)
        now = started.replace(tzinfo=None)
        noticed = intake_warnings(submissions, release_times(root, wanted), now)
        skipped: list[Outcome] = []

        def show(outcome: Outcome, was_skipped: bool) -> None:
            if was_skipped:
                skipped.append(outcome)
            if bar:
                bar(outcome, was_skipped)

        bar = Progress(len(submissions)) if progress else None
        outcomes = grader.grade_all(submissions, force, show)
        result = ClassResult(
            outcomes, rejected, n_inputs, Path(), Path(), interrupted=grader.stopping.is_set()
        )
        result.lost = grader.lost
        refused = getattr(executor, "refused", {})
        result.notes = noticed + [
            f"the Dask worker {w} got no notebook of this run: it {r}" for w, r in sorted(refused.items())
        ]
        seen = {id(o) for o in skipped}
        fresh = [o for o in outcomes if id(o) not in seen]
        systemic = systemic_failure(fresh)
        if systemic:
            # Only the notebooks that failed the environment's way are held back: a result graded
            # normally is stored, written and kept, whatever the others did.
            result.systemic, held = systemic.sentence, {id(o) for o in systemic.held_back}
            by_key = {(s.student, s.assignment): s for s in submissions}
            for o in systemic.held_back:
                grader.forget(by_key[(o.student, o.assignment)])
            outcomes = [o for o in outcomes if id(o) not in held]
            result.outcomes = outcomes
        paths = {(s.student, s.assignment): s.path for s in submissions}
        outputs.write_submitted(root, [o for o in outcomes if id(o) not in seen], paths, by_name)
    finally:
        grader.close()
        shutil.rmtree(scratch, ignore_errors=True)

    try:
        gradebook.register(db, root, [by_name[n] for n in wanted], {n: due for n in wanted} if due else None)
        gradebook.record(db, outcomes, by_name, people, late_penalty)
    except Exception as exc:  # noqa: BLE001 - the outputs are still written, the failure stated
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        result.gradebook_error = (
            f"the scores could not be written to the gradebook ({type(exc).__name__}: {first}); the results "
            "are kept, and running the same command again writes them"
        )
    return _finish(result, root, db, out, by_name, inputs, assignment, started, skipped, submissions, force)


def _check_roster(submissions: list[Submission], rejected: list[Rejected], people: Roster | None):
    """Reject the files of students the roster does not list (when there is a roster)."""
    if people is None:
        return submissions
    kept = []
    for s in submissions:
        if people.find(s.student, s.lms, s.lms_id, s.name) is None:
            rejected.append(Rejected(s.origin, people.why_not(s.student, s.name), s.student, s.assignment))
        else:
            kept.append(s)
    return kept


def _headline(warning: str) -> str:
    """A warning up to its first ``": "`` outside parentheses (an address's ``tcp://`` is no end)."""
    depth = 0
    for i, ch in enumerate(warning):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and warning.startswith(": ", i):
            return warning[:i]
    return warning


def _finish(
    result, root, db, out, by_name, inputs, assignment, started, skipped, submissions, force=False
) -> ClassResult:
    """Record the run in the course's ledger and write the course's outputs from the gradebook."""
    warnings = [w for w in (result.systemic, result.gradebook_error) if w] + result.notes
    seen = {id(o) for o in skipped}
    graded_now = len([o for o in result.outcomes if id(o) not in seen])  # held-back ones are not in it
    not_graded = len(submissions) - graded_now - len(skipped)
    if result.interrupted and not_graded == 0:
        # Ctrl-C once while the last notebooks ran: they finished, nothing is left to grade.
        result.interrupted, result.lost = False, None
    if result.interrupted:
        why = f"the run stopped ({result.lost})" if result.lost else "the run was interrupted"
        # --force would grade again what this run graded: the resuming command is the one without it
        again = "the same command without --force" if force else "the same command again"
        warnings.append(
            f"{why}: {not_graded} submissions were not graded. Run {again} to grade them (what was "
            "graded is kept and not graded twice)"
        )
    outputs.record_run(
        root,
        {
            "time": started.isoformat(),
            "assignment": assignment,
            "inputs": inputs.name,
            "counts": {
                "inputs": result.inputs,
                "graded": graded_now,
                "skipped": len(skipped),
                "not_graded": not_graded,
                "rejected": sum(1 for r in result.rejected if not r.other_assignment),
                "other": sum(1 for r in result.rejected if r.other_assignment),
            },
            "rejected": [outputs.rejected_dict(r) for r in result.rejected],
            "note": "; ".join(_headline(w) for w in warnings),
        },
    )
    report = outputs.write_report(root, db, out or root / "grading", by_name, warnings)
    this_run = {(o.student, o.assignment) for o in result.outcomes}
    result.outcomes = [o for o in report.outcomes if (o.student, o.assignment) in this_run]
    result.files, result.warnings = report.files, report.warnings  # with what the report found
    result.summary, result.grades_csv = report.files["summary"], report.files["grades"]
    return result


def report_course(
    root: Path = COURSE, solutions: Path = SOLUTIONS, db_url: str | None = None, out: Path | None = None
) -> outputs.Report:
    """Write every output of the course again from the gradebook, without grading anything."""
    db = gradebook.normalize_url(db_url or f"sqlite:///{root / 'gradebook.db'}")
    by_name = {a.name: a for a in assignments(solutions)}
    return outputs.write_report(root, db, out or root / "grading", by_name)


def grade_alone(
    path: Path, assignment: str, solutions: Path = SOLUTIONS, use_jail: bool | None = None
) -> Outcome:
    """Grade one notebook of ``assignment`` as the instructor's grader does (hidden tests on fresh
    seeds, jailed where the machine allows), outside any course directory of the instructor's: the
    Gradescope autograder's path (:mod:`autograder.engine.gradescope`)."""
    course = {a.name: a for a in assignments(solutions)}
    if assignment not in course:
        raise CourseError(f"unknown assignment {assignment!r}; the course has: {', '.join(course)}")
    a = course[assignment]
    root = Path(tempfile.mkdtemp(prefix="grade-one-"))
    try:
        ensure_course(root, solutions, only=[a.name])
        grader = Grader(root, [a], Limits(), 1, use_jail)
        try:
            return grader.grade_one(Submission("you", a.name, path, str(path)))
        finally:
            grader.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
