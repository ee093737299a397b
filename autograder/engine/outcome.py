"""The record of one graded submission: what every later step (the gradebook, the outputs, the summary,
a re-run) reads, stored as one JSON file and checked when it is read back."""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

from autograder.engine import untrusted


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
    reason: str | None = None
    cells: list[dict[str, Any]] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    """Errors raised by the learner's own (ungraded) cells, for the feedback."""
    answers: list[dict[str, str]] = field(default_factory=list)
    seconds: float = 0.0
    run_seconds: float = 0.0
    """Time the notebook's own cells took, as the runner measured it."""
    jailed: bool = True
    timing: dict[str, float] = field(default_factory=dict)
    """Where the time went, in seconds: see :func:`timing_breakdown`."""
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
    """:func:`course_version` of the assignment when it was graded."""
    regraded: str = ""
    """Why a submission graded before was graded again (the course changed), or empty."""
    adjustment: str = ""
    """In outputs only: what changed the automatic score in the gradebook (a manual score, a late
    penalty); ``score`` is then the gradebook's final score."""
    stop: dict[str, Any] = field(default_factory=dict)
    """Why execution stopped early, as :meth:`~autograder.engine.contract.Stop.to_dict` writes it
    (empty when it did not, and in outcomes stored before it was kept)."""

    def to_json(self) -> str:
        """The outcome as JSON, for the results store, every string made renderable first: nothing is
        stored that a report cannot write."""
        return json.dumps(untrusted.clean_tree(asdict(self)), indent=1)

    @classmethod
    def from_json(cls, text: str) -> Outcome:
        """An outcome as :meth:`to_json` stored it; :class:`ValueError` says why a stored one cannot be
        used (not JSON, a field unknown, missing or of the wrong type, text no UTF-8 file can hold)."""
        required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
        annotations = {f.name: str(f.type) for f in fields(cls)}
        return cls(**untrusted.check_record(json.loads(text), annotations, required, STORED_ITEMS))


#: What each item of an :class:`Outcome`'s list fields must be, for the report to render it.
STORED_ITEMS = {
    "cells": {"grade_id": "str", "points": "float", "score": "float", "feedback": "str"},
    "answers": {"id": "str", "source": "str"},
    "restored": "str",
    "errors": "str",
    "flags": "str",
}
