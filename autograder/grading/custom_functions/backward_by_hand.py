"""The grader of notebook 04's backward_by_hand: what grad_fn.apply returns, untouched."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.core import Evidence
from autograder.checks.custom_functions.backward_by_hand import (
    BACKWARD_BY_HAND,
    BY_HAND_CASES,
    by_hand_inputs,
)
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.custom_functions.items import grads_item
from autograder.grading.toolkit import add_notes


def _raw_expected(data: dict[str, Any]) -> list[np.ndarray | None]:
    x, W, g = data["x"], data["W"], data["grad"]
    rx, rw, rb = data["requires"]
    return [
        g @ W if rx else None,
        g.T @ x if rw else None,
        g.copy() if data["b"] is not None and rb else None,
    ]


@grader(BACKWARD_BY_HAND)
def grade_backward_by_hand(evidence: Evidence) -> Report:
    """Grade recorded evidence: a tuple with one entry per forward input (0.5); exactly what RawLinear's
    backward returns, unsummed bias gradient and Nones included, in every case (1); no side effects:
    no ``.grad`` filled in, the same answer twice, inputs unchanged (0.5)."""
    report = report_for(BACKWARD_BY_HAND)
    cases = evidence["cases"]
    inputs = by_hand_inputs(evidence["seed"])
    names = ["grad_input", "grad_weight", "grad_bias"]
    first = cases[BY_HAND_CASES[0][0]]
    if first["error"]:
        for name, weight in (
            ("one entry per input", 0.5),
            ("what grad_fn.apply returns", 1.0),
            ("no side effects", 0.5),
        ):
            report.add(Item(name, False, first["error"], weight))
        report.notes += first["notes"]
        return report
    returned = first["results"][0]
    n = len(returned["grads"])
    if returned["kind"] not in ("tuple", "list") or n != 3:
        report.add(
            Item(
                "one entry per input",
                False,
                f"backward_by_hand returned a {returned['kind']} of {n} value(s); out.grad_fn.apply(grad) "
                "returns a tuple with one entry per input of forward (x, W, b): return it as it is.",
                0.5,
            )
        )
    else:
        report.add(Item("one entry per input", True, "a tuple (grad_input, grad_weight, grad_bias)", 0.5))

    item = Item(
        "what grad_fn.apply returns",
        True,
        "exactly what backward returned, bias gradient (4, 5) unsummed",
        1.0,
    )
    for label, data in inputs.items():
        record = cases[label]
        if record["error"]:
            item = Item(item.name, False, f"when {label}: {record['error']}", 1.0)
            break
        # what backward_by_hand returns is grad_fn.apply's tuple, passed on as a tuple or a list alike
        result = {**record["results"][0], "kind": "tuple"}
        fake = {"outputs": {"direct": result}, "errors": {"forward": None, "direct": None}}
        mistakes = {
            "grad_bias": {
                "summed over the batch: that is what .backward() leaves in b.grad (the engine sum-reduces "
                "a gradient to its input's shape); grad_fn.apply runs backward alone and returns its "
                "(N, out) result untouched": data["grad"].sum(0)
            }
        }
        expected = _raw_expected(data)
        checked = grads_item(item.name, fake, expected, names, "RawLinear", 1.0, mistakes)
        if not checked.passed:
            item = Item(item.name, False, f"when {label}: {checked.message}", 1.0)
            break
    report.add(item)

    item = Item("no side effects", True, "no .grad filled in, the same result twice, inputs unchanged", 0.5)
    for label, data in inputs.items():
        record = cases[label]
        if record["error"]:
            item = Item(item.name, False, f"not checked: when {label}: {record['error']}", 0.5)
            break
        filled = [k for k, v in record["grads_after"].items() if v is not None]
        if filled:
            item = Item(
                item.name,
                False,
                f"when {label}, {', '.join(k + '.grad' for k in filled)} was filled in: grad_fn.apply runs "
                "backward without the engine, which is what fills .grad; do not call .backward() here.",
                0.5,
            )
            break
        r1, r2 = record["results"]
        same = len(r1["grads"]) == len(r2["grads"]) and all(
            (a is None and b is None)
            or (
                isinstance(a, np.ndarray)
                and isinstance(b, np.ndarray)
                and a.shape == b.shape
                and np.array_equal(a, b)
            )
            for a, b in zip(r1["grads"], r2["grads"], strict=True)
        )
        if not same:
            item = Item(
                item.name, False, f"when {label}, a second call returned something else than the first.", 0.5
            )
            break
        for k in ("x", "W", "b", "grad"):
            before, after = data.get(k), record["inputs_after"].get(k)
            if isinstance(before, np.ndarray) and not (
                isinstance(after, np.ndarray) and np.array_equal(before, after)
            ):
                item = Item(item.name, False, f"when {label}, {k} was changed in place.", 0.5)
                break
        if not item.passed:
            break
    if item.passed and not report.items[0].passed:
        # A function that returns nothing useful has no side effects either: that earns nothing.
        item = Item(item.name, False, "not checked: it did not return one gradient per input", 0.5)
    report.add(item)
    add_notes(report, cases.values())
    return report
