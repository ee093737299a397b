"""What the grading engine's processes say to each other, written and read in this one module.

The grader (:mod:`autograder.engine.grade`) writes a :class:`Job` for each notebook; the runner
(:mod:`autograder.engine.runner`) reads it, executes the notebook and appends its events, one JSON
object a line (:class:`Events`): a :class:`StartEvent`, a :class:`KernelEvent`, one
:class:`CellEvent` per executed code cell and one :class:`EndEvent`, whose :class:`Stop` says why
execution stopped early, if it did. The grader reads them back as typed records (:func:`read_events`,
an :class:`EventLog`) and grades from them (:mod:`autograder.grading.verdicts`): no other module
writes or parses an event. Nothing here imports the rest of the engine: the runner loads it in a
process of its own.
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
    """``numpy`` (the kernel never imports PyTorch), ``torch`` or ``compile`` (PyTorch, its compiler stack
    warmed): which zygote forks the kernel."""
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
        return "".join(_WORDING[self])

    @property
    def headline(self) -> str:
        """The wording without its tail (what the grades table shows)."""
        return _WORDING[self][0] + _WORDING[self][1]

    @property
    def gist(self) -> str:
        """The headline without what it fills in: the same words for every stop of this reason."""
        return _WORDING[self][0]


#: Each reason's wording: its gist, what the headline fills in after it, and the tail that completes
#: the sentence.
_WORDING: dict[StopReason, tuple[str, str, str]] = {
    StopReason.CELL_TIMEOUT: (
        "a cell ran longer than the {limit} s a cell may take",
        "",
        ", and was stopped",
    ),
    StopReason.NOTEBOOK_TIMEOUT: ("the notebook ran longer than its time limit", "", ", and was stopped"),
    StopReason.OUTPUT_LIMIT: (
        "the notebook printed more than the {bytes} bytes of output allowed",
        "",
        ", and was stopped",
    ),
    StopReason.DEAD: ("the kernel died", " ({detail})", ""),
    StopReason.KERNEL_FAILED: ("the kernel could not be started", " ({detail})", ""),
    StopReason.KILLED: ("the grader stopped the notebook at its hard time limit", "", ""),
    StopReason.RUNNER_FAILED: ("the grader's runner failed", " ({detail})", ""),
    StopReason.BAD_MESSAGE: (
        "the notebook sent the grader a message it could not handle",
        " ({detail})",
        ", and was stopped",
    ),
}


def _checked(
    what: str, data: Any, kinds: dict[str, tuple[type, ...]], required: tuple[str, ...] = ()
) -> dict:
    """``data`` when it is an object whose keys are among ``kinds`` (each value of one of its types,
    ``required`` ones present), else :class:`ValueError` saying which key is wrong."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} is a {type(data).__name__}, not an object")
    unknown = sorted(set(data) - set(kinds))
    if unknown:
        raise ValueError(f"{what} has an unknown key {unknown[0]!r}")
    for key in required:
        if key not in data:
            raise ValueError(f"{what} has no {key!r}")
    for key, value in data.items():
        allowed = kinds[key]
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            raise ValueError(f"{what}'s {key!r} is a {type(value).__name__}")
    return data


_TEXT = (str, type(None))
_NUMBER = (int, float, type(None))
#: A stop's keys, as an end event and a stored outcome write them.
_STOP_KEYS: dict[str, tuple[type, ...]] = {
    "reason": _TEXT,
    "cell": _TEXT,
    "limit": _NUMBER,
    "bytes": (int, type(None)),
    "detail": _TEXT,
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
        """The stop an end event (or a stored outcome) records, or None when the notebook ran to the end;
        :class:`ValueError` when one of its keys holds another type than :meth:`to_dict` writes."""
        stop = {k: v for k, v in data.items() if k in _STOP_KEYS}
        _checked("a stop", stop, _STOP_KEYS)
        code = stop.get("reason")
        if not code:
            return None
        try:
            reason: StopReason | str = StopReason(code)
        except ValueError:
            reason = code
        return cls(reason, stop.get("cell"), stop.get("limit"), stop.get("bytes"), stop.get("detail"))


# -- the runner's events --------------------------------------------------------------------------


@dataclass
class StartEvent:
    """The runner read the job."""

    t: float | None = None
    """When it was written (wall-clock time, :meth:`Events.write` stamps it), for the timing breakdown."""


@dataclass
class KernelEvent:
    """The kernel answered: how long it took to start, and its CPU time then (where it can be read)."""

    seconds: float
    cpu: float | None = None
    t: float | None = None


@dataclass
class CellEvent:
    """One executed code cell.

    ``status`` is ``ok``, ``error``, ``interrupted`` (over its time limit, and the notebook went on),
    ``timeout``, ``dead``, ``output_limit`` or ``bad_message``; ``error`` is the cell's error, cut
    and with hidden test lines taken out; a graded cell's event also has the check ``evidence`` it
    published and whether it wrote to ``stderr`` (None for other cells)."""

    index: int
    id: str | None
    status: str
    seconds: float
    error: str | None = None
    evidence: list[str] | None = None
    stderr: bool | None = None
    cpu: float | None = None
    """The kernel's CPU seconds on this cell, where the runner can read them."""
    t: float | None = None

    def __post_init__(self) -> None:
        self.seconds = round(self.seconds, 3)


@dataclass
class EndEvent:
    """The runner's last event: the stop, if the notebook stopped early, and how long it ran (when known)."""

    stop: Stop | None = None
    seconds: float | None = None
    t: float | None = None


Event = StartEvent | KernelEvent | CellEvent | EndEvent
_KINDS: dict[str, type] = {"start": StartEvent, "kernel": KernelEvent, "cell": CellEvent, "end": EndEvent}
_NAMES = {kind: name for name, kind in _KINDS.items()}
_EVENT_KEYS: dict[type, dict[str, tuple[type, ...]]] = {
    StartEvent: {"t": _NUMBER},
    KernelEvent: {"seconds": (int, float), "cpu": _NUMBER, "t": _NUMBER},
    CellEvent: {
        "index": (int,),
        "id": _TEXT,
        "status": (str,),
        "seconds": (int, float),
        "error": _TEXT,
        "evidence": (list, type(None)),
        "stderr": (bool, type(None)),
        "cpu": _NUMBER,
        "t": _NUMBER,
    },
    EndEvent: {"seconds": _NUMBER, "t": _NUMBER, **_STOP_KEYS},
}
_REQUIRED = {KernelEvent: ("seconds",), CellEvent: ("index", "id", "status", "seconds")}


def event_dict(event: Event) -> dict[str, Any]:
    """An event as the runner writes it, one JSON object: its kind, then what is set."""
    data: dict[str, Any] = {"event": _NAMES[type(event)]}
    for f in fields(event):
        value = getattr(event, f.name)
        if f.name == "stop":
            data.update(value.to_dict() if value else {"reason": None})
        elif value is not None:
            data[f.name] = value
    return data


def parse_event(data: Any) -> Event | None:
    """The event a JSON object written by :func:`event_dict` records, or None when it is none (another
    kind, a key unknown or of another type): the runner wrote it, and a line it did not is no event."""
    kind = _KINDS.get(data.get("event")) if isinstance(data, dict) else None
    if kind is None:
        return None
    body = {k: v for k, v in data.items() if k != "event"}
    try:
        _checked("an event", body, _EVENT_KEYS[kind], _REQUIRED.get(kind, ()))
        if kind is EndEvent:
            return EndEvent(Stop.from_dict(body), body.get("seconds"), body.get("t"))
        if kind is CellEvent and not all(isinstance(e, str) for e in body.get("evidence") or []):
            return None
        return kind(**body)
    except ValueError:
        return None


def parse_line(line: str | bytes) -> Event | None:
    """One line of an event log as an event, or None (not JSON: a cut last line; not an event)."""
    try:
        return parse_event(json.loads(line))
    except ValueError:
        return None


@dataclass
class EventLog:
    """The events of one run of a notebook, in the order the runner wrote them."""

    events: list[Event] = field(default_factory=list)

    @property
    def cells(self) -> list[CellEvent]:
        """Every cell's event."""
        return [e for e in self.events if isinstance(e, CellEvent)]

    @property
    def end(self) -> EndEvent | None:
        """The last end event, or None when the runner wrote none."""
        return next((e for e in reversed(self.events) if isinstance(e, EndEvent)), None)

    def stamp(self, kind: type) -> float | None:
        """When the first event of ``kind`` was written, or None."""
        return next((e.t for e in self.events if isinstance(e, kind) and e.t is not None), None)

    def ended(self, stop: Stop) -> EventLog:
        """The log, with an end event of ``stop`` when the runner wrote none (it was killed, or failed)."""
        if self.end is None:
            self.events.append(EndEvent(stop))
        return self


class Events:
    """The job's event log, as the runner writes it: one JSON object a line, flushed at once."""

    def __init__(self, path: Path) -> None:
        self._file = Path(path).open("a", encoding="utf-8")

    def write(self, event: Event) -> None:
        """Append one event, stamped with the wall-clock time (for the engine's timing breakdown)."""
        event.t = time.time()
        self._file.write(json.dumps(event_dict(event)) + "\n")
        self._file.flush()


def read_events(path: Path) -> EventLog:
    """The events a runner wrote, skipping any line that is no event (a cut last line)."""
    if not path.exists():
        return EventLog()
    lines = path.read_text(errors="replace").splitlines()
    return EventLog([e for e in map(parse_line, lines) if e is not None])
