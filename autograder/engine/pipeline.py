"""The grading commands end to end: ``grade`` (a class), ``report`` (the outputs again, from the
gradebook, without grading) and ``check`` (one learner's own notebook).

``grade`` checks the gradebook and the roster before it grades anything, then: intake, grading
(the assignments registered in the gradebook meanwhile), the scores recorded in the gradebook, the
course's outputs. The outputs are written even when the gradebook step fails or the run is
interrupted, and say so.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import tempfile
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autograder.course import COURSE, SOLUTIONS, Assignment, CourseError, assignments
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


@dataclass
class Options:
    """How a class is graded: the ``grade`` command's options, one typed record."""

    assignment: str = "all"
    root: Path = COURSE
    solutions: Path = SOLUTIONS
    workers: int | None = None
    force: bool = False
    db_url: str | None = None
    limits: Limits | None = None
    use_jail: bool | None = None
    out: Path | None = None
    progress: bool = True
    roster: Path | None = None
    due: str | None = None
    late_penalty: str = "none"
    withhold_flagged: bool = False
    scheduler: str | None = None
    """A Dask scheduler's address: the notebooks run on that cluster's workers."""
    seeds: dict[tuple[str, str], dict[str, int]] | None = None
    """Earlier gradings' inputs to reproduce (see :class:`~autograder.engine.grade.Grader`)."""
    executor: Any = None
    """This machine's executor when it was started before the run (the command line starts its runners
    first: :meth:`~autograder.engine.executor.LocalExecutor.start_runners`); the grader closes it."""


@dataclass
class Run:
    """What the steps of one class run share: each step reads what the ones before it set."""

    inputs: Path
    options: Options
    db: str = ""
    people: Roster | None = None
    course: dict[str, Assignment] = field(default_factory=dict)
    wanted: list[str] = field(default_factory=list)
    started: dt.datetime = field(default_factory=lambda: dt.datetime.now(dt.UTC).replace(microsecond=0))
    executor: Any = None
    grader: Grader | None = None
    scratch: Path | None = None
    """Where intake extracts archives: the submissions' files live there until the grader is done."""
    submissions: list[Submission] = field(default_factory=list)
    skipped: list[Outcome] = field(default_factory=list)
    """Submissions already graded by an earlier run (unchanged, same course version)."""
    result: ClassResult = field(default_factory=lambda: ClassResult([], [], 0, Path(), Path()))
    registration: Future[None] | None = None
    """The assignments' registration in the gradebook, done while the notebooks run (:func:`register`)."""

    @property
    def assignments(self) -> list[Assignment]:
        return [self.course[n] for n in self.wanted]

    def fresh(self, outcomes: list[Outcome]) -> list[Outcome]:
        """The outcomes graded by this run (not skipped)."""
        seen = {id(o) for o in self.skipped}
        return [o for o in outcomes if id(o) not in seen]


def grade_class(inputs: Path, assignment: str = "all", root: Path = COURSE, solutions: Path = SOLUTIONS,
                **options: Any) -> ClassResult:  # fmt: skip
    """Grade every submission in ``inputs`` for one assignment (or ``all``); write every output.

    ``options`` are the fields of :class:`Options`. With a ``scheduler`` the notebooks run on that Dask
    cluster's workers (:mod:`autograder.engine.distributed`; ``workers`` is then how many are in flight
    at once, by default the cluster's worker threads); everything else stays here.

    Raises :class:`~autograder.engine.gradebook.GradebookError`,
    :class:`~autograder.engine.roster.RosterError` or (with a scheduler that cannot be reached)
    :class:`~autograder.engine.distributed.ClusterUnavailable` before grading anything.
    """
    run = Run(inputs, Options(assignment, root, solutions, **options))
    for step in BEFORE_GRADING:
        step(run)
    try:
        for step in GRADING:
            step(run)
    finally:
        run.grader.close()
        if run.scratch:
            shutil.rmtree(run.scratch, ignore_errors=True)
    for step in AFTER_GRADING:
        step(run)
    return run.result


# -- the steps, in order ------------------------------------------------------------------------------


def check_gradebook(run: Run) -> None:
    """Reach the gradebook before anything else (a wrong URL grades nothing)."""
    o = run.options
    if o.db_url is None:
        o.root.mkdir(parents=True, exist_ok=True)
    run.db = gradebook.check_database(o.db_url or f"sqlite:///{o.root / 'gradebook.db'}")


def read_roster(run: Run) -> None:
    """Read the roster, if any, and keep a copy of it in the course."""
    roster = run.options.roster
    if roster:
        run.people = load_roster(roster)
        (run.options.root / "autograder").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(roster, run.options.root / "autograder" / outputs.ROSTER_COPY)


def build_course(run: Run) -> None:
    """The course's current sources and releases, and which assignments this run grades."""
    o = run.options
    run.course = {a.name: a for a in ensure_course(o.root, o.solutions, run.db)}
    if o.assignment != "all" and o.assignment not in run.course:
        raise SystemExit(f"unknown assignment {o.assignment!r}; the course has: {', '.join(run.course)}")
    run.wanted = list(run.course) if o.assignment == "all" else [o.assignment]


def start_grader(run: Run) -> None:
    """The grader, with its executor: this machine's runners, or a Dask cluster's workers."""
    o = run.options
    use_jail, workers = o.use_jail, o.workers
    run.executor = o.executor
    if o.scheduler:
        from autograder.engine.distributed import DaskExecutor

        # The workers jail their kernels (a worker that cannot gets no notebook) unless told not to.
        use_jail = True if use_jail is None else use_jail
        run.executor = DaskExecutor(o.scheduler, jailed=use_jail)
        workers = workers or run.executor.slots()
    run.grader = Grader(o.root, run.assignments, o.limits, workers, use_jail, seeds=o.seeds,
                        withhold_flagged=o.withhold_flagged, executor=run.executor)  # fmt: skip


def take_in(run: Run) -> None:
    """Intake: every input file a submission or a rejection with its reason; the roster applied."""
    root = run.options.root
    answer_cells = {name: run.grader.answer_cells(name) for name in run.wanted}
    run.scratch = Path(tempfile.mkdtemp(prefix="intake-"))
    found, rejected = discover(run.inputs, run.wanted, answer_cells, run.scratch, course=list(run.course))
    run.result = ClassResult([], rejected, len(found) + len(rejected), Path(), Path())
    run.submissions = _check_roster(found, rejected, run.people)
    now = run.started.replace(tzinfo=None)
    run.result.notes = intake_warnings(run.submissions, release_times(root, run.wanted), now)


def register(run: Run) -> None:
    """Register the assignments in the gradebook, as nbgrader's ``generate_assignment`` does, in a thread
    while the notebooks run: it needs none of their scores, and nbgrader's ``SaveCells`` takes a fifth of
    a second a notebook (at the end of a run, with nothing beside it). :func:`record_scores` waits for it."""
    o = run.options
    due = {n: o.due for n in run.wanted} if o.due else None
    thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="register")
    run.registration = thread.submit(gradebook.register, run.db, o.root, run.assignments, due)
    thread.shutdown(wait=False)


def grade_submissions(run: Run) -> None:
    """Grade what is new or changed (in parallel, with a progress bar); skip what is done."""
    bar = Progress(len(run.submissions)) if run.options.progress else None

    def show(outcome: Outcome, was_skipped: bool) -> None:
        if was_skipped:
            run.skipped.append(outcome)
        if bar:
            bar(outcome, was_skipped)

    result = run.result
    result.outcomes = run.grader.grade_all(run.submissions, run.options.force, show)
    result.interrupted, result.lost = run.grader.stopping.is_set(), run.grader.lost
    refused = getattr(run.executor, "refused", {})
    result.notes += [
        f"the Dask worker {w} got no notebook of this run: it {r}" for w, r in sorted(refused.items())
    ]


def hold_back_systemic(run: Run) -> None:
    """When most of this run's notebooks failed the environment's way, hold only those back (not
    stored: the next run grades them again); a result graded normally is kept, whatever the others did."""
    systemic = systemic_failure(run.fresh(run.result.outcomes))
    if not systemic:
        return
    held = {id(o) for o in systemic.held_back}
    by_key = {(s.student, s.assignment): s for s in run.submissions}
    for o in systemic.held_back:
        run.grader.forget(by_key[(o.student, o.assignment)])
    run.result.systemic = systemic.sentence
    run.result.outcomes = [o for o in run.result.outcomes if id(o) not in held]


def write_submitted(run: Run) -> None:
    """The submitted notebooks into the course directory, as nbgrader keeps them."""
    paths = {(s.student, s.assignment): s.path for s in run.submissions}
    outputs.write_submitted(run.options.root, run.fresh(run.result.outcomes), paths, run.course)


def record_scores(run: Run) -> None:
    """The scores into the gradebook; a failure is stated, and the outputs are still written."""
    o = run.options
    try:
        if run.registration is not None:
            run.registration.result()  # raises what the registration raised
        gradebook.record(run.db, run.result.outcomes, run.course, run.people, o.late_penalty)
    except Exception as exc:  # noqa: BLE001 - the outputs are still written, the failure stated
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        run.result.gradebook_error = (
            f"the scores could not be written to the gradebook ({type(exc).__name__}: {first}); the results "
            "are kept, and running the same command again writes them"
        )


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


def write_outputs(run: Run) -> None:
    """Record the run in the course's ledger and write the course's outputs from the gradebook."""
    result, o = run.result, run.options
    warnings = [w for w in (result.systemic, result.gradebook_error) if w] + result.notes
    graded_now = len(run.fresh(result.outcomes))  # held-back ones are not in it
    not_graded = len(run.submissions) - graded_now - len(run.skipped)
    if result.interrupted and not_graded == 0:
        # Ctrl-C once while the last notebooks ran: they finished, nothing is left to grade.
        result.interrupted, result.lost = False, None
    if result.interrupted:
        why = f"the run stopped ({result.lost})" if result.lost else "the run was interrupted"
        # --force would grade again what this run graded: the resuming command is the one without it
        again = "the same command without --force" if o.force else "the same command again"
        warnings.append(
            f"{why}: {not_graded} submissions were not graded. Run {again} to grade them (what was "
            "graded is kept and not graded twice)"
        )
    outputs.record_run(
        o.root,
        {
            "time": run.started.isoformat(),
            "assignment": o.assignment,
            "inputs": run.inputs.name,
            "counts": {
                "inputs": result.inputs,
                "graded": graded_now,
                "skipped": len(run.skipped),
                "not_graded": not_graded,
                "rejected": sum(1 for r in result.rejected if not r.other_assignment),
                "other": sum(1 for r in result.rejected if r.other_assignment),
            },
            "rejected": [outputs.rejected_dict(r) for r in result.rejected],
            "note": "; ".join(_headline(w) for w in warnings),
        },
    )
    report = outputs.write_report(o.root, run.db, o.out or o.root / "grading", run.course, warnings)
    this_run = {(x.student, x.assignment) for x in result.outcomes}
    result.outcomes = [x for x in report.outcomes if (x.student, x.assignment) in this_run]
    result.files, result.warnings = report.files, report.warnings  # with what the report found
    result.summary, result.grades_csv = report.files["summary"], report.files["grades"]


#: The steps of :func:`grade_class`, in order: what happens before the grader starts, while it holds its
#: runners (closed after the last, however it ends), and after.
BEFORE_GRADING = (check_gradebook, read_roster, build_course, start_grader)
GRADING = (take_in, register, grade_submissions, hold_back_systemic, write_submitted)
AFTER_GRADING = (record_scores, write_outputs)


def report_course(
    root: Path = COURSE, solutions: Path = SOLUTIONS, db_url: str | None = None, out: Path | None = None
) -> outputs.Report:
    """Write every output of the course again from the gradebook, without grading anything."""
    db = gradebook.normalize_url(db_url or f"sqlite:///{root / 'gradebook.db'}")
    by_name = {a.name: a for a in assignments(solutions)}
    return outputs.write_report(root, db, out or root / "grading", by_name)


def grade_alone(
    path: Path, assignment: str, solutions: Path = SOLUTIONS, use_jail: bool | None = None, sha256: str = ""
) -> Outcome:
    """Grade one notebook of ``assignment`` as the instructor's grader does (hidden tests on fresh
    seeds, jailed where the machine allows), outside any course directory of the instructor's: the
    Gradescope autograder's path (:mod:`autograder.engine.gradescope`). ``sha256`` is the notebook's
    when intake has read it already (:attr:`~autograder.engine.intake.Submission.sha256`)."""
    course = {a.name: a for a in assignments(solutions)}
    if assignment not in course:
        raise CourseError(f"unknown assignment {assignment!r}; the course has: {', '.join(course)}")
    a = course[assignment]
    root = Path(tempfile.mkdtemp(prefix="grade-one-"))
    try:
        ensure_course(root, solutions, only=[a.name])
        grader = Grader(root, [a], Limits(), 1, use_jail)
        try:
            return grader.grade_one(Submission("you", a.name, path, str(path), sha256=sha256))
        finally:
            grader.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
