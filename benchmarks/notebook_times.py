"""How long each solution notebook takes to execute, the way a learner runs it top to bottom.

    .venv/bin/python benchmarks/notebook_times.py [--repeat 3]

Builds the source notebooks (with solutions and hidden tests) into a temporary course and executes
each with nbclient in a fresh kernel, ``--repeat`` times; prints the median kernel start-up and the
median execution time of the cells. The course's target is under 30 s per notebook. The table is
also written, with the date, the machine, the load and this command, to
``benchmarks/results/notebook_times.md`` (``benchmarks/record.py``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

from autograder.course.build import write_sources


def time_notebook(path: Path) -> tuple[float, float]:
    """(kernel start-up, cell execution) seconds for one run of the notebook at ``path``."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        extra_arguments=["--IPKernelApp.log_level=ERROR"],
    )
    start = time.perf_counter()
    with client.setup_kernel():
        ready = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        done = time.perf_counter()
    return ready - start, done - ready


def main(argv: list[str] | None = None) -> int:
    from record import Record  # benchmarks/record.py: this script's folder is first on sys.path

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("MPLBACKEND", "Agg")
    root = Path(tempfile.mkdtemp(prefix="times-"))
    record = Record("notebook_times", argv)
    record.line(f"Median of {args.repeat} runs each, each in a fresh kernel, solutions and hidden tests in.")
    record.line()
    record.line("| notebook | cells | kernel start-up |")
    record.line("|---|---|---|")
    for a in write_sources(root):
        runs = [time_notebook(root / "source" / a.name / a.notebook) for _ in range(args.repeat)]
        kernel = statistics.median(r[0] for r in runs)
        cells = statistics.median(r[1] for r in runs)
        record.line(f"| {a.name} | {cells:.1f} s | {kernel:.1f} s |")
    record.write()
    return 0


if __name__ == "__main__":
    sys.exit(main())
