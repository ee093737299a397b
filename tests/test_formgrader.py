"""formgrader in JupyterLab, in a real browser (Debian's headless Chromium through Playwright).

The class graded by the engine is opened in formgrader as an instructor would: every submission is
listed as graded (none "needs manual grading"), with its student's name; a submission opens without
any hidden test in it; a score changed there reaches the gradebook and, through ``report``, every
output of the engine.
"""

from __future__ import annotations

import csv
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest
from notebook_helpers import CHROMIUM, FLAGS, source_and_release
from test_engine import FIXTURE, LIMITS, blank_answer

from autograder.course.build import COURSE_ID
from autograder.course.demo import solved
from autograder.engine.pipeline import ensure_course, grade_class, report_course

TINY = "01_tiny"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path: Path):
    """A graded class (ada 7/7, half 4/7) and JupyterLab serving its course with formgrader."""
    root = tmp_path / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, TINY)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(solved(source, release), inbox / f"ada_{TINY}.ipynb")
    nbformat.write(blank_answer(solved(source, release), release, "mse_loss"), inbox / f"half_{TINY}.ipynb")
    assert grade_class(inbox, TINY, root, FIXTURE, workers=2, limits=LIMITS, progress=False).ok
    config = f"c = get_config()\nc.CourseDirectory.root = {str(root)!r}\n"
    (tmp_path / "nbgrader_config.py").write_text(config + f"c.CourseDirectory.course_id = {COURSE_ID!r}\n")
    port = _free_port()
    command = [sys.executable, "-m", "jupyter", "lab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
               "--ServerApp.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True",
               f"--ServerApp.root_dir={tmp_path}"]  # fmt: skip
    if os.geteuid() == 0:
        command.append("--allow-root")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp_path / ".jupyter")}
    log = (tmp_path / "lab.log").open("w")
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=log)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{base}/api/status", timeout=2)
                break
            except OSError:
                assert server.poll() is None, "JupyterLab exited"
                assert time.monotonic() < deadline, "JupyterLab did not start"
                time.sleep(0.5)
        yield base, root
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def test_formgrader_lists_opens_and_regrades_a_submission_in_a_browser(lab) -> None:
    from nbgrader.api import Gradebook
    from playwright.sync_api import sync_playwright

    base, root = lab
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}", COURSE_ID) as gb:
        half = gb.find_submission_notebook(TINY, TINY, "half").id
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        page = browser.new_page()
        page.goto(f"{base}/formgrader/manage_submissions/{TINY}")
        page.wait_for_selector("td.status span")
        statuses = page.locator("td.status span").all_inner_texts()
        assert statuses == ["graded", "graded"], statuses
        assert sorted(page.locator("td.score").all_inner_texts()) == ["4 / 7", "7 / 7"]

        page.goto(f"{base}/formgrader/submissions/{half}")
        score = page.locator("input.score#test_mse_loss")
        page.wait_for_function("document.querySelector('input.score#test_mse_loss').placeholder !== ''")
        assert score.get_attribute("placeholder") == "0"  # the automatic score, set by formgrader's script
        assert "seed=7" not in page.content() and "HIDDEN" not in page.content()
        with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT"):
            score.fill("3")
            score.press("Tab")
        browser.close()

    report_course(root, FIXTURE)
    grades = {
        r["student"]: r for r in csv.DictReader((root / "grading" / "grades.csv").open(encoding="utf-8"))
    }
    assert (grades["half"]["score"], grades["half"]["automatic_score"]) == ("7", "4")
    assert "Score: 7 / 7" in (root / "feedback" / "half" / TINY / f"{TINY}.html").read_text()
    totals = {
        r["student"]: r for r in csv.DictReader((root / "grading" / "totals.csv").open(encoding="utf-8"))
    }
    assert totals["half"]["total"] == "7"
