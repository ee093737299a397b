"""Student notebooks as a learner has them: untouched, or with every exercise solved (the reference).

Shared by the tests that run the notebooks outside the grading engine: in a real JupyterLab
(``test_lab_browser.py``) and alone with only the course's wheel installed (``test_wheel.py``); the
browser both browser tests drive (``test_lab_browser.py``, ``test_formgrader.py``) is set up here too.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.course import grade_id, is_solution
from autograder.course.build import NOTEBOOKS, SOLUTIONS, source_notebook

REPO = Path(__file__).resolve().parent.parent
NAMES = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")

CHROMIUM = Path("/usr/bin/chromium")  # Debian's headless Chromium, driven through Playwright
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def student_notebook(name: str) -> NotebookNode:
    """The committed student version of notebook ``name``, as released."""
    return nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)


def solved_notebook(name: str) -> NotebookNode:
    """The student version with every answer cell replaced by the reference solution: a learner who
    solved every exercise. Test cells stay the visible ones the learner has."""
    nb = student_notebook(name)
    reference = {
        grade_id(cell): cell for cell in source_notebook(SOLUTIONS / f"{name}.py").cells if is_solution(cell)
    }
    solved = 0
    for cell in nb.cells:
        if is_solution(cell):
            lines = reference[grade_id(cell)].source.splitlines()
            cell.source = "\n".join(line for line in lines if not _MARKER.match(line))
            solved += 1
    assert solved, f"{name} has no answer cell to solve"
    return nb


def wheel_name() -> str:
    """The file name of the wheel `make wheel` builds, from the name and version in pyproject.toml."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    name = re.search(r'^name = "([^"]+)"', text, re.MULTILINE).group(1).replace("-", "_")
    version = re.search(r'^version = "([^"]+)"', text, re.MULTILINE).group(1)
    return f"{name}-{version}-py3-none-any.whl"


def make_wheel() -> Path:
    """Build the course's wheel with the Makefile's own target; return its path."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    subprocess.run(["make", "--no-print-directory", "-s", "wheel"], cwd=REPO, env=env, check=True)
    wheel = REPO / "dist" / wheel_name()
    assert wheel.is_file(), f"`make wheel` did not make {wheel}"
    return wheel


def source_and_release(root: Path, assignment: str) -> tuple[NotebookNode, NotebookNode]:
    """The instructor's version of ``assignment`` and the released student version, as the course at
    ``root`` holds them (``ensure_course`` made it)."""
    return tuple(
        nbformat.read(root / kind / assignment / f"{assignment}.ipynb", as_version=4)
        for kind in ("source", "release")
    )


def from_a_terminal(command: list[str]) -> list[str]:
    """``command`` started with SIGINT at its default, as a command typed in a terminal is, for a test
    that interrupts it with Ctrl-C. A shell that starts the test run in the background (``cmd &`` in a
    script, as CI runners and ``nohup`` do) ignores SIGINT in its children, an ignored signal stays
    ignored across exec, and a Python started with SIGINT ignored never raises KeyboardInterrupt: the
    test would measure the shell, not the command. A small Python puts the default back and execs it."""
    restore = (
        "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", restore, *command]


def started_from_a_terminal(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    """``command`` started as :func:`from_a_terminal` says, in ``cwd`` with ``env``, its stdout and stderr
    read as text by the test (which presses Ctrl-C on it)."""
    return subprocess.Popen(
        from_a_terminal(command), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str]:
    """The rest of what ``proc`` writes to its text pipes until it ends: (stdout, stderr), each "" when not
    a pipe. Unlike ``communicate`` with a timeout, which reads the pipes' descriptors, this reads their
    streams, so that what a ``readline`` or a ``for line in`` of the test already buffered is not lost.
    Kills ``proc`` and raises ``subprocess.TimeoutExpired`` when it outlives ``timeout``."""
    streams = [proc.stdout, proc.stderr]
    read: list[str] = ["", ""]

    def drain(i: int) -> None:
        read[i] = streams[i].read()  # type: ignore[union-attr]

    piped = [i for i in (0, 1) if streams[i] is not None]
    readers = [threading.Thread(target=drain, args=(i,), daemon=True) for i in piped]
    for reader in readers:
        reader.start()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise
    for reader in readers:
        reader.join(timeout=timeout)
        assert not reader.is_alive(), "a child of the process kept its pipe open after it ended"
    return read[0], read[1]
