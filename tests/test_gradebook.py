"""The instructor's workflow through nbgrader's own tools, on SQLite and on a real PostgreSQL server.

A Canvas export (two students named Wang Wei, a hyphenated and a non-ASCII name, a resubmission, a
LATE file, a student missing from the roster) is graded with the class roster and a due date into a
gradebook that does not know the course yet; then a Moodle export (two Jane Does) into the same
course. Everything is then asserted through nbgrader's API, as formgrader and ``nbgrader export``
see it: submissions counted, nothing needing manual grading, students named, late penalties applied,
export totals equal to the engine's, a manual score in every output and kept by a regrade, and
nbgrader's own feedback without hidden tests.
"""

from __future__ import annotations

import csv
import datetime as dt
import uuid
import zipfile
from pathlib import Path

import nbformat
import postgres
import pytest
from notebook_helpers import source_and_release
from test_engine import FIXTURE, LIMITS, blank_answer, solved

from autograder.course.build import nbgrader_config
from autograder.engine.gradebook import GradebookError, feedback_config
from autograder.engine.lms import canvas_file_name, moodle_file_name
from autograder.engine.outcome import CellResult
from autograder.engine.pipeline import ensure_course, grade_class, report_course

TINY = "01_tiny"
DUE = "2026-10-01 00:00:00 UTC"
ON_TIME = (2026, 9, 30, 12, 0, 0)
LATE = (2026, 10, 2, 9, 30, 0)
ROSTER = """Student,ID,SIS User ID,SIS Login ID,Section,01_tiny (4411)
    Points Possible,,,,,7
"Wang, Wei",101,S101,wwang1@uni.example,Section A,
"Wang, Wei",102,S102,wwang2@uni.example,Section B,
"Smith-Jones, Anna",103,S103,asj@uni.example,Section A,
"Müller, Jürgen",104,S104,jm@uni.example,Section A,
"Lee, Late",105,S105,ll@uni.example,Section B,
"""
#: canvas id -> (final score, raw score) with the late file zeroed by nbgrader's "zero" penalty
EXPECTED = {"101": (7, 7), "102": (4, 4), "103": (7, 7), "104": (7, 7), "105": (0, 7)}


@pytest.fixture(scope="module")
def pg_url(tmp_path_factory: pytest.TempPathFactory):
    """A PostgreSQL server for this module (run, never skipped: `make test` installs it)."""
    assert postgres.available(), "no PostgreSQL server is installed (apt-get install postgresql)"
    with postgres.server(tmp_path_factory.mktemp("pg") / "server") as url:
        postgres.wait_ready(url)
        yield url


def database(kind: str, folder: Path, request: pytest.FixtureRequest) -> str:
    """An empty gradebook database of ``kind``."""
    if kind == "sqlite":
        return f"sqlite:///{folder / 'elsewhere.db'}"
    return postgres.create_database(request.getfixturevalue("pg_url"), f"gb_{uuid.uuid4().hex[:8]}")


def canvas_export(path: Path, source, release) -> None:
    """A Canvas submissions.zip as "Download Submissions" makes it."""
    good, blank = solved(source, release), release
    half = blank_answer(good, release, "mse_loss")
    files = [
        (canvas_file_name("wangwei", 101, 9001, "01_tiny.ipynb"), good, ON_TIME),
        (canvas_file_name("wangwei", 102, 9002, "01_tiny.ipynb"), half, ON_TIME),
        (canvas_file_name("smith-jonesanna", 103, 9003, "01_tiny.ipynb"), good, ON_TIME),
        (canvas_file_name("müllerjürgen", 104, 9004, "01_tiny.ipynb"), blank, ON_TIME),
        (canvas_file_name("müllerjürgen", 104, 9010, "01_tiny.ipynb", resubmission=1), good, ON_TIME),
        (canvas_file_name("leelate", 105, 9005, "01_tiny.ipynb", late=True), good, LATE),
        (canvas_file_name("strangerdan", 999, 9006, "01_tiny.ipynb"), good, ON_TIME),
    ]
    with zipfile.ZipFile(path, "w") as zf:
        for name, nb, when in files:
            zf.writestr(zipfile.ZipInfo(name, when), nbformat.writes(nb))


def moodle_export(folder: Path, source, release) -> None:
    """A Moodle "Download all submissions" folder: two Jane Does, one file in Moodle's folder form."""
    good = solved(source, release)
    folder.mkdir(parents=True)
    nbformat.write(good, folder / moodle_file_name("Jane Doe", 201, "01_tiny.ipynb"))
    nbformat.write(release, folder / moodle_file_name("Jane Doe", 202, "01_tiny.ipynb"))
    inner = folder / "Zoë O'Neil-Brown_203_assignsubmission_file_"
    inner.mkdir()
    nbformat.write(good, inner / "01_tiny.ipynb")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def course(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """A course built with its own SQLite gradebook, then graded into another, empty, gradebook."""
    base = tmp_path_factory.mktemp(request.param)
    root = base / "course"
    ensure_course(root, FIXTURE)  # registers the assignment in course/gradebook.db only
    db = database(request.param, base, request)
    source, release = source_and_release(root, TINY)
    canvas_export(base / "submissions.zip", source, release)
    (base / "roster.csv").write_text(ROSTER, encoding="utf-8")
    canvas = grade_class(
        base / "submissions.zip", TINY, root, FIXTURE, workers=2, db_url=db, limits=LIMITS,
        progress=False, roster=base / "roster.csv", due=DUE, late_penalty="zero",
    )  # fmt: skip
    moodle_export(base / "moodle", source, release)
    moodle = grade_class(
        base / "moodle", TINY, root, FIXTURE, workers=2, db_url=db, limits=LIMITS, progress=False
    )
    return root, db, canvas, moodle


def graded_rows(root: Path) -> dict[str, dict[str, str]]:
    """The engine's grades.csv rows of graded submissions, by student."""
    rows = csv.DictReader((root / "grading" / "grades.csv").open(encoding="utf-8"))
    return {r["student"]: r for r in rows if r["status"] in ("graded", "stopped")}


def api(root: Path, db: str, hide_hidden_tests: bool = True):
    from nbgrader.apps import NbGraderAPI

    c = nbgrader_config(root, db)
    if hide_hidden_tests:
        feedback_config(c)
    return NbGraderAPI(config=c)


def test_every_file_is_accounted_for_and_no_two_students_merge(course) -> None:
    _, _, canvas, moodle = course
    assert canvas.ok and moodle.ok
    assert {o.student: o.score for o in canvas.outcomes} == {f"canvas-{k}": v[0] for k, v in EXPECTED.items()}
    assert {o.student: o.score for o in moodle.outcomes} == {
        "moodle-201": 7,
        "moodle-202": 0,
        "moodle-203": 7,
    }
    reasons = {r.origin: r.reason for r in canvas.rejected}
    assert reasons == {
        "submissions.zip:müllerjürgen_104_9004_01_tiny.ipynb": "superseded by a later file for the same "
        "student: submissions.zip:müllerjürgen_104_9010_01_tiny-1.ipynb",
        "submissions.zip:strangerdan_999_9006_01_tiny.ipynb": "student canvas-999 (strangerdan) is not on "
        "the roster roster.csv",
    }
    assert canvas.inputs == 7 and moodle.inputs == 3


def test_formgrader_counts_every_submission_and_none_needs_manual_grading(course) -> None:
    root, db, _, _ = course
    a = api(root, db)
    assert a.get_assignment(TINY)["num_submissions"] == 8
    subs = {s["student"]: s for s in a.get_submissions(TINY)}
    assert set(subs) == {f"canvas-{k}" for k in EXPECTED} | {"moodle-201", "moodle-202", "moodle-203"}
    assert all(s["autograded"] and not s["needs_manual_grade"] for s in subs.values())
    assert (subs["canvas-101"]["first_name"], subs["canvas-101"]["last_name"]) == ("Wei", "Wang")
    assert (subs["canvas-103"]["first_name"], subs["canvas-103"]["last_name"]) == ("Anna", "Smith-Jones")
    assert (subs["canvas-104"]["first_name"], subs["canvas-104"]["last_name"]) == ("Jürgen", "Müller")
    assert (subs["moodle-202"]["first_name"], subs["moodle-202"]["last_name"]) == ("Jane", "Doe")
    assert (subs["moodle-203"]["first_name"], subs["moodle-203"]["last_name"]) == ("Zoë", "O'Neil-Brown")
    notebooks = a.get_notebook_submissions(TINY, TINY)
    assert len(notebooks) == 8 and not any(n["needs_manual_grade"] for n in notebooks)


def nbgrader_export(db: str, path: Path) -> dict[str, dict[str, str]]:
    from nbgrader.api import Gradebook
    from nbgrader.plugins import CsvExportPlugin

    from autograder.course.build import COURSE_ID

    with Gradebook(db, COURSE_ID) as gb:
        CsvExportPlugin(to=str(path)).export(gb)
    return {row["student_id"]: row for row in csv.DictReader(path.open(encoding="utf-8"))}


def test_nbgrader_export_gives_the_engine_totals_with_late_penalties(course, tmp_path: Path) -> None:
    root, db, _, _ = course
    rows = nbgrader_export(db, tmp_path / "export.csv")
    for uid, (final, raw) in EXPECTED.items():
        row = rows[f"canvas-{uid}"]
        assert (float(row["score"]), float(row["raw_score"])) == (final, raw), row
    assert float(rows["canvas-105"]["late_submission_penalty"]) == 7
    assert rows["canvas-101"]["timestamp"].startswith("2026-09-30 12:00:00")
    assert rows["canvas-105"]["timestamp"].startswith("2026-10-02 09:30:00")
    assert rows["canvas-101"]["email"] == "wwang1@uni.example"
    engine = graded_rows(root)
    for student, row in rows.items():
        assert float(engine[student]["score"]) == float(row["score"]), student
    assert engine["canvas-105"]["late"] == "late"
    assert engine["canvas-105"]["adjustment"] == "late penalty of 7 points"


def test_outputs_describe_the_course_and_name_every_student(course) -> None:
    root, _, _, _ = course
    rows = list(csv.DictReader((root / "grading" / "grades.csv").open(encoding="utf-8")))
    assert len(rows) == 10  # 8 submissions of two runs, the superseded file and the stranger's
    assert all(r["student"] for r in rows)
    summary = (root / "grading" / "summary.md").read_text(encoding="utf-8")
    assert summary.count("| submissions.zip |") == 1 and summary.count("| moodle |") == 1
    assert "8 submissions in the course" in summary
    worksheet = list(csv.reader((root / "grading" / f"moodle_worksheet_{TINY}.csv").open(encoding="utf-8")))
    assert [(r[0], r[1], r[4]) for r in worksheet[1:]] == [
        ("Participant 201", "Jane Doe", "7"),
        ("Participant 202", "Jane Doe", "0"),
        ("Participant 203", "Zoë O'Neil-Brown", "7"),
    ]


def test_a_manual_score_reaches_every_output_and_survives_a_regrade(course, tmp_path: Path) -> None:
    from nbgrader.api import Gradebook

    from autograder.course.build import COURSE_ID

    root, db, _, _ = course
    with Gradebook(db, COURSE_ID) as gb:  # what formgrader does when the instructor changes a score
        grade = gb.find_grade("test_mse_loss", TINY, TINY, "canvas-102")
        grade.manual_score = 3.0
        gb.db.commit()
    report_course(root, FIXTURE, db)
    again = grade_class(
        root.parent / "submissions.zip", TINY, root, FIXTURE,
        workers=2, db_url=db, limits=LIMITS, progress=False, force=True,
        roster=root.parent / "roster.csv", due=DUE, late_penalty="zero",
    )  # fmt: skip
    assert {o.student: o.score for o in again.outcomes}["canvas-102"] == 7
    grades = graded_rows(root)
    assert grades["canvas-102"]["score"] == "7" and grades["canvas-102"]["automatic_score"] == "4"
    assert grades["canvas-102"]["adjustment"] == "adjusted by the instructor to 7 (automatic score 4)"
    totals = {
        r["student"]: r for r in csv.DictReader((root / "grading" / "totals.csv").open(encoding="utf-8"))
    }
    assert totals["canvas-102"]["total"] == "7"
    canvas = list(csv.reader((root / "grading" / "canvas_import.csv").open(encoding="utf-8")))
    assert canvas[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", TINY, "Final Points"]
    assert canvas[1][0] == "Points Possible" and canvas[1][5] == "7"
    assert canvas[2:] == [
        ["Wang, Wei", "101", "S101", "wwang1@uni.example", "Section A", "7", "7"],
        ["Wang, Wei", "102", "S102", "wwang2@uni.example", "Section B", "7", "7"],
        ["Smith-Jones, Anna", "103", "S103", "asj@uni.example", "Section A", "7", "7"],
        ["Müller, Jürgen", "104", "S104", "jm@uni.example", "Section A", "7", "7"],
        ["Lee, Late", "105", "S105", "ll@uni.example", "Section B", "0", "0"],
    ]
    page = (root / "feedback" / "canvas-102" / TINY / f"{TINY}.html").read_text(encoding="utf-8")
    assert "Score: 7 / 7" in page and "Adjusted by the instructor to 7" in page
    assert nbgrader_export(db, tmp_path / "export.csv")["canvas-102"]["score"] == "7.0"


@pytest.mark.parametrize("hide_hidden_tests", [True, False], ids=["course-config", "nbgrader-defaults"])
def test_nbgrader_feedback_never_shows_hidden_tests(course, hide_hidden_tests: bool) -> None:
    """formgrader's "Generate Feedback" runs nbgrader's generate_feedback: with the course's config and
    with nbgrader's defaults, its page holds no hidden test (the engine's executed notebook has none)."""
    root, db, _, _ = course
    result = api(root, db, hide_hidden_tests).generate_feedback(TINY, "canvas-101", force=True)
    assert result["success"], result
    page = (root / "feedback" / "canvas-101" / TINY / f"{TINY}.html").read_text(encoding="utf-8")
    assert "check_linear_layer" in page, "nbgrader's page shows the visible test cells"
    assert "seed=7" not in page and "HIDDEN" not in page


def test_the_course_config_strips_hidden_tests_nbgrader_would_otherwise_show(course) -> None:
    """Even an executed notebook that holds the hidden tests (graded by nbgrader's own autograde, say)
    gives feedback without them under the course's nbgrader configuration."""
    root, db, _, _ = course
    executed = root / "autograded" / "canvas-103" / TINY / f"{TINY}.ipynb"
    nb = nbformat.read(executed, as_version=4)
    source = nbformat.read(root / "source" / TINY / f"{TINY}.ipynb", as_version=4)
    tests = {c.id: c.source for c in source.cells if c.metadata.get("nbgrader", {}).get("grade")}
    for cell in nb.cells:
        cell.source = tests.get(cell.get("id"), cell.source)
    nbformat.write(nb, executed)
    assert "seed=7" in executed.read_text()
    assert api(root, db).generate_feedback(TINY, "canvas-103", force=True)["success"]
    page = (root / "feedback" / "canvas-103" / TINY / f"{TINY}.html").read_text(encoding="utf-8")
    assert "check_mse_loss" in page and "seed=7" not in page


# -- the gradebook is checked before anything is graded ------------------------------------------------


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_a_gradebook_that_cannot_be_used_stops_the_run_before_grading(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    import sqlalchemy

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "jane_01_tiny.ipynb").write_text("{}")
    root = tmp_path / "course"
    if kind == "sqlite":
        bad = [("sqlite:////nonexistent/folder/gradebook.db", "unable to open database file")]
        foreign = f"sqlite:///{tmp_path / 'other.db'}"
    else:
        server = request.getfixturevalue("pg_url")
        bad = [(server.rsplit("/", 1)[0] + "/nosuch", 'database "nosuch" does not exist')]
        foreign = postgres.create_database(server, f"other_{uuid.uuid4().hex[:8]}")
    bad.append(("not a url", "is not a database URL"))
    engine = sqlalchemy.create_engine(foreign.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("CREATE TABLE payroll (id INTEGER)"))
    engine.dispose()
    bad.append((foreign, "holds tables that are not nbgrader's gradebook (payroll)"))
    for url, why in bad:
        with pytest.raises(GradebookError, match=why.replace("(", r"\(").replace(")", r"\)")):
            grade_class(inbox, TINY, root, FIXTURE, workers=1, db_url=url, limits=LIMITS, progress=False)
        assert not (root / "autograder" / "results").exists(), "nothing was graded"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_outputs_are_written_when_the_gradebook_step_fails(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A gradebook that can be read but not written (a read-only SQLite file, a PostgreSQL user with
    read rights only): the run grades, writes its outputs, and says the scores are not in the gradebook."""
    import sqlalchemy
    from nbgrader.api import Gradebook

    root = tmp_path / "course"
    ensure_course(root, FIXTURE)
    if kind == "sqlite":
        Gradebook(f"sqlite:///{tmp_path / 'ro.db'}").close()
        db = f"sqlite:///file:{tmp_path / 'ro.db'}?mode=ro&uri=true"
    else:
        owner = postgres.create_database(request.getfixturevalue("pg_url"), f"ro_{uuid.uuid4().hex[:8]}")
        Gradebook(owner.replace("postgresql://", "postgresql+psycopg://")).close()
        engine = sqlalchemy.create_engine(owner.replace("postgresql://", "postgresql+psycopg://"))
        with engine.begin() as conn:
            conn.execute(sqlalchemy.text("CREATE ROLE reader LOGIN"))
            conn.execute(sqlalchemy.text("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader"))
        engine.dispose()
        db = owner.replace("postgres@", "reader@")
    source, release = source_and_release(root, TINY)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(solved(source, release), inbox / "ada_01_tiny.ipynb")
    result = grade_class(inbox, TINY, root, FIXTURE, workers=1, db_url=db, limits=LIMITS, progress=False)
    assert result.gradebook_error and "could not be written to the gradebook" in result.gradebook_error
    assert not result.ok
    summary = result.summary.read_text(encoding="utf-8")
    assert "WARNING: the scores could not be written to the gradebook" in summary
    rows = list(csv.DictReader(result.grades_csv.open(encoding="utf-8")))
    assert [(r["student"], r["score"]) for r in rows] == [("ada", "7")]
    assert (root / "feedback" / "ada" / TINY / f"{TINY}.html").exists()


def test_a_due_date_is_stored_for_nbgrader(course) -> None:
    from nbgrader.api import Gradebook

    from autograder.course.build import COURSE_ID

    _, db, _, _ = course
    with Gradebook(db, COURSE_ID) as gb:
        assert gb.find_assignment(TINY).duedate == dt.datetime(2026, 10, 1)
        assert gb.find_submission(TINY, "canvas-105").total_seconds_late == pytest.approx(120600)


def test_the_schema_version_is_the_one_nbgrader_asks_alembic_for() -> None:
    from nbgrader.api import get_alembic_version

    from autograder.course.build import ensure_tools_on_path
    from autograder.engine.gradebook import schema_version

    ensure_tools_on_path()
    assert schema_version() == get_alembic_version()


def test_a_new_gradebook_is_stamped_without_running_alembic(tmp_path: Path, monkeypatch) -> None:
    """nbgrader stamps a new gradebook with the version it asks of the ``alembic`` command (about 2 s
    of CPU at the end of a course's first run): the engine's gradebook gets the same stamp without it."""
    import nbgrader.api as api
    from sqlalchemy import create_engine, text

    from autograder.course import assignments
    from autograder.engine.gradebook import register, schema_version

    root = tmp_path / "course"
    ensure_course(root, FIXTURE)
    commands = []
    monkeypatch.setattr(api.sp, "check_output", lambda command, **kw: commands.append(command) or b"")
    asked = api.get_alembic_version
    db = f"sqlite:///{tmp_path / 'new.db'}"
    register(db, root, assignments(FIXTURE))
    assert commands == [] and api.get_alembic_version is asked
    engine = create_engine(db)
    with engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == schema_version()
    engine.dispose()


def test_a_class_is_written_in_one_transaction_all_or_nothing(course) -> None:
    """One commit per class whatever its size, the same scores as before; and a class whose writing fails
    half-way leaves the gradebook as it was."""
    import copy
    import dataclasses

    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from autograder.course.build import assignments
    from autograder.engine.gradebook import final_scores, record
    from autograder.engine.roster import load_roster

    root, db, canvas, _ = course
    people = load_roster(root.parent / "roster.csv")
    by_name = {a.name: a for a in assignments(FIXTURE)}
    outcomes = [o for o in canvas.outcomes if o.status != "failed"]
    assert len(outcomes) >= 4
    before = final_scores(db)
    commits: list[int] = []

    def count(conn) -> None:
        commits.append(1)

    event.listen(Engine, "commit", count)
    try:
        record(db, outcomes[:1], by_name, people, "zero")
        one = len(commits)
        record(db, outcomes, by_name, people, "zero")
        assert len(commits) - one == one
    finally:
        event.remove(Engine, "commit", count)
    assert final_scores(db) == before

    zeroed = dataclasses.replace(outcomes[0], cells=copy.deepcopy(outcomes[0].cells))
    for cell in zeroed.cells:
        cell.score = 0.0
    broken = dataclasses.replace(outcomes[1], cells=[CellResult("no-such-cell", 1.0, 1.0, "")])
    with pytest.raises(Exception, match="no-such-cell|No such"):
        record(db, [zeroed, broken], by_name, people, "zero")
    assert final_scores(db) == before
