"""Benchmark: the grading engine against plain serial ``nbgrader autograde`` on the same submissions.

    .venv/bin/python benchmarks/grading_speed.py [--submissions 8] [--workers 2] [--assignment NAME]

Both grade the same honest submissions (reference answers, blank notebooks and half-done ones, in
turn) of one assignment, each in a course directory of its own, in the same command. The script
checks that both give every submission the same score, then prints the wall times, their ratio,
and where the engine's time per notebook goes: the notebook's own cells (as the runner timed them)
and the overhead beyond them (runner process, kernel start-up and shutdown, preparing, grading).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import nbformat

from autograder.build import SOLUTIONS, ensure_tools_on_path, nbgrader_config
from autograder.demo import solved
from autograder.engine.pipeline import ensure_course, grade_class


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


def run_engine(root: Path, assignment: str, notebooks: dict, workers: int):
    inbox = root.parent / "inbox"
    inbox.mkdir()
    for student, nb in notebooks.items():
        nbformat.write(nb, inbox / f"{student}_{assignment}.ipynb")
    start = time.perf_counter()
    result = grade_class(inbox, assignment, root, SOLUTIONS, workers=workers, force=True, progress=False)
    return time.perf_counter() - start, result.outcomes


def run_nbgrader(root: Path, assignment: str, notebooks: dict) -> tuple[float, dict[str, float]]:
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--submissions", type=int, default=8)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--assignment", default="01_linear_layer")
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = "1"

    work = Path(tempfile.mkdtemp(prefix="bench-"))
    try:
        engine_root, nbgrader_root = work / "engine" / "course", work / "nbgrader" / "course"
        ensure_course(engine_root, SOLUTIONS)
        ensure_course(nbgrader_root, SOLUTIONS)
        notebooks = make_submissions(engine_root, args.assignment, args.submissions)

        nb_seconds, nb_scores = run_nbgrader(nbgrader_root, args.assignment, notebooks)
        engine_seconds, outcomes = run_engine(engine_root, args.assignment, notebooks, args.workers)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    engine_scores = {o.student: o.score for o in outcomes}
    mismatches = {
        s: (engine_scores.get(s), nb_scores[s]) for s in nb_scores if engine_scores.get(s) != nb_scores[s]
    }
    per_notebook = [o.seconds for o in outcomes]
    own_code = [o.run_seconds for o in outcomes]
    overhead = [o.seconds - o.run_seconds for o in outcomes]
    n = len(notebooks)
    print(
        f"{n} submissions of {args.assignment}; engine: {args.workers} workers, jailed: {outcomes[0].jailed}"
    )
    print(f"serial nbgrader autograde: {nb_seconds:7.1f} s  ({nb_seconds / n:.1f} s per notebook)")
    print(
        f"grading engine:            {engine_seconds:7.1f} s  ({engine_seconds / n:.1f} s per notebook, wall)"
    )
    print(f"speed-up (nbgrader / engine): {nb_seconds / engine_seconds:.2f}x")
    print(
        f"engine, per notebook (median): {statistics.median(per_notebook):.1f} s in all = "
        f"{statistics.median(own_code):.1f} s of the notebook's own cells + "
        f"{statistics.median(overhead):.1f} s overhead"
    )
    phases = ["runner_start", "kernel_start", "cells", "shutdown"]
    medians = {p: statistics.median(o.timing.get(p, 0.0) for o in outcomes) for p in phases}
    medians["prepare_and_grade"] = statistics.median(o.seconds - sum(o.timing.values()) for o in outcomes)
    print(
        "engine, median seconds per notebook by phase: "
        + ", ".join(f"{p} {v:.2f}" for p, v in medians.items())
    )
    print("scores: " + ("identical for every submission" if not mismatches else f"DIFFER: {mismatches}"))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
