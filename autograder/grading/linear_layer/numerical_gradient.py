"""The grader of notebook 01's numerical gradient: centred differences, the input left as it was."""

from __future__ import annotations

import re
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
from autograder.grading.toolkit import add_notes, explain_errors


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


def first_axis_difference(f: Callable[[np.ndarray], float], x: np.ndarray, h: float) -> np.ndarray:
    """What a loop written for 1-D arrays gives on an N-D x: ``x[i]`` is a whole slice, so each slice is
    shifted at once and its one centred difference fills the slice."""
    x = np.array(x, dtype=np.float64, copy=True)
    grad = np.zeros_like(x)
    for i in range(len(x)):
        saved = x[i].copy()
        x[i] = saved + h
        f_plus = f(x)
        x[i] = saved - h
        f_minus = f(x)
        x[i] = saved
        grad[i] = (f_plus - f_minus) / (2 * h)
    return grad


ONE_D_LOOP = (
    "x[i] indexes a whole slice of an x with more than one axis (a loop written for 1-D arrays, "
    "for i in range(len(x))), so each slice is shifted at once; loop over every element, "
    "for index in np.ndindex(x.shape)"
)

#: A loop written for 2-D arrays, on an x with fewer axes: the line that raised reads x.shape[1].
_TWO_D_LOOP = re.compile(r"IndexError: tuple index out of range \(in [^,]+, line \d+: .*shape\[1\]")


def _explained(error: str) -> str | None:
    if _TWO_D_LOOP.search(error):
        return (
            "a loop written for 2-D arrays (x.shape[1], x[i, j]); loop over every element whatever the "
            "number of axes, for index in np.ndindex(x.shape)"
        )
    return None


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
        if x.ndim > 1:
            mistakes[ONE_D_LOOP] = first_axis_difference(f, x, step)
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


def _x_unchanged_item(
    records: dict[str, dict[str, Any]], originals: dict[str, np.ndarray], steps: dict[str, float]
) -> Item:
    """x is left exactly as it was in every case (``steps``: each case's h, for :func:`_how_x_changed`)."""
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
            message += _how_x_changed(after - before, before, steps[label])
        return Item(name, False, message + ".", weight)
    return Item(name, True, "every element of x was restored exactly", weight)


def _how_x_changed(shift: np.ndarray, before: np.ndarray, h: float) -> str:
    """How x changed: by rounding errors only (put back by arithmetic), every element by exactly h or -h
    (left at x + h or x - h), or otherwise (named by its size only)."""
    change = float(np.max(np.abs(shift)))
    restore = "restore each element to its saved value after evaluating f at x + h and x - h"
    if change <= 1e-12 * (1.0 + float(np.max(np.abs(before)))):
        return (
            f" (changed by at most {change:.1e}, a rounding error). Likely mistake: each element put back "
            "by arithmetic (x[i] += h after x[i] -= 2 h): adding and subtracting h does not give back "
            "exactly the number you started from; save the element before you change it and put that "
            "saved value back"
        )
    if any(np.allclose(shift, sign * h, rtol=1e-6, atol=0.0) for sign in (1, -1)):
        side = "x - h" if shift.flat[0] < 0 else "x + h"
        return (
            f" (every element changed by {shift.flat[0]:.3g}, h = {h:g}). Likely mistake: each element left "
            f"at {side}, never put back: {restore}"
        )
    return f" (changed by up to {change:.3g}): {restore}"


@grader(NUMERICAL_GRADIENT)
def grade_numerical_gradient(evidence: Evidence) -> Report:
    """Grade recorded evidence: shape and dtype (0.5), values on 2-D x (1), on 1-D and 3-D x (1),
    the step h is used (0.5), x unchanged (0.5)."""
    report = report_for(NUMERICAL_GRADIENT)
    seed, records = evidence["seed"], explain_errors(evidence["cases"], _explained)
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
    originals = {label: case[1]["x"] for label, case in cases.items()}
    steps = {label: DEFAULT_STEP if case[2] is None else case[2] for label, case in cases.items()}
    report.add(_x_unchanged_item(records, originals, steps))
    add_notes(report, records.values())
    return report
