"""A benchmark's figures, printed as they come and kept beside the benchmarks with where they came from.

A figure means little without its date, its machine, how busy the machine was and the command that
measured it. :class:`Record` prints each line of a benchmark's report as the benchmark produces it
and, at the end of the run, writes the whole report to ``benchmarks/results/<name>.md`` under a
header that says all of that, so the documentation quotes a file the benchmark wrote, never a figure
someone typed. A run replaces the file of the run before it; git keeps the history.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
import shlex
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
REPOSITORY = RESULTS.parent.parent


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _memory_gib() -> str:
    try:
        return f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB memory"
    except (ValueError, OSError, AttributeError):
        return "memory unknown"


def _versions() -> str:
    found = []
    for package in ("torch", "numpy", "nbgrader"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join([f"Python {platform.python_version()}", *found])


def machine() -> str:
    """The machine in one line: system, CPU, cores (all, and those this process may use), memory."""
    return (
        f"{platform.system()} {platform.machine()}, {_cpu_model()}, {os.cpu_count()} cores "
        f"({_usable_cores()} usable by the benchmark), {_memory_gib()}"
    )


def commit() -> str:
    """The commit measured, and whether the working tree differed from it."""

    def git(*args: str) -> str:
        command = ["git", "-C", str(REPOSITORY), *args]
        return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    return head + (", with uncommitted changes" if dirty else "")


def command_line(script: str, argv: list[str]) -> str:
    """The command that repeats the run, from the repository's root, with no path of this machine in it."""
    python = Path(os.path.normpath(os.path.abspath(sys.executable)))  # not resolved: the venv's link
    shown = python.relative_to(REPOSITORY).as_posix() if python.is_relative_to(REPOSITORY) else "python"
    return shlex.join([shown, f"benchmarks/{script}.py", *argv])


class Record:
    """The report of one benchmark run: :meth:`line` prints a line and keeps it, :meth:`write` files them."""

    def __init__(self, name: str, argv: list[str] | None = None) -> None:
        self.name = name
        self.command = command_line(name, sys.argv[1:] if argv is None else argv)
        self.started = dt.datetime.now(dt.UTC)
        self._clock = time.perf_counter()
        self.load_at_start = os.getloadavg()[0]
        self.lines: list[str] = []

    def line(self, text: str = "") -> None:
        """Print ``text`` now, and keep it for the results file."""
        print(text, flush=True)
        self.lines.append(text)

    def header(self) -> list[str]:
        """The provenance of the figures: what a reader needs to judge them and to measure them again."""
        took = time.perf_counter() - self._clock
        return [
            f"# {self.name}: the last run",
            "",
            f"Written by `benchmarks/{self.name}.py` at the end of its run, not by hand. To measure again,",
            "from the repository's root:",
            "",
            "```bash",
            self.command,
            "```",
            "",
            "| | |",
            "|---|---|",
            f"| date | {self.started:%Y-%m-%d %H:%M} UTC (the run took {took:.0f} s) |",
            f"| machine | {machine()} |",
            f"| software | {_versions()} |",
            f"| load average (1 min) | {self.load_at_start:.2f} at the start, "
            f"{os.getloadavg()[0]:.2f} at the end |",
            f"| commit | {commit()} |",
            "",
        ]

    def write(self) -> Path:
        """Write the header and every line to ``benchmarks/results/<name>.md``; return its path."""
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"{self.name}.md"
        path.write_text("\n".join(self.header() + self.lines).rstrip("\n") + "\n")
        print(f"written to {path.relative_to(REPOSITORY).as_posix()}", flush=True)
        return path
