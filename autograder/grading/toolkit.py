"""Item builders every grader shares: an error that sinks an item, unchanged inputs, notes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
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


def cases_item(
    name: str, records: dict[str, Record], verdicts: dict[str, list[Verdict]], weight: float = 1.0
) -> Item:
    """An item over several cases, sunk by the first case that raised or failed, named by its label."""
    for label, record in records.items():
        if record.get("error"):
            return Item(name, False, f"{label}: {record['error']}", weight)
    for label in records:
        failures = [v for v in verdicts[label] if not v.ok]
        if failures:
            return Item(name, False, f"{label}: {failures[0].message()}", weight)
    return Item.from_verdicts(name, [v for label in records for v in verdicts[label]], weight)


# Error messages of a product whose operands do not line up: numpy's @ and np.dot, torch's @.
_MATMUL_SIZES = (
    re.compile(r"mismatch in its core dimension \d+.*\(size (\d+) is different from (\d+)\)"),
    re.compile(r"not aligned: (\d+) \(dim \d+\) != (\d+) \(dim \d+\)"),
    re.compile(r"shapes cannot be multiplied \(\d+x(\d+) and (\d+)x\d+\)"),
)
#: The learner's line that raised, as :func:`autograder.calling.describe_exception` quotes it.
_QUOTED_LINE = re.compile(r"\(in [^,]+, line \d+: (.*)\)\s*$")
_BROADCAST_SHAPES = re.compile(r"could not be broadcast together with shapes ((?:\([\d,]*\) ?){2,})")


def product_sizes(error: str | None) -> tuple[int, int] | None:
    """The two inner sizes that did not match in a failed matrix product, read from its error."""
    for pattern in _MATMUL_SIZES:
        match = pattern.search(error or "")
        if match:
            return int(match.group(1)), int(match.group(2))
    return None


def broadcast_shapes(error: str | None) -> list[tuple[int, ...]]:
    """The shapes of a failed elementwise operation (numpy's broadcasting error), else []."""
    match = _BROADCAST_SHAPES.search(error or "")
    if not match:
        return []
    shapes = re.findall(r"\(([\d,]*)\)", match.group(1))
    return [tuple(int(s) for s in shape.split(",") if s) for shape in shapes]


def elementwise_for_product(error: str | None) -> str | None:
    """ "An elementwise product where a matrix product belongs", when a failed elementwise operation had
    two matrices that a matrix product (with or without a transpose) could combine, and the line that
    raised, when the error quotes it, multiplies (a sum or difference of such matrices is another
    mistake, and is left unnamed)."""
    shapes = broadcast_shapes(error)
    if len(shapes) != 2 or any(len(shape) != 2 for shape in shapes):
        return None
    quoted = _QUOTED_LINE.search(error or "")
    if quoted and not re.search(r"(?<!\*)\*(?!\*)", quoted.group(1)):
        return None
    (a0, a1), (b0, b1) = shapes
    if a1 == b0 or a1 == b1 or a0 == b0:
        return (
            f"an elementwise product (*) of a ({a0}, {a1}) and a ({b0}, {b1}) array where a matrix "
            "product (@) belongs?"
        )
    return None


def explain_errors(records: dict[str, Record], explain: Callable[[str], str | None]) -> dict[str, Record]:
    """Copies of ``records`` whose errors end with the likely mistake ``explain`` finds in them, if any.

    The evidence itself is left as it was: a grader may be run twice on the same evidence.
    """
    explained = {}
    for label, record in records.items():
        error = record.get("error")
        likely = explain(error) if error else None
        explained[label] = {**record, "error": f"{error}. Likely mistake: {likely}"} if likely else record
    return explained
