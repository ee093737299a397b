"""Resident runners (``python -m autograder serve``) as the grade command uses them: real service and
command processes, jail on as root, each service on a socket of its own folder (``XDG_RUNTIME_DIR``)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
from library_helpers import LIBRARY, OTHER_VERSION, other_library_env
from notebook_helpers import finish, source_and_release, started_from_a_terminal
from test_engine import FIXTURE, LIMITS, after, solved

from autograder.engine import resident
from autograder.engine.contract import KernelEvent, StopReason, read_events
from autograder.engine.executor import LocalExecutor, Work
from autograder.engine.pipeline import ensure_course
from autograder.engine.service import CHECKS_ENV

TINY = "01_tiny"
#: A Python that any user may run (the test's own may live in a folder closed to others).
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or "python3"
GRADE = [sys.executable, "-m", "autograder", "grade", TINY, "inbox", "--course", "course",
         "--solutions", str(FIXTURE), "--cell-timeout", "20"]  # fmt: skip


def own_folder(prefix: str) -> Path:
    """A folder outside pytest's shared root (a concurrent session may prune it), reachable by the
    kernels' users as /tmp is."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    folder.chmod(0o755)
    return folder


def start_service(runtime: Path, *options: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``serve`` with its socket under ``runtime``, once it says it listens."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder", "serve", *options],
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("serving "), line + proc.stdout.read()
    return proc


def stop_service(proc: subprocess.Popen[str]) -> str:
    """SIGTERM the service; what it printed after its first line."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    return finish(proc, 60)[0]


@pytest.fixture(scope="module")
def class_folder() -> Iterator[Path]:
    """A class of two (a solved notebook and a blank one) with the course built, and a runtime folder."""
    folder = own_folder("serve-")
    ensure_course(folder / "build", FIXTURE)
    source, release = source_and_release(folder / "build", TINY)
    (folder / "inbox").mkdir()
    nbformat.write(solved(source, release), folder / "inbox" / f"ada_{TINY}.ipynb")
    nbformat.write(release, folder / "inbox" / f"bob_{TINY}.ipynb")
    (folder / "slow").mkdir()
    slow = after(solved(source, release), "mse_loss", "import time\ntime.sleep(6)")
    for student in ("s0", "s1", "s2"):
        nbformat.write(slow, folder / "slow" / f"{student}_{TINY}.ipynb")
    (folder / "run").mkdir(mode=0o700)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def service(class_folder: Path) -> Iterator[subprocess.Popen[str]]:
    """One warm runner of numpy kernels (the tiny assignment's kind), never idle-stopped."""
    proc = start_service(class_folder / "run", "--workers", "1", "--kinds", "numpy", "--idle", "0")
    yield proc
    out = stop_service(proc)
    assert "stopped: runners stopped" in out, out
    assert not (class_folder / "run" / "autograder" / "runners.sock").exists()


def grade(folder: Path, course: str, *options: str, inbox: str = "inbox") -> subprocess.CompletedProcess[str]:
    command = [*GRADE, *options]
    command[5], command[7] = inbox, course
    env = {**os.environ, "XDG_RUNTIME_DIR": str(folder / "run"), "TMPDIR": str(folder)}
    return subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def scores(folder: Path, course: str) -> list[str]:
    return sorted((folder / course / "grading" / "grades.csv").read_text().splitlines())


def test_scores_with_the_service_equal_scores_without_it_and_the_command_says_which_runners(
    class_folder: Path, service: subprocess.Popen[str]
) -> None:
    shared = grade(class_folder, "course-shared", "--workers", "2")
    assert shared.returncode == 0, shared.stderr
    line = f"runners: 1 of the resident service's (pid {service.pid}), and 1 of its own"
    assert line in shared.stderr, shared.stderr
    own = grade(class_folder, "course-own", "--workers", "2", "--own-runners")
    assert own.returncode == 0, own.stderr
    assert "runners: own (--own-runners)" in own.stderr
    assert scores(class_folder, "course-shared") == scores(class_folder, "course-own")
    assert "7" in "".join(scores(class_folder, "course-own"))


def test_a_command_killed_mid_job_leaves_the_service_grading_the_next_one(
    class_folder: Path, service: subprocess.Popen[str]
) -> None:
    temp = class_folder / "tmp-killed"
    temp.mkdir(mode=0o755)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(class_folder / "run"), "TMPDIR": str(temp)}
    command = [*GRADE, "--workers", "1"]
    command[5], command[7] = "slow", "course-killed"
    proc = subprocess.Popen(command, cwd=class_folder, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(temp.glob("grading-*/job-*.job.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)  # its kernel is running the notebook's cells on the service's runner
    proc.kill()
    _, err = proc.communicate(timeout=30)
    assert f"runners: 1 of the resident service's (pid {service.pid})" in err
    after_kill = grade(class_folder, "course-after", "--workers", "1")
    assert after_kill.returncode == 0, after_kill.stderr
    assert f"runners: 1 of the resident service's (pid {service.pid})" in after_kill.stderr
    assert re.search(r"ada\s+7 / 7", after_kill.stdout) and re.search(r"bob\s+0 / 7", after_kill.stdout)
    assert service.poll() is None
    # The killed command's job went no further: its kernel was killed with the runner, mid-sleep.
    (events,) = temp.glob("grading-*/job-*.events.jsonl")
    log = read_events(events)
    assert log.events and log.end is None, log.events


def interrupt(folder: Path, course: str, times: int) -> tuple[int, str, Path]:
    """Grade the slow class on one runner; Ctrl-C once the first notebook is graded (the second running),
    and ``times - 1`` more once the command says it is finishing. Its exit status, stderr, and its TMPDIR."""
    temp = folder / f"tmp-{course}"
    temp.mkdir(mode=0o755)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(folder / "run"), "TMPDIR": str(temp)}
    command = [*GRADE, "--workers", "1"]
    command[5], command[7] = "slow", course
    proc = started_from_a_terminal(command, cwd=folder, env=env)
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "1/3" in line or (times > 1 and "Interrupted: no new notebook starts" in line):
            proc.send_signal(signal.SIGINT)
            times -= 1
            if not times:
                break
    err = finish(proc, 120)[1]
    return proc.returncode, "".join(seen) + err, temp


def test_ctrl_c_while_on_the_service_ends_as_with_own_runners(
    class_folder: Path, service: subprocess.Popen[str]
) -> None:
    """The running notebook finishes and is kept; the one after it never starts."""
    code, err, temp = interrupt(class_folder, "course-ctrl-c", 1)
    assert code == 130, err
    assert f"runners: 1 of the resident service's (pid {service.pid})" in err
    assert "Interrupted: no new notebook starts; finishing the 1 running" in err
    assert "Traceback" not in err
    results = class_folder / "course-ctrl-c" / "autograder" / "results" / TINY
    assert len(list(results.glob("*.json"))) == 2  # the first, and the one running at Ctrl-C
    assert not list(temp.glob("grading-*")), "no scratch folder is left behind"


def test_killing_the_runs_notebooks_kills_the_job_on_the_service(
    class_folder: Path, service: subprocess.Popen[str]
) -> None:
    """What a second Ctrl-C does (``Grader.cancel(running=True)``: the executor's ``kill``): the job on the
    service's runner ends as killed at once, and the runner is replaced, ready for the next command."""
    folder = Path(tempfile.mkdtemp(prefix="kill-", dir=class_folder))
    folder.chmod(0o755)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_RUNTIME_DIR", str(class_folder / "run"))
        patch.setenv("TMPDIR", str(folder))
        tempfile.tempdir = None  # read TMPDIR again
        try:
            executor = LocalExecutor()
        finally:
            tempfile.tempdir = None
        runners, line = resident.lease(1, lambda: True, executor.work)
        assert len(runners) == 1, line
        executor.use_runners(runners)
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import time\ntime.sleep(60)")])
        work = Work("kill", nbformat.writes(notebook), [], "numpy", replace(LIMITS, cell_seconds=90), True)
        done: list = []
        running = threading.Thread(target=lambda: done.append(executor.run(work)))
        running.start()
        deadline = time.monotonic() + 60
        while not any(read_events(f).stamp(KernelEvent) for f in executor.work.glob("*.events.jsonl")):
            assert time.monotonic() < deadline, "the kernel never started"
            time.sleep(0.2)
        killed_at = time.monotonic()
        executor.kill()
        running.join(timeout=30)
        assert not running.is_alive() and time.monotonic() - killed_at < 10
        stop = done[0].events.end.stop
        assert stop.reason is StopReason.KILLED, stop
        executor.close()
        deadline = (
            time.monotonic() + 60
        )  # the service notices the closed connection, then replaces the runner
        while not (again := resident.lease(1, lambda: True, folder))[0] and time.monotonic() < deadline:
            time.sleep(0.5)
    assert len(again[0]) == 1, again[1]
    again[0][0].stop()


def test_refusals_stale_socket_and_idle_stop() -> None:
    """A stale socket is taken over; a second service is refused; a service of other checks is not used;
    a client of another user is refused, and a folder others can enter is not trusted; --idle stops it."""
    runtime = own_folder("serve-run-")
    folder = runtime / "autograder"
    folder.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(folder / "runners.sock"))
    stale.close()  # its file stays: a service that died without removing it
    env = {CHECKS_ENV: "another-version"}
    proc = start_service(runtime, "--workers", "1", "--kinds", "", "--idle", "10", env=env)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "autograder", "serve", "--kinds", ""],
            env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2
        assert f"another service (pid {proc.pid}) already listens" in second.stderr
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_RUNTIME_DIR", str(runtime))
            runners, line = resident.lease(1, lambda: True, runtime)
            assert runners == [] and "other checks version" in line, line
            assert f"pid {proc.pid}" in line
            for path in (runtime, folder):
                path.chmod(0o711)  # as if the folder were open: the service's own check must hold
            (folder / "runners.sock").chmod(0o666)
            nobody = subprocess.run(
                ["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", SYSTEM_PYTHON, "-c",
                 "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                 "print(s.recv(4096).decode())", str(folder / "runners.sock")],
                capture_output=True, text=True, timeout=30,
            )  # fmt: skip
            assert nobody.stdout.startswith("refused only user 0 may use this service, not user 65534")
            runners, line = resident.lease(1, lambda: True, runtime)
            assert runners == [] and "is not a folder of this user closed to others" in line, line
        out = finish(proc, 60)[0]
        assert "refused a connection of user 65534" in out
        assert "no request for 10 s: runners stopped" in out
        assert not (folder / "runners.sock").exists()
    finally:
        stop_service(proc)
        shutil.rmtree(runtime, ignore_errors=True)


#: A version as a hostile metadata file could state it: an escape sequence, a bell, and far too long.
HOSTILE_VERSION = "9.9\x1b[2J\x07" + "x" * 100


@pytest.mark.parametrize(
    ("theirs", "shown"),
    [(OTHER_VERSION, OTHER_VERSION), (HOSTILE_VERSION, "9.9[2J" + "x" * 31 + "...")],
    ids=["another", "hostile"],
)
def test_a_service_with_other_libraries_is_not_used_and_the_command_says_which(
    theirs: str, shown: str
) -> None:
    """A service started where another version of a library its kernels run is installed (``pip install``
    after ``serve`` started): its runners would run the old one, the command's references the new one.
    The command runs its own runners and names the library and both versions, the service's cut short
    and without a control character."""
    runtime = own_folder("serve-libs-")
    proc = start_service(runtime, "--workers", "1", "--kinds", "", env=other_library_env(runtime, theirs))
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_RUNTIME_DIR", str(runtime))
            runners, line = resident.lease(1, lambda: True, runtime)
        assert runners == [], line
        assert line == (
            f"own runners: the resident service (pid {proc.pid}) has other libraries: {LIBRARY} {shown}, "
            f"this command {metadata.version(LIBRARY)} (restart the service after installing)"
        )
    finally:
        stop_service(proc)
        shutil.rmtree(runtime, ignore_errors=True)


def test_a_service_that_dies_mid_run_fails_that_notebook_and_the_rest_run_on_own_runners(
    class_folder: Path,
) -> None:
    """The service is killed while the first notebook runs on it: that notebook ends as a runner
    failure (stated, nothing lost), the command says so, and the next notebooks are graded on its own."""
    runtime = own_folder("serve-dies-")
    proc = start_service(runtime, "--workers", "1", "--kinds", "numpy", "--idle", "0")
    temp = class_folder / "tmp-dies"
    temp.mkdir(mode=0o755)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "TMPDIR": str(temp)}
    command = [*GRADE, "--workers", "1"]
    command[5], command[7] = "slow", "course-dies"
    try:
        grading = subprocess.Popen(command, cwd=class_folder, env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while not list(temp.glob("grading-*/job-*.job.json")) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        proc.kill()
        out, err = grading.communicate(timeout=300)
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(runtime, ignore_errors=True)
    assert f"runners: 1 of the resident service's (pid {proc.pid})" in err
    assert f"the resident service (pid {proc.pid}) went away" in err, err
    assert "Traceback" not in err
    stated = (
        f"stopped early (01_tiny): the grader's runner failed (the resident runner service (pid {proc.pid})"
    )
    # The one running when the service died (which of the three starts first is the threads' race)
    # keeps the points of its cells before the stop; the other two are graded in full.
    failed = [s for s in ("s0", "s1", "s2") if re.search(rf"{s}\s+\d / 7 .*" + re.escape(stated), out)]
    assert len(failed) == 1, out
    assert all(re.search(rf"{s}\s+7 / 7\s+7 / 7\s*$", out, re.M) for s in {"s0", "s1", "s2"} - set(failed)), (
        out
    )


def test_the_service_runs_only_a_grade_commands_own_job_files(
    class_folder: Path, service: subprocess.Popen[str]
) -> None:
    """What a client of the right user may still send is bounded: a path that is not a job file of a
    ``grading-*`` folder, a job file whose notebook is another file, a hard limit that is not a number of
    seconds, an over-long line. Each is refused or ends the connection, no runner runs it, and the
    runner goes back to the service for the next command."""
    from autograder.engine.contract import Job

    scratch = Path(tempfile.mkdtemp(prefix="grading-", dir=class_folder))
    stem = scratch / "job-abc"

    def job(stem: Path, notebook: str) -> Path:
        Job(notebook=notebook, workdir=str(stem), events=f"{stem}.events.jsonl", grade_cells=[],
            cell_seconds=5, notebook_seconds=5, output_bytes=1000, kernel="numpy",
            executed=f"{stem}.executed.ipynb").write(Path(f"{stem}.job.json"))  # fmt: skip
        return Path(f"{stem}.job.json")

    job(stem, f"{stem}.ipynb")
    stolen = job(scratch / "job-stolen", "/etc/shadow")  # everything its own but the notebook

    def lease() -> tuple[socket.socket, object]:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_RUNTIME_DIR", str(class_folder / "run"))
            sock, stream, _ = resident.connect()
        sock.settimeout(60)
        sock.sendall(b"lease\n")
        assert resident.read_line(stream) == "leased"
        return sock, stream

    sock, stream = lease()
    not_a_job = "refused not the job file of a grading-* scratch folder"
    asked = {
        "run 10 /etc/passwd": not_a_job,
        f"run 10 {stolen}": "refused its notebook is not that job's own",
        f"run nan {stem}.job.json": "refused its hard limit is out of bounds",
        f"run 1e9 {stem}.job.json": "refused its hard limit is out of bounds",
        f"run 10 {scratch}/../{scratch.name}/job-abc.job.json.x": not_a_job,
        "run 10 relative/grading-x/job-abc.job.json": not_a_job,
    }
    for line, answer in asked.items():
        sock.sendall(line.encode() + b"\n")
        assert resident.read_line(stream) == answer, line
    sock.sendall(b"run 10 /" + b"a" * 5000 + b"\n")
    assert stream.readline() == b"", "an over-long line ends the connection"
    sock.close()
    assert not list(scratch.glob("*.events.jsonl")), "no job of these ran"
    again, _ = lease()  # the one runner is back
    again.close()
    assert service.poll() is None


# -- scoring on the service's graders -----------------------------------------------------------------

#: The grade command, run so that it says at its exit whether PyTorch was ever imported in its process.
PROBED = (
    "import atexit, runpy, sys; atexit.register(lambda: print('pytorch imported:', 'torch' in sys.modules, "
    "file=sys.stderr)); runpy.run_module('autograder', run_name='__main__', alter_sys=True)"
)


def test_a_command_on_the_service_scores_there_and_never_imports_pytorch(
    class_folder: Path, service: subprocess.Popen[str]
) -> None:
    """The command's fixed cost on resident runners was mostly its graders' warm-up (PyTorch): on the
    service's runners its cells are scored by the service's warm graders, its process never imports
    PyTorch, and the scores are those of a command that scores everything itself."""
    served = grade(class_folder, "course-scored", "--workers", "1")
    own = grade(class_folder, "course-scored-own", "--workers", "1", "--own-runners")
    for run in (served, own):
        assert run.returncode == 0, run.stderr
    probed = [sys.executable, "-c", PROBED, *GRADE[3:], "--workers", "1"]
    probed[probed.index("course")] = "course-probed"
    env = {**os.environ, "XDG_RUNTIME_DIR": str(class_folder / "run"), "TMPDIR": str(class_folder)}
    on_service = subprocess.run(
        probed, cwd=class_folder, env=env, capture_output=True, text=True, timeout=300
    )
    assert f"runners: 1 of the resident service's (pid {service.pid})" in on_service.stderr
    assert "pytorch imported: False" in on_service.stderr, on_service.stderr
    probed[probed.index("course-probed")] = "course-probed-own"
    alone = subprocess.run([*probed, "--own-runners"], cwd=class_folder, env=env, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert "pytorch imported: True" in alone.stderr, "the probe sees a command that scores itself"
    assert scores(class_folder, "course-scored") == scores(class_folder, "course-scored-own")
    assert scores(class_folder, "course-probed") == scores(class_folder, "course-scored-own")
    assert "scoring:" not in served.stderr + on_service.stderr


def test_the_services_scores_and_feedback_are_the_commands_own_for_every_kind_of_evidence(
    class_folder: Path, service: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same cell graded here and on the service, for a right answer, a wrong one (with its
    diagnosis), evidence a grader cannot use, and text no UTF-8 encoder takes (a lone surrogate): the same
    score and the same feedback, every answer the service's (the scorer never fell back)."""
    from test_verdicts import LINEAR, backward_wrong_axis, cell_event, linear_evidence

    from autograder.grading.verdicts import grade_cell

    unusable = (
        '{"check": "linear_layer", "seed": 7, "cases": "\ud800 not a list of cases"}'  # a raw surrogate
    )
    evidences = {
        "right": linear_evidence(7),
        "wrong": linear_evidence(7, backward_wrong_axis),
        "unusable": unusable,
    }
    # The socket the runners were leased from, whatever the environment says by the time a cell is scored.
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    scorer = resident.ServiceScorer(service.pid, class_folder / "run" / "autograder" / "runners.sock")
    try:
        for what, text in evidences.items():
            event = cell_event(LINEAR.grade_id, text)
            here, there = grade_cell(LINEAR, event, None), grade_cell(LINEAR, event, None, scorer)
            assert there == here, what
            assert not scorer.gone, f"{what}: the service did not answer"
            for sock, _ in scorer._idle:  # a kept connection the service has closed meanwhile (idle)
                sock.shutdown(socket.SHUT_RDWR)
    finally:
        scorer.close()
    assert here.feedback.startswith("not graded: unusable evidence ("), here.feedback
    assert grade_cell(LINEAR, cell_event(LINEAR.grade_id, evidences["wrong"]), None).score < LINEAR.points


def test_a_scorer_whose_service_does_not_answer_says_so_once_and_the_command_scores_itself(
    class_folder: Path, service: subprocess.Popen[str], capsys
) -> None:
    """Another service now at the socket (its pid not the leased one's), or none: each cell is graded in
    the command's process with the same outcome, and the command says once why."""
    from test_verdicts import LINEAR, cell_event, linear_evidence

    from autograder.grading.verdicts import grade_cell

    path = class_folder / "run" / "autograder" / "runners.sock"
    event = cell_event(LINEAR.grade_id, linear_evidence(7))
    nowhere = class_folder / "nothing-here" / "runners.sock"
    for scorer in (
        resident.ServiceScorer(service.pid + 100_000, path),
        resident.ServiceScorer(service.pid, nowhere),
    ):
        results = [grade_cell(LINEAR, event, None, scorer) for _ in range(2)]
        assert results == [grade_cell(LINEAR, event, None)] * 2
        assert scorer.gone
        said = capsys.readouterr().err
        assert said.count(f"scoring: the resident service (pid {scorer.pid}) did not answer") == 1, said


def test_a_service_whose_graders_cannot_load_scores_nothing_and_the_command_scores_itself(
    class_folder: Path,
) -> None:
    """The service's own PyTorch is broken (its import raises): it says so and refuses every scoring
    request, so that its failure never reads as a learner's unusable evidence; the command runs on its
    runners, says the service did not answer, and scores the cells itself, right."""
    runtime = own_folder("serve-no-graders-")
    fake = runtime / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('a broken PyTorch')\n")
    proc = start_service(runtime, "--workers", "1", "--kinds", "numpy", "--idle", "0",
                         env={"PYTHONPATH": str(fake.parent)})  # fmt: skip
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "TMPDIR": str(class_folder)}
    command = [*GRADE, "--workers", "1"]
    command[7] = "course-no-graders"
    try:
        run = subprocess.run(command, cwd=class_folder, env=env, capture_output=True, text=True, timeout=300)
    finally:
        out = stop_service(proc)
        shutil.rmtree(runtime, ignore_errors=True)
    said = "the graders could not be loaded (ImportError: a broken PyTorch): this service scores nothing"
    assert said in out, out
    assert run.returncode == 0, run.stderr
    assert f"runners: 1 of the resident service's (pid {proc.pid})" in run.stderr
    assert run.stderr.count(f"scoring: the resident service (pid {proc.pid}) did not answer") == 1, run.stderr
    graded = {line.split(",")[0]: line.split(",")[4] for line in scores(class_folder, "course-no-graders")}
    assert (graded["ada"], graded["bob"]) == ("7", "0"), graded


def test_the_service_bounds_a_scoring_request_and_goes_on(
    class_folder: Path, service: subprocess.Popen[str]
) -> None:
    """A length over the bound, or not a number, ends that connection unanswered; a request cut short
    too; the next connection is served."""

    def ask(request: bytes) -> bytes:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("XDG_RUNTIME_DIR", str(class_folder / "run"))
            sock, stream, _ = resident.connect()
        sock.settimeout(60)
        sock.sendall(request)
        sock.shutdown(socket.SHUT_WR)
        answer = stream.read()
        sock.close()
        return answer

    assert ask(f"score {resident.SCORE_BYTES + 1} linear_layer\n".encode() + b"{}") == b""
    assert ask(b"score -1 linear_layer\n") == b""
    assert ask(b"score many linear_layer\n") == b""
    assert ask(b"score 100 linear_layer\n{}") == b""  # closed before its 100 bytes
    answer = ask(b"score 2 no_such_check\n{}")
    assert answer == b'scored 21\n{"error": "KeyError"}', answer
    assert service.poll() is None


@pytest.mark.parametrize(
    "answer",
    [
        [],
        {"score": 1.0},
        {"score": True, "points": 1, "text": ""},
        {"score": float("nan"), "points": 1, "text": ""},
        {"score": 1, "points": 1, "text": 3},
        {"score": 1, "points": 1, "text": "", "more": 1},
        {"error": 3},
    ],
)
def test_an_answer_not_shaped_as_a_score_is_not_taken(answer: object) -> None:
    with pytest.raises(ValueError, match="not a score"):
        resident._score_answer(answer)
