"""Runs as an instructor lives them: Ctrl-C in the middle (a real SIGINT to a real ``grade`` process),
a broken environment that fails the whole class the same way, a changed hidden test, damaged
notebooks, and ``report`` regenerating the outputs without grading."""

from __future__ import annotations

import codecs
import copy
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest
from notebook_helpers import finish, source_and_release, started_from_a_terminal
from test_engine import FIXTURE, LIMITS, after, solved

from autograder.engine.pipeline import ensure_course, grade_class

TINY = "01_tiny"


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory: pytest.TempPathFactory):
    """The tiny assignment's source and student version, built by the real build."""
    root = tmp_path_factory.mktemp("build") / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, TINY)
    return source, release


def results(root: Path) -> list[str]:
    return sorted(p.stem for p in (root / "autograder" / "results").glob(f"{TINY}/*.json"))


@pytest.fixture
def own_folder():
    """A folder outside pytest's shared temporary root, which a concurrent pytest session may prune
    while a long subprocess still uses it."""
    folder = Path(tempfile.mkdtemp(prefix="ctrl-c-"))
    folder.chmod(0o755)  # like /tmp: the kernels' users must reach their job folders under TMPDIR
    yield folder
    if not os.environ.get("KEEP_CTRL_C"):
        shutil.rmtree(folder, ignore_errors=True)


def test_ctrl_c_stops_writes_the_outputs_says_how_to_resume_and_leaves_no_temp_folder(
    notebooks, own_folder: Path
) -> None:
    tmp_path = own_folder
    source, release = notebooks
    slow = after(solved(source, release), "mse_loss", "import time\ntime.sleep(4)")
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    students = [f"s{i}" for i in range(6)]
    for student in students:
        nbformat.write(slow, inbox / f"{student}_{TINY}.ipynb")
    temp = tmp_path / "tmp"
    temp.mkdir()
    root = tmp_path / "course"
    # As an instructor types it, in the class's folder: the course given relative to it.
    command = [sys.executable, "-m", "autograder", "grade", TINY, "inbox", "--course", "course",
               "--solutions", str(FIXTURE), "--workers", "1", "--cell-timeout", "20"]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(temp)}
    proc = started_from_a_terminal(command, cwd=tmp_path, env=env)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if f"1/{len(students)}" in line:  # the first notebook is graded, the second is running
            proc.send_signal(signal.SIGINT)
            break
    out, err = finish(proc, 120)
    err = "".join(seen) + err
    assert proc.returncode == 130, err
    assert "Interrupted: no new notebook starts; finishing the 1 running" in err
    assert "Run the same command again to grade them" in err
    assert "Traceback" not in err
    graded = results(root)
    assert len(graded) == 2, graded  # the first, and the one running at Ctrl-C, finished
    summary = (root / "grading" / "summary.md").read_text()
    assert "the run was interrupted: 4 submissions were not graded" in summary
    rows = (root / "grading" / "grades.csv").read_text().splitlines()
    assert len(rows) == 1 + 2
    # PyTorch's own compile cache (made by the graders' warm-up, which builds an optimizer) may stay
    left = sorted(p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_"))
    assert left == [], "no grading-* or intake-* folder is left behind"

    again = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    assert again.stderr.count("already graded") == 2
    assert results(root) == students
    assert "6 submissions in the course: 6 graded" in (root / "grading" / "summary.md").read_text()
    assert sorted(p.name for p in temp.iterdir() if not p.name.startswith("torchinductor_")) == []


def test_a_class_failing_the_same_way_is_not_recorded_as_zeros(notebooks, tmp_path: Path) -> None:
    """The kernels lack a module the course's set-up cell imports (a broken grading environment): every
    test cell fails for want of its checks, the run says so, stores nothing, writes nothing to the
    gradebook; a class of blank notebooks, failing its own way in every cell, is graded as usual."""
    from nbgrader.api import Gradebook

    source, release = notebooks
    broken_course = tmp_path / "broken-solutions"
    shutil.copytree(FIXTURE, broken_course)
    tiny = broken_course / f"{TINY}.py"
    tiny.write_text(
        tiny.read_text().replace("import numpy as np\n", "import numpy as np\nimport not_in_kernel\n", 1)
    )
    for kind, nb, solutions in (
        ("broken", solved(source, release), broken_course),
        ("blank", release, FIXTURE),
    ):
        root = tmp_path / kind / "course"
        inbox = tmp_path / kind / "inbox"
        inbox.mkdir(parents=True)
        for i in range(5):
            nbformat.write(nb, inbox / f"{kind}{i}_{TINY}.ipynb")
        result = grade_class(inbox, TINY, root, solutions, workers=2, limits=LIMITS, progress=False)
        if kind == "broken":
            assert result.systemic and result.systemic.startswith(
                "5 of the 5 notebooks graded in this run failed the same way (0 points: every test cell "
                "failed with NameError). This looks like a problem of the grading environment"
            ), result.systemic
            assert not result.ok and result.outcomes == []
            assert results(root) == []
            assert "WARNING: 5 of the 5 notebooks" in result.summary.read_text()
            with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
                assert gb.find_assignment(TINY).submissions == []
        else:
            assert result.ok and [o.score for o in result.outcomes] == [0] * 5
            assert results(root) == [f"blank{i}" for i in range(5)]


def test_damaged_notebooks_are_graded_and_a_changed_hidden_test_regrades(notebooks, tmp_path: Path) -> None:
    source, release = notebooks
    good = solved(source, release)
    bare = copy.deepcopy(good)
    for cell in bare.cells:
        cell.metadata.pop("nbgrader", None)  # stripped by another editor; cell ids intact
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(good, inbox / f"ada_{TINY}.ipynb")
    nbformat.write(bare, inbox / f"bare_{TINY}.ipynb")
    (inbox / f"utf16_{TINY}.ipynb").write_bytes(nbformat.writes(good).encode("utf-16"))
    (inbox / f"bom_{TINY}.ipynb").write_bytes(codecs.BOM_UTF8 + nbformat.writes(good).encode())
    (inbox / f"old_{TINY}.ipynb").write_text(nbformat.writes(good, version=3))
    solutions = tmp_path / "solutions"
    shutil.copytree(FIXTURE, solutions)
    root = tmp_path / "course"
    first = grade_class(inbox, TINY, root, solutions, workers=2, limits=LIMITS, progress=False)
    assert {o.student: o.score for o in first.outcomes} == dict.fromkeys(
        ["ada", "bare", "bom", "old", "utf16"], 7
    )
    bare_outcome = next(o for o in first.outcomes if o.student == "bare")
    assert (
        "answer cell 'mse_loss' had lost its nbgrader metadata; matched by its cell id"
        in bare_outcome.restored
    )

    unchanged = grade_class(inbox, TINY, root, solutions, workers=2, limits=LIMITS, progress=False)
    assert all(o.regraded == "" for o in unchanged.outcomes)
    assert [o.seconds for o in unchanged.outcomes] == [o.seconds for o in first.outcomes], "nothing regraded"

    tiny = solutions / f"{TINY}.py"
    tiny.write_text(
        tiny.read_text().replace("check_mse_loss(mse_loss, seed=7)", "check_mse_loss(mse_loss, seed=8)")
    )
    changed = grade_class(inbox, TINY, root, solutions, workers=2, limits=LIMITS, progress=False)
    reason = "graded again: the assignment's tests or the checks changed since it was graded"
    assert {o.student: (o.score, o.regraded) for o in changed.outcomes} == dict.fromkeys(
        ["ada", "bare", "bom", "old", "utf16"], (7, reason)
    )
    assert reason in changed.summary.read_text()


def test_the_report_command_rewrites_the_outputs_without_grading(notebooks, tmp_path: Path) -> None:
    from nbgrader.api import Gradebook

    from autograder.__main__ import main

    source, release = notebooks
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(solved(source, release), inbox / f"ada_{TINY}.ipynb")
    root = tmp_path / "course"
    grade_class(inbox, TINY, root, FIXTURE, workers=1, limits=LIMITS, progress=False)
    (root / "grading" / "grades.csv").unlink()
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", "backprop-course") as gb:
        gb.find_grade("test_linear_layer", TINY, TINY, "ada").manual_score = 1.0
        gb.db.commit()
    assert main(["report", "--course", str(root), "--solutions", str(FIXTURE)]) == 0
    rows = (root / "grading" / "grades.csv").read_text().splitlines()
    assert rows[1].startswith("ada,ada,ada,01_tiny,4,7,7,adjusted by the instructor to 4 (automatic score 7)")
    assert "Score: 4 / 7" in (root / "feedback" / "ada" / TINY / f"{TINY}.html").read_text()


def test_a_second_ctrl_c_cancels_the_running_notebook(notebooks, own_folder: Path) -> None:
    """The first Ctrl-C lets the running notebook finish; a second one kills it: the command ends long
    before the notebook's sleep would, the killed notebook is not stored, and a re-run grades it."""
    source, release = notebooks
    slow = after(solved(source, release), "mse_loss", "import time\ntime.sleep(60)")
    inbox = own_folder / "inbox"
    inbox.mkdir()
    for student in ("s0", "s1"):
        nbformat.write(slow, inbox / f"{student}_{TINY}.ipynb")
    temp = own_folder / "tmp"
    temp.mkdir()
    command = [sys.executable, "-m", "autograder", "grade", TINY, "inbox", "--course", "course",
               "--solutions", str(FIXTURE), "--workers", "1", "--cell-timeout", "90"]  # fmt: skip
    proc = started_from_a_terminal(command, cwd=own_folder, env={**os.environ, "TMPDIR": str(temp)})
    assert proc.stderr is not None
    seen: list[str] = []
    started = None
    while started is None or time.monotonic() - started < 120:
        if started is None and list(temp.glob("grading-*/job-*.events.jsonl")):
            time.sleep(3)  # the first notebook's kernel is in its 60 s sleep
            proc.send_signal(signal.SIGINT)
            started = time.monotonic()
            for line in proc.stderr:
                seen.append(line)
                if "Interrupted: no new notebook starts" in line:
                    break
            proc.send_signal(signal.SIGINT)
            break
        time.sleep(0.2)
    err = finish(proc, 120)[1]
    err = "".join(seen) + err
    assert started is not None, err
    assert time.monotonic() - started < 30, "the running notebook was not cancelled: " + err
    assert proc.returncode == 130, err
    assert "Cancelling the running notebooks" in err and "Traceback" not in err, err
    assert results(own_folder / "course") == []
