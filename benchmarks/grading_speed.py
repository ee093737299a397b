"""Benchmark: where grading stands, in one run on the same submissions of one assignment.

    .venv/bin/python benchmarks/grading_speed.py [--submissions 10] [--workers 2] [--assignment NAME]
                                                 [--skip-nbgrader] [--skip-scaling] [--scheduler ADDRESS]

Every row grades the same honest submissions (reference answers, blank notebooks and half-done
ones, in turn; notebook 04 by default), each in a course directory of its own:

* serial ``nbgrader autograde``, one submission after the other (the baseline);
* the local engine with ``--workers`` workers (default 2);
* the physical floor: the CPU time of the notebooks' own cells, tests included, summed over the
  submissions and divided by the machine's cores. The runner reads each kernel's CPU time from
  ``/proc`` around every cell (``cells_cpu`` in an outcome's timing), so it is the cells' own work
  as the engine's kernels did it, with no start-up, shutdown or waiting in it;
* the fixed cost per run: a run of one notebook minus the per-notebook time (the median time of a
  notebook in the full run): checking the gradebook and the course, starting runners and zygotes,
  the gradebook step and the outputs; once in this process (whose libraries the runs before have
  imported) and once as an instructor meets it, ``python -m autograder grade`` in a fresh process;
* the Dask executor on a local cluster of ``--workers`` worker processes (``dask.distributed``'s
  ``LocalCluster``), or on the cluster at ``--scheduler ADDRESS``, against the local engine;
* a scaling table: the Dask executor on local clusters of 1, 2 and 4 workers, against the machine's
  core count (workers beyond the cores show the executor's overhead, not a speed-up).

Every row must give every submission the same score; the script says so and exits 1 when not.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from autograder.engine import light

nbformat = light.nbformat()

from autograder.course.build import SOLUTIONS, ensure_tools_on_path, nbgrader_config  # noqa: E402
from autograder.course.demo import solved  # noqa: E402
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
    root: Path, assignment: str, notebooks: dict, workers: int, scheduler: str | None = None
) -> tuple[float, list]:
    """Grade ``notebooks`` with the engine in the course at ``root`` (locally, or on the Dask cluster
    at ``scheduler``); return the wall time and the outcomes."""
    inbox = Path(tempfile.mkdtemp(prefix="inbox-", dir=root.parent))
    for student, nb in notebooks.items():
        nbformat.write(nb, inbox / f"{student}_{assignment}.ipynb")
    start = time.perf_counter()
    result = grade_class(
        inbox, assignment, root, SOLUTIONS, workers=workers, force=True, progress=False, scheduler=scheduler
    )
    return time.perf_counter() - start, result.outcomes


def run_command_line(root: Path, assignment: str, notebooks: dict) -> float:
    """The wall time of ``python -m autograder grade`` on ``notebooks`` in a fresh process."""
    inbox = Path(tempfile.mkdtemp(prefix="inbox-", dir=root.parent))
    for student, nb in notebooks.items():
        nbformat.write(nb, inbox / f"{student}_{assignment}.ipynb")
    command = [sys.executable, "-m", "autograder", "grade", assignment, str(inbox), "--course", str(root)]
    start = time.perf_counter()
    subprocess.run(command + ["--force"], check=True, capture_output=True)
    return time.perf_counter() - start


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
    root = work / name / "course"
    ensure_course(root, SOLUTIONS)
    return root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--submissions", type=int, default=10)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--assignment", default="04_custom_functions")
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

    work = Path(tempfile.mkdtemp(prefix="bench-"))
    rows: list[tuple[str, float, dict]] = []
    try:
        engine_root = _course(work, "engine")
        notebooks = make_submissions(engine_root, args.assignment, args.submissions)
        if not args.skip_nbgrader:
            nb_seconds, nb_scores = run_nbgrader(_course(work, "nbgrader"), args.assignment, notebooks)
            rows.append(("serial nbgrader autograde", nb_seconds, nb_scores))
        engine_seconds, outcomes = run_engine(engine_root, args.assignment, notebooks, args.workers)
        rows.append(
            (f"local engine, {args.workers} workers", engine_seconds, {o.student: o.score for o in outcomes})
        )
        first = dict(list(notebooks.items())[:1])
        one_seconds, one = run_engine(_course(work, "one"), args.assignment, first, args.workers)
        command_seconds = run_command_line(_course(work, "command"), args.assignment, first)
        if args.scheduler:
            label = f"Dask executor at {args.scheduler}"
            seconds, dasked = run_engine(
                _course(work, "dask"), args.assignment, notebooks, args.workers, args.scheduler
            )
        else:
            label = f"Dask executor, {args.workers} local workers"
            seconds, dasked = on_local_cluster(
                _course(work, "dask"), args.assignment, notebooks, args.workers
            )
        rows.append((label, seconds, {o.student: o.score for o in dasked}))
        scaling = []
        for size in () if args.skip_scaling else (1, 2, 4):
            seconds, scaled = on_local_cluster(
                _course(work, f"dask-{size}"), args.assignment, notebooks, size
            )
            scaling.append((size, seconds))
            scores = {o.student: o.score for o in scaled}
            rows.append((f"Dask, {size} local workers (scaling)", seconds, scores))
    finally:
        shutil.rmtree(work, ignore_errors=True)

    n, ncores = len(notebooks), cores()
    cpu = [o.timing.get("cells_cpu") for o in outcomes]
    floor = sum(c for c in cpu if c is not None) / ncores if all(c is not None for c in cpu) else None
    per_notebook = statistics.median(o.seconds for o in outcomes)
    print(
        f"{n} submissions of {args.assignment}; this machine has {ncores} cores "
        f"(os.cpu_count() {os.cpu_count()}); jailed: {outcomes[0].jailed}"
    )
    print(f"{'':40} {'wall s':>8} {'s/notebook':>11} {'vs nbgrader':>12} {'vs floor':>9} {'vs local':>9}")
    base = rows[0][1] if not args.skip_nbgrader else None
    for label, seconds, _ in rows:
        if label.endswith("(scaling)"):
            continue
        speed = f"{base / seconds:11.2f}x" if base else f"{'':>12}"
        above = f"{seconds / floor:8.2f}x" if floor else f"{'':>9}"
        print(
            f"{label:40} {seconds:8.1f} {seconds / n:11.2f} {speed} {above} {seconds / engine_seconds:8.2f}x"
        )
    if floor is not None:
        print(f"{'physical floor (cells CPU / cores)':40} {floor:8.1f} {floor / n:11.2f}")
    else:
        print("physical floor: unknown (the runner could not read the kernels' CPU time)")
    print(
        f"fixed cost per run: {one_seconds - per_notebook:.2f} s (a run of 1 notebook {one_seconds:.2f} s, "
        f"minus the per-notebook time {per_notebook:.2f} s)"
    )
    print(
        f"fixed cost per run from the command line: {command_seconds - per_notebook:.2f} s "
        f"(`python -m autograder grade` of 1 notebook in a fresh process {command_seconds:.2f} s)"
    )
    if scaling:
        one_worker = scaling[0][1]
        print(
            f"Dask executor on local clusters ({ncores} cores here): workers, wall s, speed-up over 1 worker"
        )
        for workers, seconds in scaling:
            print(f"  {workers} {seconds:8.1f} {one_worker / seconds:6.2f}x")
    phases = ["runner_start", "kernel_start", "cells", "cells_cpu", "shutdown"]
    medians = {p: statistics.median(o.timing.get(p, 0.0) for o in outcomes) for p in phases}
    measured = ("runner_start", "kernel_start", "cells", "shutdown")
    medians["prepare_and_grade"] = statistics.median(
        o.seconds - sum(o.timing.get(p, 0.0) for p in measured) for o in outcomes
    )
    print("engine, median seconds per notebook: " + ", ".join(f"{p} {v:.2f}" for p, v in medians.items()))
    reference = rows[0][2]
    mismatches = {
        label: {s: (scores.get(s), reference[s]) for s in reference if scores.get(s) != reference[s]}
        for label, _, scores in rows[1:]
    }
    mismatches = {label: diff for label, diff in mismatches.items() if diff}
    if len(one) != 1 or one[0].score != reference[one[0].student]:
        mismatches["one-notebook run"] = {o.student: o.score for o in one}
    print("scores: " + ("identical in every row" if not mismatches else f"DIFFER: {mismatches}"))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
