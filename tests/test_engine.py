"""The grading engine end to end: a small class with every fault, each with its exact outcome.

The class is graded once (module fixture) by the real engine: real kernels in the jail, the real
nbgrader gradebook. Each test then asserts one student's score, status and stated reason; the
correct submission's full marks in the same run show that no fault spills over to the others.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import nbformat
import pytest
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell
from notebook_helpers import source_and_release

from autograder import course
from autograder.course.demo import solved
from autograder.engine import executor as executor_module
from autograder.engine import grade as grade_module
from autograder.engine.grade import Limits
from autograder.engine.jail import jail_available
from autograder.engine.pipeline import ClassResult, ensure_course, grade_class

FIXTURE = Path(__file__).parent / "fixtures" / "solutions"
ASSIGNMENT = "01_tiny"
LIMITS = Limits(cell_seconds=8, notebook_seconds=90, memory_bytes=2 * 1024**3, output_bytes=200_000)


def _answers(nb: NotebookNode) -> dict[str | None, int]:
    return {course.grade_id(c): i for i, c in enumerate(nb.cells) if course.is_solution(c)}


def after(nb: NotebookNode, grade_id: str, code: str) -> NotebookNode:
    """A copy of ``nb`` with a new code cell right after the answer cell ``grade_id``."""
    nb = copy.deepcopy(nb)
    cell = new_code_cell(code)
    cell.id = f"added-after-{grade_id}"
    nb.cells.insert(_answers(nb)[grade_id] + 1, cell)
    return nb


def at_top(nb: NotebookNode, code: str) -> NotebookNode:
    """A copy of ``nb`` with a new code cell before every other cell."""
    nb = copy.deepcopy(nb)
    cell = new_code_cell(code)
    cell.id = "added-at-top"
    nb.cells.insert(0, cell)
    return nb


def blank_answer(nb: NotebookNode, release: NotebookNode, grade_id: str) -> NotebookNode:
    """A copy of ``nb`` whose answer ``grade_id`` is the stub again."""
    nb = copy.deepcopy(nb)
    nb.cells[_answers(nb)[grade_id]].source = release.cells[_answers(release)[grade_id]].source
    return nb


def grade_cell_index(nb: NotebookNode, cell_id: str) -> int:
    return next(i for i, c in enumerate(nb.cells) if course.grade_id(c) == cell_id)


CHEAT_COMPARE = """
import numpy as np, torch
np.allclose = np.isclose = lambda *a, **k: True
np.array_equal = lambda *a, **k: True
torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
torch.autograd.gradcheck = lambda *a, **k: True
"""
CHEAT_CHECKER = """
import autograder.checks as checks, autograder.checks.core as core
checks.check_linear_layer = check_linear_layer = lambda *a, **k: 4.0
checks.check_mse_loss = check_mse_loss = lambda *a, **k: 3.0
core.run_check = lambda *a, **k: 100.0
"""
CHEAT_BUILTINS = """
import builtins
# The graded kernel has no grading half and its test cells end with 0.0: rig how floats are shown,
# and builtins, so that the kernel's own record of the cell says full marks.
get_ipython().display_formatter.formatters["text/plain"].for_type(float, lambda o, p, c: p.text("4.0"))
builtins.round = lambda *a, **k: 4.0
"""
CHEAT_SHADOW = """
fake = "def check_linear_layer(*a, **k):\\n    return 4.0\\ndef check_mse_loss(*a, **k):\\n    return 3.0\\n"
import os
os.makedirs("autograder", exist_ok=True)
open("autograder/__init__.py", "w").write("")
open("autograder/checks.py", "w").write(fake)
open("utils.py", "w").write("")
import sys
for name in [m for m in sys.modules if m == "autograder" or m.startswith("autograder.")]:
    del sys.modules[name]
"""
CHEAT_TRANSFORMER = """
get_ipython().input_transformers_post.append(lambda lines: ["7.0\\n"])
"""
CHEAT_FORGE = """
import numpy as np
from autograder.checks.evidence import emit
for seed in (0, 7):
    emit({"check": "linear_layer", "seed": seed, "cases": {}})
    emit({"check": "mse_loss", "seed": seed, "cases": {}})
"""
SNOOP = """
import os
# The paths a snooping learner would try, here known exactly: the gradebook and the hidden tests in the
# course directory, the solutions in the repository, another learner's submission, the repository's git.
SECRETS = [p for p in {secrets!r} if os.path.exists(p)]
print(SECRETS)
if not SECRETS:
    def mse_loss(pred, target):
        raise NotImplementedError("nothing to copy from")
"""
NOISY = """
import sys, warnings
_mse = mse_loss
def mse_loss(pred, target):
    warnings.warn("a harmless warning", UserWarning)
    print("a note on stderr", file=sys.stderr)
    return _mse(pred, target)
"""


def make_class(source: NotebookNode, release: NotebookNode, inbox: Path, root: Path) -> dict[str, int]:
    """Write the class into ``inbox``; return the number of input files."""
    from autograder.course.build import REPO

    good = solved(source, release)
    secrets = [
        str(root / "gradebook.db"),
        str(root / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"),
        str(REPO / "solutions" / "01_linear_layer.py"),
        str(REPO / ".git"),
        str(FIXTURE / f"{ASSIGNMENT}.py"),
        str(inbox / f"ada_{ASSIGNMENT}.ipynb"),
    ]
    notebooks = {
        "ada": good,
        "blank": release,
        "half": blank_answer(good, release, "mse_loss"),
        "sleeper": after(good, "mse_loss", "import time\ntime.sleep(1000)"),
        "stubborn": after(
            good,
            "mse_loss",
            "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass",
        ),
        "quitter": after(good, "mse_loss", "import os\nos._exit(3)"),
        "crasher": after(good, "mse_loss", "import ctypes\nctypes.string_at(0)"),
        "hog": after(
            good, "linear_layer", "import numpy as np\nhoard = [np.ones(10**8) for _ in range(100)]"
        ),
        "chatty": after(good, "mse_loss", "while True:\n    print('x' * 10000)"),
        "noisy": after(good, "mse_loss", NOISY),
        "cheatcompare": after(release, "linear_layer", CHEAT_COMPARE),
        "cheatchecker": after(release, "linear_layer", CHEAT_CHECKER),
        "cheatbuiltins": after(release, "linear_layer", CHEAT_BUILTINS),
        "cheatshadow": at_top(release, CHEAT_SHADOW),
        "cheattransformer": after(release, "linear_layer", CHEAT_TRANSFORMER),
        "cheatforge": after(release, "linear_layer", CHEAT_FORGE),
        "snoop": after(good, "mse_loss", SNOOP.format(secrets=secrets)),
    }
    eraser = copy.deepcopy(good)
    del eraser.cells[grade_cell_index(eraser, "test_mse_loss")]
    notebooks["eraser"] = eraser
    editor = copy.deepcopy(good)
    editor.cells[grade_cell_index(editor, "test_linear_layer")].source = "4.0"
    notebooks["editor"] = blank_answer(editor, release, "mse_loss")
    mover = copy.deepcopy(good)
    moved = mover.cells.pop(grade_cell_index(mover, "test_linear_layer"))
    mover.cells.insert(0, moved)
    notebooks["mover"] = mover

    inbox.mkdir(parents=True)
    for student, nb in notebooks.items():
        nbformat.write(nb, inbox / f"{student}_{ASSIGNMENT}.ipynb")
    nbformat.write(release, inbox / f"dup_{ASSIGNMENT}.ipynb")
    nbformat.write(good, inbox / f"dup_{ASSIGNMENT}-1.ipynb")
    (inbox / f"empty_{ASSIGNMENT}.ipynb").write_bytes(b"")
    (inbox / f"corrupt_{ASSIGNMENT}.ipynb").write_text('{"cells": [{"cell_type": "code"')
    (inbox / "utils.py").write_text("def compare(*a, **k):\n    return True\n")
    (inbox / "frank_99_other.ipynb").write_text(nbformat.writes(good))
    nbformat.write(source, inbox / f"imposter_{ASSIGNMENT}.ipynb")
    other = copy.deepcopy(good)
    for cell in other.cells:
        cell.metadata.pop("nbgrader", None)
        cell.id = f"x-{cell.id}"
    nbformat.write(other, inbox / f"stranger_{ASSIGNMENT}.ipynb")
    return {"files": len(list(inbox.iterdir()))}


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[ClassResult, Path]:
    root = tmp_path_factory.mktemp("engine") / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, ASSIGNMENT)
    inbox = root.parent / "inbox"
    make_class(source, release, inbox, root)
    result = grade_class(inbox, ASSIGNMENT, root, FIXTURE, workers=2, limits=LIMITS, progress=False)
    return result, root


def outcome(result: ClassResult, student: str):
    found = [o for o in result.outcomes if o.student == student]
    assert len(found) == 1, f"{student}: {len(found)} outcomes"
    return found[0]


def cell_score(o, grade_id: str) -> float:
    return next(c.score for c in o.cells if c.grade_id == grade_id)


@pytest.mark.parametrize(
    ("student", "score", "status", "reason"),
    [
        ("ada", 7, "graded", None),
        ("blank", 0, "graded", None),
        ("half", 4, "graded", None),
        ("sleeper", 7, "graded", None),  # interrupted at the cell limit, and the notebook went on
        ("stubborn", 4, "stopped", "a cell ran longer than the 8 s a cell may take"),
        ("quitter", 4, "stopped", "the kernel exited with status 3"),
        ("crasher", 4, "stopped", "the kernel died from signal SIGSEGV"),
        ("chatty", 4, "stopped", "printed more than the 200000 bytes of output allowed"),
        ("hog", 7, "graded", None),
        ("noisy", 7, "graded", None),
        ("eraser", 7, "graded", None),
        ("editor", 4, "graded", None),
        ("mover", 7, "graded", None),
        ("dup", 7, "graded", None),
        ("snoop", 4, "graded", None),
        ("cheatcompare", 0, "graded", None),
        ("cheatchecker", 0, "graded", None),
        ("cheatbuiltins", 0, "graded", None),
        ("cheatshadow", 0, "graded", None),
        ("cheattransformer", 0, "graded", None),
        ("cheatforge", 0, "graded", None),
    ],
)
def test_each_submission_gets_its_exact_outcome(graded, student, score, status, reason) -> None:
    result, _ = graded
    o = outcome(result, student)
    assert (o.score, o.status) == (score, status), f"{student}: {o.score} {o.status} {o.reason} {o.cells}"
    if reason is None:
        assert o.reason is None
    else:
        assert reason in o.reason


def test_a_stopped_notebook_keeps_the_points_of_cells_that_ran(graded) -> None:
    result, _ = graded
    for student in ("stubborn", "quitter", "crasher", "chatty"):
        o = outcome(result, student)
        assert cell_score(o, "test_linear_layer") == 4
        mse = next(c for c in o.cells if c.grade_id == "test_mse_loss")
        assert mse.score == 0 and mse.feedback.startswith("not graded:"), mse


def test_a_cell_over_its_time_limit_is_interrupted_and_the_notebook_goes_on(graded) -> None:
    """As under nbgrader: the sleeping cell is interrupted, the test after it still runs and scores."""
    o = outcome(graded[0], "sleeper")
    assert cell_score(o, "test_mse_loss") == 3
    assert any("interrupted" in e and "went on" in e for e in o.errors), o.errors


def test_memory_blow_up_is_reported_and_the_kernel_goes_on(graded) -> None:
    o = outcome(graded[0], "hog")
    assert any("MemoryError" in e for e in o.errors), o.errors


def test_restored_test_cells_are_stated(graded) -> None:
    result, _ = graded
    assert any("'test_mse_loss' was deleted" in n for n in outcome(result, "eraser").restored)
    assert any("'test_linear_layer' was edited" in n for n in outcome(result, "editor").restored)
    assert any("'test_linear_layer' was moved" in n for n in outcome(result, "mover").restored)
    assert outcome(result, "ada").restored == []


def test_a_rigged_in_kernel_score_does_not_reach_the_gradebook(graded) -> None:
    """The builtins cheat does fool the kernel's own record of the cell; the trusted score stays 0."""
    result, root = graded
    executed = nbformat.read(root / "autograded" / "cheatbuiltins" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4)
    cell = next(c for c in executed.cells if c.get("id") == "test_linear_layer")
    shown = [o["data"]["text/plain"] for o in cell.outputs if o.output_type == "execute_result"]
    assert shown == ["4.0"], "the cheat should fool the kernel, or this test proves nothing"
    assert cell_score(outcome(result, "cheatbuiltins"), "test_linear_layer") == 0


def test_feedback_names_the_missing_answer_for_a_cheat(graded) -> None:
    o = outcome(graded[0], "cheatcompare")
    assert "not implemented" in o.cells[0].feedback
    forged = outcome(graded[0], "cheatforge")
    assert all(c.score == 0 for c in forged.cells)


def test_every_input_file_is_accounted_for(graded) -> None:
    result, root = graded
    reasons = {r.origin: r.reason for r in result.rejected}
    assert reasons[f"empty_{ASSIGNMENT}.ipynb"] == "empty file"
    assert reasons[f"corrupt_{ASSIGNMENT}.ipynb"].startswith("not valid notebook JSON")
    assert reasons["utils.py"] == "not a notebook (.ipynb) file"
    assert "contains no assignment being graded" in reasons["frank_99_other.ipynb"]
    assert reasons[f"dup_{ASSIGNMENT}.ipynb"].startswith("superseded by a later file")
    assert "none of its answer cells" in reasons[f"stranger_{ASSIGNMENT}.ipynb"]
    files = len(list((root.parent / "inbox").iterdir()))
    assert result.inputs == len(result.outcomes) + len(result.rejected) == files == 28
    assert (
        f"Last run: accounted for: {result.inputs} of {result.inputs} input files"
        in result.summary.read_text()
    )


def test_scores_are_in_the_gradebook(graded) -> None:
    from nbgrader.api import Gradebook

    result, root = graded
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for o in result.outcomes:
            assert gb.find_submission(ASSIGNMENT, o.student).score == pytest.approx(o.score)


def test_feedback_and_outputs_never_show_hidden_tests(graded) -> None:
    result, root = graded
    pages = list((root / "feedback").rglob("*.html"))
    assert len(pages) == len(result.outcomes)
    for page in pages:
        text = page.read_text()
        assert "seed=7" not in text and "HIDDEN" not in text and "check_linear_layer(" not in text
    assert "seed=7" not in result.grades_csv.read_text() + result.summary.read_text()
    ada = (root / "feedback" / "ada" / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
    assert "7 / 7" in ada and "def linear_forward" in ada


def test_imposter_submitting_the_instructor_source_gets_graded_like_anyone(graded) -> None:
    o = outcome(graded[0], "imposter")
    assert o.score == 7


def test_a_rerun_skips_what_is_graded_and_regrades_what_changed(graded, monkeypatch) -> None:
    result, root = graded
    inbox = root.parent / "rerun"
    inbox.mkdir()
    shutil.copy(root.parent / "inbox" / f"ada_{ASSIGNMENT}.ipynb", inbox)
    shutil.copy(root.parent / "inbox" / f"blank_{ASSIGNMENT}.ipynb", inbox / f"half_{ASSIGNMENT}.ipynb")

    ran: list[str] = []
    real = executor_module.RunnerProcess.run

    def spy(self, job_path, hard_limit):
        ran.append(json.loads(job_path.read_text())["notebook"])
        return real(self, job_path, hard_limit)

    monkeypatch.setattr(executor_module.RunnerProcess, "run", spy)
    hashed: list[Path] = []
    real_hash = grade_module.sha256
    monkeypatch.setattr(grade_module, "sha256", lambda path: hashed.append(path) or real_hash(path))
    again = grade_class(inbox, ASSIGNMENT, root, FIXTURE, workers=2, limits=LIMITS, progress=False)
    assert len(ran) == 1, "only the changed submission (half) runs again"
    assert hashed == [], "the grader uses the hash of the bytes intake read: no file is read twice"
    assert {o.student: o.score for o in again.outcomes} == {"ada": 7, "half": 0}


@pytest.mark.skipif(not jail_available(), reason="kernels can only be jailed as root with mount namespaces")
def test_the_jail_hides_the_course_and_runs_as_nobody(graded) -> None:
    result, root = graded
    o = outcome(result, "snoop")
    assert o.jailed
    assert cell_score(o, "test_mse_loss") == 0, "the snooping cell found a secret path"
    executed = nbformat.read(root / "autograded" / "snoop" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    snoop = next(c for c in executed.cells if c.get("id") == "added-after-mse_loss")
    assert snoop.outputs[0]["text"].strip() == "[]"


def test_scores_go_to_the_gradebook_a_database_url_names(graded, tmp_path: Path) -> None:
    from nbgrader.api import Gradebook

    _, root = graded
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copy(root.parent / "inbox" / f"ada_{ASSIGNMENT}.ipynb", inbox)
    db = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    course = tmp_path / "course"
    grade_class(inbox, ASSIGNMENT, course, FIXTURE, workers=1, limits=LIMITS, db_url=db, progress=False)
    with Gradebook(db) as gb:
        assert gb.find_submission(ASSIGNMENT, "ada").score == 7
    assert not (course / "gradebook.db").exists()


def test_a_learner_checks_a_notebook_with_the_visible_tests(graded, tmp_path: Path) -> None:
    from autograder.engine.check import check_notebook

    _, root = graded
    path = tmp_path / "my_work.ipynb"
    shutil.copy(root.parent / "inbox" / f"half_{ASSIGNMENT}.ipynb", path)
    o = check_notebook(path, solutions=FIXTURE)
    assert (o.assignment, o.score, o.max_score) == (ASSIGNMENT, 4, 7)
    assert "mse_loss is not implemented yet" in o.cells[1].feedback


def test_without_the_zygote_kernels_start_behind_unshare_and_grade_the_same(graded, tmp_path: Path) -> None:
    """The fallback a runner uses when its zygote cannot start: the same scores, still jailed."""
    from autograder.course.build import Assignment
    from autograder.engine.grade import Grader
    from autograder.engine.intake import Submission

    _, root = graded
    assignment = Assignment(ASSIGNMENT, FIXTURE / f"{ASSIGNMENT}.py")
    grader = Grader(root, [assignment], LIMITS, workers=1, zygote=False)
    try:
        for student, expected in (("ada", 7), ("half", 4)):
            path = root.parent / "inbox" / f"{student}_{ASSIGNMENT}.ipynb"
            o = grader.grade_one(Submission(f"{student}-unshare", ASSIGNMENT, path, path.name))
            assert (o.score, o.status, o.jailed) == (expected, "graded", grader.jailed)
    finally:
        grader.close()
