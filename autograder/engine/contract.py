"""What the grading engine's processes say to each other, written and read in this one module.

The grader (:mod:`autograder.engine.grade`) writes a :class:`Job` for each notebook; the runner
(:mod:`autograder.engine.runner`) reads it, executes the notebook and appends its events, one JSON
object a line: ``start``, ``kernel``, one ``cell`` event per executed code cell (:func:`cell_event`)
and one ``end`` event (:func:`end_event`), whose :class:`Stop` says why execution stopped early, if
it did. The grader reads the events back (:func:`read_events`) and grades from them
(:mod:`autograder.grading.verdicts`). Nothing here imports the rest of the engine: the runner loads
it in a process of its own.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from enum import Enum
from pathlib import Path
from typing import Any


@dataclass
class Limits:
    """What one notebook may use; the command line's defaults are these."""

    cell_seconds: float = 120.0
    notebook_seconds: float = 600.0
    memory_bytes: int = 4 * 1024**3
    output_bytes: int = 2 * 1024**2
    file_bytes: int = 100 * 1024**2
    processes: int = 4096


@dataclass
class Job:
    """One notebook to run: written by the grader, read by the runner."""

    notebook: str
    """The prepared notebook (it holds the hidden tests: it lives outside ``workdir``)."""
    workdir: str
    """The kernel's folder, holding nothing of the course."""
    events: str
    """Where the runner appends its events."""
    grade_cells: list[str]
    """The grade ids of the graded cells: only their events carry evidence."""
    cell_seconds: float
    notebook_seconds: float
    output_bytes: int
    kernel: str = "torch"
    """``numpy`` (the kernel never imports PyTorch) or ``torch``: which zygote forks the kernel."""
    executed: str | None = None
    """Where the executed notebook is written, or None."""
    jail_prefix: list[str] = field(default_factory=list)
    jail_spec: str | None = None
    startup_timeout: float = 60.0

    def write(self, path: Path) -> None:
        """Write the job as JSON."""
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, path: Path) -> Job:
        """Read a job written by :meth:`write`; a missing or unknown key is an error that says which."""
        data = json.loads(Path(path).read_text())
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"job {path}: unknown keys {unknown}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ValueError(f"job {path}: {exc}") from None


class StopReason(Enum):
    """Why the runner (or the grader, for a runner it had to kill) stopped a notebook early."""

    CELL_TIMEOUT = "cell_timeout"
    NOTEBOOK_TIMEOUT = "notebook_timeout"
    OUTPUT_LIMIT = "output_limit"
    DEAD = "dead"
    KERNEL_FAILED = "kernel_failed"
    KILLED = "killed"
    RUNNER_FAILED = "runner_failed"
    BAD_MESSAGE = "bad_message"

    @property
    def wording(self) -> str:
        """How the reason reads in feedback, with ``{limit}``, ``{bytes}`` and ``{detail}`` to fill in."""
        return _WORDING[self][0] + _WORDING[self][1]

    @property
    def headline(self) -> str:
        """The wording without its tail (what the grades table shows)."""
        return _WORDING[self][0]


#: Each reason's wording, as its headline and the tail that completes the sentence.
_WORDING: dict[StopReason, tuple[str, str]] = {
    StopReason.CELL_TIMEOUT: ("a cell ran longer than the {limit} s a cell may take", ", and was stopped"),
    StopReason.NOTEBOOK_TIMEOUT: ("the notebook ran longer than its time limit", ", and was stopped"),
    StopReason.OUTPUT_LIMIT: (
        "the notebook printed more than the {bytes} bytes of output allowed",
        ", and was stopped",
    ),
    StopReason.DEAD: ("the kernel died ({detail})", ""),
    StopReason.KERNEL_FAILED: ("the kernel could not be started ({detail})", ""),
    StopReason.KILLED: ("the grader stopped the notebook at its hard time limit", ""),
    StopReason.RUNNER_FAILED: ("the grader's runner failed ({detail})", ""),
    StopReason.BAD_MESSAGE: (
        "the notebook sent the grader a message it could not handle ({detail})",
        ", and was stopped",
    ),
}


@dataclass(frozen=True)
class Stop:
    """An early stop: its reason and what the reason's wording names."""

    reason: StopReason | str
    """A :class:`StopReason`, or the code as written when it is none of them (it then reads as is)."""
    cell: str | None = None
    limit: float | None = None
    bytes: int | None = None
    detail: str | None = None

    def _fill(self, template: str) -> str:
        return template.format(
            limit="?" if self.limit is None else self.limit,
            bytes="?" if self.bytes is None else self.bytes,
            detail="?" if self.detail is None else self.detail,
        )

    def _where(self) -> str:
        return f" (in cell {self.cell!r})" if self.cell else ""

    def sentence(self) -> str:
        """The stop in words, for feedback and the summary."""
        if isinstance(self.reason, StopReason):
            return self._fill(self.reason.wording) + self._where()
        return self.reason + self._where()

    def headline(self) -> str:
        """The stop in a few words, without the cell: for the grades table."""
        if isinstance(self.reason, StopReason):
            return self._fill(self.reason.headline)
        return self.reason

    def code(self) -> str:
        """The reason's code, as events and stored outcomes write it."""
        return self.reason.value if isinstance(self.reason, StopReason) else self.reason

    def to_dict(self) -> dict[str, Any]:
        """The stop as the end event (and a stored outcome) writes it: only what is set."""
        data: dict[str, Any] = {"reason": self.code()}
        for key in ("cell", "limit", "bytes", "detail"):
            value = getattr(self, key)
            if value is not None:
                data[key] = value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Stop | None:
        """The stop an end event (or a stored outcome) records, or None when the notebook ran to the end."""
        code = data.get("reason")
        if not code:
            return None
        try:
            reason: StopReason | str = StopReason(code)
        except ValueError:
            reason = str(code)
        return cls(reason, data.get("cell"), data.get("limit"), data.get("bytes"), data.get("detail"))


def end_event(stop: Stop | None, seconds: float | None = None) -> dict[str, Any]:
    """The runner's last event: how long the notebook ran (when known), and the stop if it stopped early."""
    event: dict[str, Any] = {"event": "end"} if seconds is None else {"event": "end", "seconds": seconds}
    return {**event, **(stop.to_dict() if stop else {"reason": None})}


def cell_event(
    index: int,
    cell_id: str | None,
    status: str,
    seconds: float,
    error: str | None = None,
    evidence: list[str] | None = None,
    stderr: bool | None = None,
) -> dict[str, Any]:
    """The runner's event for one executed code cell.

    ``status`` is ``ok``, ``error``, ``interrupted`` (over its time limit, and the notebook went on),
    ``timeout``, ``dead``, ``output_limit`` or ``bad_message``; ``error`` is the cell's error, cut
    and with hidden test lines taken out; a graded cell's event also has the check ``evidence`` it
    published and whether it wrote to ``stderr``.
    """
    event: dict[str, Any] = {"event": "cell", "index": index, "id": cell_id, "status": status}
    event["seconds"] = round(seconds, 3)
    if error is not None:
        event["error"] = error
    if evidence is not None:
        event["evidence"] = evidence
    if stderr is not None:
        event["stderr"] = stderr
    return event


class Events:
    """The job's event log: one JSON object a line, flushed as soon as it is written."""

    def __init__(self, path: Path) -> None:
        self._file = Path(path).open("a", encoding="utf-8")

    def write(self, event: dict[str, Any]) -> None:
        """Append one event, stamped with the wall-clock time (for the engine's timing breakdown)."""
        event["t"] = time.time()
        self._file.write(json.dumps(event) + "\n")
        self._file.flush()


def read_events(path: Path) -> list[dict[str, Any]]:
    """The events a runner wrote, skipping any line that is not a JSON object (a cut last line)."""
    events: list[dict[str, Any]] = []
    if not path.exists():
        return events
    for line in path.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events
