"""The grade command's side of a resident runner service (``python -m autograder serve``,
:mod:`autograder.engine.service`): where its socket is, whether a live one will run this command's
notebooks, and :class:`ServiceRunner`, one of its runners leased for the command's length.

Light to import (no engine, no notebook library): the grade command asks before its heavy imports.

The protocol, one line each way, every line at most :data:`LINE` bytes: on connecting, the service says
``hello {json}`` (its pid, its code's versions, its kernels' libraries, Python and whether it can jail
kernels) or ``refused SENTENCE``;
``lease`` is answered ``leased`` (one idle runner is this connection's until it closes) or ``busy``;
``run SECONDS PATH`` runs the job file PATH on the leased runner, killed after SECONDS, and is answered
``done 0|1 LAST LINE`` (whether it was killed, the runner's last log line) or ``refused SENTENCE`` (a job
path the service will not run). A connection that closes during a job has that job killed and its
runner replaced by a fresh one: a command that dies leaves no work behind. Before a ``lease`` (or
instead), ``score LENGTH CHECK`` and LENGTH bytes of a graded call's evidence (UTF-8) are answered
``scored LENGTH`` and LENGTH bytes of JSON, the score the service's graders give it
(:func:`autograder.grading.verdicts.score_evidence`); as many as the command asks, on one connection.
"""

from __future__ import annotations

import json
import math
import os
import socket
import stat
import struct
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: The longest line either side sends or reads.
LINE = 4096
#: Why a command uses its own runners when this user has no service at all (it prints nothing then).
NONE_RUNNING = "none running"
#: How long the command waits for a job's answer beyond its hard limit before it gives the service up.
GRACE = 60.0
#: The longest scoring request or answer, in bytes: a graded call's evidence is at most 8 Mi characters
#: (``autograder.checks.evidence.MAX_EVIDENCE_BYTES``), each at most 4 bytes in UTF-8.
SCORE_BYTES = 4 * 8 * 2**20
#: How long the command waits for a score before it scores the rest itself.
SCORE_SECONDS = 300.0


def socket_folder() -> Path:
    """The per-user folder of the service's socket: ``$XDG_RUNTIME_DIR/autograder`` when set, else
    ``/run/autograder`` for root, else ``autograder-UID`` in the temporary folder."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        return Path(runtime) / "autograder"
    if os.geteuid() == 0 and os.access("/run", os.W_OK):
        return Path("/run/autograder")
    return Path(tempfile.gettempdir()) / f"autograder-{os.geteuid()}"


def socket_path() -> Path:
    """Where a resident runner service of this user listens."""
    return socket_folder() / "runners.sock"


def folder_problem(folder: Path) -> str | None:
    """Why ``folder`` may not hold this user's socket (None when it may): it must be a real folder of
    this user that no one else can enter."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return NONE_RUNNING
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        return f"{folder} is not a folder of this user closed to others"
    return None


def peer_uid(sock: socket.socket) -> int:
    """The user id of the process at the other end of a Unix socket, as the kernel recorded it."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def read_line(stream: Any) -> str:
    """One line from a socket's file, without its newline; an over-long line is an error."""
    raw = stream.readline(LINE + 1)
    if not raw.endswith(b"\n"):
        raise ConnectionError("line too long" if len(raw) > LINE else "closed")
    return raw[:-1].decode("utf-8", errors="replace")


def _send(sock: socket.socket, line: str) -> None:
    sock.sendall(line.encode()[: LINE - 1] + b"\n")


def connect(timeout: float = 5.0, path: Path | None = None) -> tuple[socket.socket, Any, dict[str, Any]]:
    """Connect to this user's service (or to the one at ``path``) and read its hello; raise
    :class:`Refused` (with the sentence the grade command prints) when there is none to use."""
    path = path or socket_path()
    why = folder_problem(path.parent)
    if why:
        raise Refused(why)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
        if peer_uid(sock) != os.geteuid():
            raise Refused("its socket is held by another user")
        stream = sock.makefile("rb")
        line = read_line(stream)
    except Refused:
        sock.close()
        raise
    except OSError:
        sock.close()
        raise Refused(NONE_RUNNING) from None
    word, _, rest = line.partition(" ")
    if word != "hello":
        sock.close()
        raise Refused(f"refused: {rest[:200]}" if word == "refused" else "it answered nonsense")
    return sock, stream, json.loads(rest)


class Refused(Exception):
    """Why this command runs its notebooks on its own runners, in the words its line prints."""


def mismatch(hello: dict[str, Any], jailed: Callable[[], bool]) -> str | None:
    """Why a service that said ``hello`` must not run this command's notebooks (None when it may);
    ``jailed`` says whether the command would jail its kernels (asked only of a service that cannot)."""
    from autograder.engine.versions import code_version, engine_version, library_difference

    if hello.get("checks") != code_version():
        return "other checks version (restart the service after changing the code)"
    if hello.get("engine") != engine_version():
        return "other engine code (restart the service after changing the code)"
    other = library_difference(hello.get("libraries"))
    if other:
        name, theirs, ours = other
        return f"other libraries: {name} {theirs}, this command {ours} (restart the service after installing)"
    if hello.get("python") != sys.executable:
        return f"it runs another Python ({str(hello.get('python'))[:200]})"
    if not hello.get("jail") and jailed():
        return "it cannot jail kernels"
    return None


def lease(
    count: int, jailed: Callable[[], bool], work: Path, zygote: bool = True
) -> tuple[list[ServiceRunner], str]:
    """Up to ``count`` of the service's idle runners for this command, and the line the command prints
    about its runners (which, and why not the service's; empty when no service runs: a command that
    was never told of one says nothing of it)."""
    try:
        sock, stream, hello = connect()
    except Refused as exc:
        return [], "" if str(exc) == NONE_RUNNING else f"own runners ({exc})"
    sock.close()
    why = mismatch(hello, jailed)
    if why:
        return [], f"own runners: the resident service (pid {hello.get('pid')}) has {why}"
    runners: list[ServiceRunner] = []
    for i in range(count):
        runner = ServiceRunner.lease(hello, work / f"runner-fallback-{i}.log", zygote)
        if runner is None:
            break
        runners.append(runner)
    pid = hello.get("pid")
    if not runners:
        return [], f"own runners: the resident service (pid {pid}) has no idle runner"
    rest = count - len(runners)
    tail = f", and {rest} of its own (the service had no more idle)" if rest else ""
    return runners, f"runners: {len(runners)} of the resident service's (pid {pid}){tail}"


class ServiceRunner:
    """One of the service's runners, leased by one connection: the interface of
    :class:`~autograder.engine.executor.RunnerProcess`. When the service goes away, the job it ran ends
    as a runner failure and the next ones run on a runner of this command's own."""

    def __init__(
        self, sock: socket.socket, stream: Any, pid: int, log: Path, zygote: bool, scores: bool = False
    ) -> None:
        self.sock, self.stream, self.pid = sock, stream, pid
        self.log, self.zygote = log, zygote
        self.scores = scores
        """Whether the service scores graded cells too (its ``hello`` says so): :class:`ServiceScorer`."""
        self.path = socket_path()
        """Where the service listened when this runner was leased."""
        self.fallback: Any = None
        """The command's own runner, once the service is gone."""
        self.killed = False

    @classmethod
    def lease(cls, hello: dict[str, Any], log: Path, zygote: bool) -> ServiceRunner | None:
        """A new connection leasing one idle runner, or None when the service has none (or is gone)."""
        try:
            sock, stream, again = connect()
        except Refused:
            return None
        try:
            if again.get("pid") != hello.get("pid"):
                raise ConnectionError("another service")
            sock.settimeout(330.0)  # the service may be replacing a runner a killed command left
            _send(sock, "lease")
            if read_line(stream) == "leased":
                sock.settimeout(None)
                return cls(sock, stream, int(hello["pid"]), log, zygote, hello.get("scores") is True)
        except OSError:
            pass
        sock.close()
        return None

    def run(self, job_path: Path, hard_limit: float) -> tuple[bool, str]:
        """Run one job on the leased runner; return whether it had to be killed and its last log line."""
        if self.fallback is not None:
            return self.fallback.run(job_path, hard_limit)
        try:
            self.sock.settimeout(hard_limit + GRACE)
            _send(self.sock, f"run {hard_limit:.3f} {job_path}")
            word, _, rest = read_line(self.stream).partition(" ")
        except OSError:
            word, rest = "", ""
        if self.killed:
            return True, "killed with the resident runner's job"
        if word == "done":
            flag, _, last = rest.partition(" ")
            return flag == "1", last
        if word == "refused":
            return False, f"the resident runner service refused the job: {rest[:300]}"
        self._fall_back()
        return False, (
            f"the resident runner service (pid {self.pid}) went away during this notebook; the next "
            "ones run on this command's own runners"
        )

    def _fall_back(self) -> None:
        from autograder.engine.executor import RunnerProcess

        self._close()
        self.fallback = RunnerProcess(self.log, zygote=self.zygote)
        print(
            f"runners: the resident service (pid {self.pid}) went away; its notebook ends as a runner "
            "failure, the next ones run on own runners",
            file=sys.stderr,
            flush=True,
        )

    def _close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def kill(self) -> None:
        """Kill the running job: closing the connection has the service kill it (and replace the runner)."""
        self.killed = True
        self._close()
        if self.fallback is not None:
            self.fallback.kill()

    def stop(self) -> None:
        """Give the runner back to the service (or stop the own one)."""
        self._close()
        if self.fallback is not None:
            self.fallback.stop()


class ServiceScorer:
    """Scores graded cells on the warm graders of the resident service whose runners a command leased
    (:data:`autograder.grading.verdicts.Scorer`), so that the command never imports PyTorch: a
    connection per cell scored at once, kept for the next. When the service does not answer (gone, or
    another one now at its socket), it says so once and answers None from then on: the command scores
    the rest itself, with the same outcome (the service runs this command's code and libraries:
    :func:`mismatch`)."""

    def __init__(self, pid: int, path: Path) -> None:
        self.pid, self.path = pid, path
        self.gone = False
        self._lock = threading.Lock()
        self._idle: list[tuple[socket.socket, Any]] = []
        """Connections that answered and are free for the next cell."""

    def __call__(self, check: str, text: str) -> dict[str, Any] | None:
        """What the service's graders give the evidence ``text`` of ``check``; None when it did not answer."""
        for _ in range(2):  # a kept connection the service has since closed (idle): once more, afresh
            if self.gone:
                return None
            with self._lock:
                held = self._idle.pop() if self._idle else None
            try:
                held = held or self._connect()
                answer = self._ask(held, check, text)
            except (OSError, ValueError, UnicodeError, Refused):
                if held is not None:
                    held[0].close()
                continue
            with self._lock:
                self._idle.append(held)
            return answer
        with self._lock:
            said, self.gone = self.gone, True
        if not said:
            print(
                f"scoring: the resident service (pid {self.pid}) did not answer; this command scores the "
                "rest itself",
                file=sys.stderr,
                flush=True,
            )
        return None

    def _connect(self) -> tuple[socket.socket, Any]:
        sock, stream, hello = connect(path=self.path)
        if hello.get("pid") != self.pid or hello.get("scores") is not True:
            sock.close()
            raise Refused("another service")
        sock.settimeout(SCORE_SECONDS)
        return sock, stream

    @staticmethod
    def _ask(held: tuple[socket.socket, Any], check: str, text: str) -> dict[str, Any]:
        sock, stream = held
        body = text.encode("utf-8", errors="surrogatepass")
        if len(body) > SCORE_BYTES or not check.isidentifier():
            raise ValueError("not a request the service takes")
        sock.sendall(f"score {len(body)} {check}\n".encode() + body)
        word, _, length = read_line(stream).partition(" ")
        size = int(length)
        if word != "scored" or not 0 <= size <= SCORE_BYTES:
            raise ValueError(f"the service answered {word[:20]!r}")
        raw = stream.read(size)
        if len(raw) != size:
            raise ConnectionError("closed")
        return _score_answer(json.loads(raw))

    def close(self) -> None:
        """Close the kept connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for sock, _ in idle:
            sock.close()


def _score_answer(answer: Any) -> dict[str, Any]:
    """The service's answer to a scoring request, checked for the shape :func:`score_evidence` gives
    (``{"score", "points", "text"}`` or ``{"error": NAME}``); a ValueError for anything else."""
    if isinstance(answer, dict) and set(answer) == {"error"} and isinstance(answer["error"], str):
        return {"error": answer["error"][:200]}
    if not (isinstance(answer, dict) and set(answer) == {"score", "points", "text"}):
        raise ValueError("not a score")
    numbers = [answer["score"], answer["points"]]
    if not all(isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) for n in numbers):
        raise ValueError("not a score")
    if not isinstance(answer["text"], str):
        raise ValueError("not a score")
    return answer
