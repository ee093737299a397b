"""Item builders every grader shares: an error that sinks an item, unchanged inputs, notes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from autograder.compare import Verdict
from autograder.report import Item, Report

Record = dict[str, Any]


def error_or_verdicts(name: str, error: str | None, verdicts: list[Verdict], weight: float = 1.0) -> Item:
    """The item fails with ``error`` when the learner's code raised, else it is judged on the verdicts."""
    if error:
        return Item(name, False, error, weight)
    return Item.from_verdicts(name, verdicts, weight)


def inputs_unchanged_item(
    cases: dict[str, Record], originals: dict[str, dict[str, np.ndarray]], weight: float = 0.5
) -> Item:
    """An item that passes when no case's learner code modified the arrays it was given.

    It cannot pass while any case failed to run: a function that raises changes nothing, and
    must not earn points for it.
    """
    for label, record in cases.items():
        if record.get("error"):
            return Item("inputs unchanged", False, f"not checked: case {label} did not run", weight)
    for label, record in cases.items():
        for key, before in originals[label].items():
            after = record.get("inputs_after", {}).get(key)
            if isinstance(after, np.ndarray) and not np.array_equal(after, before, equal_nan=True):
                return Item(
                    "inputs unchanged",
                    False,
                    f"in case {label}, your code changed its argument {key} in place; {copy_advice(key)}",
                    weight,
                )
    return Item("inputs unchanged", True, "no argument was modified", weight)


def copy_advice(argument: str) -> str:
    """How to avoid changing ``argument`` in place, naming that argument (not another one)."""
    return (
        f"work on a copy ({argument} = {argument}.copy() before changing it, or build a new array) "
        "so the caller's data stays intact."
    )


def add_notes(report: Report, records: Iterable[Record]) -> None:
    """Copy each distinct warning or stderr note from the records into the report, in order."""
    for record in records:
        for note in record.get("notes", []):
            if note not in report.notes:
                report.notes.append(note)


def verdict_or_error(name: str, verdict: Verdict, error: str | None, weight: float = 1.0) -> Item:
    """The item of one value, judged on its verdict; the call's error stands in only when the value is
    missing, so that a forward whose output was recorded is not failed by its backward's error."""
    if verdict.problem == "missing" and error:
        return Item(name, False, error, weight)
    return Item.from_verdicts(name, [verdict], weight)
