"""A learner's check against simply running the notebook, on every notebook of the course.

    .venv/bin/python benchmarks/check_speed.py [--repeat 3] [NN ...]

For each notebook, a solved student version (the reference answers in the learner's notebook) is
checked with ``python -m autograder check --quiet`` and executed with ``jupyter nbconvert --to
notebook --execute``, the two commands in turn, ``--repeat`` times each, every run a whole process
as the learner types it. Prints the median wall time and CPU time (the process and its children) of
each, and the ratio of the medians; the course's target is a check at most 1.2 times plain
execution. The table is also written, with the date, the machine, the load and this command, to
``benchmarks/results/check_speed.md`` (``benchmarks/record.py``).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from autograder.course import assignments, grade_id, is_solution
from autograder.course.build import NOTEBOOKS, SOLUTIONS, source_notebook

BIN = Path(sys.executable).parent


def solved(name: str) -> nbformat.NotebookNode:
    """The student version of ``name`` with the reference answers in its answer cells."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    reference = {
        grade_id(c): c.source for c in source_notebook(SOLUTIONS / f"{name}.py").cells if is_solution(c)
    }
    for cell in nb.cells:
        if is_solution(cell):
            cell.source = reference[grade_id(cell)]
    return nb


def timed(command: list[str], cwd: Path) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``command``, its children's CPU included."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    from record import Record  # benchmarks/record.py: this script's folder is first on sys.path

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("notebooks", nargs="*", help="notebook numbers (default: all), e.g. 01 04")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("MPLBACKEND", "Agg")
    work = Path(tempfile.mkdtemp(prefix="check-speed-"))
    record = Record("check_speed", argv)
    record.line(f"Median of {args.repeat} runs each, the two commands in turn, every run a whole process.")
    record.line()
    record.line("| notebook | check wall | check CPU | nbconvert wall | nbconvert CPU | wall ratio |")
    record.line("|---|---|---|---|---|---|")
    for a in assignments():
        if args.notebooks and not any(a.name.startswith(n) for n in args.notebooks):
            continue
        path = work / a.notebook
        nbformat.write(solved(a.name), path)
        check = [str(BIN / "python"), "-m", "autograder", "check", "--quiet", a.notebook]
        plain = [
            str(BIN / "jupyter"),
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--output",
            "run.ipynb",
            a.notebook,
        ]
        runs: dict[str, list[tuple[float, float]]] = {"check": [], "plain": []}
        for _ in range(args.repeat):  # in turn, so that a change of load falls on both
            runs["check"].append(timed(check, work))
            runs["plain"].append(timed(plain, work))
        med = {
            k: (statistics.median(r[0] for r in v), statistics.median(r[1] for r in v))
            for k, v in runs.items()
        }
        record.line(
            f"| {a.name} | {med['check'][0]:.1f} s | {med['check'][1]:.1f} s | {med['plain'][0]:.1f} s "
            f"| {med['plain'][1]:.1f} s | {med['check'][0] / med['plain'][0]:.2f} |"
        )
    record.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
