"""Where a prepared notebook runs: an :class:`Executor` takes a :class:`Work` (everything the run needs,
by value) and gives back what the run :class:`Executed` (its events and the executed notebook), nothing
graded. :class:`LocalExecutor` runs each notebook on a long-lived runner process of this machine
(:class:`RunnerProcess`); :mod:`autograder.engine.distributed` runs them on a Dask cluster's workers, and
:mod:`autograder.engine.check` in the learner's own process."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from autograder.engine import jail
from autograder.engine.contract import (
    EventLog,
    Job,
    KernelEvent,
    Limits,
    StartEvent,
    Stop,
    StopReason,
    read_events,
)


@dataclass
class Work:
    """One notebook to run, as the grader hands it to an :class:`Executor`: everything the run needs, by
    value (no path of the grader's machine), so that it may run on another machine."""

    name: str
    """Who and what it is (``student-assignment``), for logs."""
    notebook: str
    """The prepared notebook as JSON: the learner's answers and the course's tests, hidden ones included."""
    grade_cells: list[str]
    kernel: str
    """``numpy``, ``torch`` or ``compile``: :func:`kernel_kind`."""
    limits: Limits
    jailed: bool


@dataclass
class Executed:
    """What running a :class:`Work` gave back: the evidence to grade from, nothing graded yet."""

    events: EventLog
    """The runner's events, always with an end event (the executor's own when the runner wrote none)."""
    notebook: bytes | None
    """The executed notebook as the runner wrote it (the hidden tests still in it), or None."""
    timing: dict[str, float]
    """Where the time went: :func:`timing_breakdown`."""


class ExecutorLost(RuntimeError):
    """The executor can run nothing more (a lost Dask scheduler, say): the run stops, and the submission
    it was running is not stored, so that a re-run grades it."""


class NotStarted(RuntimeError):
    """The executor had the notebook but had not started it when the run was stopped (a first Ctrl-C):
    nothing is stored, so that a re-run grades it."""


class Executor(Protocol):
    """Runs prepared notebooks; the grader keeps everything else (preparing, seeds, scores, storing)."""

    def run(self, work: Work) -> Executed:
        """Run one notebook to its end, or to its first stop; raise :class:`ExecutorLost` when nothing
        can run any more, and another error when this one notebook cannot be run."""
        ...

    def stop(self) -> None:
        """Start no notebook from now on (a first Ctrl-C): a :meth:`run` waiting for its notebook to start
        raises :class:`NotStarted`; the running ones finish."""
        ...

    def kill(self) -> None:
        """Kill the running notebooks (a second Ctrl-C); their :meth:`run` returns or raises soon."""
        ...

    def close(self, kill: bool = False) -> None:
        """Let the runners finish (or kill them) and remove the scratch space."""
        ...

    def threads(self, workers: int, notebooks: int) -> int:
        """How many of the grader's threads hand it ``notebooks`` to run ``workers`` of them at once."""
        ...


#: When a runner's zygotes run their warm-up (:func:`autograder.engine.zygote.warm_up`, the libraries'
#: first calls): before their first kernel, behind it (at the lowest priority), or never.
WARM_UPS = ("first", "behind", "never")


def when_to_warm(notebooks: int, runners: int) -> str:
    """When runners started for a run of ``notebooks`` on ``runners`` warm their zygotes up
    (:data:`WARM_UPS`).

    The warm-up pays, once, the first calls of the notebooks' libraries, so that the kernels forked
    after it do not; the kernel forked before it runs cold and pays them itself. Where a runner gets
    more than one notebook, ``first``: behind its first kernel the warm-up ran beside that cold kernel
    and paid the same calls again, and the runner's next kernel waited for it (ten notebooks 06 on 2
    runners and 2 cores took 23.3-24.7 s behind, 20.3 s first; ten notebooks 04, 10.7 s and 9.0-9.4 s,
    on 2026-12-02). Where each runner gets one notebook, ``never``: no kernel is forked after it, and
    behind that one kernel it only took a core from the command's own work (a class of one, notebook
    04: 7.1 s behind, 6.4 s without; 06: 16.3 s and 15.2 s; medians of 4-5 alternating runs on
    2026-12-03). ``benchmarks/grading_speed.py``'s submissions, this course's 2-core machine.
    """
    return "first" if notebooks > runners else "never"


class LocalExecutor:
    """Runs each notebook on a long-lived runner process of this machine, taken from its idle runners
    for the notebook's run (at most as many as :meth:`threads` was told, else one per calling thread),
    job files in one scratch folder.

    A Dask worker runs its notebooks with one as well (:mod:`autograder.engine.distributed`)."""

    def __init__(self, zygote: bool = True) -> None:
        self.zygote = zygote
        self.work = Path(tempfile.mkdtemp(prefix="grading-"))
        self._lock = threading.Lock()
        self._runners: list[RunnerProcess] = []
        self._idle: list[RunnerProcess] = []
        """Runners free for the next notebook: started ahead (:meth:`start_runners`), a resident service's
        (:meth:`use_runners`), or handed back after a notebook."""
        self._font_caches: list[Path] | None = None
        self._free = threading.Condition(self._lock)
        """Notified when a runner is handed back, or the executor stops."""
        self._most: int | None = None
        """The most runners at once (:meth:`threads`); None: one for each thread that runs a notebook."""
        self._warm_up = "behind"
        """When a runner it starts for a notebook warms its zygote up (:data:`WARM_UPS`; :meth:`threads`)."""
        self._stopped = False
        self.scorer: Any = None
        """The resident service's scorer (:class:`~autograder.engine.resident.ServiceScorer`) when this
        executor runs on its runners and it scores too (:meth:`use_runners`); None: the grader scores."""

    def threads(self, workers: int, notebooks: int) -> int:
        """Twice as many threads as runners, and at most ``workers`` runners: a thread whose notebook has
        run scores it (a tenth of a second to a third, on notebook 04) while the next thread's notebook,
        prepared meanwhile, runs on the runner it handed back, rather than leave the runner idle. The
        runners it starts for ``notebooks`` warm their zygotes up when :func:`when_to_warm` says."""
        self._most = workers
        self._warm_up = when_to_warm(notebooks, min(workers, notebooks))
        return 2 * workers

    def start_runners(self, count: int, kinds: list[str], warm: str = "behind") -> None:
        """Start ``count`` runners now, each starting its zygotes of ``kinds`` at once, rather than on
        the first notebook: the grading command calls it first, so that their imports (seconds, what
        the first notebook waits for) overlap its own work. Each of the grader's threads takes one.
        ``warm`` says when the zygotes warm up (:func:`when_to_warm`): with ``first``, before the runners
        take a notebook."""
        for i in range(count):
            runner = RunnerProcess(self.work / f"runner-ahead-{i}.log", self.zygote, kinds, warm)
            runner.proc = runner._start()
            with self._lock:
                self._runners.append(runner)
                self._idle.append(runner)

    def use_runners(self, runners: list[Any]) -> None:
        """Run on ``runners`` (a resident service's, :class:`~autograder.engine.resident.ServiceRunner`),
        one per thread of the grader, as on runners :meth:`start_runners` started; and on its graders
        (:attr:`scorer`), when it says it scores."""
        from autograder.engine.resident import ServiceScorer

        with self._lock:
            self._runners.extend(runners)
            self._idle.extend(runners)
        if runners and all(getattr(r, "scores", False) for r in runners) and self.scorer is None:
            self.scorer = ServiceScorer(runners[0].pid, runners[0].path)

    def run(self, work: Work) -> Executed:
        """Run the notebook as a job of its own, in a fresh job folder, on this thread's runner."""
        job_dir = Path(tempfile.mkdtemp(prefix="job-", dir=self.work))
        executed = self.work / f"{job_dir.name}.executed.ipynb"
        try:
            job, job_path = self._write_job(work, job_dir, executed)
            asked = time.time()
            with self._runner(work.kernel) as runner:
                spawned = time.time()
                # at the hard limit the runner's whole tree is killed
                killed, last_line = runner.run(job_path, work.limits.notebook_seconds + 120)
                exited = time.time()
            events = read_events(Path(job.events))
            notebook = executed.read_bytes() if executed.exists() else None
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)
            for leftover in self.work.glob(f"{job_dir.name}.*"):
                leftover.unlink(missing_ok=True)
        reason = StopReason.KILLED if killed else StopReason.RUNNER_FAILED
        events.ended(Stop(reason, detail=last_line))
        timing = timing_breakdown(events, spawned, exited)
        if timing:
            timing["queued"] = round(spawned - asked, 3)
        return Executed(events, notebook, timing)

    def _write_job(self, work: Work, job_dir: Path, executed: Path) -> tuple[Job, Path]:
        """Write the notebook to run beside its job folder, and the job (and jail) description; return
        the job and where it was written (the runner's path to it)."""
        self._seed_matplotlib_cache(job_dir / ".matplotlib")
        # The prepared notebook holds the hidden tests: it stays outside the kernel's folder.
        notebook = self.work / f"{job_dir.name}.ipynb"
        notebook.write_text(work.notebook, encoding="utf-8")
        limits = work.limits
        job = Job(
            notebook=str(notebook),
            workdir=str(job_dir),
            events=str(self.work / f"{job_dir.name}.events.jsonl"),
            grade_cells=list(work.grade_cells),
            cell_seconds=limits.cell_seconds,
            notebook_seconds=limits.notebook_seconds,
            output_bytes=limits.output_bytes,
            kernel=work.kernel,
            executed=str(executed),
        )
        if work.jailed:
            spec = jail.spec_for(
                job_dir,
                memory_bytes=limits.memory_bytes,
                file_bytes=limits.file_bytes,
                processes=limits.processes,
                numpy_only=work.kernel == "numpy",
            )
            spec_path = self.work / f"{job_dir.name}.jail.json"
            spec_path.write_text(json.dumps(spec))
            job.jail_prefix = jail.jail_command(spec_path)
            job.jail_spec = str(spec_path)
        job_path = self.work / f"{job_dir.name}.job.json"
        job.write(job_path)
        return job, job_path

    def _seed_matplotlib_cache(self, folder: Path) -> None:
        """Give the job's kernel a built font cache: a fresh one costs every notebook seconds to build."""
        with self._lock:
            if self._font_caches is None:
                import matplotlib
                import matplotlib.font_manager  # noqa: F401 - builds the cache if this user has none

                self._font_caches = sorted(Path(matplotlib.get_cachedir()).glob("fontlist-*.json"))
        folder.mkdir(parents=True, exist_ok=True)
        for cache in self._font_caches:
            shutil.copyfile(cache, folder / cache.name)

    @contextlib.contextmanager
    def _runner(self, kind: str) -> Iterator[Any]:
        """An idle runner (a new one while there are fewer than the most, for a job of ``kind``) for one
        job, handed back after it; waits for one when none is idle, and raises :class:`NotStarted` when
        the executor stopped before one was."""
        with self._free:
            while not self._stopped and not self._idle and self._full():
                self._free.wait()
            if self._stopped:
                raise NotStarted()
            runner = self._idle.pop(0) if self._idle else None
            if runner is None:
                log = self.work / f"runner-{len(self._runners)}.log"
                if self._warm_up == "first":  # its zygote starts at once and warms up before the job
                    runner = RunnerProcess(log, self.zygote, [kind], warm="first")
                    runner.proc = runner._start()  # here: RunnerProcess.run would start it without kinds
                else:  # its zygote starts with the job (and warms up behind its first kernel, or never)
                    runner = RunnerProcess(log, self.zygote, warm=self._warm_up)
                self._runners.append(runner)
        try:
            yield runner
        finally:
            with self._free:
                self._idle.append(runner)
                self._free.notify()

    def _full(self) -> bool:
        """Whether the executor has as many runners as it may have (under :attr:`_free`)."""
        return self._most is not None and len(self._runners) >= self._most

    def stop(self) -> None:
        """Start no notebook from now on: a thread waiting for a runner raises :class:`NotStarted`."""
        with self._free:
            self._stopped = True
            self._free.notify_all()

    def kill(self) -> None:
        """Kill every runner (and its kernel): the jobs they ran end as killed."""
        with self._lock:
            runners = list(self._runners)
        for runner in runners:
            runner.kill()

    def close(self, kill: bool = False) -> None:
        """Stop the runner processes (or kill them) and remove the scratch folder."""
        for runner in self._runners:
            if kill:
                runner.kill()
            else:
                runner.stop()
        if self.scorer is not None:
            self.scorer.close()
        shutil.rmtree(self.work, ignore_errors=True)


class RunnerProcess:
    """A long-lived runner process (``runner --serve``) that runs one job at a time for one worker.

    It starts in a session of its own; at a job's hard limit the whole session is killed, and the
    kernel with it (the jail ties the kernel's life to the runner's), and the next job starts a new
    runner.
    """

    def __init__(
        self, log: Path, zygote: bool = True, kinds: list[str] | None = None, warm: str = "behind"
    ) -> None:
        self.log = log
        self.zygote = zygote
        self.kinds = list(kinds or [])
        """The kinds of kernel whose zygotes the runner starts at once (the others on first use)."""
        self.warm = warm
        """When its zygotes warm up (:data:`WARM_UPS`); with ``first`` the runner answers ``ready`` once
        those of ``kinds`` have (a resident runner's, and those of a run with more notebooks than runners)."""
        self.proc: subprocess.Popen[str] | None = None
        self._held = b""
        """What the runner wrote on its stdout after its last whole answer (:meth:`answer`)."""

    def _start(self) -> subprocess.Popen[str]:
        if self.warm not in WARM_UPS:
            raise ValueError(f"a runner's zygotes warm up {' or '.join(WARM_UPS)}, not {self.warm!r}")
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self._held = b""
        with self.log.open("ab") as log_file:
            return subprocess.Popen(
                [sys.executable, "-m", "autograder.engine.runner", "--serve"]
                + (["--zygote", str(self.log.parent)] if self.zygote else [])
                + (["--kinds", ",".join(self.kinds)] if self.zygote and self.kinds else [])
                + (["--warm-up", self.warm] if self.zygote and self.warm != "behind" else []),
                env=env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log_file,
                text=True,
                bufsize=1,
                start_new_session=True,
            )

    def run(self, job_path: Path, hard_limit: float) -> tuple[bool, str]:
        """Run one job; return whether it had to be killed and the last line logged meanwhile."""
        if self.proc is None or self.proc.poll() is not None:
            self.kinds = []  # a new runner after a kill: its zygotes start on first use
            self.proc = self._start()
        offset = self.log.stat().st_size if self.log.exists() else 0
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        killed, answered = False, False
        try:
            proc.stdin.write(f"{job_path}\n")
            proc.stdin.flush()
            deadline = time.monotonic() + hard_limit
            while not answered:
                line = self.answer(deadline - time.monotonic())
                if line is None:
                    break
                answered = line == f"done {job_path}"
        except (BrokenPipeError, OSError):
            answered = False
        if not answered:
            killed = proc.poll() is None
            self.kill()
        with self.log.open("rb") as f:
            f.seek(offset)
            lines = f.read().decode(errors="replace").strip().splitlines()
        return killed, (lines[-1][:300] if lines else f"exit status {proc.poll()}")

    def answer(self, seconds: float) -> str | None:
        """The runner's next line on its stdout (``ready``, ``done JOB``), stripped, waiting at most
        ``seconds``; None when none came in time or the runner closed its stdout. Read from the pipe's
        descriptor, never through the stream's buffer: a select on the pipe does not see the lines a
        buffered readline took in ahead (``ready`` and a fast job's ``done`` in one read left the job
        waiting for its hard limit)."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + seconds
        while b"\n" not in self._held:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self._held += chunk
        line, _, self._held = self._held.partition(b"\n")
        return line.decode(errors="replace").strip()

    def kill(self) -> None:
        """Kill the runner's whole session."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None

    def stop(self) -> None:
        """Let the runner finish: close its input and wait, killing it if it does not exit."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
        self.proc = None


#: What a notebook's code uses that imports PyTorch's compiler stack on its first call (``torch._dynamo``,
#: AOTAutograd, ``opcheck``'s tests: seconds in every kernel): its kernels come from a ``compile`` zygote.
COMPILER = re.compile(r"\btorch\.(compile|library|_dynamo)\b|\bfunctorch\b")


def kernel_kind(source: Any) -> str:
    """``numpy`` when the notebook's locked set-up cells import no PyTorch (its kernel then gets none);
    otherwise ``compile`` when any of its code cells uses PyTorch's compiler stack (:data:`COMPILER`), and
    ``torch``. ``source`` is the assignment's source notebook, as nbformat or plain JSON reads it."""
    from autograder.course import is_locked

    code = []
    for cell in source["cells"]:
        if cell.get("cell_type") == "code":
            text = cell.get("source", "")
            code.append(("".join(text) if isinstance(text, list) else text, is_locked(cell)))
    if not any(re.search(r"^\s*(import|from)\s+torch\b", t, re.MULTILINE) for t, locked in code if locked):
        return "numpy"
    return "compile" if any(COMPILER.search(t) for t, _ in code) else "torch"


def course_kinds(course_root: Path, assignment: str) -> list[str]:
    """The kinds of kernel an assignment (or ``all``) of the course at ``course_root`` needs, read from its
    source notebooks as plain JSON (no import); none for an assignment the course does not hold yet."""
    sources = course_root / "source"
    names = [assignment] if assignment != "all" else sorted(p.name for p in sources.glob("*") if p.is_dir())
    kinds = set()
    for name in names:
        try:
            kinds.add(kernel_kind(json.loads((sources / name / f"{name}.ipynb").read_text(encoding="utf-8"))))
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return sorted(kinds)


def timing_breakdown(events: EventLog, spawned: float, exited: float) -> dict[str, float]:
    """Split one runner's wall time into phases, from the time stamps on its events.

    ``runner_start``: from handing the job to the runner to its first event (reading the job);
    ``kernel_start``: to the kernel answering (jail, kernel process, ipykernel start-up);
    ``cells``: executing the notebook's cells (its own code, imports included);
    ``shutdown``: from the last cell to the runner's answer (kernel shutdown, writing the notebook).
    Where the runner could read the kernel's CPU time, also ``cells_cpu``: the CPU seconds the kernel
    spent on the cells (not a phase: part of ``cells``). :class:`LocalExecutor` adds ``queued``: the
    prepared notebook waiting for a runner, while the runners finished others.
    """
    start, kernel = events.stamp(StartEvent), events.stamp(KernelEvent)
    if start is None or kernel is None:
        return {}
    cells = [e.t for e in events.cells if e.t is not None]
    last = cells[-1] if cells else kernel
    phases = {
        "runner_start": round(start - spawned, 3),
        "kernel_start": round(kernel - start, 3),
        "cells": round(last - kernel, 3),
        "shutdown": round(exited - last, 3),
    }
    cpu = [e.cpu for e in events.cells if e.cpu is not None]
    if cpu:
        phases["cells_cpu"] = round(sum(cpu), 3)
    return phases
