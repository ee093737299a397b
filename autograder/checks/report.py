"""Partial credit per property, and the feedback a learner reads.

A check grades a list of properties (shape, values, each gradient, edge cases), each with a
weight. The score is ``points * passed_weight / total_weight``, a plain Python float in
``[0, points]``: the last value of a test cell, which nbgrader reads as partial credit.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

from autograder.checks.compare import Verdict


@dataclass(frozen=True)
class Item:
    """One graded property of an answer."""

    name: str
    passed: bool
    message: str
    weight: float = 1.0

    def __post_init__(self) -> None:
        # A negative or NaN weight would make the score leave [0, points]: a bug in the check itself.
        if not (isinstance(self.weight, numbers.Real) and math.isfinite(self.weight) and self.weight >= 0):
            raise ValueError(
                f"weight of item {self.name!r} must be a finite number >= 0, got {self.weight!r}"
            )

    @classmethod
    def from_verdicts(cls, name: str, verdicts: list[Verdict], weight: float = 1.0) -> Item:
        """Pass when every verdict is ok; the message is the first failure's, or the first ok detail.

        An empty list fails: nothing compared is nothing shown to be right.
        """
        if not verdicts:
            return cls(name, False, "nothing was compared", weight)
        failures = [v for v in verdicts if not v.ok]
        if failures:
            return cls(name, False, failures[0].message(), weight)
        return cls(name, True, verdicts[0].detail, weight)


@dataclass
class Report:
    """The graded properties of one exercise, its score and its feedback."""

    title: str
    points: float
    items: list[Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Remarks that cost no points: warnings the learner's code raised, what was skipped and why."""

    def __post_init__(self) -> None:
        if not (isinstance(self.points, numbers.Real) and math.isfinite(self.points) and self.points >= 0):
            raise ValueError(f"points of {self.title!r} must be a finite number >= 0, got {self.points!r}")

    def add(self, item: Item) -> Item:
        """Append an item and return it."""
        self.items.append(item)
        return item

    @property
    def score(self) -> float:
        """Points earned: a plain float in [0, points], rounded to 1/100 of a point.

        Full points only when every weighted property passed.
        """
        total = sum(i.weight for i in self.items)
        if not total > 0:
            return 0.0
        earned = sum(i.weight for i in self.items if i.passed)
        score = round(self.points * earned / total, 2)
        if earned < total and score >= self.points:
            # a failure with a tiny weight must not round up to full marks
            score = round(self.points - 0.01, 2)
        # nbgrader takes the cell's last value as the grade: above the cell's points it rejects the
        # whole submission, so the clamp stays even though earned <= total.
        return float(min(max(score, 0.0), float(self.points)))

    def render(self) -> str:
        """Plain-text feedback: the score, then one line per property, then the notes.

        A failure with the same message as the failure just above it (one error that sinks several
        properties) reads "(same as above)"; a message spanning several lines stays indented.
        """
        lines = [f"{self.title}: {self.score:g} / {self.points:g} points"]
        width = max((len(i.name) for i in self.items), default=0)
        indent = " " * (len("  [FAIL] ") + width + 2)
        previous_failure = None
        for item in self.items:
            mark = "pass" if item.passed else "FAIL"
            same = not item.passed and item.message == previous_failure
            message = "(same as above)" if same else item.message.replace("\n", "\n" + indent)
            lines.append(f"  [{mark}] {item.name:<{width}}  {message}")
            previous_failure = None if item.passed else item.message
        lines.extend("  note: " + note.replace("\n", "\n        ") for note in self.notes)
        return "\n".join(lines)
