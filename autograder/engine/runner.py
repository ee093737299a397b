"""Execute one prepared notebook in a fresh kernel, cell by cell, recording what happened.

Run as ``python -m autograder.engine.runner JOB.json`` for one notebook, or as
``python -m autograder.engine.runner --serve``, the grading engine's way: a long-lived process per
worker that reads job paths from stdin and answers ``done`` for each, so the engine pays for the
interpreter and its imports (about 1 s) once per
worker rather than once per notebook. Every notebook still gets a fresh kernel.

For each job it appends one JSON line per executed code cell to the job's events file (outside the
kernel's reach), so whatever stops the run (a cell over its time limit, the notebook over its
wall-clock limit, too much output, a dead kernel, or the engine killing the runner) the cells
that ran are on record. For graded cells it keeps only the check evidence the cell published and
whether it raised, never the cell's text output: that output is the learner kernel's to forge.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from autograder.engine.space import mount_space, private_mounts, unmount_space

#: Where this runner's zygotes put their sockets; None when kernels start without a zygote.
ZYGOTE_DIR: dict[str, Path | None] = {"folder": None}
#: This runner's zygotes by kind of kernel (``numpy``: never imported PyTorch; ``torch``), started on
#: first use or at the runner's start (:func:`first_steps`); a kind whose zygote failed to start maps to
#: None (its kernels start the ordinary way).
ZYGOTES: dict[str, dict[str, Any] | None] = {}
#: Whether :func:`first_steps` ran: the mount namespace is made once (a second would hide the first's
#: mounts from the zygotes started in it).
STARTED: list[bool] = []
#: When this runner's zygotes warm up (``--warm-up first|behind|never``; ``executor.WARM_UPS``): with
#: ``first`` before they say they are ready, with ``behind`` (the default) behind their first kernel.
WARM_UP = {"when": "behind"}


def zygote_for(kind: str) -> str | None:
    """The socket of this runner's zygote for ``kind`` kernels, starting it on first use and waiting, the
    first time, until it is ready."""
    folder = ZYGOTE_DIR["folder"]
    if folder is None:
        return None
    if kind not in ZYGOTES:
        ZYGOTES[kind] = launch_zygote(folder, kind, WARM_UP["when"])
    zygote = ZYGOTES[kind]
    if zygote is not None and not zygote["ready"]:
        zygote = ZYGOTES[kind] = _ready(zygote, kind)
    return zygote["socket"] if zygote else None


def launch_zygote(folder: Path, kind: str, warm: str = "behind") -> dict[str, Any]:
    """Start a zygote for this runner's ``kind`` kernels, warming up when ``warm`` says; :func:`zygote_for`
    waits for it to be ready (with ``first``, until it has warmed up too)."""
    import subprocess
    import tempfile

    path = tempfile.mktemp(prefix=f"zygote-{kind}-", suffix=".sock", dir=folder)  # noqa: S306 - bound at once
    proc = subprocess.Popen(
        [sys.executable, "-m", "autograder.engine.zygote", "serve", path, kind, warm],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        text=True,
    )
    return {"socket": path, "process": proc, "ready": False}


def _ready(zygote: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """The zygote once it said it is ready; None, its kernels starting the ordinary way, when it failed."""
    proc = zygote["process"]
    if proc.stdout.readline().strip() == "ready":
        return {**zygote, "ready": True}
    proc.kill()
    print(f"{kind} zygote failed to start; kernels will start without it", file=sys.stderr, flush=True)
    return None


def first_steps(argv: list[str]) -> None:
    """What a runner does before anything else: a mount namespace of its own (first, while it has no
    thread and no child: see space.py), then, serving with ``--zygote DIR --kinds K,...``, the zygotes of
    the kinds the grader announced, so that their imports (seconds) overlap this runner's own (below,
    about 0.5 s) and the grader's, rather than wait for the first job. ``--warm-up first|behind|never``
    says when its zygotes warm up (:data:`WARM_UP`); with ``first`` (a resident runner,
    :mod:`autograder.engine.service`, or a run with more notebooks than runners), before they say they
    are ready, and :func:`serve` answers ``ready`` once they all have."""
    if STARTED:
        return
    STARTED.append(private_mounts())
    if argv[:1] == ["--serve"] and argv[1:2] == ["--zygote"]:
        ZYGOTE_DIR["folder"] = Path(argv[2])
        kinds = argv[argv.index("--kinds") + 1].split(",") if "--kinds" in argv[3:-1] else []
        if "--warm-up" in argv[3:-1]:
            WARM_UP["when"] = argv[argv.index("--warm-up") + 1]
        for kind in filter(None, kinds):
            ZYGOTES[kind] = launch_zygote(Path(argv[2]), kind, WARM_UP["when"])


if __name__ == "__main__":
    first_steps(sys.argv[1:])

from autograder.engine.light import nbformat as _nbformat  # noqa: E402

# First, before nbclient imports it: nbformat without the ~0.8 s nothing here needs.
nbformat = _nbformat()

from jupyter_client.manager import AsyncKernelManager  # noqa: E402
from nbclient.exceptions import CellTimeoutError, DeadKernelError  # noqa: E402

from autograder.checks.evidence import EVIDENCE_ENV, EVIDENCE_MIME  # noqa: E402
from autograder.engine.contract import (  # noqa: E402
    CellEvent,
    EndEvent,
    Events,
    Job,
    KernelEvent,
    StartEvent,
    Stop,
    StopReason,
)
from autograder.engine.kernel import (  # noqa: E402
    MESSAGE_OVERHEAD,
    JailedKernelManager,
    LimitedClient,
    QuickReadyClient,
    connection_options,
    kernel_process,
    relay_limits,
)
from autograder.grading.seeds import hidden_lines, redact  # noqa: E402

#: A learner's error message is cut to this many characters in the events (and so in feedback).
ERROR_LENGTH = 500
#: What an interrupted cell's event says instead of the KeyboardInterrupt it raised.
INTERRUPTED = "TimeoutError: it ran longer than a cell may take and was interrupted; the notebook went on"

#: After a cell's time limit, how long the kernel has to answer an interrupt before it is given up.
INTERRUPT_GRACE = 5.0


def _cell_event(
    cell: Any, index: int, status: str, seconds: float, graded: bool, hidden: list[str]
) -> CellEvent:
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    error = None
    if status == "interrupted":
        error = INTERRUPTED
    elif errors:
        # Taken out before the message is cut: a cut echo of a hidden test is still an echo.
        raw = f"{errors[-1].get('ename', '')}: {errors[-1].get('evalue', '')}"
        error = redact(raw, hidden)[:ERROR_LENGTH]
    evidence = stderr = None
    if graded:
        evidence = [
            o["data"][EVIDENCE_MIME]
            for o in cell.get("outputs", [])
            if o.get("output_type") == "display_data"
            and isinstance(o.get("data", {}).get(EVIDENCE_MIME), str)
        ]
        stderr = any(o.get("name") == "stderr" for o in cell.get("outputs", []))
    return CellEvent(index, cell.get("id"), status, seconds, error, evidence, stderr)


class KernelClock:
    """The CPU time (user and system, in seconds) the kernel process has used, read from ``/proc``.

    The runner reads it outside the kernel, so the learner's code cannot change what it says; it is
    a measurement for the benchmarks, never part of a score. None when the kernel's process id is
    not known (kernels started without the zygote) or ``/proc`` cannot be read.
    """

    def __init__(self, km: JailedKernelManager) -> None:
        self.km = km
        self.pid: int | None = None
        self.tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    def seconds(self) -> float | None:
        if self.pid is None and self.km.pid_file:
            with contextlib.suppress(OSError, ValueError):
                self.pid = int(Path(self.km.pid_file).read_text())
        if self.pid is None:
            return None
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return None
        # utime, stime, and the same of its waited-for children (fields 14 to 17 of proc(5))
        return sum(int(v) for v in fields[11:15]) / self.tick


def _kernel_alive(km: AsyncKernelManager) -> bool:
    process = kernel_process(km)
    return process is not None and process.poll() is None


def _kernel_exit(km: AsyncKernelManager) -> str:
    process = kernel_process(km)
    code = process.poll() if process is not None else None
    if code is None:
        return "the kernel died"
    if code < 0:
        return f"the kernel died from signal {signal.Signals(-code).name}"
    if code > 128:
        try:
            return f"the kernel died from signal {signal.Signals(code - 128).name}"
        except ValueError:
            pass
    return f"the kernel exited with status {code}"


async def _answers(client: LimitedClient, seconds: float) -> bool:
    """True when the kernel answers a kernel_info request within ``seconds`` (it is idle again)."""
    import asyncio

    try:
        reply = await asyncio.wait_for(client.kc.kernel_info(reply=True, timeout=seconds), seconds + 1)
    except Exception:  # noqa: BLE001 - no answer, in whatever way, is no answer
        return False
    return bool(reply) and reply.get("msg_type") == "kernel_info_reply"


def _interrupted(client: LimitedClient) -> bool:
    """Interrupt the kernel after a cell's time limit; True when it is idle again and may go on."""
    from jupyter_core.utils import run_sync

    try:
        run_sync(client.km.interrupt_kernel)()
    except Exception:  # noqa: BLE001 - a kernel that cannot be interrupted is given up
        return False
    return run_sync(_answers)(client, INTERRUPT_GRACE)


def _execute(
    client: LimitedClient,
    nb: Any,
    job: Job,
    graded: set[str],
    deadline: float,
    events: Events,
    clock: KernelClock | None = None,
) -> Stop | None:
    """Run the code cells in order until the end or the first stop; return the stop (None: no stop).

    A cell over its time limit is interrupted, as nbgrader does, and the notebook goes on when the
    kernel answers; it stops only when the kernel does not, or at the notebook's own limit.
    """
    cell_timeout = float(job.cell_seconds)
    hidden = hidden_lines(nb)
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not cell.source.strip():
            continue
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return Stop(StopReason.NOTEBOOK_TIMEOUT, cell.get("id"))
        client.timeout = max(1, int(min(cell_timeout, remaining)))
        began = time.monotonic()
        cpu_before = clock.seconds() if clock else None
        try:
            client.execute_cell(cell, index)
            status = "error" if any(o.get("output_type") == "error" for o in cell.outputs) else "ok"
        except CellTimeoutError:
            status = "timeout"
        except DeadKernelError:
            status = "dead"
        if client.km.relay_stop is not None:
            sentence, size = client.km.relay_stop
            client.output_exceeded = client.output_exceeded or size
            client.bad_message = client.bad_message or (None if size else sentence)
        if client.bad_message:
            status = "bad_message"
        elif client.output_exceeded or (client.refused_oversized() and _kernel_alive(client.km)):
            # A dropped connection means an oversized message only while the kernel lives: a dying
            # kernel drops it too.
            status = "output_limit"
        if status == "timeout" and client.timeout >= cell_timeout and _interrupted(client):
            status = "interrupted"
        seconds = time.monotonic() - began
        event = _cell_event(cell, index, status, seconds, cell.get("id") in graded, hidden)
        cpu_after = clock.seconds() if clock else None
        if cpu_before is not None and cpu_after is not None:
            event.cpu = round(cpu_after - cpu_before, 3)
        events.write(event)
        if status == "timeout":
            reason = StopReason.NOTEBOOK_TIMEOUT if client.timeout < cell_timeout else StopReason.CELL_TIMEOUT
            return Stop(reason, cell.get("id"), limit=client.timeout)
        if status == "output_limit":
            return Stop(StopReason.OUTPUT_LIMIT, cell.get("id"), bytes=client.output_budget)
        if status == "bad_message":
            return Stop(StopReason.BAD_MESSAGE, cell.get("id"), detail=client.bad_message)
        if status == "dead":
            return Stop(StopReason.DEAD, cell.get("id"), detail=_kernel_exit(client.km))
    return None


def run(job: Job) -> None:
    """Execute the job's notebook and write its events; a jailed kernel works in a space of its own
    (:mod:`autograder.engine.space`), mounted over the job folder for the job's length."""
    if not job.jail_spec:
        _run(job)
        return
    spec = json.loads(Path(job.jail_spec).read_text())
    try:
        mount_space(job.workdir, int(spec["space_bytes"]), int(spec["space_inodes"]))
    except OSError as exc:  # the kernel's jail refuses to start without it, and says so
        print(f"cannot mount the kernel's space: {exc}", file=sys.stderr, flush=True)
    try:
        _run(job)
    finally:
        unmount_space(job.workdir)


def _kernel_manager(job: Job) -> JailedKernelManager:
    """The job's kernel manager: its jail, its zygote, and a relay bounding a jailed kernel's messages."""
    workdir = job.workdir
    km = JailedKernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(workdir, "kernel"))
    km.connection_file = os.path.join(workdir, "kernel.json")
    km.jail_prefix = list(job.jail_prefix)
    km.zygote = zygote_for(job.kernel)
    km.jail_spec = job.jail_spec
    km.client_factory = QuickReadyClient
    km.pid_file = os.path.join(os.path.dirname(workdir), os.path.basename(workdir) + ".kernel.pid")
    if job.jail_spec:  # the kernel is the learner's: its messages come through a relay that bounds them
        km.relay_base = os.path.join(os.path.dirname(workdir), os.path.basename(workdir) + ".relay")
        km.relay_limits = relay_limits(int(job.output_bytes))
    connection_options(km, int(job.output_bytes) + MESSAGE_OVERHEAD)
    return km


def _run(job: Job) -> None:
    events = Events(Path(job.events))
    events.write(StartEvent())
    nb = nbformat.read(job.notebook, as_version=4)
    os.environ.update(
        {EVIDENCE_ENV: "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    )
    os.environ.update({"PYTHONDONTWRITEBYTECODE": "1", "PYDEVD_DISABLE_FILE_VALIDATION": "1"})
    km = _kernel_manager(job)
    clock = KernelClock(km)
    client = LimitedClient(
        nb,
        km=km,
        timeout=int(job.cell_seconds),
        allow_errors=True,
        kernel_name="python3",
        startup_timeout=int(job.startup_timeout),
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
        resources={"metadata": {"path": job.workdir}},
    )
    client.output_budget = int(job.output_bytes)
    client.shutdown_kernel = "immediate"
    start = time.monotonic()
    deadline = start + float(job.notebook_seconds)
    stop: Stop | None = None
    process = None
    try:
        with client.setup_kernel(cwd=job.workdir, cleanup_kc=True):
            process = kernel_process(km)
            events.write(KernelEvent(round(time.monotonic() - start, 3), _rounded(clock.seconds())))
            client.watch_disconnects()
            try:
                stop = _execute(client, nb, job, set(job.grade_cells), deadline, events, clock)
            finally:
                client.stop_watching()
    except Exception as exc:  # noqa: BLE001 - a kernel that never starts must still end in a stated outcome
        if stop is None:
            stop = Stop(StopReason.KERNEL_FAILED, detail=f"{type(exc).__name__}: {exc}"[:500])
    finally:
        # Whatever happened, nothing of the kernel may outlive the job.
        if process is not None and process.poll() is None:
            process.kill()
        if km.relay is not None:
            km.relay.close()
    if job.executed:
        nbformat.write(nb, job.executed)
    events.write(EndEvent(stop, round(time.monotonic() - start, 3)))


def _rounded(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds, 3)


def _exit_with_parent() -> None:
    """End this runner, and with it its zygotes and kernels, as soon as the grader that started it
    is gone (killed, say), even in the middle of a job."""
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def serve(zygote_dir: Path | None = None) -> int:
    """Run jobs whose paths arrive one a line on stdin; answer ``done`` on stdout after each.

    Only the answers go to the real stdout: anything else written to file descriptor 1 is sent
    to stderr, so library output cannot be mistaken for an answer. With ``zygote_dir``, kernels
    are forked from a zygote whose socket lives there.
    """
    ZYGOTE_DIR["folder"] = ZYGOTE_DIR["folder"] or zygote_dir
    _exit_with_parent()
    answers = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    if WARM_UP["when"] == "first":
        for kind in list(ZYGOTES):
            zygote_for(kind)  # waits until it has warmed up
        answers.write("ready\n")
    for line in sys.stdin:
        path = line.strip()
        if not path:
            continue
        try:
            run(Job.read(Path(path)))
        except Exception as exc:  # noqa: BLE001 - report and go on with the next job
            print(f"runner error on {path}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        answers.write(f"done {path}\n")
    return 0


def main(argv: list[str]) -> int:
    """Run the job described by the JSON file ``argv[0]``, or serve jobs with ``--serve``."""
    first_steps(argv)  # already done when run as a module, before its imports
    if argv[:1] == ["--serve"]:
        return serve(Path(argv[2]) if argv[1:2] == ["--zygote"] else None)
    run(Job.read(Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
