"""The learner's path in a real browser: `make lab` (docs/learners.md), then every notebook run cell by cell.

Each student notebook is opened in a JupyterLab started by the Makefile's own `lab` target and run one
cell at a time, as a learner does (JupyterLab's "Run All" stops at the first exercise a learner has not
solved yet), in Debian's chromium driven by Playwright. Twice: untouched (every cell runs; only the
stubs' NotImplementedError may fail, and every plotting cell that did not stop on one shows its image)
and with every exercise solved by the reference (no cell fails, every plotting cell shows its image).
The lab is started with MPLBACKEND=Agg in its environment, as `make test` exports it: the Makefile must
take it away from the lab, or no plot shows and this test fails.

It also checks the two labs' tools: the learner's has no nbgrader menu and logs no error or warning at
start; `make instructor-lab` has nbgrader's menu.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
import pytest
from notebook_helpers import CHROMIUM, FLAGS, NAMES, REPO, solved_notebook, student_notebook
from playwright.sync_api import BrowserContext, Page, expect, sync_playwright

CELL_SECONDS = 180
# How a cell that calls an exercise not solved yet ends: the stub's `raise NotImplementedError()`.
STUB_ERROR = re.compile(r"^NotImplementedError\b", re.MULTILINE)
START_SECONDS = 90
# A cell that draws: it calls one of backprop_utils' plotting functions or matplotlib's pyplot.
PLOTS = re.compile(
    r"^[^#\n]*\b(plot_losses|plot_fit|plot_decision_boundary|draw_graph|plt\.\w+)\(", re.MULTILINE
)
# What a learner's lab must never log: an error, ever (nbgrader's course-directory error was one), or a
# warning while it starts. (Opening a notebook logs Jupyter's own warning that it "is not trusted": any
# notebook not signed on this machine is, so its outputs' HTML and JavaScript are not run; it is no fault.)
ERROR_LINE = re.compile(r"^\[[EC] .*|^Traceback.*", re.MULTILINE)
# Not the lab's fault: the test closes its pages at once, and tornado then logs that a message for a
# closed websocket was not sent. (A learner closing a tab gets the same.)
CLOSED_TAB = re.compile(
    r"^Task exception was never retrieved\n(?:(?!^Task ).*\n)*?tornado\.websocket\.WebSocketClosedError\n",
    re.MULTILINE,
)
WARNING_LINE = re.compile(r"^\[W .*", re.MULTILINE)
STARTED = "Use Control-C to stop this server"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Lab:
    """A JupyterLab started with `make <target>`, on a free port, with a token, logging to a file."""

    def __init__(self, target: str, home: Path, extra: list[str]) -> None:
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.log = home / f"{target}.log"
        args = [
            "--no-browser",
            f"--port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
        ]
        if os.geteuid() == 0:  # CI runs as root; jupyter refuses to without this
            args.append("--allow-root")
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
        env.update(
            MPLBACKEND="Agg",  # as `make test` exports it: the lab target must undo it
            JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
            JUPYTER_RUNTIME_DIR=str(home / "runtime"),
        )
        command = ["make", "--no-print-directory", target, f"LAB_ARGS={' '.join(args)}", *extra]
        with self.log.open("w") as log:
            self.process = subprocess.Popen(
                command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + START_SECONDS
        while True:
            try:
                self.api("status")
                break
            except OSError:
                assert self.process.poll() is None, f"`make {target}` exited:\n{self.log.read_text()}"
                assert time.monotonic() < deadline, f"`make {target}` did not start:\n{self.log.read_text()}"
                time.sleep(0.5)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}/{path}?token={self.token}"

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(self.url(f"api/{path}"), method=method)
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def wait_for_idle_kernel(self, path: str) -> None:
        """Wait until the notebook at ``path`` has a kernel that is ready for its first cell."""
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            states = [s["kernel"]["execution_state"] for s in self.api("sessions") if s["path"] == path]
            if states == ["idle"]:
                return
            time.sleep(0.5)
        raise AssertionError(f"no idle kernel for {path} after {START_SECONDS} s:\n{self.log.read_text()}")

    def shut_down_kernels(self) -> None:
        for session in self.api("sessions"):
            self.api(f"sessions/{session['id']}", method="DELETE")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)  # make and the jupyter it started: our own group
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrowserContext]:
    assert CHROMIUM.is_file(), (
        f"{CHROMIUM} is missing: `apt-get install -y chromium` (`make test` does it: tests/system_deps.sh)"
    )
    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), headless=True, args=FLAGS
        )
        context.set_default_timeout(30_000)
        yield context
        context.close()


@pytest.fixture(scope="module")
def learner_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    home = tmp_path_factory.mktemp("learner-lab")
    folder = home / "notebooks"
    (folder / "solved").mkdir(parents=True)
    for name in NAMES:
        nbformat.write(student_notebook(name), folder / f"{name}.ipynb")
        nbformat.write(solved_notebook(name), folder / "solved" / f"{name}.ipynb")
    lab = Lab("lab", home, [f"LAB_DIR={folder}"])
    yield lab
    lab.stop()


@dataclass
class CellRun:
    index: int
    source: str
    prompt: str
    images: int
    stderr: list[str]

    def where(self, notebook: str) -> str:
        return f"{notebook}, code cell {self.index + 1} ({self.source.splitlines()[0][:60]!r})"


STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
READ_CELL = """cell => ({
    prompt: cell.querySelector('.jp-InputPrompt').textContent.trim(),
    images: [...cell.querySelectorAll('.jp-OutputArea-output img')]
        .filter(img => img.complete && img.naturalWidth > 0).length,
    stderr: [...cell.querySelectorAll('STDERR')].map(output => output.textContent),
})""".replace("STDERR", STDERR)


def run_cell_by_cell(page: Page, lab: Lab, path: str, sources: list[str]) -> list[CellRun]:
    """Open the notebook at ``path`` (relative to the lab's folder) and run its code cells one by one,
    each after the one before has finished; return what each shows."""
    workspace = re.sub(r"\W", "-", path)
    page.goto(lab.url(f"lab/workspaces/{workspace}/tree/{path}"))
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-CodeCell")
    expect(cells).to_have_count(len(sources), timeout=60_000)
    lab.wait_for_idle_kernel(path)
    runs = []
    for index, source in enumerate(sources):
        cell = cells.nth(index)
        prompt = cell.locator(".jp-InputPrompt")
        for _ in range(5):  # a key press can be lost while the page still settles: "[*]" says it was not
            prompt.click()
            page.keyboard.press("Control+Enter")
            try:
                expect(prompt).not_to_have_text("[ ]:", timeout=10_000)
                break
            except AssertionError:
                continue
        expect(prompt).to_have_text(re.compile(r"\[\d+\]"), timeout=CELL_SECONDS * 1000)
        runs.append(CellRun(index, source, **cell.evaluate(READ_CELL)))
    lab.shut_down_kernels()
    return runs


def _code_sources(nb: nbformat.NotebookNode) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("solved", [False, True], ids=["untouched", "solved"])
@pytest.mark.parametrize("name", NAMES)
def test_every_plot_shows_in_the_learners_lab(
    learner_lab: Lab, browser: BrowserContext, name: str, solved: bool
) -> None:
    nb = solved_notebook(name) if solved else student_notebook(name)
    sources = _code_sources(nb)
    page = browser.new_page()
    try:
        runs = run_cell_by_cell(
            page, learner_lab, f"solved/{name}.ipynb" if solved else f"{name}.ipynb", sources
        )
    finally:
        page.close()
    plotting = [r for r in runs if PLOTS.search(r.source)]
    assert plotting, f"{name} has no plotting cell: the pattern PLOTS is out of date"
    problems = []
    for run in runs:
        failed = "\n".join(run.stderr)
        stopped_at_stub = not solved and STUB_ERROR.search(failed) is not None
        if failed and not stopped_at_stub:
            problems.append(f"{run.where(name)} wrote to stderr:\n{failed[-1500:]}")
        if run in plotting and not stopped_at_stub and run.images == 0:
            problems.append(f"{run.where(name)} plots, but shows no image")
    assert not problems, "\n".join(problems)
    if solved:
        assert all(r.images for r in plotting)


def test_the_learners_lab_has_no_instructor_tools_and_logs_no_error(
    learner_lab: Lab, browser: BrowserContext
) -> None:
    page = browser.new_page()
    try:
        page.goto(learner_lab.url("lab/workspaces/tools/tree/01_linear_layer.ipynb"))
        expect(page.locator(".lm-MenuBar-itemLabel", has_text="Kernel")).to_have_count(1)
        expect(page.locator(".jp-Notebook .jp-Cell").first).to_be_visible()
        assert page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").count() == 0
        assert page.get_by_text("Create Assignment").count() == 0
        assert page.get_by_role("button", name="Validate").count() == 0
        learner_lab.wait_for_idle_kernel("01_linear_layer.ipynb")  # shut down a kernel that has started
    finally:
        page.close()
    learner_lab.shut_down_kernels()
    log = learner_lab.log.read_text()
    assert "nbgrader" not in log, log
    assert STARTED in log, log
    assert ERROR_LINE.findall(CLOSED_TAB.sub("", log)) == [], log
    assert WARNING_LINE.findall(log[: log.index(STARTED)]) == [], log


def test_the_instructor_lab_has_nbgrader(browser: BrowserContext, tmp_path: Path) -> None:
    lab = Lab("instructor-lab", tmp_path, [])
    page = browser.new_page()
    try:
        page.goto(lab.url("lab/workspaces/instructor/tree/notebooks/01_linear_layer.ipynb"))
        expect(page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader")).to_have_count(1)
        lab.wait_for_idle_kernel("notebooks/01_linear_layer.ipynb")
    finally:
        page.close()
        lab.shut_down_kernels()
        lab.stop()
    log = lab.log.read_text()
    assert "nbgrader.server_extensions.formgrader | extension was successfully loaded" in log
    assert ERROR_LINE.findall(log[: log.index(STARTED)]) == [], log  # its course/ is inside its root
