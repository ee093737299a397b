"""The record of one graded submission: what every later step (the gradebook, the outputs, the summary,
a re-run) reads, stored as one JSON file, written and read back only here and checked when it is read.

A stored result of another format than :data:`STORE_FORMAT` (one written before the cells and the stop
were typed, say) is not parsed: :meth:`Outcome.from_json` refuses it with :class:`OldFormat`, and the
grader grades that submission again."""

from __future__ import annotations

import json
from dataclasses import MISSING, dataclass, field, fields
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
