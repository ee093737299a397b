"""Partial credit per property, and the feedback a learner reads.

A check grades a list of properties (shape, values, each gradient, edge cases), each with a
weight. The score is ``points * passed_weight / total_weight``, a plain Python float in
``[0, points]``: the last value of a test cell, which nbgrader reads as partial credit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autograder.compare import Verdict


@dataclass(frozen=True)
class Item:
    """One graded property of an answer."""

    name: str
    passed: bool
    message: str
    weight: float = 1.0

    @classmethod
    def from_verdicts(cls, name: str, verdicts: list[Verdict], weight: float = 1.0) -> Item:
        """Pass when every verdict is ok; the message is the first failure's, or the first ok detail."""
        failures = [v for v in verdicts if not v.ok]
        if failures:
            return cls(name, False, failures[0].message(), weight)
        return cls(name, True, verdicts[0].detail if verdicts else "ok", weight)


@dataclass
class Report:
    """The graded properties of one exercise, its score and its feedback."""

    title: str
    points: float
    items: list[Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Remarks that cost no points: warnings the learner's code raised, what was skipped and why."""

    def add(self, item: Item) -> Item:
        """Append an item and return it."""
        self.items.append(item)
        return item

    @property
    def score(self) -> float:
        """Points earned: a plain float in [0, points], rounded to 1/100 of a point."""
        total = sum(i.weight for i in self.items)
        if total <= 0:
            return 0.0
        earned = sum(i.weight for i in self.items if i.passed)
        return float(min(max(round(self.points * earned / total, 2), 0.0), float(self.points)))

    def render(self) -> str:
        """Plain-text feedback: the score, then one line per property, then the notes."""
        lines = [f"{self.title}: {self.score:g} / {self.points:g} points"]
        width = max((len(i.name) for i in self.items), default=0)
        previous = None
        for item in self.items:
            mark = "pass" if item.passed else "FAIL"
            message = "(same as above)" if item.message == previous and not item.passed else item.message
            lines.append(f"  [{mark}] {item.name:<{width}}  {message}")
            previous = item.message
        lines.extend(f"  note: {note}" for note in self.notes)
        return "\n".join(lines)
