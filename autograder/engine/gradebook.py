"""nbgrader's gradebook as the one source of truth for scores.

The engine writes every graded submission into nbgrader's gradebook the way nbgrader's own
``autograde`` would: the student (with a name, an email and the LMS user id when a roster gives
them), the submission with its time stamp (so nbgrader's late-penalty plugin applies), every graded
cell's automatic score with ``needs_manual_grade`` off. formgrader then agrees: nothing is flagged
for manual grading, and a score the instructor changes there is a manual score that survives a
regrade. Every output (grades CSV, summary, per-student totals, LMS files, the learner's feedback
page) reads its final scores back from here with :func:`final_scores`, as ``nbgrader export`` does:
the automatic score unless a manual one replaced it, minus the late penalty.

The database is checked before anything is graded (:func:`check_database`): a URL that cannot be
parsed, a server that cannot be reached, a missing driver, or a schema that is not nbgrader's is a
:class:`GradebookError` with a sentence saying so.
"""

from __future__ import annotations

import datetime as dt
import functools
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from autograder.course import COURSE_ID, Assignment
from autograder.course.build import ensure_tools_on_path

if TYPE_CHECKING:
    from nbgrader.api import Gradebook

    from autograder.engine.outcome import Outcome
    from autograder.engine.roster import Roster


class GradebookError(RuntimeError):
    """The gradebook cannot be used; the message says why, in one sentence."""


def normalize_url(db_url: str) -> str:
    """``postgresql://`` means the driver this project pins (psycopg 3), not SQLAlchemy's default
    psycopg2, which is not installed."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(db_url)
    except ArgumentError as exc:
        raise GradebookError(f"the gradebook URL {db_url!r} is not a database URL ({exc})") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def _quiet() -> None:
    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning)


def check_database(db_url: str) -> str:
    """Make sure the gradebook at ``db_url`` can be used before grading starts; return the URL to use.

    An empty database is fine (nbgrader creates its tables); a database with tables must hold
    nbgrader's schema at the version this nbgrader expects.
    """
    from sqlalchemy import create_engine, inspect, text
    from sqlalchemy.exc import NoSuchModuleError, SQLAlchemyError

    ensure_tools_on_path()  # nbgrader runs ``alembic`` as a command to learn its schema version
    url = normalize_url(db_url)
    shown = _hide_password(url)
    try:
        engine = create_engine(url, future=True)
    except (NoSuchModuleError, ImportError) as exc:
        raise GradebookError(f"no database driver for {shown} is installed ({exc})") from None
    try:
        with engine.connect() as conn:
            tables = set(inspect(conn).get_table_names())
            if not tables:
                return url
            if "alembic_version" not in tables or "assignment" not in tables:
                raise GradebookError(
                    f"the database {shown} holds tables that are not nbgrader's gradebook "
                    f"({', '.join(sorted(tables)[:5])}); give an empty database or an nbgrader gradebook"
                )
            found = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except SQLAlchemyError as exc:
        first = str(exc.orig if getattr(exc, "orig", None) else exc).strip().splitlines()[0]
        raise GradebookError(f"cannot use the gradebook database {shown}: {first}") from None
    finally:
        engine.dispose()
    expected = schema_version()
    if found != expected:
        raise GradebookError(
            f"the gradebook {shown} has nbgrader schema version {found}, this nbgrader expects "
            f"{expected}: run `nbgrader db upgrade` on it first"
        )
    return url


@contextmanager
def opened(db_url: str) -> Iterator[Gradebook]:
    """nbgrader's gradebook at ``db_url``, open.

    On a new database nbgrader stamps the schema version, which it asks of the ``alembic`` command: a
    process of about 2 s of CPU, at the end of a course's first run, when nothing else is left to
    run beside it. Here nbgrader is given :func:`schema_version` instead, the same answer read from
    its migration scripts (``tests/test_gradebook.py`` compares the two), while the gradebook opens.
    """
    import nbgrader.api as api

    version = schema_version()
    asked, api.get_alembic_version = api.get_alembic_version, lambda: version
    try:
        gradebook = api.Gradebook(db_url, COURSE_ID)
    finally:
        api.get_alembic_version = asked
    with gradebook as gb:
        yield gb


@functools.cache
def schema_version() -> str:
    """The gradebook schema version (alembic head revision) this nbgrader expects.

    nbgrader's own ``get_alembic_version`` asks it of the ``alembic`` command, a process that costs
    about 2 s; the same head is read here from nbgrader's migration scripts (the one revision no other
    revision follows), without running them. Anything unexpected falls back to nbgrader's way.
    """
    import ast
    import importlib.util

    # Found, not imported: importing nbgrader imports its server extensions (about 1.5 s), which the
    # gradebook step after grading pays for beside the kernels (autograder.grading.warm_up's thread).
    spec = importlib.util.find_spec("nbgrader")
    folders = list(spec.submodule_search_locations or []) if spec else []
    revisions: dict[str, set[str]] = {}
    for script in (Path(folders[0]) / "alembic" / "versions").glob("*.py") if folders else []:
        values = {}
        for node in ast.parse(script.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                if node.targets[0].id in ("revision", "down_revision"):
                    values[node.targets[0].id] = ast.literal_eval(node.value)
        if isinstance(values.get("revision"), str):
            down = values.get("down_revision")
            revisions[values["revision"]] = set(
                down if isinstance(down, (tuple, list)) else [down] if down else []
            )
    heads = set(revisions) - set().union(*revisions.values()) if revisions else set()
    if len(heads) == 1:
        return heads.pop()
    from nbgrader.api import get_alembic_version

    return get_alembic_version()


def _hide_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def register(
    db_url: str, root: Path, assignments: list[Assignment], due: dict[str, str] | None = None
) -> None:
    """Register each assignment, its notebook and its cells in the gradebook, as nbgrader's
    ``generate_assignment`` does (with nbgrader's own ``SaveCells``): in an empty gradebook or an
    existing one, any number of times."""
    import nbformat
    from nbgrader.preprocessors import SaveCells

    _quiet()
    for a in assignments:
        with opened(db_url) as gb:
            duedate = (due or {}).get(a.name)
            if duedate:
                gb.update_or_create_assignment(a.name, duedate=_parse_time(duedate))
            else:
                gb.update_or_create_assignment(a.name)
        nb = nbformat.read(root / "source" / a.name / a.notebook, as_version=4)
        resources = {"nbgrader": {"notebook": Path(a.notebook).stem, "assignment": a.name, "db_url": db_url}}
        SaveCells().preprocess(nb, resources)


def _parse_time(text: str) -> dt.datetime:
    from nbgrader.utils import parse_utc

    return parse_utc(text)


def record(
    db_url: str,
    outcomes: list[Outcome],
    assignments: dict[str, Assignment],
    roster: Roster | None = None,
    penalty_method: str = "none",
) -> None:
    """Store every graded outcome as nbgrader's autograde would: student, submission time, cell
    scores (automatic, no manual grading needed) and the late penalty of nbgrader's plugin.

    A manual score the instructor gave in formgrader is kept: it is a separate column that a new
    automatic score does not touch.

    The class is written in one transaction (:func:`_one_transaction`): all of it or, when anything
    fails, none of it, and a commit (a disk sync on SQLite) per class rather than three per submission.
    """
    from nbgrader.api import MissingEntry
    from nbgrader.plugins import LateSubmissionPlugin

    _quiet()
    plugin = LateSubmissionPlugin(penalty_method=penalty_method)
    with opened(db_url) as gb, _one_transaction(gb.db):
        for o in outcomes:
            if o.status == "failed":
                continue
            notebook = Path(assignments[o.assignment].notebook).stem
            gb.update_or_create_student(o.student, **_person(o, roster))
            stamp = _parse_time(o.timestamp) if o.timestamp else None
            try:
                submission = gb.find_submission(o.assignment, o.student)
                submission.timestamp = stamp
            except MissingEntry:
                submission = gb.add_submission(o.assignment, o.student, timestamp=stamp)
            for cell in o.cells:
                grade = gb.find_grade(cell.grade_id, notebook, o.assignment, o.student)
                grade.auto_score = cell.score
                grade.needs_manual_grade = False
            gb.db.commit()
            nb = gb.find_submission_notebook(notebook, o.assignment, o.student)
            late = submission.total_seconds_late
            nb.late_submission_penalty = (
                plugin.late_submission_penalty(o.student, nb.score, late) if late > 0 else None
            )
            gb.db.commit()


@contextmanager
def _one_transaction(session) -> Iterator[None]:
    """Make nbgrader's API, which commits after each change, write into one transaction of ``session``.

    Inside, each of its commits only sends the changes (a flush) and expires what the session
    loaded, as a commit does, so that scores computed by the database (a notebook's total, which the
    late penalty uses) are read again; the one real commit comes at the end, or a rollback on error.
    """
    commit = session.commit

    def flush() -> None:
        session.flush()
        session.expire_all()

    session.commit = flush
    try:
        yield
    except BaseException:
        session.rollback()
        raise
    finally:
        del session.commit  # the class's own method again
    commit()


def _person(o: Outcome, roster: Roster | None) -> dict[str, str | None]:
    person = roster.find(o.student, o.lms, o.lms_id, o.name) if roster else None
    if person is not None:
        return {
            "first_name": person.first_name or None,
            "last_name": person.last_name or None,
            "email": person.email or None,
            "lms_user_id": person.lms_user_id or o.lms_id or None,
        }
    first, _, last = o.name.rpartition(" ") if " " in o.name else ("", "", o.name)
    return {
        "first_name": first or None,
        "last_name": last or o.student,
        "lms_user_id": o.lms_id if o.lms in ("canvas", "moodle") else None,
    }


@dataclass(frozen=True)
class Final:
    """A submission's final score as the gradebook holds it (``nbgrader export``'s numbers)."""

    student: str
    assignment: str
    raw_score: float
    late_penalty: float
    score: float
    max_score: float
    manual: bool
    """A manual score replaced at least one automatic one."""
    timestamp: str
    seconds_late: float
    first_name: str
    last_name: str
    email: str
    lms_user_id: str


def final_scores(db_url: str) -> dict[tuple[str, str], Final]:
    """Every submission's final score, keyed by (student, assignment), read from the gradebook."""
    _quiet()
    finals: dict[tuple[str, str], Final] = {}
    with opened(db_url) as gb:
        for assignment in gb.assignments:
            for sub in assignment.submissions:
                penalty = float(sub.late_submission_penalty or 0.0)
                manual = any(g.manual_score is not None for nb in sub.notebooks for g in nb.grades)
                student = sub.student
                finals[(student.id, assignment.name)] = Final(
                    student=student.id,
                    assignment=assignment.name,
                    raw_score=float(sub.score),
                    late_penalty=penalty,
                    score=max(0.0, float(sub.score) - penalty),
                    max_score=float(sub.max_score),
                    manual=manual,
                    timestamp=sub.timestamp.isoformat() if sub.timestamp else "",
                    seconds_late=float(sub.total_seconds_late),
                    first_name=student.first_name or "",
                    last_name=student.last_name or "",
                    email=student.email or "",
                    lms_user_id=student.lms_user_id or "",
                )
    return finals


def feedback_config(c) -> None:
    """Make nbgrader's own feedback (``nbgrader generate_feedback``, formgrader's "Generate Feedback")
    strip hidden tests from the notebooks it renders, whatever they hold."""
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from nbgrader.preprocessors import ClearHiddenTests, GetGrades

    c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
    c.ClearHiddenTests.enforce_metadata = False
