"""The record of one graded submission: what every later step (the gradebook, the outputs, the summary,
a re-run) reads, stored as one JSON file (:class:`ResultStore`), written and read back only here and
checked when it is read.

A stored result of another format than :data:`STORE_FORMAT` (one written before the cells and the stop
were typed, say) is not parsed: :meth:`Outcome.from_json` refuses it with :class:`OldFormat`, and the
grader grades that submission again."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from autograder.engine import untrusted
from autograder.engine.contract import Stop

#: The stored results' format: 2 stores each cell as a :class:`CellResult`, the stop once (its code and
#: what it names, never its sentence) and a failure's reason apart. 1 (no ``format`` key) stored the stop
#: as a sentence beside its code.
STORE_FORMAT = 2


class OldFormat(ValueError):
    """A stored result of another format than :data:`STORE_FORMAT`: graded again, not read."""


@dataclass
class CellResult:
    """The trusted outcome of one graded cell (:func:`autograder.grading.verdicts.grade_cell`)."""

    grade_id: str
    points: float
    score: float
    feedback: str
    """The check's report, or the reason there is none."""
    passed: bool = False


@dataclass
class Outcome:
    """The result of grading one submission: what the gradebook, the feedback and the summary use."""

    student: str
    assignment: str
    origin: str
    sha256: str
    status: str
    """``graded`` (ran to the end), ``stopped`` (graded, but execution stopped early) or ``failed``."""
    score: float
    max_score: float
    failure: str | None = None
    """Why the grader could not grade (or store) the notebook: set exactly when ``status`` is ``failed``."""
    cells: list[CellResult] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Errors raised by the learner's own (ungraded) cells, for the feedback."""
    answers: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    run_seconds: float = 0.0
    """Time the notebook's own cells took, as the runner measured it."""
    jailed: bool = True
    timing: dict[str, float] = field(default_factory=dict)
    """Where the time went, in seconds: see :func:`~autograder.engine.executor.timing_breakdown`."""
    seeds: dict[str, int] = field(default_factory=dict)
    """The fresh seed of each graded cell's final call in this run (:mod:`autograder.grading.seeds`)."""
    flags: list[str] = field(default_factory=list)
    """Answers that skip their exercise, by a static look at the code (:mod:`autograder.engine.method`)."""
    lms: str = ""
    lms_id: str = ""
    name: str = ""
    late: bool = False
    timestamp: str = ""
    """Who submitted it and when, as :class:`~autograder.engine.intake.Submission` has it."""
    course_version: str = ""
    """:func:`~autograder.engine.grade.course_version` of the assignment when it was graded."""
    regraded: str = ""
    """Why a submission graded before was graded again (the course changed), or empty."""
    adjustment: str = ""
    """In outputs only: what changed the automatic score in the gradebook (a manual score, a late
    penalty); ``score`` is then the gradebook's final score."""
    stop: Stop | None = None
    """Why execution stopped early (its detail without hidden test lines), or None when it did not."""

    @property
    def reason(self) -> str | None:
        """Why the notebook did not run to its end, in words: the failure, or the stop's sentence."""
        return self.failure or (self.stop.sentence() if self.stop else None)

    def to_json(self) -> str:
        """The outcome as JSON, for the results store, every string made renderable first: nothing is
        stored that a report cannot write."""
        data: dict[str, Any] = {"format": STORE_FORMAT}
        for f in fields(self):
            data[f.name] = getattr(self, f.name)
        data["cells"] = [{f.name: getattr(c, f.name) for f in fields(CellResult)} for c in self.cells]
        data["stop"] = self.stop.to_dict() if self.stop else None
        return json.dumps(untrusted.clean_tree(data), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Outcome:
        """An outcome as :meth:`to_json` stored it; :class:`ValueError` says why a stored one cannot be
        used (not JSON, a field unknown, missing or of the wrong type, text no UTF-8 file can hold), and
        :class:`OldFormat` that it was stored in another format."""
        data = json.loads(text)
        if isinstance(data, dict) and data.get("format") != STORE_FORMAT:
            raise OldFormat(f"it is stored in format {data.get('format', 1)!r}, not {STORE_FORMAT}")
        required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
        annotations = {f.name: STORED_TYPES.get(f.name, str(f.type)) for f in fields(cls)}
        data = untrusted.check_record(data, {"format": "int", **annotations}, required, STORED_ITEMS)
        del data["format"]
        for i, cell in enumerate(data.get("cells", [])):
            unknown = sorted(set(cell) - {f.name for f in fields(CellResult)})
            if unknown:
                raise ValueError(f"its cells[{i}] has unknown keys {unknown}")
        data["cells"] = [CellResult(**c) for c in data.get("cells", [])]
        data["stop"] = Stop.from_dict(data["stop"]) if data.get("stop") else None
        return cls(**data)


#: The stored types of the fields whose type is a record: checked as JSON, then read as the record.
STORED_TYPES = {"cells": "list", "stop": "dict | None"}
#: What each item of an :class:`Outcome`'s list fields must be, for the report to render it.
STORED_ITEMS = {
    "cells": {"grade_id": "str", "points": "float", "score": "float", "feedback": "str", "passed": "bool"},
    "answers": {"id": "str", "source": "str"},
    "restored": "str",
    "errors": "str",
    "flags": "str",
}


class ResultStore:
    """The course's stored outcomes: one JSON file per submission, ``<assignment>/<student>.json``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def path(self, student: str, assignment: str) -> Path:
        """Where a submission's outcome is stored: named after the student id when it is a short, safe
        file name (as intake makes ids), else after a hash of it, so that no id can make a name the
        file system refuses."""
        name = student
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}", name):
            name = "id-" + hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return self.folder / assignment / f"{name}.json"

    def fallback_path(self, student: str, assignment: str) -> Path:
        """Where a failed outcome goes when a submission's result could not be stored at its own path."""
        key = f"{student}\0{assignment}".encode("utf-8", "surrogatepass")
        return self.folder / assignment / f"unstored-{hashlib.sha256(key).hexdigest()[:32]}.json"

    @staticmethod
    def write(path: Path, outcome: Outcome) -> None:
        """Store an outcome at ``path``, whole or not at all (written beside it, then moved)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(outcome.to_json(), encoding="utf-8")
            tmp.replace(path)
        finally:
            if tmp.is_file():
                tmp.unlink()

    @staticmethod
    def read(path: Path) -> Outcome:
        """The outcome stored at ``path`` (:meth:`Outcome.from_json` says why one cannot be read)."""
        return Outcome.from_json(path.read_text(encoding="utf-8", errors="surrogateescape"))

    def read_all(self) -> tuple[list[Outcome], list[str]]:
        """Every stored outcome (all assignments, all runs), by assignment and student, and a sentence
        for each stored result that cannot be used: that student's problem, stated, never a failure of
        the report."""
        found, unreadable = [], []
        for path in sorted(self.folder.glob("*/*.json")):
            try:
                found.append(self.read(path))
            except (OSError, ValueError, RecursionError) as exc:
                why = str(exc) if isinstance(exc, ValueError) else type(exc).__name__
                who = f"{untrusted.one_line(path.stem, 300)} for {untrusted.one_line(path.parent.name, 100)}"
                unreadable.append(
                    f"the stored result of {who} cannot be read ({untrusted.one_line(why, 300)}): it is left "
                    "out of these outputs, and the next grade command grades that submission again"
                )
        return sorted(found, key=lambda o: (o.assignment, o.student)), unreadable


def result_store(course_root: Path) -> ResultStore:
    """The stored outcomes of the course in ``course_root`` (``autograder/results/``)."""
    return ResultStore(course_root / "autograder" / "results")
