"""Grading on a real Dask cluster: a scheduler and two workers started as processes of their own, the way
a deployment starts them, the class graded through the command line with ``--scheduler``.

The scores must be the local executor's (same seeds, the nbgrader gradebook compared cell by cell), the
local path must never import Dask, and a worker killed in the middle of a notebook must cost that
notebook a bounded retry and then a stated failure, nothing else.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
from library_helpers import LIBRARY, OTHER_VERSION, other_library_env
from notebook_helpers import from_a_terminal

from autograder.course.build import SOLUTIONS
from autograder.course.demo import STUDENTS, solved
from autograder.engine.jail import jail_available
from autograder.engine.outcome import Outcome
from autograder.engine.outputs import load_runs
from autograder.engine.pipeline import ensure_course

ASSIGNMENT = "01_linear_layer"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
LOOP = "while True:\n    pass\n"
#: How many times the scheduler runs a notebook again after its worker died (Dask's default is 3).
ALLOWED_FAILURES = 1

needs_jail = pytest.mark.skipif(
    not jail_available(), reason="the workers jail their kernels: root with mount namespaces is needed"
)


def test_the_local_path_never_imports_dask() -> None:
    """What ``grade`` imports without --scheduler (the grading run itself is checked by LOCAL_RUN below)."""
    code = (
        "import sys\n"
        "from autograder.__main__ import build_parser\n"
        "import autograder.engine.pipeline, autograder.engine.grade\n"
        "build_parser().parse_args(['grade', 'all', 'inbox'])\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'dask', 'distributed'}))\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "[]"
    with_dask = code.replace("import autograder.engine.pipeline", "import autograder.engine.distributed")
    ran = subprocess.run([sys.executable, "-c", with_dask], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "['dask', 'distributed']", "the check above would prove nothing"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(
    args: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "dask", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            start_new_session=True,
        )


def _scheduler(address: str, log: Path) -> subprocess.Popen:
    return _start(
        ["scheduler", "--host", "127.0.0.1", "--port", address.rsplit(":", 1)[1], "--no-dashboard"],
        log,
        {"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(ALLOWED_FAILURES)},
    )


def _worker(
    address: str, folder: Path, name: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen:
    return _start(
        ["worker", address, "--nthreads", "1", "--nworkers", "1", "--no-dashboard"]
        + ["--local-directory", str(folder / name)],
        folder / f"{name}.log",
        env=env,
        cwd=cwd,
    )


def _end(proc: subprocess.Popen) -> None:
    """End a process and everything in its session: politely, then not."""
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    """A scheduler and two single-threaded workers (each a nanny and its worker process)."""
    from distributed import Client

    folder = tmp_path_factory.mktemp("cluster")
    address = f"tcp://127.0.0.1:{_free_port()}"
    procs = [_scheduler(address, folder / "scheduler.log")]
    try:
        for i in range(2):
            procs.append(_worker(address, folder, f"worker{i}"))
        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=90)
            yield address, client
    finally:
        for proc in reversed(procs):
            _end(proc)


def _write_class(root: Path, inbox: Path, added: dict[str, str], others=("ada", "blake", "casey")) -> None:
    """The course (notebook 01 only) in ``root`` and its class in ``inbox``: ``others`` as the demo has
    them (solved, blank, with realistic mistakes), and solved notebooks with a cell of ``added`` code."""
    ensure_course(root, SOLUTIONS, only=[ASSIGNMENT])
    source = nbformat.read(root / "source" / ASSIGNMENT / NOTEBOOK, as_version=4)
    release = nbformat.read(root / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    inbox.mkdir(parents=True)
    notebooks = {name: STUDENTS[name](source, release) for name in others}
    for name, code in added.items():
        nb = solved(source, release)
        cell = nbformat.v4.new_code_cell(code)
        cell.id = f"added-by-{name}"
        nb.cells.insert(len(nb.cells) // 2, cell)
        notebooks[name] = nb
    for name, nb in notebooks.items():
        nbformat.write(nb, inbox / f"{name}_{NOTEBOOK}")


def _grade_command(inbox: Path, root: Path, *options: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "autograder",
        "grade",
        ASSIGNMENT,
        str(inbox),
        "--course",
        str(root),
        *options,
    ]


def _grade_on(address: str, inbox: Path, root: Path, cell_seconds: int) -> subprocess.CompletedProcess[str]:
    """Grade the class on the cluster through the command line, as an instructor does; wait for it."""
    command = _grade_command(inbox, root, "--scheduler", address, "--cell-timeout", str(cell_seconds))
    return subprocess.run(command, capture_output=True, text=True, timeout=240)


def _results(root: Path) -> dict[str, Outcome]:
    return {
        p.stem: Outcome.from_json(p.read_text())
        for p in (root / "autograder" / "results" / ASSIGNMENT).glob("*.json")
    }


def _cell_scores(root: Path) -> dict[tuple[str, str], float]:
    """Every graded cell's score in the course's nbgrader gradebook, by student and cell."""
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for student in gb.students:
            notebook = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student.id)
            for grade in notebook.grades:
                scores[(student.id, grade.name)] = grade.score
    return scores


#: The local run with the Dask run's seeds, in a process that must never import Dask.
LOCAL_RUN = """
import json, sys
from pathlib import Path
from autograder.engine.grade import Limits
from autograder.engine.pipeline import grade_class
inbox, root, solutions, seeds = sys.argv[1:]
seeds = {tuple(k.split("/")): v for k, v in json.loads(seeds).items()}
result = grade_class(Path(inbox), "01_linear_layer", Path(root), Path(solutions), workers=2,
                     limits=Limits(cell_seconds=3), progress=False, seeds=seeds)
assert result.ok, result.warnings
imported = sorted({m.split(".")[0] for m in sys.modules} & {"dask", "distributed"})
assert not imported, f"the local path imported {imported}"
"""


@needs_jail
def test_the_cluster_grades_as_the_local_executor_does(cluster, tmp_path: Path) -> None:
    address, _ = cluster
    inbox, on_dask, local = tmp_path / "inbox", tmp_path / "dask", tmp_path / "local"
    _write_class(on_dask, inbox, {"loopy": LOOP})
    ran = _grade_on(address, inbox, on_dask, cell_seconds=3)
    assert ran.returncode == 0, ran.stderr[-3000:]
    graded = _results(on_dask)
    assert {s: (o.score, o.status, o.jailed) for s, o in graded.items()} == {
        "ada": (13, "graded", True),
        "blake": (0, "graded", True),
        "casey": (graded["casey"].score, "graded", True),
        "loopy": (13, "graded", True),
    }
    assert 0 < graded["casey"].score < 13, "the mistakes should cost some points, not all"
    assert any("interrupted" in e for e in graded["loopy"].errors), graded["loopy"].errors
    # the client alone wrote the executed notebooks, with no hidden test in them
    executed = (on_dask / "autograded" / "ada" / ASSIGNMENT / NOTEBOOK).read_text()
    assert "HIDDEN TESTS" not in executed and "def linear_forward" in executed

    seeds = {f"{s}/{ASSIGNMENT}": o.seeds for s, o in graded.items()}
    ensure_course(local, SOLUTIONS, only=[ASSIGNMENT])
    subprocess.run(
        [sys.executable, "-c", LOCAL_RUN, str(inbox), str(local), str(SOLUTIONS), json.dumps(seeds)],
        check=True,
        timeout=240,
    )
    assert {s: o.seeds for s, o in _results(local).items()} == {s: o.seeds for s, o in graded.items()}
    dask_scores, local_scores = _cell_scores(on_dask), _cell_scores(local)
    assert len(dask_scores) == 4 * 4, dask_scores  # 4 students, 4 graded cells
    assert dask_scores == local_scores


def _processing(client, student: str) -> str | None:
    """The worker running ``student``'s notebook now, or None."""
    for worker, keys in client.processing().items():
        if any(str(k).startswith(f"grade-{student}-") for k in keys):
            return worker
    return None


def _kill_worker_running(client, student: str, deadline: float) -> str:
    """SIGKILL the worker process (not its nanny) running ``student``'s notebook, once it is running."""
    while (worker := _processing(client, student)) is None:
        assert time.monotonic() < deadline, f"{student}'s notebook never started on a worker"
        time.sleep(0.2)
    time.sleep(4)  # into the notebook's sleep: its runner, zygote and kernel are up
    pid = client.run(os.getpid, workers=[worker])[worker]
    os.kill(pid, signal.SIGKILL)
    return worker


@needs_jail
def test_a_worker_killed_mid_notebook_costs_that_notebook_only(cluster, tmp_path: Path) -> None:
    """The sleeper's worker is killed; the scheduler runs it again elsewhere, whose worker is killed too:
    past the scheduler's allowed failures it fails with the reason, the others are graded, and nothing
    is left unaccounted for; a re-run grades only what is missing."""
    address, client = cluster
    inbox, root = tmp_path / "inbox", tmp_path / "course"
    _write_class(root, inbox, {"sleeper": "import time\ntime.sleep(30)\n"}, others=("ada", "blake"))
    grading = subprocess.Popen(
        _grade_command(inbox, root, "--scheduler", address, "--cell-timeout", "60"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        first = _kill_worker_running(client, "sleeper", deadline)
        while _processing(client, "sleeper") in (None, first):
            assert time.monotonic() < deadline, "the sleeper's notebook was not run again"
            time.sleep(0.2)
        _kill_worker_running(client, "sleeper", deadline)
        out, err = grading.communicate(timeout=180)
    finally:
        if grading.poll() is None:
            grading.kill()
            grading.wait()
    assert grading.returncode == 0, err[-3000:]
    results = _results(root)
    assert sorted(results) == ["ada", "blake", "sleeper"], "every submission has a result"
    sleeper = results.pop("sleeper")
    assert sleeper.status == "failed"
    assert f"died {ALLOWED_FAILURES + 1} times" in sleeper.reason, sleeper.reason
    assert all(o.status == "graded" for o in results.values()), results
    assert (results["ada"].score, results["blake"].score) == (13, 0)

    # The cluster is whole again (each nanny restarted its worker); a late submission comes in.
    client.wait_for_workers(2, timeout=60)
    shutil.copy(inbox / f"ada_{NOTEBOOK}", inbox / f"late_{NOTEBOOK}")
    again = _grade_on(address, inbox, root, cell_seconds=60)
    assert again.returncode == 0, again.stderr[-3000:]
    last = load_runs(root)[-1]
    assert (last["counts"]["graded"], last["counts"]["skipped"]) == (1, 3), last
    assert _results(root)["late"].score == 13


def _other_checkout(folder: Path) -> Path:
    """A copy of this checkout's ``autograder`` with one check's message changed: another version."""
    import autograder

    copy = folder / "other-checkout"
    shutil.copytree(
        Path(autograder.__file__).parent, copy / "autograder", ignore=shutil.ignore_patterns("__pycache__")
    )
    compare = copy / "autograder" / "checks" / "compare.py"
    text = compare.read_text()
    assert " Likely mistake: " in text, "the copy would not differ"
    compare.write_text(text.replace(" Likely mistake: ", " Probable mistake: "))
    return copy


@needs_jail
def test_a_worker_of_another_version_gets_no_notebook_and_the_run_says_so(cluster, tmp_path: Path) -> None:
    """It joins in the middle of the run, when two notebooks wait for a worker: the one it is given runs on
    another, it gets no other, every notebook is graded; in the next run it is left out from the start."""
    address, client = cluster
    inbox, root = tmp_path / "inbox", tmp_path / "course"
    _write_class(root, inbox, {f"slow{i}": "import time\ntime.sleep(12)\n" for i in range(4)}, others=())
    command = _grade_command(inbox, root, "--scheduler", address, "--workers", "4", "--cell-timeout", "60")
    grading = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    other = None
    try:
        deadline = time.monotonic() + 120
        while len([k for keys in client.processing().values() for k in keys]) < 2:
            assert time.monotonic() < deadline, "the notebooks never started"
            time.sleep(0.2)
        other = _worker(address, tmp_path, "other", cwd=_other_checkout(tmp_path))
        client.wait_for_workers(3, timeout=60)
        out, err = grading.communicate(timeout=180)
        assert grading.returncode == 0, err[-3000:]
        joined = set(client.nthreads())
        assert "gets no notebook of this run: it has other checks than the grading machine" in err, err
        results = _results(root)
        assert {s: (o.score, o.status) for s, o in results.items()} == {
            f"slow{i}": (13, "graded") for i in range(4)
        }
        summary = (root / "grading" / "summary.md").read_text()
        assert "got no notebook of this run: it has other checks" in summary

        # The next run: the worker is refused before anything is sent to it, and the run grades as usual.
        (inbox / f"slow0_{NOTEBOOK}").unlink()
        shutil.copy(inbox / f"slow1_{NOTEBOOK}", inbox / f"late_{NOTEBOOK}")
        again = _grade_on(address, inbox, root, cell_seconds=60)
        assert again.returncode == 0, again.stderr[-3000:]
        refused = [w for w in joined if f"The Dask worker {w} gets no notebook" in again.stderr]
        assert len(refused) == 1, again.stderr
        assert _results(root)["late"].score == 13
    finally:
        if grading.poll() is None:
            grading.kill()
            grading.wait()
        if other is not None:
            _end(other)


@needs_jail
def test_a_worker_with_other_libraries_gets_no_notebook_and_the_run_says_which(
    cluster, tmp_path: Path
) -> None:
    """A worker where another version of a library the kernels run is installed would run the notebooks
    otherwise than the grading machine: it is refused from the start, with the library and both versions,
    and the class is graded on the others."""
    address, client = cluster
    inbox, root = tmp_path / "inbox", tmp_path / "course"
    _write_class(root, inbox, {}, others=("ada", "blake"))
    other = _worker(address, tmp_path, "other-libraries", env=other_library_env(tmp_path))
    try:
        client.wait_for_workers(3, timeout=60)
        joined = set(client.nthreads())
        graded = _grade_on(address, inbox, root, cell_seconds=60)
        assert graded.returncode == 0, graded.stderr[-3000:]
        said = (
            f"gets no notebook of this run: it has other libraries than the grading machine ({LIBRARY} "
            f"{OTHER_VERSION}, the grading machine {metadata.version(LIBRARY)}): install the same versions "
            "on every worker"
        )
        refused = [w for w in joined if f"The Dask worker {w} {said}" in graded.stderr]
        assert len(refused) == 1, graded.stderr
        assert {s: o.status for s, o in _results(root).items()} == {"ada": "graded", "blake": "graded"}
    finally:
        _end(other)


def test_a_refused_workers_reason_is_printed_bounded_and_as_text(capsys: pytest.CaptureFixture[str]) -> None:
    """What a worker answered (its refusal, or the exception it raised) reaches the instructor's terminal
    and the run's notes: one line, cut short, with no escape sequence or other control character."""
    from types import SimpleNamespace

    from autograder.engine.distributed import REASON_LENGTH, DaskExecutor

    executor = SimpleNamespace(refused={})
    DaskExecutor._refuse(executor, "tcp://10.0.0.9:4000", "is odd\x1b]0;owned\x07\nnext line " + "y" * 2000)
    err = capsys.readouterr().err
    assert err.startswith(
        "The Dask worker tcp://10.0.0.9:4000 gets no notebook of this run: it is odd]0;owned"
    )
    assert err.count("\n") == 1 and not any(ord(c) < 32 for c in err.rstrip("\n")), repr(err[:200])
    reason = executor.refused["tcp://10.0.0.9:4000"]
    assert len(reason) == REASON_LENGTH and reason.endswith("...")


def _running(client) -> set[str]:
    """The students whose notebooks a worker executes now (not those in its queue)."""

    def executing(dask_worker) -> list[str]:  # noqa: ANN001 - a local function: sent by value
        return [str(ts.key) for ts in dask_worker.state.executing]

    return {key.split("-")[1] for keys in client.run(executing).values() for key in keys}


def _interrupt_when_running(inbox: Path, root: Path, address: str, client, running: int, *options: str):
    """Grade on the cluster, press Ctrl-C once when ``running`` notebooks run on workers; the command's
    exit status and stderr, and whose notebooks ran at Ctrl-C."""
    grading = subprocess.Popen(
        from_a_terminal(
            _grade_command(inbox, root, "--scheduler", address, "--cell-timeout", "60", *options)
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while len(started := _running(client)) < running:
            assert time.monotonic() < deadline, "the notebooks never started"
            time.sleep(0.2)
        grading.send_signal(signal.SIGINT)
        out, err = grading.communicate(timeout=120)
    finally:
        if grading.poll() is None:
            grading.kill()
            grading.wait()
    assert "Interrupted: no new notebook starts" in err and "Traceback" not in err, err
    return grading.returncode, err, started


@needs_jail
def test_ctrl_c_starts_no_notebook_already_sent_and_a_run_whose_last_notebooks_finish_is_whole(
    cluster, tmp_path: Path
) -> None:
    """Four notebooks in flight on two single-threaded workers: two run, two wait on the scheduler. Ctrl-C
    once: the two running finish, the two waiting never start. The same command then grades those two;
    Ctrl-C while they run: they finish, and that run is whole (status 0, no warning)."""
    address, client = cluster
    inbox, root = tmp_path / "inbox", tmp_path / "course"
    _write_class(root, inbox, {f"slow{i}": "import time\ntime.sleep(8)\n" for i in range(4)}, others=())
    code, err, started = _interrupt_when_running(inbox, root, address, client, 2, "--workers", "4")
    assert code == 130, err[-3000:]
    assert "2 submissions were not graded. Run the same command again" in err, err
    assert len(started) == 2 and set(_results(root)) == started, "a waiting notebook started after Ctrl-C"

    code, err, started = _interrupt_when_running(inbox, root, address, client, 2, "--workers", "4")
    assert code == 0, err[-3000:]
    assert "WARNING" not in err, err
    assert {s: o.score for s, o in _results(root).items()} == {f"slow{i}": 13 for i in range(4)}


@needs_jail
def test_a_lost_scheduler_stops_the_run_kills_the_runners_and_says_how_to_resume(tmp_path: Path) -> None:
    """The scheduler is killed while a notebook runs: the run stops with status 4 and says how to resume
    (without the --force it was given), the ledger keeps the scheduler's address, the worker's runner is
    killed at once rather than left to finish a notebook nobody will read, and the worker itself ends
    (Dask's workers end with their scheduler: they must be started again with it)."""
    import psutil

    address = f"tcp://127.0.0.1:{_free_port()}"
    scheduler = _scheduler(address, tmp_path / "scheduler.log")
    worker = _worker(address, tmp_path, "worker")
    inbox, root = tmp_path / "inbox", tmp_path / "course"
    _write_class(root, inbox, {"sleeper": "import time\ntime.sleep(40)\n"}, others=("ada",))
    grading = None
    try:
        from distributed import Client

        with Client(address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(1, timeout=90)
            command = _grade_command(inbox, root, "--scheduler", address, "--force", "--cell-timeout", "60")
            grading = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            deadline = time.monotonic() + 120
            while _processing(client, "sleeper") is None:
                assert time.monotonic() < deadline, "the sleeper's notebook never started"
                time.sleep(0.2)
            time.sleep(3)  # into the sleep
        runners = [
            p
            for p in psutil.Process(worker.pid).children(recursive=True)
            if "autograder.engine.runner" in " ".join(p.cmdline())
        ]
        assert runners, "the worker runs the notebook on a runner"
        _end_now(scheduler)
        out, err = grading.communicate(timeout=60)
        assert grading.returncode == 4, err[-3000:]
        assert "Run the same command without --force to grade them" in err, err
        note = load_runs(root)[-1]["note"]
        assert note == f"the run stopped (the connection to the Dask scheduler at {address} was lost)", note
        gone, alive = psutil.wait_procs(runners, timeout=15)
        assert not alive, "the runner was left to finish a notebook whose result is lost"
        worker.wait(timeout=60)  # Dask: a worker ends when its scheduler is gone
    finally:
        if grading is not None and grading.poll() is None:
            grading.kill()
            grading.wait()
        _end(worker)
        _end(scheduler)


def _end_now(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def test_a_scheduler_that_cannot_be_reached_is_an_error_and_nothing_is_graded(tmp_path: Path) -> None:
    """A wrong address (nothing listens there): one line saying so, exit status 2, no result stored."""
    inbox, root = tmp_path / "inbox", tmp_path / "course"
    _write_class(root, inbox, {}, others=("ada",))
    address = f"tcp://127.0.0.1:{_free_port()}"
    ran = subprocess.run(
        _grade_command(inbox, root, "--scheduler", address), capture_output=True, text=True, timeout=180
    )
    assert ran.returncode == 2, ran.stderr[-3000:]
    assert f"error: cannot reach the Dask scheduler at {address}" in ran.stderr
    assert "Nothing was graded." in ran.stderr and "Traceback" not in ran.stderr
    assert _results(root) == {}
