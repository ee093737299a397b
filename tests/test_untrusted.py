"""Untrusted at every edge: names, file names, evidence and kernel text in; CSV, Markdown, HTML
and the terminal out.

Two classes are graded through the command line by the real engine (jail, runners, nbgrader's gradebook):
four learners who send evidence with an ``Infinity`` shape beside two honest ones (the systemic-failure
guard once discarded the honest results), and a class whose Canvas, Moodle and file names are formulas,
Markdown and escape sequences, with a kernel that raises text no UTF-8 file can hold. Each test asserts
the exact outcome in every output.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from notebook_helpers import source_and_release
from test_engine import FIXTURE, after, solved

from autograder.engine import lms
from autograder.engine.jail import jail_available
from autograder.engine.outcome import Outcome
from autograder.engine.pipeline import ensure_course

pytestmark = pytest.mark.skipif(not jail_available(), reason="the jail needs root and namespaces")

TINY = "01_tiny"
INFINITY = (
    '{"check": "linear_layer", "seed": 0, "out": {"__ndarray__": "", "dtype": "<f8", "shape": [Infinity]}}'
)
#: Rebinds the check the test cell calls: it publishes only evidence whose shape is ``[Infinity]``.
FORGER = f"""
from IPython.display import publish_display_data
def check_linear_layer(*args, **kwargs):
    publish_display_data({{"application/x-backprop-course-evidence": {INFINITY!r}}})
    return 4.0
"""
#: Kernel text no UTF-8 file can hold and escape sequences in a check's evidence (the error mse_loss
#: raises, which the check records), escape sequences and markup in the learner's own cell's error (a
#: lone surrogate there never leaves the kernel: its message cannot be encoded).
GHOST = r"""
def mse_loss(pred, target):
    raise ValueError("bad \udcff \x1b[31mred")
raise RuntimeError("\x1b]0;pwned\x07\x1b[2J <script>alert(1)</script> | 7 / 7 |")
"""
FORMULA = '=HYPERLINK("x?leak="&C3)'
MARKUP = "@SUM(1) | 7 of 7 | graded | <img src=x onerror=alert(1)> [a](javascript:alert(1))"
ESCAPE = "\x1b]0;pwned\x07\x1b[2J"


def grade(root: Path, inbox: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "autograder", "grade", TINY, str(inbox), "--course", str(root),
               "--solutions", str(FIXTURE), "--workers", "2", "--cell-timeout", "30", *extra]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def report(root: Path) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "autograder",
        "report",
        "--course",
        str(root),
        "--solutions",
        str(FIXTURE),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def stored(root: Path) -> dict[str, Outcome]:
    """Every stored outcome, read the way the report reads it (which also proves each renderable)."""
    found = {}
    for path in (root / "autograder" / "results" / TINY).glob("*.json"):
        text = path.read_text(encoding="utf-8")
        json.dumps(json.loads(text), ensure_ascii=False).encode("utf-8")
        found[path.stem] = Outcome.from_json(text)
    return found


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("untrusted")
    root = base / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, TINY)
    return base, root, solved(source, release), release


@pytest.fixture(scope="module")
def forgers(course):
    """Four forgers sending an ``Infinity`` shape and two honest learners, graded in one run."""
    base, _, good, release = course
    root = base / "forgers-course"
    inbox = base / "forgers"
    inbox.mkdir()
    for i in range(4):
        nbformat.write(after(release, "linear_layer", FORGER), inbox / f"forger{i}_{TINY}.ipynb")
    for name in ("honest0", "honest1"):
        nbformat.write(good, inbox / f"{name}_{TINY}.ipynb")
    return root, grade(root, inbox)


@pytest.fixture(scope="module")
def names(course):
    """A class whose names and file names are formulas, Markdown and escape sequences."""
    base, root, good, release = course
    inbox = base / "names"
    inbox.mkdir()
    nbformat.write(good, inbox / lms.canvas_file_name(FORMULA, 21, 601, f"{TINY}.ipynb"))
    nbformat.write(release, inbox / lms.moodle_file_name(MARKUP, 402, f"{TINY}.ipynb"))
    nbformat.write(good, inbox / f"-2+3_{TINY}.ipynb")
    nbformat.write(after(good, "mse_loss", GHOST), inbox / f"ghost_{TINY}.ipynb")
    nbformat.write(release, inbox / f"eve\n| mallory | 7 of 7 | graded |\n# Pwned_{TINY}.ipynb")
    (inbox / f"{ESCAPE}empty_{TINY}.ipynb").write_bytes(b"")
    return root, grade(root, inbox)


# -- 3. the systemic-failure guard never discards what a learner earned --------------------------------


def test_four_forgers_beside_two_honest_learners_are_each_their_own_outcome(forgers) -> None:
    """Before: OverflowError failed each forger's whole notebook, the guard took the four identical
    failures for a broken environment, exited 3 and discarded the two honest 7 / 7."""
    root, proc = forgers
    assert proc.returncode == 0, proc.stderr
    assert "problem of the grading environment" not in proc.stderr
    results = stored(root)
    assert sorted(results) == ["forger0", "forger1", "forger2", "forger3", "honest0", "honest1"]
    assert [(results[h].score, results[h].status) for h in ("honest0", "honest1")] == [(7, "graded")] * 2
    why = (
        "not graded: the evidence its check recorded is malformed (malformed array in evidence: its shape "
        "holds inf, not a size from 0 to 2147483648)"
    )
    for i in range(4):
        forger = results[f"forger{i}"]
        assert (forger.score, forger.status) == (0, "graded")
        assert [c.feedback for c in forger.cells if c.grade_id == "test_linear_layer"] == [why]
    with (root / "grading" / "grades.csv").open(encoding="utf-8") as f:
        scores = {row["student"]: row["score"] for row in csv.DictReader(f)}
    assert scores == {
        "forger0": "0",
        "forger1": "0",
        "forger2": "0",
        "forger3": "0",
        "honest0": "7",
        "honest1": "7",
    }


# -- 4. CSV cells are never formulas ----------------------------------------------------------------


def _cells(path: Path) -> list[list[str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


def _no_formula(rows: list[list[str]]) -> None:
    for row in rows:
        for cell in row:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), (cell, row)


def test_names_that_are_formulas_are_text_in_every_csv(names) -> None:
    root, proc = names
    assert proc.returncode == 0, proc.stderr
    out = root / "grading"
    grades = _cells(out / "grades.csv")
    for name in ("grades.csv", "totals.csv", "canvas_import.csv", f"moodle_worksheet_{TINY}.csv"):
        _no_formula(_cells(out / name))
    by_student = {row[0]: row for row in grades[1:]}
    assert by_student["canvas-21"][1:5] == ["'" + FORMULA, "21", TINY, "7"]
    assert by_student["moodle-402"][1] == "'" + MARKUP
    flat = next(row for row in grades[1:] if row[12] == f"'-2+3_{TINY}.ipynb")
    assert flat[4] == "7"
    canvas = _cells(out / "canvas_import.csv")
    assert canvas[2][:2] == ["'" + FORMULA, "21"], canvas
    assert canvas[1][5] == "7" and canvas[2][5] == "7", "the numbers stay numbers"
    moodle = _cells(out / f"moodle_worksheet_{TINY}.csv")
    assert moodle[1][:2] == ["Participant 402", "'" + MARKUP]
    assert moodle[1][4:6] == ["0", "7"]


# -- 5. Markdown, HTML and the terminal --------------------------------------------------------------


def test_a_name_cannot_forge_a_row_a_heading_markup_or_a_link_in_the_summary(names) -> None:
    root, _ = names
    summary = (root / "grading" / "summary.md").read_text(encoding="utf-8")
    lines = summary.splitlines()
    assert [line for line in lines if line.startswith("#")] == [
        "# Grading summary",
        "## Runs",
        "## Scores",
        "## Pass rate per test",
        "## Problems",
    ]
    for forged in ("<img", "<script", "](javascript", "[a]", "mallory | 7 of 7"):
        assert forged not in summary
    rows = [line for line in lines if line.startswith("| moodle-402 ")]
    assert rows == [
        "| moodle-402 | @SUM(1) &#124; 7 of 7 &#124; graded &#124; &lt;img src=x onerror=alert(1)&gt; "
        "&#91;a&#93;(javascript:alert(1)) | 01_tiny | 0 / 7 | graded |  |  |"
    ]
    # every scores row has exactly the table's eight cell borders
    table = lines[lines.index("## Scores") + 2 : lines.index("## Pass rate per test") - 1]
    assert all(row.count("|") == 8 for row in table), table
    assert "\x1b" not in summary and "\x07" not in summary


def test_kernel_text_no_utf8_file_can_hold_is_stored_renderable_and_shown_escaped(names) -> None:
    """Before: the lone surrogate was stored, writing the feedback raised UnicodeEncodeError, and every
    later grade and report of the course failed the same way."""
    root, proc = names
    ghost = stored(root)["ghost"]
    assert (ghost.score, ghost.status) == (4, "graded")
    error = "RuntimeError: ]0;pwned[2J <script>alert(1)</script> | 7 / 7 |"
    assert len(ghost.errors) == 1 and ghost.errors[0].endswith(f") raised {error}"), ghost.errors
    assert ghost.errors[0].startswith("cell "), ghost.errors
    mse = next(c.feedback for c in ghost.cells if c.grade_id == "test_mse_loss")
    assert "bad \ufffd [31mred" in mse and "\x1b" not in mse, mse
    page = (root / "feedback" / "ghost" / TINY / f"{TINY}.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>" not in page
    assert "\x1b" not in page and "\x07" not in page
    moodle = (root / "feedback" / "moodle-402" / TINY / f"{TINY}.html").read_text(encoding="utf-8")
    assert "<img" not in moodle and "&lt;img src=x onerror=alert(1)&gt;" in moodle


def test_the_terminal_gets_no_escape_sequence(names) -> None:
    _, proc = names
    assert "\x1b" not in proc.stdout + proc.stderr and "\x07" not in proc.stdout + proc.stderr
    assert f"rejected ]0;pwned[2Jempty_{TINY}.ipynb: empty file" in proc.stdout


# -- 2. a stored outcome that cannot be rendered ---------------------------------------------------------


def test_a_stored_result_that_cannot_be_read_is_that_students_stated_problem(names) -> None:
    """A results file as the old code wrote it (a lone surrogate in JSON's escapes), one that is not
    JSON and one of the wrong shape: report and grade state each, and write everything else."""
    root, _ = names
    results = root / "autograder" / "results" / TINY
    old = json.loads((results / "ghost.json").read_text(encoding="utf-8"))
    old["student"], old["errors"] = "oldghost", ["cell 'x' raised RuntimeError: \ud800"]
    (results / "oldghost.json").write_text(json.dumps(old), encoding="utf-8")
    (results / "corrupt.json").write_text('{"student": "corrupt", "score": ', encoding="utf-8")
    (results / "shape.json").write_text(json.dumps({**old, "student": "shape", "cells": [{"score": "x"}]}))
    try:
        again = report(root)
        assert again.returncode == 0, again.stderr
        for proc in (again, grade(root, root.parent / "names")):
            assert proc.returncode == 0, proc.stderr
            assert "Traceback" not in proc.stderr
            assert (
                f"the stored result of oldghost for {TINY} cannot be read (it holds text no UTF-8 file can "
                "hold (a lone surrogate))"
            ) in proc.stderr
            assert f"the stored result of corrupt for {TINY} cannot be read (Expecting value" in proc.stderr
            assert (
                f"the stored result of shape for {TINY} cannot be read (its cells[0] has no 'grade_id')"
                in (proc.stderr)
            )
            summary = (root / "grading" / "summary.md").read_text(encoding="utf-8")
            assert "the stored result of oldghost" in summary
            graded = {row[0] for row in _cells(root / "grading" / "grades.csv")[1:]}
            assert {"canvas-21", "moodle-402", "ghost"} <= graded
    finally:
        for name in ("oldghost", "corrupt", "shape"):
            (results / f"{name}.json").unlink()


def test_the_check_command_prints_no_escape_sequence(tmp_path: Path) -> None:
    """A learner's own check of a notebook whose cell raises escape sequences and a lone surrogate."""
    from autograder.course import NOTEBOOKS

    nb = nbformat.read(NOTEBOOKS / "01_linear_layer.ipynb", as_version=4)
    cell = nbformat.v4.new_code_cell('raise RuntimeError("\\x1b]0;pwned\\x07\\x1b[2J")')
    cell.id = "hostile"
    nb.cells.insert(1, cell)
    path = tmp_path / "01_linear_layer.ipynb"
    nbformat.write(nb, path)
    env = {**os.environ}
    proc = subprocess.run(
        [sys.executable, "-m", "autograder", "check", str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    # the learner's cell named as they see it: its number and first line, escape sequences gone
    assert (
        'Note: cell 2 (raise RuntimeError("\\x1b]0;pwned\\x07\\x1b[2J")) raised RuntimeError: ]0;pwned[2J'
        in proc.stdout
    ), proc.stdout
    assert "\x1b" not in proc.stdout + proc.stderr
