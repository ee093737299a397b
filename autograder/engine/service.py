"""Resident runners: ``python -m autograder serve`` keeps N runner processes of this machine, their zygotes
imported and warmed, for the grade commands of the same user to run their notebooks on.

A grade command pays, before its first notebook, for its runners' zygotes to import numpy, PyTorch and
ipykernel and for its first kernels to run cold (docs/speed.md); runners that outlive the command pay it
once. The service listens on a Unix socket in a folder only its user can enter
(:func:`~autograder.engine.resident.socket_path`), answers only peers of its own user id (``SO_PEERCRED``)
and runs only job files of a ``grading-*`` scratch folder of that user, written as the grade command writes
them (:func:`job_problem`). It also scores graded cells for those commands, on graders it has imported
and warmed (:meth:`Service.score`), so that a command on its runners never imports PyTorch. Each
connection leases one runner; a connection that closes during a job has
the job killed and the runner replaced by a fresh, warm one, so no command's work outlives it or reaches
the next. The protocol is :mod:`autograder.engine.resident`'s.

A test hook: :data:`CHECKS_ENV` makes the service announce another checks version than its own, as a
service started from other code would (``tests/test_service.py``).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import select
import shutil
import signal
import socket
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path

from autograder.engine import jail
from autograder.engine.contract import Job
from autograder.engine.executor import RunnerProcess
from autograder.engine.resident import (
    LINE,
    SCORE_BYTES,
    _send,
    folder_problem,
    peer_uid,
    read_line,
    socket_folder,
    socket_path,
)
from autograder.engine.versions import code_version, engine_version, library_versions

#: For tests only: the checks version the service announces instead of its own.
CHECKS_ENV = "AUTOGRADER_SERVICE_CHECKS_VERSION"
#: How many connections may be open at once (leases and probes together).
MOST_CONNECTIONS = 64
#: The longest hard limit a job may ask for, in seconds.
MOST_SECONDS = 7 * 24 * 3600.0

JOB_NAME = re.compile(r"(job-[a-z0-9_]{1,64})\.job\.json")
SCRATCH_NAME = re.compile(r"grading-[a-z0-9_]{1,64}")


class ServiceError(Exception):
    """Why the service cannot start, as the serve command prints it."""


def job_problem(text: str, uid: int) -> str | None:
    """Why the service will not run the job file ``text`` for a peer of user ``uid`` (None: it will).

    Only a job as the grade command writes it (:meth:`~autograder.engine.executor.LocalExecutor.run`): a
    regular file ``job-*.job.json`` of that user in a ``grading-*`` folder of that user, whose notebook,
    kernel folder, events, executed notebook and jail are that job's files of the same folder, and whose
    jail command is the engine's own."""
    real = os.path.realpath(text) if text.startswith("/") and "\0" not in text else ""
    match = JOB_NAME.fullmatch(os.path.basename(real))
    folder = os.path.dirname(real)
    if not match or not SCRATCH_NAME.fullmatch(os.path.basename(folder)):
        return "not the job file of a grading-* scratch folder"
    try:
        info, folder_info = os.lstat(real), os.lstat(folder)
    except OSError:
        return "no such job file"
    if not stat.S_ISREG(info.st_mode) or info.st_size > 2**20 or {info.st_uid, folder_info.st_uid} != {uid}:
        return "the job file or its folder is not the requester's own"
    try:
        job = Job.read(Path(real))
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return f"an unreadable job file: {type(exc).__name__}"
    stem = os.path.join(folder, match.group(1))
    expected = {"workdir": stem, "notebook": f"{stem}.ipynb", "events": f"{stem}.events.jsonl"}
    expected["executed"] = f"{stem}.executed.ipynb"
    if job.jail_spec is not None:
        expected["jail_spec"] = f"{stem}.jail.json"
    for name, want in expected.items():
        value = getattr(job, name)
        if not isinstance(value, str) or os.path.realpath(value) != want:
            return f"its {name} is not that job's own"
    prefix = jail.jail_command(Path(job.jail_spec)) if job.jail_spec is not None else []
    if job.jail_prefix != prefix or job.kernel not in ("numpy", "torch", "compile"):
        return "its jail or kernel is not the engine's"
    return None


class Service:
    """The runners, the socket and the leases: :meth:`start`, :meth:`serve_forever`, :meth:`close`."""

    def __init__(self, workers: int, kinds: list[str], idle_seconds: float) -> None:
        self.workers, self.kinds, self.idle_seconds = workers, kinds, idle_seconds
        self.path = socket_path()
        self.work = Path(tempfile.mkdtemp(prefix="autograder-serve-"))
        self.lock = threading.Lock()
        self.runners: list[RunnerProcess] = []
        self.free: list[RunnerProcess] = []
        self.changed = threading.Condition(self.lock)
        """Notified when a replaced runner is back: a lease waits for it rather than find none idle."""
        self.connections = 0
        self.leases = 0
        self.replacing = 0
        self.last = time.monotonic()
        self.server: socket.socket | None = None
        self.lock_fd: int | None = None
        self.hello = {
            "pid": os.getpid(),
            "checks": os.environ.get(CHECKS_ENV) or code_version(),
            "engine": engine_version(),
            "libraries": library_versions(),
            "python": sys.executable,
            "jail": jail.jail_available(),
            "runners": workers,
            "scores": True,
        }
        self.graders_warm = threading.Event()
        """Set once the graders are imported and warmed (:meth:`_warm_graders`): scoring waits for it."""
        self.graders_failed: str | None = None
        """Why the graders could not be imported or warmed (None when they were): no request is scored."""

    def start(self) -> None:
        """Claim the socket (refusing when a live service holds it, taking over a stale one), then start
        the runners and wait until every zygote and the graders have warmed up; only then listen."""
        self._claim()
        threading.Thread(target=self._warm_graders, name="warm-graders", daemon=True).start()
        for i in range(self.workers):
            runner = RunnerProcess(self.work / f"runner-{i}.log", True, self.kinds, warm="first")
            runner.proc = runner._start()
            self.runners.append(runner)
        for runner in self.runners:
            self._await_ready(runner)
        self.graders_warm.wait(timeout=600)  # beside the runners' warm-up, and shorter
        self.free = list(self.runners)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            server.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        server.listen(16)
        server.settimeout(1.0)
        self.server = server

    def _claim(self) -> None:
        folder = socket_folder()
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        why = folder_problem(folder)
        if why:
            raise ServiceError(why)
        fd = os.open(folder / "runners.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise ServiceError(f"another service (pid {holder}) already listens at {self.path}") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.lock_fd = fd
        self.path.unlink(missing_ok=True)  # a stale socket: the service that made it no longer holds the lock

    def _warm_graders(self) -> None:
        """Import the graders and make their first calls (:func:`autograder.grading.warm_up`, every check),
        beside the runners' warm-up. When that fails, the service scores nothing: a failure of its own must
        not read as the learner's evidence being unusable (each command then scores its cells itself)."""
        try:
            from autograder.grading import warm_up

            warm_up(None)
        except Exception as exc:  # noqa: BLE001 - said when the service starts, and every scoring refused
            self.graders_failed = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            self.graders_warm.set()

    def _await_ready(self, runner: RunnerProcess, seconds: float = 600.0) -> bool:
        """Wait for a runner started with ``--warm-up first`` to say its zygotes are warm; kill it if not."""
        if runner.proc is None or not runner.kinds:
            return runner.proc is not None
        if runner.answer(seconds) == "ready":
            return True
        runner.kill()  # it starts again, cold, on its next job
        return False

    def _restart(self, runner: RunnerProcess) -> None:
        runner.kill()
        runner.kinds, runner.warm = list(self.kinds), "first"
        runner.proc = runner._start()
        self._await_ready(runner)

    def serve_forever(self) -> str:
        """Accept connections until ``idle_seconds`` pass with no request and no lease; return why it
        stopped. Each connection is served by a thread of its own."""
        assert self.server is not None
        while True:
            with self.lock:
                quiet = self.leases == 0 and time.monotonic() - self.last > self.idle_seconds
            if self.idle_seconds and quiet:
                return f"no request for {self.idle_seconds:g} s"
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            with self.lock:
                self.last = time.monotonic()
                crowded = self.connections >= MOST_CONNECTIONS
                self.connections += 0 if crowded else 1
            if crowded:
                conn.close()
                continue
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        try:
            self._converse(conn)
        except (OSError, ValueError):
            pass  # the peer went away or spoke nonsense: its lease, if any, was given back
        finally:
            conn.close()
            with self.lock:
                self.connections -= 1
                self.last = time.monotonic()

    def _converse(self, conn: socket.socket) -> None:
        uid = peer_uid(conn)
        if uid != os.geteuid():
            _send(conn, f"refused only user {os.geteuid()} may use this service, not user {uid}")
            print(f"refused a connection of user {uid}: not this service's user", flush=True)
            return
        _send(conn, "hello " + json.dumps(self.hello))
        conn.settimeout(60.0)
        stream = conn.makefile("rb")
        word, _, rest = read_line(stream).partition(" ")
        while word == "score":
            self._answer_score(conn, stream, rest)
            word, _, rest = read_line(stream).partition(" ")
        if word != "lease":
            return
        with self.lock:
            self.changed.wait_for(lambda: self.free or not self.replacing, timeout=300)
            runner = self.free.pop(0) if self.free else None
            self.leases += runner is not None
        if runner is None:
            _send(conn, "busy")
            return
        try:
            _send(conn, "leased")
            conn.settimeout(None)  # the lease lasts as long as the command
            self._serve_lease(conn, stream, runner, uid)
        finally:
            self._give_back(runner)

    def _answer_score(self, conn: socket.socket, stream: object, rest: str) -> None:
        """``score LENGTH CHECK``, then LENGTH bytes of evidence (UTF-8): answer ``scored LENGTH`` and the
        score as :meth:`score` gives it. A length out of bounds ends the connection (a ValueError)."""
        length, _, check = rest.partition(" ")
        size = int(length)
        if not 0 <= size <= SCORE_BYTES:
            raise ValueError(f"a scoring request of {size} bytes")
        body = stream.read(size)  # type: ignore[attr-defined]
        if len(body) != size:
            raise ConnectionError("closed")
        with self.lock:
            self.last = time.monotonic()
        scored = self.score(check, body.decode("utf-8", errors="surrogatepass"))
        if scored is None:
            _send(conn, "refused its graders could not be loaded")
            return
        answer = json.dumps(scored).encode()
        conn.sendall(f"scored {len(answer)}\n".encode() + answer)

    def score(self, check: str, text: str) -> dict[str, object] | None:
        """Grade the evidence ``text`` with the grader of ``check``, as the command would in its own process
        (:func:`autograder.grading.verdicts.score_evidence`): the same code and libraries (its ``hello``
        says which, and the command checked), the graders already imported and warm. None when they could
        not be loaded."""
        self.graders_warm.wait(timeout=600)
        if self.graders_failed is not None:
            return None
        from autograder.grading.verdicts import score_evidence

        return score_evidence(check, text)

    def _give_back(self, runner: RunnerProcess) -> None:
        """Put a leased runner back, replaced by a fresh, warm one when its job was killed."""
        dead = runner.proc is None or runner.proc.poll() is not None
        with self.lock:
            self.leases -= 1
            self.replacing += dead
        if dead:
            self._restart(runner)
        with self.lock:
            self.replacing -= dead
            self.free.append(runner)
            self.changed.notify_all()

    def _serve_lease(self, conn: socket.socket, stream: object, runner: RunnerProcess, uid: int) -> None:
        while True:
            word, _, rest = read_line(stream).partition(" ")
            with self.lock:
                self.last = time.monotonic()
            seconds, _, path = rest.partition(" ")
            if word != "run":
                return
            why = job_problem(path, uid)
            limit = float(seconds)  # a ValueError ends the connection
            if why is None and not 0 < limit <= MOST_SECONDS:
                why = "its hard limit is out of bounds"
            if why:
                _send(conn, f"refused {why}")
                continue
            answer = self._run(conn, runner, Path(os.path.realpath(path)), limit)
            if answer is None:
                return
            killed, last = answer
            _send(conn, f"done {int(killed)} {last.replace(chr(10), ' ')[: LINE - 16]}")

    def _run(
        self, conn: socket.socket, runner: RunnerProcess, path: Path, limit: float
    ) -> tuple[bool, str] | None:
        """Run one job on the runner, as the command's own runner would (its hard limit included);
        None when the connection closed meanwhile: the job was killed, and the runner with it."""
        answer: list[tuple[bool, str]] = []
        job = threading.Thread(target=lambda: answer.append(runner.run(path, limit)), daemon=True)
        job.start()
        while job.is_alive():
            ready, _, _ = select.select([conn], [], [], 0.05)
            if ready:  # the command closed (it died, or killed its notebooks) or spoke out of turn
                runner.kill()
                job.join()
                print(
                    "a command went away during its job: the job was killed, its runner replaced", flush=True
                )
                return None
        job.join()
        return answer[0] if answer else (False, "the resident runner failed")

    def close(self) -> None:
        """Kill the runners, remove the socket and the service's scratch folder."""
        if self.server is not None:
            self.server.close()
            self.path.unlink(missing_ok=True)
        for runner in self.runners:
            runner.kill()
        if self.lock_fd is not None:
            os.close(self.lock_fd)
        shutil.rmtree(self.work, ignore_errors=True)


def serve_command(workers: int, kinds_text: str, idle_seconds: float) -> int:
    """``python -m autograder serve``: start the service, say where it listens, serve until Ctrl-C,
    SIGTERM or ``idle_seconds`` without a request; then stop the runners and remove the socket."""
    from autograder.engine.untrusted import terminal

    def stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    kinds = [k for k in kinds_text.split(",") if k]
    unknown = sorted(set(kinds) - {"numpy", "torch", "compile"})
    if unknown or workers < 1:
        why = (
            f"unknown kinds {unknown} (numpy, torch, compile)" if unknown else "--workers must be at least 1"
        )
        print(f"error: {why}", file=sys.stderr)
        return 2
    service = Service(workers, kinds, idle_seconds)
    try:
        service.start()
        print(
            f"serving {workers} warm runners ({','.join(kinds) or 'no'} kernels) at {service.path} (pid "
            f"{os.getpid()}): grade commands of this user on this machine use them; Ctrl-C stops",
            flush=True,
        )
        if service.graders_failed:
            print(
                f"the graders could not be loaded ({terminal(service.graders_failed)}): this service scores "
                "nothing, and grade commands score their cells themselves",
                flush=True,
            )
        why = service.serve_forever()
    except ServiceError as exc:
        print(f"error: {terminal(exc)}; nothing started", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        why = "stopped"
    finally:
        service.close()
    print(f"{why}: runners stopped, {service.path} removed", flush=True)
    return 0
