"""What every check shares: evidence, the registry, and running a check from a test cell.

A check has two halves:

* ``collect(*learner_functions, seed) -> Evidence`` runs the learner's code on inputs made from
  ``seed`` and records what came back (outputs, gradients, errors, the inputs after the call) as
  plain data. This is the only half that runs learner code.
* ``grade(evidence) -> Report`` remakes the inputs from the seed, computes the reference with
  PyTorch autograd in float64, and compares. It is a pure function of the evidence, so a verdict
  can be recomputed outside the learner's kernel.

A test cell calls :func:`run_check` through a ``check_*`` function, which prints the feedback
and returns the score as a plain float.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.calling import Call, call
from autograder.compare import as_array
from autograder.evidence import emit
from autograder.report import Item, Report

Evidence = dict[str, Any]


@dataclass(frozen=True)
class NotAnArray:
    """Stands in the evidence for a learner value that is not numeric data (a list, a string...)."""

    type_name: str


def freeze(value: Any) -> Any:
    """A plain-data copy of a learner value: a numpy array, None, or :class:`NotAnArray`."""
    if value is None:
        return None
    arr = as_array(value)
    if arr is None:
        return NotAnArray(type(value).__name__)
    return np.array(arr, copy=True)


@dataclass(frozen=True)
class Check:
    """A registered check: its name, title, points, and its two halves."""

    name: str
    title: str
    points: float
    collect: Callable[..., Evidence]
    grade: Callable[[Evidence], Report]


CHECKS: dict[str, Check] = {}


def register(check: Check) -> Check:
    """Add a check to :data:`CHECKS`, the table the grader looks verdicts up in."""
    CHECKS[check.name] = check
    return check


def run_check(check: Check, *learner: Any, seed: int = 0) -> float:
    """Collect evidence from the learner's functions, grade it, print the feedback, return the score.

    Under the grading engine the evidence is also published (see :func:`autograder.evidence.emit`)
    so that the engine can recompute the verdict outside the learner's kernel.
    """
    evidence = check.collect(*learner, seed=seed)
    emit(evidence)
    report = check.grade(evidence)
    print(report.render())
    return report.score


def unpack(outcome: Call, names: Sequence[str], label: str) -> tuple[dict[str, Any], str | None]:
    """Split a call's result into named values, or explain why it cannot be split.

    A function documented to return ``(out, cache)`` must return exactly two things; when it
    returns something else the error says what it returned.
    """
    if not outcome.ok:
        return {}, outcome.error
    result = outcome.result
    if len(names) == 1:
        return {names[0]: result}, None
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        got = f"a {type(result).__name__}"
        if isinstance(result, (tuple, list)):
            got += f" of length {len(result)}"
        return {}, f"{label} should return ({', '.join(names)}), but returned {got}"
    return dict(zip(names, result, strict=True)), None


def run_forward_backward(
    forward: Callable[..., Any],
    backward: Callable[..., Any],
    inputs: dict[str, np.ndarray],
    dout: np.ndarray,
    grad_names: Sequence[str],
) -> dict[str, Any]:
    """Run the ``forward(*inputs) -> (out, cache)`` / ``backward(dout, cache) -> grads`` interface.

    The learner's functions get copies of ``inputs`` and ``dout``; what those copies hold
    afterwards is recorded as ``inputs_after`` so that grading can tell whether they were changed.

    Returns a case record: ``outputs`` (``out`` and each gradient), ``error`` (the first error, or
    None), ``notes`` and ``inputs_after``.
    """
    args = {k: np.array(v, copy=True) for k, v in inputs.items()}
    dout_arg = np.array(dout, copy=True)
    fname = getattr(forward, "__name__", "forward")
    bname = getattr(backward, "__name__", "backward")
    record: dict[str, Any] = {"outputs": {}, "error": None, "notes": []}

    fwd = call(forward, *args.values(), name=fname)
    record["notes"] += fwd.notes
    values, error = unpack(fwd, ["out", "cache"], fname)
    if error is None:
        record["outputs"]["out"] = freeze(values["out"])
        bwd = call(backward, dout_arg, values["cache"], name=bname)
        record["notes"] += bwd.notes
        grads, error = unpack(bwd, grad_names, bname)
        record["outputs"].update({k: freeze(v) for k, v in grads.items()})
    record["error"] = error
    record["inputs_after"] = {**{k: freeze(v) for k, v in args.items()}, "dout": freeze(dout_arg)}
    return record


def inputs_unchanged_item(
    cases: dict[str, dict[str, Any]], originals: dict[str, dict[str, np.ndarray]], weight: float = 0.5
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
                    f"in case {label}, your code changed its argument {key} in place; work on a copy "
                    "(e.g. dx = dout.copy() before masking) so the caller's data stays intact.",
                    weight,
                )
    return Item("inputs unchanged", True, "no argument was modified", weight)


def collect_notes(report: Report, cases: dict[str, dict[str, Any]]) -> None:
    """Copy each distinct warning or stderr note from the cases into the report."""
    for record in cases.values():
        for note in record.get("notes", []):
            if note not in report.notes:
                report.notes.append(note)
