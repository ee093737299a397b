"""Grading on a Dask cluster (``grade ... --scheduler ADDRESS``): the same jobs, run by Dask workers.

The grader stays the client and keeps everything trusted: it prepares every notebook, draws its
seeds, grades from the evidence, stores the outcomes and alone writes the autograded notebooks, the
gradebook and the outputs, exactly as on one machine. Only running a prepared notebook moves:
:class:`DaskExecutor` sends it by value (workers need not share a file system with the client) to a
worker, where the :class:`RunnerPlugin` of this run keeps a
:class:`~autograder.engine.executor.LocalExecutor` per worker process: long-lived runner processes with
their zygotes, a scratch folder of the worker's own, every kernel jailed as it is locally. The worker
sends back the events, the executed notebook and the timing.

- A worker that dies mid-job (its node lost, the process killed): the scheduler runs the job again on
  another worker, at most ``distributed.scheduler.allowed-failures`` times (Dask's default is 3, set
  on the scheduler); past that the submission fails with that reason (:class:`WorkerDied`), and only
  that one.
- No worker at the start: the run waits for one, at most :data:`WORKERLESS_SECONDS`, saying so.
- A worker that cannot grade for this machine (other checks than the grader's, no jail): it gets no
  notebook of this run (:class:`WorkerRefused`), the run says so once and grades on the others; when
  no worker is left that can, nothing is graded (at the start) or the run stops (later).
- A lost scheduler, or a cluster left with no worker for :data:`WORKERLESS_SECONDS`:
  :class:`~autograder.engine.executor.ExecutorLost`: the run stops with that reason, what was graded is
  stored, and a re-run grades only what is missing.
- Ctrl-C: no new notebook is submitted, none already submitted starts (:meth:`~DaskExecutor.stop`:
  those waiting on the scheduler or in a worker's queue come back :class:`NotStarted`, not stored)
  and the running ones finish; a second Ctrl-C (:meth:`kill`) kills this run's runners on every worker.

Nothing imports this module unless a scheduler is given: grading on one machine never pays for Dask.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
import uuid

from distributed import CancelledError, Client, KilledWorker, TimeoutError, WorkerPlugin, get_worker

from autograder.engine import jail
from autograder.engine.executor import Executed, ExecutorLost, LocalExecutor, NotStarted, Work
from autograder.engine.untrusted import one_line, terminal
from autograder.engine.versions import code_version, library_difference, library_versions

#: The longest reason a refused worker is given with (its answer, or the exception it raised, in words).
REASON_LENGTH = 500
#: How often a waiting grader thread looks at the cluster (lost scheduler, no worker).
POLL_SECONDS = 5.0
#: A cluster with no worker for this long stops the run (a job queue that never starts workers).
WORKERLESS_SECONDS = 600.0


class ClusterUnavailable(RuntimeError):
    """The scheduler cannot be reached when the run starts, or no worker joins it: nothing is graded."""


class WorkerRefused(RuntimeError):
    """A worker cannot grade for this grading machine (other checks, no jail): the notebook it was given
    runs on another worker, and it gets no other notebook of this run."""

    def __init__(self, address: str, reason: str) -> None:
        super().__init__(address, reason)
        self.address, self.reason = address, reason

    def __str__(self) -> str:
        return f"the Dask worker {self.address} {self.reason}"


class WorkerDied(RuntimeError):
    """The workers that ran a notebook died, as many times as the scheduler allows."""


class RunnerPlugin(WorkerPlugin):
    """On each worker process, this run's :class:`LocalExecutor`: runners started on first use, one per
    worker thread, each with its zygotes; removed (runners stopped, scratch folder deleted) when the
    client unregisters the plugin or the worker closes."""

    def __init__(self, zygote: bool = True) -> None:
        self.zygote = zygote
        self.executor: LocalExecutor | None = None
        self.killed = False
        self.stopping = False

    def setup(self, worker) -> None:  # noqa: ANN001 - a distributed.Worker
        self.executor = LocalExecutor(zygote=self.zygote)

    def teardown(self, worker) -> None:  # noqa: ANN001
        # A worker that closes (its scheduler lost, say) takes its running notebooks' results with it:
        # its runners are killed rather than left to finish them.
        closing = getattr(worker.status, "name", "running") not in ("running", "paused", "closing_gracefully")
        if self.executor is not None:
            self.executor.close(kill=self.killed or closing)

    def stop(self) -> None:
        """Start no notebook from now on; the running ones finish (a first Ctrl-C)."""
        self.stopping = True

    def kill(self) -> None:
        """Kill the running notebooks and refuse the ones that would start after (a second Ctrl-C)."""
        self.killed = True
        if self.executor is not None:
            self.executor.kill()


def checks_version() -> str:
    """A hash of the checks' code as installed here (:func:`~autograder.engine.versions.code_version`): a
    worker grading with other checks than the grader would give other scores than the grader records
    and than a local run."""
    return code_version()


def refusal(checks: str, jailed: bool, libraries: dict[str, str]) -> str | None:
    """Why this worker cannot grade for a grading machine whose checks are ``checks`` and whose kernels'
    libraries are ``libraries`` (:func:`~autograder.engine.versions.library_versions`) (None when it can);
    run on every worker when the run starts, and before every notebook."""
    if checks != checks_version():
        return (
            "has other checks than the grading machine (another version of this repository): install the "
            "same version on every worker"
        )
    other = library_difference(libraries)
    if other:
        name, machine, here = other
        return (
            f"has other libraries than the grading machine ({name} {here}, the grading machine {machine}): "
            "install the same versions on every worker"
        )
    if jailed and not jail.jail_available():
        return (
            "cannot jail kernels: a worker must run as root, with unshare and setpriv working (or grade "
            "with --no-jail, not recommended)"
        )
    return None


def run_on_worker(plugin: str, work: Work, checks: str, libraries: dict[str, str]) -> Executed:
    """The Dask task: run one prepared notebook on this worker's runner."""
    worker = get_worker()
    why = refusal(checks, work.jailed, libraries)
    if why:
        raise WorkerRefused(worker.address, why)
    runner = worker.plugins.get(plugin)
    if not isinstance(runner, RunnerPlugin) or runner.executor is None:
        raise RuntimeError(f"the Dask worker {worker.address} has no runner for this grading run")
    if runner.killed:
        raise RuntimeError("the grading run was cancelled")
    if runner.stopping:
        raise NotStarted("the grading run is stopping")
    return runner.executor.run(work)


def stop_runners(plugin: str, dask_worker=None) -> None:  # noqa: ANN001 - client.run passes the worker
    """Start no more notebooks of this run on one worker (run there by :meth:`DaskExecutor.stop`)."""
    runner = (dask_worker or get_worker()).plugins.get(plugin)
    if isinstance(runner, RunnerPlugin):
        runner.stop()


def kill_runners(plugin: str, dask_worker=None) -> None:  # noqa: ANN001 - client.run passes the worker
    """Kill this run's runners on one worker (run there by :meth:`DaskExecutor.kill`)."""
    runner = (dask_worker or get_worker()).plugins.get(plugin)
    if isinstance(runner, RunnerPlugin):
        runner.kill()


class _Stranded(Exception):  # noqa: N818 - not an error: the notebook is submitted again
    """Every worker a notebook could run on has left the cluster."""


class DaskExecutor:
    """Runs the grader's notebooks on the Dask cluster whose scheduler is at ``address``.

    Each grader thread has one notebook in flight at a time (submitted with ``pure=False``): the
    grader's ``workers`` bounds what the scheduler holds, never a whole class's notebooks at once.
    """

    def __init__(
        self, address: str, zygote: bool = True, connect_seconds: float = 30.0, jailed: bool = True
    ) -> None:
        self.address = address
        try:
            self.client = Client(address, timeout=connect_seconds, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterUnavailable(f"cannot reach the Dask scheduler at {address} ({exc})") from None
        if not self.client.nthreads():
            sys.stderr.write(f"Waiting for a worker to join the Dask cluster at {address}...\n")
            try:
                self.client.wait_for_workers(1, timeout=WORKERLESS_SECONDS)
            except TimeoutError:
                self.client.close()
                raise ClusterUnavailable(
                    f"no worker joined the Dask cluster at {address} in {WORKERLESS_SECONDS:g} s"
                ) from None
        self.refused: dict[str, str] = {}
        """The workers that cannot grade for this machine, with the reason: they get no notebook."""
        self._screen(jailed)
        self.plugin = f"autograder-runner-{uuid.uuid4().hex[:12]}"
        self.client.register_plugin(RunnerPlugin(zygote), name=self.plugin)
        self.killed = threading.Event()
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        self._futures: set = set()
        self._workerless_since: float | None = None

    def _screen(self, jailed: bool) -> None:
        """Ask every worker now in the cluster whether it can grade for this machine; refuse the ones that
        cannot, and give up (nothing graded) when none can."""
        answers = self.client.run(refusal, checks_version(), jailed, library_versions(), on_error="return")
        for address, answer in sorted(answers.items()):
            if isinstance(answer, BaseException):
                answer = (
                    "cannot run the grading machine's code: was it started from another version of this "
                    f"repository, or before an update? ({answer})"
                )
            if answer:
                self._refuse(address, answer)
        if answers and len(self.refused) == len(answers):
            self.client.close()
            raise ClusterUnavailable(
                f"no worker of the Dask cluster at {self.address} can grade: {self._why()}"
            )

    def _refuse(self, address: str, reason: str) -> None:
        """Give the worker no notebook of this run, and say why on the terminal (the reason is the worker's
        answer: bounded and printed as text, never as the terminal's commands)."""
        if address not in self.refused:
            self.refused[address] = one_line(reason, REASON_LENGTH)
            line = f"The Dask worker {address} gets no notebook of this run: it {self.refused[address]}."
            sys.stderr.write(terminal(line) + "\n")

    def _why(self) -> str:
        return "; ".join(f"{a} {r}" for a, r in sorted(self.refused.items()))

    def _allowed(self) -> list[str] | None:
        """The workers a notebook may run on: None (any) when none was refused."""
        if not self.refused:
            return None
        allowed = sorted(set(self.client.nthreads()) - set(self.refused))
        if not allowed:
            raise ExecutorLost(f"no worker of the Dask cluster at {self.address} can grade: {self._why()}")
        return allowed

    def slots(self) -> int:
        """How many notebooks the cluster runs at once now: the threads of its workers that can grade
        (at least 1)."""
        threads = self.client.nthreads()
        return max(1, sum(n for w, n in threads.items() if w not in self.refused))

    def run(self, work: Work) -> Executed:
        """Submit the notebook and wait for what its worker sends back (from another worker when the one
        it went to refuses)."""
        while True:
            if self.killed.is_set():
                raise RuntimeError("the grading run was cancelled")
            if self.stopping.is_set():
                raise NotStarted("the grading run is stopping")
            if self.client.status != "running":
                raise ExecutorLost(f"the connection to the Dask scheduler at {self.address} was lost")
            allowed = self._allowed()
            key = f"grade-{work.name}-{uuid.uuid4().hex[:8]}"
            future = self.client.submit(
                run_on_worker,
                self.plugin,
                work,
                checks_version(),
                library_versions(),
                key=key,
                pure=False,
                workers=allowed,
                allow_other_workers=False,
            )
            with self._lock:
                self._futures.add(future)
            try:
                return self._wait(future, allowed)
            except WorkerRefused as exc:
                self._refuse(exc.address, exc.reason)
            except _Stranded:
                pass
            finally:
                with self._lock:
                    self._futures.discard(future)
                future.release()

    def _wait(self, future, allowed: list[str] | None) -> Executed:  # noqa: ANN001 - a distributed.Future
        while True:
            try:
                return future.result(timeout=POLL_SECONDS)
            except KilledWorker as exc:
                raise WorkerDied(
                    f"the Dask workers that ran it died {exc.allowed_failures + 1} times (the last: "
                    f"{exc.last_worker.address}); the scheduler's allowed-failures is {exc.allowed_failures}"
                ) from None
            except CancelledError:
                if self.killed.is_set():
                    raise RuntimeError("the grading run was cancelled") from None
                raise ExecutorLost(
                    f"the connection to the Dask scheduler at {self.address} was lost"
                ) from None
            except TimeoutError:
                pass
            workers = self._check_cluster()
            if allowed is not None and workers and not set(allowed) & workers:
                # every worker it may run on left: submitted again, to the workers there are now
                self.client.cancel([future])
                raise _Stranded

    def _check_cluster(self) -> set[str]:
        """The cluster's workers now; raise :class:`ExecutorLost` when the scheduler is gone or has had no
        worker for too long."""
        lost = ExecutorLost(f"the connection to the Dask scheduler at {self.address} was lost")
        if self.client.status != "running":
            raise lost
        try:
            workers = set(self.client.nthreads())
        except (OSError, TimeoutError, CancelledError):
            raise lost from None
        now = time.monotonic()
        if workers:
            self._workerless_since = None
        elif self._workerless_since is None:
            self._workerless_since = now
        elif now - self._workerless_since > WORKERLESS_SECONDS:
            raise ExecutorLost(
                f"the Dask cluster at {self.address} has had no worker for {WORKERLESS_SECONDS:g} s"
            )
        return workers

    def threads(self, workers: int, notebooks: int) -> int:
        """One thread per notebook running at once: a thread waits on the cluster while its notebook runs."""
        return workers

    def stop(self) -> None:
        """Start no notebook from now on: the ones waiting on the scheduler or in a worker's queue are not
        started (their :meth:`run` raises :class:`NotStarted`); the running ones finish."""
        self.stopping.set()
        try:
            self.client.run(stop_runners, self.plugin)
        except Exception:  # noqa: BLE001, S110 - a lost cluster starts nothing anyway
            pass

    def kill(self) -> None:
        """Cancel the notebooks not started yet and kill the running ones, on every worker."""
        self.killed.set()
        with self._lock:
            futures = list(self._futures)
        try:
            self.client.cancel(futures)
            self.client.run(kill_runners, self.plugin)
        except Exception:  # noqa: BLE001, S110 - a lost cluster has nothing left to kill
            pass

    def close(self, kill: bool = False) -> None:
        """Remove this run's runners from every worker (their scratch folders with them), disconnect."""
        try:
            if kill:
                self.kill()
            if self.client.status == "running":
                self.client.unregister_worker_plugin(self.plugin)
            else:
                # the client's attempts to reconnect end in tracebacks of its own: the run said why
                logging.getLogger("distributed.client").setLevel(logging.CRITICAL)
        except Exception:  # noqa: BLE001, S110 - a lost scheduler: its workers end their runners
            pass
        finally:
            self.client.close(timeout=10)
