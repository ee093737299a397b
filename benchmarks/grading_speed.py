"""Benchmark: where grading stands, in one run on the same submissions of one assignment.

    .venv/bin/python benchmarks/grading_speed.py [--submissions 10] [--workers 2] [--assignments NAME ...]
                                                 [--repeat 3] [--skip-nbgrader] [--skip-scaling]
                                                 [--scheduler ADDRESS]

For each assignment (notebook 04 by default; ``--assignments 04_custom_functions
06_memory_efficient_attention`` for several, a table each), every row grades the same honest
submissions (reference answers, blank notebooks and half-done ones, in turn), each in a course
directory of its own. Before the first row this process imports what the grader's first scoring
imports (:func:`autograder.grading.warm_up`, nbgrader's API), so that every row does the same work:
in one process only the first grading run pays for those imports, and the rows after it (the Dask
executor's, before) would not. What a first run pays is the command line's fixed cost below.

Serial nbgrader runs once (the baseline, the slowest row by far). Every run of the engine below runs
``--repeat`` times (default 3), in rounds, one of each in turn, so that a change of the machine's load
(on a shared machine, single runs of the same command spread by more than a second) falls on all of
them; each row, the floor and the fixed costs are the medians of the rounds, and the table gives each
row's range.

* serial ``nbgrader autograde``, one submission after the other (the baseline);
* the local engine with ``--workers`` workers (default 2);
* the physical floor: the CPU time of the notebooks' own cells, tests included, summed over the
  submissions and divided by the machine's cores. The runner reads each kernel's CPU time from
  ``/proc`` around every cell (``cells_cpu`` in an outcome's timing), so it is the cells' own work
  as the engine's kernels did it, with no start-up, shutdown or waiting in it; it is taken from the
  row on warm runners (below), since on the engine's own runners each runner's first kernels run
  cold and their libraries' first calls would raise the floor itself (both sums are printed);
* the fixed cost per run: a run of one notebook (the first submission, a solved one) minus the same
  notebook's own time graded alone on warm runners (the resident runners below, from this warm
  process; not the median notebook, often a blank one that stops early, nor the notebook's time in a
  full run, beside its runner's warm-up or sharing the cores): checking the gradebook and the
  course, starting runners and zygotes, the gradebook step and the outputs; once in this process
  (whose libraries the runs before have imported) and once as an instructor meets it, ``python -m
  autograder grade`` in a fresh process, with where that one goes: its notebook's wait for a kernel,
  its cold cells and its scoring beyond the same notebook's alone on warm runners, and the command's
  own time outside its notebook (imports, the gradebook's check and intake before; the gradebook
  step, the outputs and the exit after);
* the engine with resident runners: ``python -m autograder serve`` (``--workers`` runners, the
  assignment's kinds of zygote) started and warmed before the first round (idle, its zygotes asleep,
  while the other runs run), its runners leased as the grade command leases them; and the command
  line's fixed cost again, with that service running, and where it goes (the command without it runs
  ``--own-runners``, so that a service of the machine is not used);
* the machine's CPU during the median run of the engine's rows (every process's: kernels, runners,
  zygotes, the grader; from ``/proc/stat``, so only on a quiet machine is it the run's alone): what
  the engine spends a notebook beyond its cells' CPU, and the fastest the run could be with every
  core busy throughout (its CPU over the cores), against the floor;
* the Dask executor on a local cluster of ``--workers`` worker processes (``dask.distributed``'s
  ``LocalCluster``), or on the cluster at ``--scheduler ADDRESS``, against the local engine;
* a scaling table: the Dask executor on local clusters of 1, 2 and 4 workers, against the machine's
  core count (workers beyond the cores show the executor's overhead, not a speed-up).

Every run must give every submission the same score; the script says so and exits 1 when not. The
report is printed and written, with the date, the machine, the load and this command, to
``benchmarks/results/grading_speed.md`` (``benchmarks/record.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from autograder.engine import light

nbformat = light.nbformat()

from autograder.course.build import SOLUTIONS, ensure_tools_on_path, nbgrader_config  # noqa: E402
from autograder.course.demo import solved  # noqa: E402
from autograder.engine.executor import course_kinds  # noqa: E402
from autograder.engine.pipeline import ensure_course, grade_class  # noqa: E402


def _half(source, release):
    nb = solved(source, release)
    stubs = {c.id: c.source for c in release.cells if c.metadata.get("nbgrader", {}).get("solution")}
    for cell in [c for c in nb.cells if c.id in stubs][1::2]:
        cell.source = stubs[cell.id]
    return nb


def make_submissions(root: Path, assignment: str, n: int) -> dict[str, object]:
    """n honest notebooks: solved, blank and half-done in turn, keyed by student id."""
    source = nbformat.read(root / "source" / assignment / f"{assignment}.ipynb", as_version=4)
    release = nbformat.read(root / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    kinds = [solved, lambda s, r: r, _half]
    return {f"s{i:03d}": kinds[i % 3](source, release) for i in range(n)}


def run_engine(
    root: Path,
    assignment: str,
    notebooks: dict,
    workers: int,
    scheduler: str | None = None,
    service: dict[str, str] | None = None,
) -> tuple[float, list]:
    """Grade ``notebooks`` with the engine in the course at ``root`` (locally, on the Dask cluster at
    ``scheduler``, or on the runners of the resident service whose environment is ``service``); return
    the wall time and the outcomes."""
    inbox = Path(tempfile.mkdtemp(prefix="inbox-", dir=root.parent))
    for student, nb in notebooks.items():
        nbformat.write(nb, inbox / f"{student}_{assignment}.ipynb")
    start = time.perf_counter()
    executor = leased(service, workers) if service else None
    result = grade_class(
        inbox, assignment, root, SOLUTIONS, workers=workers, force=True, progress=False, scheduler=scheduler,
        executor=executor,
    )  # fmt: skip
    return time.perf_counter() - start, result.outcomes


def leased(service: dict[str, str], workers: int):  # noqa: ANN201 - a LocalExecutor
    """An executor on ``workers`` runners of the resident service, as the grade command leases them."""
    from autograder.engine import resident
    from autograder.engine.executor import LocalExecutor
    from autograder.engine.jail import jail_available

    executor = LocalExecutor()
    before = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = service["XDG_RUNTIME_DIR"]
    try:
        runners, line = resident.lease(workers, jail_available, executor.work)
    finally:
        os.environ.pop("XDG_RUNTIME_DIR") if before is None else os.environ.update(XDG_RUNTIME_DIR=before)
    if len(runners) != workers:
        raise RuntimeError(f"the benchmark's resident service gave {line}")
    executor.use_runners(runners)
    return executor


@contextlib.contextmanager
def resident_service(work: Path, workers: int, kinds: list[str]) -> Iterator[dict[str, str]]:
    """``python -m autograder serve`` on a socket of its own, started and warmed; its environment."""
    runtime = work / "run"
    runtime.mkdir(mode=0o700, parents=True)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    command = [sys.executable, "-m", "autograder", "serve", "--workers", str(workers), "--idle", "0"]
    proc = subprocess.Popen(
        command + ["--kinds", ",".join(kinds)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        if not proc.stdout.readline().startswith("serving "):
            raise RuntimeError("the resident runner service did not start")
        yield env
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def run_command_line(
    root: Path, assignment: str, notebooks: dict, env: dict[str, str] | None = None
) -> tuple[float, list]:
    """The wall time of ``python -m autograder grade`` on ``notebooks`` in a fresh process, and the
    outcomes it stored: on its own runners, or with ``env`` a resident service's, on that service's."""
    from autograder.engine.outcome import result_store

    inbox = Path(tempfile.mkdtemp(prefix="inbox-", dir=root.parent))
    for student, nb in notebooks.items():
        nbformat.write(nb, inbox / f"{student}_{assignment}.ipynb")
    command = [sys.executable, "-m", "autograder", "grade", assignment, str(inbox), "--course", str(root)]
    start = time.perf_counter()
    subprocess.run(
        command + ["--force"] + ([] if env else ["--own-runners"]), check=True, capture_output=True, env=env
    )
    seconds = time.perf_counter() - start
    store = result_store(root)
    return seconds, [store.read(store.path(student, assignment)) for student in notebooks]


def run_nbgrader(root: Path, assignment: str, notebooks: dict) -> tuple[float, dict[str, float]]:
    """Serial ``nbgrader autograde`` of every notebook; the wall time and the gradebook's scores."""
    from nbgrader.api import Gradebook
    from nbgrader.apps import NbGraderAPI
    from sqlalchemy.exc import SAWarning

    warnings.filterwarnings("ignore", category=SAWarning)
    for student, nb in notebooks.items():
        folder = root / "submitted" / student / assignment
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / f"{assignment}.ipynb")
    ensure_tools_on_path()
    api = NbGraderAPI(config=nbgrader_config(root))
    start = time.perf_counter()
    for student in notebooks:
        result = api.autograde(assignment, student, force=True)
        if not result["success"]:
            raise RuntimeError(f"nbgrader autograde failed for {student}:\n{result['log']}")
    seconds = time.perf_counter() - start
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        scores = {s: float(gb.find_submission(assignment, s).score) for s in notebooks}
    return seconds, scores


def cores() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def on_local_cluster(root: Path, assignment: str, notebooks: dict, workers: int) -> tuple[float, list]:
    """:func:`run_engine` on the Dask executor, on a local cluster of ``workers`` worker processes of one
    thread each; the cluster's start and stop are not timed."""
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True) as cluster:
        return run_engine(root, assignment, notebooks, workers, cluster.scheduler_address)


def _course(work: Path, name: str) -> Path:
    """A course directory of its own for one run: a copy of one built in ``work`` the first time (building
    one takes seconds; a run uses a fresh one, its gradebook as the build left it)."""
    built = work / "built" / "course"
    if not built.exists():
        ensure_course(built, SOLUTIONS)
    root = work / name / "course"
    shutil.copytree(built, root)
    ensure_course(root, SOLUTIONS)  # finds it up to date
    return root


#: A timed run: its wall time and the outcomes it stored (the rows' scores, the notebooks' timings).
Sample = tuple[float, list]

#: The runs measured in every round, in the order they run, and each one's row label (None: not a row).
KINDS = {
    "engine": "the engine, {workers} workers",
    "one": None,
    "command": None,
    "served": "the engine with resident runners (`autograder serve` started and warmed before the rows)",
    "alone": None,
    "command-served": None,
    "dask": "Dask executor, local cluster of {workers} workers",
}


@dataclass
class Runs:
    """What one benchmark run measured: serial nbgrader's time and scores, and every engine run's samples
    (one a round), by kind (:data:`KINDS`)."""

    assignment: str
    notebooks: dict
    nbgrader: tuple[float, dict] | None = None
    samples: dict[str, list[Sample]] = field(default_factory=dict)
    scaling: list[tuple[int, float, list]] = field(default_factory=list)
    busy: dict[str, list[float | None]] = field(default_factory=dict)
    """The machine's busy CPU seconds during each sample (:func:`machine_busy`), by kind, in order."""

    def add(self, kind: str, sample: Sample, busy: float | None = None) -> None:
        self.samples.setdefault(kind, []).append(sample)
        self.busy.setdefault(kind, []).append(busy)

    def _middle(self, kind: str) -> int:
        """The index of the sample of median wall time (the lower middle one of an even number)."""
        ordered = sorted(range(len(self.samples[kind])), key=lambda i: self.samples[kind][i][0])
        return ordered[(len(ordered) - 1) // 2]

    def median(self, kind: str) -> Sample:
        """The sample of median wall time: a run that happened, so that its outcomes are that run's own."""
        return self.samples[kind][self._middle(kind)]

    def median_busy(self, kind: str) -> float | None:
        """The machine's busy CPU seconds during :meth:`median`'s run."""
        return self.busy[kind][self._middle(kind)]

    def seconds(self, kind: str) -> float:
        return self.median(kind)[0]

    def spread(self, kind: str) -> str:
        """The fastest and slowest sample, or that there was one."""
        times = [seconds for seconds, _ in self.samples[kind]]
        return f"{min(times):.1f}-{max(times):.1f} s" if len(times) > 1 else "one run"


def machine_busy() -> float | None:
    """The CPU seconds this machine has been busy since it started, all cores together: ``/proc/stat``'s
    total less its idle and I/O-wait time. None where it cannot be read."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
        ticks = os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        return None
    return (sum(fields[:8]) - fields[3] - fields[4]) / ticks  # guest time is already in user time


def busy_during(run: Callable[[], Sample]) -> tuple[Sample, float | None]:
    """``run``'s sample, and the machine's busy CPU seconds while it ran."""
    before = machine_busy()
    sample = run()
    after = machine_busy()
    return sample, None if before is None or after is None else after - before


def warm_process() -> None:
    """Import, once, what the grader's first scoring and its gradebook step import (seconds), so that no
    row of the report pays for it and the others not."""
    from autograder.grading import warm_up

    warm_up()
    import nbgrader.api  # noqa: F401


def measure(args: argparse.Namespace, work: Path, assignment: str) -> Runs:
    """Grade the same submissions of ``assignment`` in every way the report compares, each run in a course
    of its own: serial nbgrader once, then ``--repeat`` rounds of every engine run (:data:`KINDS`) in
    turn, so that a change of the machine's load falls on all of them."""
    work = work / assignment
    first_root = _course(work, "submissions")
    runs = Runs(assignment, make_submissions(first_root, assignment, args.submissions))
    notebooks = runs.notebooks
    first = dict(list(notebooks.items())[:1])
    if not args.skip_nbgrader:
        runs.nbgrader = run_nbgrader(_course(work, "nbgrader"), assignment, notebooks)
    workers = args.workers
    with resident_service(work, workers, course_kinds(first_root, assignment)) as service:
        for r in range(args.repeat):

            def course(kind: str, r: int = r) -> Path:
                return _course(work, f"{kind}-{r}")

            runs.add(
                "engine", *busy_during(partial(run_engine, course("engine"), assignment, notebooks, workers))
            )
            runs.add("one", run_engine(course("one"), assignment, first, workers))
            runs.add("command", run_command_line(course("command"), assignment, first))
            served = partial(run_engine, course("served"), assignment, notebooks, workers, service=service)
            runs.add("served", *busy_during(served))
            runs.add("alone", run_engine(course("alone"), assignment, first, workers, service=service))
            runs.add("command-served", run_command_line(course("command-served"), assignment, first, service))
            if args.scheduler:
                runs.add("dask", run_engine(course("dask"), assignment, notebooks, workers, args.scheduler))
            else:
                runs.add("dask", on_local_cluster(course("dask"), assignment, notebooks, workers))
    for size in () if args.skip_scaling else (1, 2, 4):
        seconds, scaled = on_local_cluster(_course(work, f"dask-{size}"), assignment, notebooks, size)
        runs.scaling.append((size, seconds, scaled))
    return runs


def mismatches(runs: Runs) -> dict[str, dict]:
    """Every run whose scores differ from serial nbgrader's (else the first engine run's), or that lacks a
    notebook it was given, by run; empty when all agree."""
    engine = runs.samples["engine"][0][1]
    reference = runs.nbgrader[1] if runs.nbgrader else {o.student: o.score for o in engine}
    everyone, first = list(runs.notebooks), [next(iter(runs.notebooks))]
    named = [
        (f"{kind} #{r + 1}", first if KINDS[kind] is None else everyone, outcomes)
        for kind, samples in runs.samples.items()
        for r, (_, outcomes) in enumerate(samples)
    ]
    named += [(f"Dask, {n} local workers (scaling)", everyone, o) for n, _, o in runs.scaling]
    found = {}
    for label, given, outcomes in named:
        scores = {o.student: o.score for o in outcomes}
        wrong = {s: (scores.get(s), reference[s]) for s in given if scores.get(s) != reference[s]}
        if wrong:
            found[label] = wrong
    return found


def scaling_table(scaling: list[tuple[int, float, list]], ncores: int, record) -> None:
    """The Dask executor's wall time on local clusters of 1, 2 and 4 workers, against one worker."""
    if not scaling:
        return
    one_worker = scaling[0][1]
    record.line()
    record.line(f"The Dask executor on local clusters ({ncores} cores here):")
    record.line()
    record.line("| workers | wall | speed-up over 1 worker |")
    record.line("|---|---|---|")
    for workers, seconds, _ in scaling:
        record.line(f"| {workers} | {seconds:.1f} s | {one_worker / seconds:.2f}x |")


PHASES = ("queued", "runner_start", "kernel_start", "cells", "shutdown")


def phase_medians(outcomes: list) -> dict[str, float]:
    """The median seconds of each phase of a notebook (:func:`~autograder.engine.executor.timing_breakdown`),
    with ``cells_cpu`` and ``prepare_and_grade`` (the rest of the grader's time on it)."""
    medians = {p: statistics.median(o.timing.get(p, 0.0) for o in outcomes) for p in (*PHASES, "cells_cpu")}
    medians["prepare_and_grade"] = statistics.median(
        o.seconds - sum(o.timing.get(p, 0.0) for p in PHASES) for o in outcomes
    )
    return medians


def cells_cpu(outcomes: list) -> float | None:
    """The CPU time of every notebook's cells, summed; None when the runner could not read one."""
    cpu = [o.timing.get("cells_cpu") for o in outcomes]
    return None if not cpu or None in cpu else sum(cpu)


def own_seconds(outcome) -> float:  # noqa: ANN001
    """A notebook's own time in a run: its outcome's seconds without its wait for a runner."""
    return outcome.seconds - outcome.timing.get("queued", 0.0)


def fixed_cost_parts(one, command_seconds: float, same) -> str:  # noqa: ANN001
    """The command line's one notebook (``one``, its outcome) against the same notebook graded alone on
    warm runners (``same``): how much longer it waited to start and its kernel, how much longer its
    cells ran (cold), how much longer the grader took to prepare and score it, and the command's time
    outside it."""
    waited = sum(one.timing.get(p, 0.0) - same.timing.get(p, 0.0) for p in ("runner_start", "kernel_start"))
    colder = one.timing.get("cells", 0.0) - same.timing.get("cells", 0.0)
    grader = [o.seconds - sum(o.timing.get(p, 0.0) for p in PHASES) for o in (one, same)]
    scored = grader[0] - grader[1]
    outside = command_seconds - one.seconds
    return (
        f"its notebook waited {waited:.2f} s more for its runner and kernel (a zygote's imports), its cells "
        f"ran {colder:.2f} s longer (a kernel not yet warmed, beside the grader's warm-up), preparing and "
        f"scoring it {scored:.2f} s longer, and {outside:.2f} s were the command's own, outside its "
        "notebook (the interpreter, imports, the gradebook's check and intake before; the gradebook "
        "step, the outputs and the exit after)"
    )


def machine_cpu(runs: Runs, n: int, ncores: int, floor: float | None) -> str | None:
    """The line on the machine's CPU during the median runs of the engine's two local rows: beyond the
    cells' own, a notebook, and the run's least wall time with every core busy, against the floor."""
    parts = []
    for kind, text in (("engine", "own runners"), ("served", "resident runners")):
        busy, cells = runs.median_busy(kind), cells_cpu(runs.median(kind)[1])
        if busy is None or cells is None or floor is None:
            return None
        parts.append(
            f"{text} {busy:.1f} s, {(busy - cells) / n:.2f} s a notebook beyond its cells' "
            f"{cells / n:.2f} s, so no less than {busy / ncores:.1f} s with all {ncores} cores busy "
            f"throughout ({busy / ncores / floor:.2f}x the floor)"
        )
    return (
        "- the machine's CPU during the median run (every process: kernels, runners, zygotes, the grader; "
        "a quiet machine's alone): " + "; ".join(parts)
    )


def report(runs: Runs, args: argparse.Namespace, record) -> dict[str, dict]:
    """Print and keep the comparison table (each engine row the median of its rounds, with their range),
    the fixed cost, the scaling table and where a notebook's time goes; return the runs whose scores
    differ."""
    n, ncores = len(runs.notebooks), cores()
    engine_seconds, outcomes = runs.median("engine")
    # The floor is the cells' CPU on warm runners (the resident rows): on the engine's own runners each
    # runner's first kernels run cold, and their first calls would raise the floor itself.
    served = [cells_cpu(o) for _, o in runs.samples["served"]]
    warm = None if None in served else statistics.median(served)
    own = cells_cpu(outcomes)
    floor = warm / ncores if warm is not None else None
    rounds = len(runs.samples["engine"])
    record.line(
        f"{n} submissions of {runs.assignment}; {ncores} cores usable (os.cpu_count() {os.cpu_count()}); "
        f"jailed: {outcomes[0].jailed}; each engine row the median of {rounds} rounds, its runs in turn"
    )
    record.line()
    record.line("| | wall | range | per notebook | vs serial nbgrader | vs the floor | vs the local engine |")
    record.line("|---|---|---|---|---|---|---|")
    base = runs.nbgrader[0] if runs.nbgrader else None
    rows = [("serial `nbgrader autograde`", base, "one run")] if base else []
    label = f"Dask executor at {args.scheduler}" if args.scheduler else KINDS["dask"]
    for kind, text in (("engine", KINDS["engine"]), ("served", KINDS["served"]), ("dask", label)):
        rows.append((text.format(workers=args.workers), runs.seconds(kind), runs.spread(kind)))
    for text, seconds, spread in rows:
        speed = f"{base / seconds:.2f}x" if base else ""
        above = f"{seconds / floor:.2f}x" if floor else ""
        record.line(
            f"| {text} | {seconds:.1f} s | {spread} | {seconds / n:.2f} s | {speed} | {above} "
            f"| {seconds / engine_seconds:.2f}x |"
        )
    if floor is not None:
        record.line(
            f"| physical floor (cells' CPU / {ncores} cores) | {floor:.1f} s | | {floor / n:.2f} s | | | |"
        )
    record.line()
    if floor is None:
        record.line("- physical floor: unknown (the runner could not read the kernels' CPU time)")
    elif own is not None:
        record.line(
            f"- the cells' CPU, summed: {warm:.1f} s on warm runners (the floor's; the median of the "
            f"rounds), {own:.1f} s on the engine's own runners (each runner's first kernels cold)"
        )
    machine = machine_cpu(runs, n, ncores, floor)
    if machine:
        record.line(machine)
    # What a class of one is measured against: the same notebook's own time graded alone on warm
    # runners, in this warm process. Not the median notebook (often a blank one that stops early), nor
    # the notebook's time in a full run (beside its runner's warm-up, or sharing the cores).
    first = next(iter(runs.notebooks))
    alone = runs.median("alone")[1][0]
    own = statistics.median(own_seconds(o[0]) for _, o in runs.samples["alone"])
    median = statistics.median(own_seconds(o) for o in outcomes)
    one_seconds, command_seconds = runs.seconds("one"), runs.seconds("command")
    record.line(
        f"- fixed cost per run: {one_seconds - own:.2f} s (a run of 1 notebook, {first}, "
        f"{one_seconds:.2f} s ({runs.spread('one')}), minus that notebook's own time graded alone on warm "
        f"runners {own:.2f} s; the median notebook's in the full run: {median:.2f} s)"
    )
    record.line(
        f"- fixed cost per run from the command line: {command_seconds - own:.2f} s "
        f"(`python -m autograder grade --own-runners` of 1 notebook in a fresh process "
        f"{command_seconds:.2f} s ({runs.spread('command')}))"
    )
    medians = phase_medians(outcomes)
    record.line(
        "- the engine, median seconds per notebook: " + ", ".join(f"{p} {v:.2f}" for p, v in medians.items())
    )
    parts = fixed_cost_parts(runs.median("command")[1][0], command_seconds, alone)
    record.line("- where the command line's fixed cost goes (its own runners; the median run): " + parts)
    served_seconds, served_outcomes = runs.median("command-served")
    record.line(
        f"- fixed cost per run from the command line with resident runners: "
        f"{served_seconds - own:.2f} s (the same command, `autograder serve` running: "
        f"{served_seconds:.2f} s ({runs.spread('command-served')})); where it goes (the median run): "
        + fixed_cost_parts(served_outcomes[0], served_seconds, alone)
    )
    differ = mismatches(runs)
    record.line("- scores: " + ("identical in every run" if not differ else f"DIFFER: {differ}"))
    scaling_table(runs.scaling, ncores, record)
    return differ


def main(argv: list[str] | None = None) -> int:
    from record import Record  # benchmarks/record.py: this script's folder is first on sys.path

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--submissions", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--repeat", type=int, default=3, help="rounds of the engine's runs, each row their median (default 3)"
    )
    parser.add_argument("--assignment", default=None, help="one assignment (default 04_custom_functions)")
    parser.add_argument(
        "--assignments", nargs="+", default=None, metavar="NAME", help="several, a table each"
    )
    parser.add_argument(
        "--skip-nbgrader", action="store_true", help="leave out serial nbgrader (the slow row)"
    )
    parser.add_argument(
        "--skip-scaling", action="store_true", help="leave out the 1, 2 and 4 Dask workers' table"
    )
    parser.add_argument(
        "--scheduler", help="the Dask executor's row on the cluster at this address (default: a local one)"
    )
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = "1"
    names = args.assignments or [args.assignment or "04_custom_functions"]
    record = Record("grading_speed", argv)
    work = Path(tempfile.mkdtemp(prefix="bench-"))
    differ: dict[str, dict] = {}
    try:
        warm_process()
        for i, name in enumerate(names):
            if i:
                record.line()
            found = report(measure(args, work, name), args, record)
            differ.update({f"{name}: {label}": diff for label, diff in found.items()})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    record.write()
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
