"""The Gradescope autograder, run as Gradescope's documentation says it runs it.

``python -m autograder gradescope 01_linear_layer`` writes the zip; the test extracts it into
``<root>/source``, copies ``run_autograder`` to ``<root>/run_autograder``, puts a submission in
``<root>/submission`` and runs ``run_autograder`` in ``<root>``, as root with the jail where it can be
made, then checks ``<root>/results/results.json`` against the format Gradescope documents
("Autograder Specifications"). Gradescope's own servers and base image are not used: ``setup.sh`` is
only checked for its syntax, and the course's Python is this checkout's (``GRADESCOPE_AUTOGRADER_PYTHON``).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import nbformat
import pytest
from notebook_helpers import solved_notebook, student_notebook

from autograder.__main__ import main
from autograder.course.build import source_notebook

FIXTURE = Path(__file__).parent / "fixtures" / "solutions"
ASSIGNMENT = "01_linear_layer"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
GRADE_IDS = ["test_numerical_gradient", "test_linear_layer", "test_mse_loss", "test_fit_cubic"]

# results.json as Gradescope documents it: every key optional except a score (at the top or on every
# test); the keys below and no others; visibility one of four values.
VISIBILITY = {"hidden", "after_due_date", "after_published", "visible"}
TOP_KEYS = {
    "score": (int, float),
    "execution_time": (int, float),
    "output": str,
    "visibility": str,
    "stdout_visibility": str,
    "extra_data": dict,
    "tests": list,
    "leaderboard": list,
}
TEST_KEYS = {
    "score": (int, float),
    "max_score": (int, float),
    "name": str,
    "number": str,
    "output": str,
    "tags": list,
    "visibility": str,
    "extra_data": dict,
}


def _check_keys(obj: dict[str, Any], allowed: dict[str, Any], where: str) -> None:
    assert isinstance(obj, dict), f"{where} is not a JSON object"
    for key, value in obj.items():
        assert key in allowed, f"{where} has the key {key!r}, which Gradescope does not document"
        assert isinstance(value, allowed[key]) and not isinstance(value, bool), f"{where}.{key}: {value!r}"
        if isinstance(value, float):
            assert math.isfinite(value), f"{where}.{key} is not finite"
        if key.endswith("visibility"):
            assert value in VISIBILITY, f"{where}.{key} is {value!r}"


def assert_gradescope_results(data: dict[str, Any]) -> None:
    """Fail unless ``data`` is a results.json that Gradescope's documented format accepts, with scores
    that add up (each test between 0 and its max_score, the total the sum of the tests)."""
    _check_keys(data, TOP_KEYS, "results")
    tests = data.get("tests", [])
    for i, test in enumerate(tests):
        _check_keys(test, TEST_KEYS, f"tests[{i}]")
        assert all(isinstance(tag, str) for tag in test.get("tags", []))
        if "score" in test and "max_score" in test:
            assert 0 <= test["score"] <= test["max_score"], f"tests[{i}] scores out of range"
    assert "score" in data or (tests and all("score" in t for t in tests)), "no score anywhere"
    if tests:
        assert data["score"] == pytest.approx(sum(t["score"] for t in tests))


@pytest.fixture(scope="module")
def autograder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zip the command writes, extracted where Gradescope puts it."""
    zipped = tmp_path_factory.mktemp("zip") / "autograder.zip"
    assert main(["gradescope", ASSIGNMENT, "--out", str(zipped)]) == 0
    return install(zipped, tmp_path_factory.mktemp("autograder"))


def install(zipped: Path, root: Path) -> Path:
    """What Gradescope does with an autograder zip: extract it into ``root/source`` and copy
    ``run_autograder`` to ``root``."""
    with zipfile.ZipFile(zipped) as archive:
        archive.extractall(root / "source")
        for info in archive.infolist():  # zipfile drops the modes: restore them as unzip would
            (root / "source" / info.filename).chmod((info.external_attr >> 16) & 0o777)
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    return root


def run_autograder(root: Path, files: dict[str, bytes], python: str = sys.executable) -> dict[str, Any]:
    """Put ``files`` in a fresh ``root/submission``, run ``root/run_autograder`` in ``root``, return the
    validated results.json."""
    shutil.rmtree(root / "submission", ignore_errors=True)
    shutil.rmtree(root / "results", ignore_errors=True)
    (root / "submission").mkdir()
    for name, data in files.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_bytes(data)
    env = {**os.environ, "GRADESCOPE_AUTOGRADER_ROOT": str(root), "GRADESCOPE_AUTOGRADER_PYTHON": python}
    done = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert_gradescope_results(data)
    return data


def _bytes(nb: nbformat.NotebookNode) -> bytes:
    return nbformat.writes(nb).encode()


def test_the_zip_holds_the_two_scripts_at_its_root_and_only_this_assignment(tmp_path: Path) -> None:
    first, second = tmp_path / "a.zip", tmp_path / "b.zip"
    assert main(["gradescope", ASSIGNMENT, "--out", str(first)]) == 0
    assert main(["gradescope", ASSIGNMENT, "--out", str(second)]) == 0
    assert first.read_bytes() == second.read_bytes()  # the same course gives the same zip
    with zipfile.ZipFile(first) as archive:
        modes = {i.filename: (i.external_attr >> 16) for i in archive.infolist()}
        setup = archive.read("setup.sh")
    for script in ("setup.sh", "run_autograder"):
        assert stat.S_ISREG(modes[script]) and modes[script] & 0o111, f"{script} is not executable"
    assert [n for n in modes if n.startswith("solutions/")] == [f"solutions/{ASSIGNMENT}.py"]
    assert {
        "pyproject.toml",
        "requirements.txt",
        "autograder/engine/gradescope.py",
        "utils/compare.py",
    } <= set(modes)
    subprocess.run(["bash", "-n"], input=setup, check=True)


def test_a_solved_notebook_gets_full_marks_one_test_per_graded_cell_hidden_until_published(
    autograder: Path,
) -> None:
    """Beside a second notebook: the one named after the assignment is graded, and the output says so."""
    data = run_autograder(
        autograder,
        {
            NOTEBOOK: _bytes(solved_notebook(ASSIGNMENT)),
            "scratch.ipynb": _bytes(student_notebook(ASSIGNMENT)),
        },
    )
    assert data["score"] == 13
    assert [t["tags"] for t in data["tests"]] == [[g] for g in GRADE_IDS]
    assert [(t["score"], t["max_score"]) for t in data["tests"]] == [(3, 3), (4, 4), (3, 3), (3, 3)]
    assert {t["visibility"] for t in data["tests"]} == {"after_published"}
    assert data["tests"][1]["name"] == "linear_forward and linear_backward"
    assert data["tests"][1]["output"].startswith("linear_forward and linear_backward: 4 / 4 points")
    assert "the other notebooks were not graded: scratch.ipynb" in data["output"]
    # every cell's final call ran on a fresh seed, recorded for the instructor in extra_data
    assert sorted(data["extra_data"]["seeds"]) == sorted(GRADE_IDS)
    assert data["stdout_visibility"] == "hidden"


def test_the_score_comes_from_the_hidden_tests(tmp_path: Path) -> None:
    """A course whose mse_loss test cell calls its check only in the hidden tests: graded as the
    instructor grades (hidden tests included), a solved notebook earns that cell's 3 points too."""
    solutions = tmp_path / "solutions"
    solutions.mkdir()
    text = (FIXTURE / "01_tiny.py").read_text(encoding="utf-8")
    assert text.count("score = check_mse_loss(mse_loss)\n") == 1
    (solutions / "01_tiny.py").write_text(text.replace("score = check_mse_loss(mse_loss)\n", "score = 0.0\n"))
    zipped = tmp_path / "autograder.zip"
    assert main(["gradescope", "01_tiny", "--out", str(zipped), "--solutions", str(solutions)]) == 0
    root = install(zipped, tmp_path / "autograder")
    solved = _bytes(source_notebook(solutions / "01_tiny.py"))  # the answers are in it
    data = run_autograder(root, {"01_tiny.ipynb": solved})
    assert [(t["tags"], t["score"]) for t in data["tests"]] == [
        (["test_linear_layer"], 4),
        (["test_mse_loss"], 3),
    ]


def test_a_blank_notebook_of_any_name_gets_zero_with_each_exercises_feedback(autograder: Path) -> None:
    data = run_autograder(autograder, {"my work.ipynb": _bytes(student_notebook(ASSIGNMENT))})
    assert data["score"] == 0 and len(data["tests"]) == 4
    assert "numerical_gradient is not implemented yet" in data["tests"][0]["output"]
    assert data["extra_data"]["graded"] is True
    assert all("seed=" not in t["output"] for t in data["tests"])


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({}, "The submission is empty: upload your notebook 01_linear_layer.ipynb."),
        ({"notes.txt": b"hello"}, "has no notebook (.ipynb) in it (notes.txt)"),
        (
            {"a.ipynb": b"{}", "b/c.ipynb": b"{}"},
            "has 2 notebooks and the grader cannot tell which one to grade (a.ipynb, b/c.ipynb)",
        ),
        ({NOTEBOOK: b"print('hello')"}, "01_linear_layer.ipynb was not graded: not valid notebook JSON"),
        ({NOTEBOOK: b""}, "01_linear_layer.ipynb was not graded: empty file"),
    ],
    ids=["empty", "no-notebook", "several", "not-json", "empty-file"],
)
def test_a_submission_without_one_notebook_is_a_stated_result(autograder: Path, files, reason) -> None:
    data = run_autograder(autograder, files)
    assert reason in data["output"]
    assert (data["score"], data["tests"], data["extra_data"]["graded"]) == (0, [], False)
    assert "visibility" not in data  # shown to the learner at once


def test_a_notebook_of_another_assignment_is_not_graded(autograder: Path) -> None:
    data = run_autograder(autograder, {NOTEBOOK: _bytes(solved_notebook("02_two_layer_net"))})
    assert "not a notebook of this assignment" in data["output"]
    assert (data["score"], data["tests"]) == (0, [])


def test_when_the_grader_cannot_run_run_autograder_still_writes_a_stated_result(autograder: Path) -> None:
    data = run_autograder(autograder, {NOTEBOOK: b"{}"}, python=str(autograder / "no-such-python"))
    assert data["output"].startswith("The autograder failed before it could grade this submission")
    assert (data["score"], data["tests"]) == (0, [])


def test_the_schema_check_refuses_what_gradescope_does_not_document() -> None:
    """The validator above is strict enough to catch a wrong key, type or visibility."""
    good = {"score": 1.0, "tests": [{"score": 1.0, "max_score": 1.0, "visibility": "visible"}]}
    assert_gradescope_results(good)
    for bad in (
        {**good, "visibility": "later"},
        {**good, "tests": [{"score": 1.0, "max_score": 1.0, "status": "passed"}]},
        {**good, "tests": [{"score": "1", "max_score": 1.0}]},
        {**good, "tests": [{"score": 2.0, "max_score": 1.0}]},
        {"tests": [{"max_score": 1.0}]},
    ):
        with pytest.raises(AssertionError):
            assert_gradescope_results(bad)
