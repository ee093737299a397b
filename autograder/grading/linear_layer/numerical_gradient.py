"""The grader of notebook 01's numerical gradient: centred differences, the input left as it was."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence
from autograder.checks.linear_layer import (
    DEFAULT_STEP,
    GRADIENT_SHAPES,
    NUMERICAL_GRADIENT,
    SHAPE_PROBLEMS,
    STEP_CASE,
    _gradient_cases,
    numpy_function,
)
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import FINITE_DIFFERENCE
from autograder.grading import grader, reference, report_for
from autograder.grading.toolkit import add_notes


def forward_difference(f: Callable[[np.ndarray], float], x: np.ndarray, h: float) -> np.ndarray:
    """``(f(x + h e_i) - f(x)) / h``: the wrong answer the centred difference exists to avoid."""
    x = np.array(x, dtype=np.float64, copy=True)
    fx = f(x)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + h
        grad[index] = (f(x) - fx) / h
        x[index] = saved
    return grad


def _gradient_verdict(
    label: str, record: dict[str, Any], fn: Callable[..., Any], data: dict, h: float | None
) -> Verdict:
    """The learner's gradient for one case against autograd's (or, for a large h, the exact centred
    difference), with the forward difference and the missing 1/2 as named mistakes."""
    x, c = data["x"], data["c"]
    exact = reference.gradient(lambda t: fn(t, torch, torch.from_numpy(c)), x)
    f = numpy_function(fn, c)
    if h is None:
        expected = exact
        step = DEFAULT_STEP
        mistakes = {
            "forward differences (f(x + h) - f(x)) / h, which are accurate only to ~h * f''; "
            "use the centred (f(x + h) - f(x - h)) / (2 h)": forward_difference(f, x, step),
            "divided by h instead of 2 h": 2.0 * exact,
        }
    else:
        # Centred difference of c * x**3 with step h, exactly: c * ((x + h)**3 - (x - h)**3) / (2 h).
        expected = exact + c * h**2
        step = h
        mistakes = {
            f"the h you were given is not used: these are the exact derivatives, while the centred "
            f"difference with h = {h} is c * (3 x**2 + h**2) for this cubic": exact,
            "forward differences (f(x + h) - f(x)) / h; use the centred (f(x + h) - f(x - h)) / (2 h)": (
                forward_difference(f, x, step)
            ),
            "divided by h instead of 2 h": 2.0 * expected,
        }
    return compare(
        f"gradient ({label})",
        record["outputs"].get("grad"),
        expected,
        tol=FINITE_DIFFERENCE,
        mistakes=mistakes,
    )


def _values_item(name: str, labels: list[str], records: dict, verdicts: dict, weight: float) -> Item:
    for label in labels:
        if records[label]["error"]:
            return Item(name, False, f"{label}: {records[label]['error']}", weight)
    return Item.from_verdicts(name, [verdicts[label] for label in labels], weight)


def _x_unchanged_item(records: dict[str, dict[str, Any]], originals: dict[str, np.ndarray]) -> Item:
    name, weight = "x unchanged", 0.5
    for label, record in records.items():
        if record["error"]:
            return Item(name, False, f"not checked: case {label} did not run: {record['error']}", weight)
    for label, record in records.items():
        after, before = record["inputs_after"]["x"], originals[label]
        if isinstance(after, np.ndarray) and after.shape == before.shape and np.array_equal(after, before):
            continue
        message = f"in case {label}, x is not the same after your function returned"
        if isinstance(after, np.ndarray) and after.shape == before.shape:
            change = float(np.max(np.abs(after - before)))
            if change <= 1e-12 * (1.0 + float(np.max(np.abs(before)))):
                message += (
                    f" (changed by at most {change:.1e}, a rounding error): adding and subtracting h "
                    "does not give back exactly the number you started from; save the element before "
                    "you change it and put that saved value back"
                )
            else:
                message += (
                    f" (changed by up to {change:.3g}): restore each element to its saved value after "
                    "evaluating f at x + h and x - h"
                )
        return Item(name, False, message + ".", weight)
    return Item(name, True, "every element of x was restored exactly", weight)


@grader(NUMERICAL_GRADIENT)
def grade_numerical_gradient(evidence: Evidence) -> Report:
    """Grade recorded evidence: shape and dtype (0.5), values on 2-D x (1), on 1-D and 3-D x (1),
    the step h is used (0.5), x unchanged (0.5)."""
    report = report_for(NUMERICAL_GRADIENT)
    seed, records = evidence["seed"], evidence["cases"]
    cases = _gradient_cases(seed)
    verdicts = {label: _gradient_verdict(label, records[label], *case) for label, case in cases.items()}
    shaped = list(GRADIENT_SHAPES)

    errors = [f"{label}: {records[label]['error']}" for label in shaped if records[label]["error"]]
    bad_shape = [v for label, v in verdicts.items() if label in shaped and v.problem in SHAPE_PROBLEMS]
    if errors:
        report.add(Item("shape and dtype", False, errors[0], 0.5))
    elif bad_shape:
        report.add(Item("shape and dtype", False, bad_shape[0].message(), 0.5))
    else:
        report.add(Item("shape and dtype", True, "float64, shaped like x, for 1-D, 2-D and 3-D x", 0.5))
    report.add(_values_item("values, 2-D x", shaped[:1], records, verdicts, 1.0))
    report.add(_values_item("values, 1-D and 3-D x", shaped[1:], records, verdicts, 1.0))
    report.add(_values_item("uses h", [STEP_CASE], records, verdicts, 0.5))
    report.add(_x_unchanged_item(records, {label: case[1]["x"] for label, case in cases.items()}))
    add_notes(report, records.values())
    return report
