"""The grader of notebook 04's backward_by_hand: what grad_fn.apply returns, untouched."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.core import Evidence
from autograder.checks.custom_functions.backward_by_hand import (
    BACKWARD_BY_HAND,
    BY_HAND_CASES,
    ByHandCase,
    by_hand_inputs,
)
from autograder.checks.functions import Returned
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.custom_functions.items import returned_grads_item
from autograder.grading.toolkit import add_notes

#: The three items, with their weights: each fails with the first case's error when that case raised.
ITEMS = (("one entry per input", 0.5), ("what grad_fn.apply returns", 1.0), ("no side effects", 0.5))

GRAD_NAMES = ["grad_input", "grad_weight", "grad_bias"]


def _raw_expected(data: dict[str, Any]) -> list[np.ndarray | None]:
    x, W, g = data["x"], data["W"], data["grad"]
    rx, rw, rb = data["requires"]
    return [
        g @ W if rx else None,
        g.T @ x if rw else None,
        g.copy() if data["b"] is not None and rb else None,
    ]


def _as_tuple(result: Returned) -> Returned:
    """What backward_by_hand returns is grad_fn.apply's tuple, passed on as a tuple or a list alike."""
    return {"kind": "tuple", "grads": result["grads"]}


def _entries_item(first: ByHandCase) -> Item:
    returned = first["results"][0]
    n = len(returned["grads"])
    if returned["kind"] not in ("tuple", "list") or n != 3:
        return Item(
            "one entry per input",
            False,
            f"backward_by_hand returned a {returned['kind']} of {n} value(s); out.grad_fn.apply(grad) "
            "returns a tuple with one entry per input of forward (x, W, b): return it as it is.",
            0.5,
        )
    return Item("one entry per input", True, "a tuple (grad_input, grad_weight, grad_bias)", 0.5)


def _values_item(cases: dict[str, ByHandCase], inputs: dict[str, dict[str, Any]]) -> Item:
    name = "what grad_fn.apply returns"
    for label, data in inputs.items():
        record = cases[label]
        if record["error"]:
            return Item(name, False, f"when {label}: {record['error']}", 1.0)
        mistakes = {
            "grad_bias": {
                "summed over the batch: that is what .backward() leaves in b.grad (the engine sum-reduces "
                "a gradient to its input's shape); grad_fn.apply runs backward alone and returns its "
                "(N, out) result untouched": data["grad"].sum(0)
            }
        }
        result = _as_tuple(record["results"][0])
        checked = returned_grads_item(
            name, result, _raw_expected(data), GRAD_NAMES, "RawLinear", 1.0, mistakes
        )
        if not checked.passed:
            return Item(name, False, f"when {label}: {checked.message}", 1.0)
    return Item(name, True, "exactly what backward returned, bias gradient (4, 5) unsummed", 1.0)


def _same(first: Returned, second: Returned) -> bool:
    return len(first["grads"]) == len(second["grads"]) and all(
        (a is None and b is None)
        or (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.shape == b.shape
            and np.array_equal(a, b)
        )
        for a, b in zip(first["grads"], second["grads"], strict=True)
    )


def _side_effect(label: str, record: ByHandCase, data: dict[str, Any]) -> str | None:
    """The first side effect of one case: a .grad filled in, a second call's other answer, a changed input."""
    if record["error"]:
        return f"not checked: when {label}: {record['error']}"
    filled = [k for k, v in record["grads_after"].items() if v is not None]
    if filled:
        return (
            f"when {label}, {', '.join(k + '.grad' for k in filled)} was filled in: grad_fn.apply runs "
            "backward without the engine, which is what fills .grad; do not call .backward() here."
        )
    if not _same(*record["results"]):
        return f"when {label}, a second call returned something else than the first."
    for k in ("x", "W", "b", "grad"):
        before, after = data.get(k), record["inputs_after"].get(k)
        if isinstance(before, np.ndarray) and not (
            isinstance(after, np.ndarray) and np.array_equal(before, after)
        ):
            return f"when {label}, {k} was changed in place."
    return None


def _side_effects_item(
    cases: dict[str, ByHandCase], inputs: dict[str, dict[str, Any]], entries: Item
) -> Item:
    name = "no side effects"
    for label, data in inputs.items():
        problem = _side_effect(label, cases[label], data)
        if problem:
            return Item(name, False, problem, 0.5)
    if not entries.passed:
        # A function that returns nothing useful has no side effects either: that earns nothing.
        return Item(name, False, "not checked: it did not return one gradient per input", 0.5)
    return Item(name, True, "no .grad filled in, the same result twice, inputs unchanged", 0.5)


@grader(BACKWARD_BY_HAND)
def grade_backward_by_hand(evidence: Evidence) -> Report:
    """Grade recorded evidence: a tuple with one entry per forward input (0.5); exactly what RawLinear's
    backward returns, unsummed bias gradient and Nones included, in every case (1); no side effects:
    no ``.grad`` filled in, the same answer twice, inputs unchanged (0.5)."""
    report = report_for(BACKWARD_BY_HAND)
    cases: dict[str, ByHandCase] = evidence["cases"]
    inputs = by_hand_inputs(evidence["seed"])
    first = cases[BY_HAND_CASES[0][0]]
    if first["error"]:
        for name, weight in ITEMS:
            report.add(Item(name, False, first["error"], weight))
        report.notes += first["notes"]
        return report
    entries = _entries_item(first)
    for item in (entries, _values_item(cases, inputs), _side_effects_item(cases, inputs, entries)):
        report.add(item)
    add_notes(report, cases.values())
    return report
