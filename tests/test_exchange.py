"""A class under nbgrader's own exchange, as JupyterHub runs it: students keep their ids end to end.

The instructor releases the tiny assignment with ``nbgrader release_assignment``; each student
(``jane.doe@uni.edu``, ``a__b``, ``José``, ``bob``: the logins an email or OAuth JupyterHub gives)
fetches it and submits it with nbgrader's own commands, in a home folder of their own; the
instructor collects with ``nbgrader collect`` and grades with ``python -m autograder grade`` (whose
own feedback pages ``nbgrader release_feedback`` can release as they are), makes nbgrader's
feedback with ``nbgrader generate_feedback`` and releases it with ``nbgrader release_feedback``;
each student then fetches their feedback with ``nbgrader fetch_feedback``.

nbgrader's exchange names a student from the operating system's user name (``JUPYTERHUB_USER`` only
for the ``jovyan`` user of JupyterHub's images); on one machine the test names each student with
nbgrader's ``--student`` option, which its exchange reads in place of that name. The exchange is a
folder (``Exchange.root``), as under JupyterHub; no network is used.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook
from notebook_helpers import source_and_release
from test_engine import FIXTURE, blank_answer, solved

from autograder.course.build import COURSE_ID
from autograder.engine.pipeline import ensure_course

TINY = "01_tiny"
#: student -> the score their submission earns (the tiny assignment has 7 points)
STUDENTS = {"jane.doe@uni.edu": 7.0, "a__b": 4.0, unicodedata.normalize("NFC", "José"): 7.0, "bob": 7.0}
BIN = Path(sys.executable).parent


def nbgrader(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """Run one of nbgrader's commands in ``cwd``, where its ``nbgrader_config.py`` is."""
    proc = subprocess.run(
        [str(BIN / "nbgrader"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
    )
    assert proc.returncode == 0, f"nbgrader {' '.join(args)}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def config(folder: Path, lines: list[str]) -> Path:
    """``folder`` with an ``nbgrader_config.py`` of ``lines``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "nbgrader_config.py").write_text("c = get_config()  # noqa: F821\n" + "\n".join(lines) + "\n")
    return folder


def signed(nb: nbformat.NotebookNode, student: str) -> nbformat.NotebookNode:
    """``nb`` with a line naming ``student`` in its first answer cell, to tell whose feedback a page is."""
    cell = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution"))
    cell.source += f"\n# {marker(student)}\n"
    return nb


def marker(student: str) -> str:
    return f"submitted by {student.encode('unicode_escape').decode()}"


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory):
    """The whole round trip; returns the course directory and each student's home folder."""
    base = tmp_path_factory.mktemp("hub")
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)  # nbgrader's exchange is a folder every user may write to
    shared = [f"c.Exchange.root = {str(exchange)!r}", f"c.CourseDirectory.course_id = {COURSE_ID!r}"]
    root = base / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, TINY)
    # the course's own nbgrader configuration (nbgrader_config.py at the repository's root), on this course
    course_config = [
        "from autograder.course.build import nbgrader_config",
        "from autograder.engine.gradebook import feedback_config",
        f"c.merge(nbgrader_config({str(root)!r}))",
        "feedback_config(c)",
    ]
    instructor = config(base / "instructor", [*course_config, *shared])
    nbgrader(instructor, "release_assignment", TINY)

    homes = {}
    for n, (student, score) in enumerate(STUDENTS.items()):
        home = config(
            base / "home" / str(n), [*shared, f"c.Exchange.cache = {str(base / 'cache' / str(n))!r}"]
        )
        nbgrader(home, "fetch_assignment", TINY, f"--student={student}")
        answer = solved(source, release)
        if score < 7:
            answer = blank_answer(answer, release, "mse_loss")
        nbformat.write(signed(answer, student), home / TINY / f"{TINY}.ipynb")
        nbgrader(home, "submit", TINY, f"--student={student}")
        homes[student] = home

    nbgrader(instructor, "collect", TINY)
    grade = subprocess.run(
        [sys.executable, "-m", "autograder", "grade", TINY, str(root / "submitted"), "--course", str(root),
         "--solutions", str(FIXTURE), "--workers", "2", "--cell-timeout", "20"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert grade.returncode == 0, grade.stderr[-3000:]
    # the engine's own feedback pages can be released as they are
    nbgrader(instructor, "release_feedback", TINY)
    nbgrader(homes["bob"], "fetch_feedback", TINY, "--student=bob")
    (engine_page,) = (homes["bob"] / TINY / "feedback").rglob("*.html")
    assert "Score: 7 / 7" in engine_page.read_text(encoding="utf-8")
    shutil.rmtree(homes["bob"] / TINY / "feedback")
    nbgrader(instructor, "generate_feedback", TINY, "--force")
    nbgrader(instructor, "release_feedback", TINY)
    for student, home in homes.items():
        nbgrader(home, "fetch_feedback", TINY, f"--student={student}")
    return root, homes


def test_every_student_keeps_their_id_in_the_course_directory_and_the_gradebook(hub) -> None:
    root, _ = hub
    for kind in ("submitted", "autograded", "feedback"):
        assert sorted(p.name for p in (root / kind).iterdir()) == sorted(STUDENTS), kind
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        assert sorted(s.id for s in gb.students) == sorted(STUDENTS)
        scores = {s.student.id: s.score for s in gb.find_assignment(TINY).submissions}
    assert scores == STUDENTS
    with (root / "grading" / "grades.csv").open(encoding="utf-8") as f:
        assert {row["student"]: float(row["score"]) for row in csv.DictReader(f)} == STUDENTS


def test_each_student_fetches_exactly_their_own_feedback_without_hidden_tests(hub) -> None:
    _, homes = hub
    for student, home in homes.items():
        (page,) = (home / TINY / "feedback").rglob("*.html")
        text = page.read_text(encoding="utf-8")
        others = [other for other in STUDENTS if other != student]
        assert marker(student) in text and not any(marker(o) in text for o in others), student
        assert f"Score: {STUDENTS[student]:g}" in text or f"{STUDENTS[student]:g} / 7" in text
        assert "check_linear_layer" in text and "seed=7" not in text and "HIDDEN" not in text
