"""The grader of ``check_saved_tensors``: what autograd saves, as the pack hooks really see it.

The truth is measured here, on the trusted side, by running the same function on the same arguments
under :class:`~autograder.checks.attention_inputs.SavedLog`: nothing from the learner's kernel says
what should have been saved.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.attention import (
    SAVED_BACKWARD,
    SAVED_FUNCTIONS,
    SAVED_TENSORS,
    saved_arguments,
    saved_inputs,
)
from autograder.checks.attention_inputs import SavedLog
from autograder.checks.compare import compare
from autograder.checks.core import Evidence, case_seed
from autograder.checks.functions import FunctionRecord
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.toolkit import add_notes, step_error

Pairs = list[list[Any]]


def true_saved(seed: int, index: int, name: str) -> Pairs:
    """What the pack hooks see while the function ``name`` runs on its arguments: [shape, nbytes] each."""
    fn = SAVED_FUNCTIONS[name][0]
    args = saved_arguments(case_seed(seed, index), name, torch.device("cpu"))
    if name.startswith("x * x"):
        args = args[:1]
    with SavedLog() as log:
        fn(*args)
    return [[e["shape"], e["nbytes"]] for e in log.entries]


def _element_sizes(expected: Pairs) -> set[int]:
    return {size // max(1, _numel(shape)) for shape, size in expected}


def _numel(shape: list[int]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def saved_problem(got: Any, expected: Pairs, name: str) -> str | None:
    """What is wrong with the learner's list for the function ``name``, with the likely mistake where the
    list fits one; None when it is right."""
    if isinstance(got, dict):
        return f"saved_tensors returned a {got['type']}, expected a list of (shape, nbytes) pairs"
    if got == expected:
        return None
    shown = f"got {got}, expected {expected} (one [shape, nbytes] per tensor, in the order they are packed)"
    likely = None
    if not got and expected:
        likely = (
            "no tensor was recorded: is fn called inside the `with saved_tensors_hooks(pack, unpack):` "
            "block, and does pack append before it returns the tensor?"
        )
    elif [s for s, _ in got] == [s for s, _ in expected]:
        if all(b == _numel(s) for s, b in got):
            likely = "nbytes is the number of elements: multiply by t.element_size()"
        elif len({b // max(1, _numel(s)) for s, b in got}) == 1 and len(_element_sizes(expected)) == 1:
            likely = "the element size is fixed: float32 has 4 bytes, float64 8; use t.element_size()"
    elif sorted(map(str, got)) == sorted(map(str, expected)):
        likely = "the tensors are not in the order autograd packs them: append in pack, as they come"
    elif len(got) < len(expected) and all(g in expected for g in got):
        likely = (
            "a tensor saved twice is listed once: autograd packs it each time it is saved (x * x saves "
            "x twice), so record every call of pack"
        )
    return f"{shown}. Likely mistake: {likely}" if likely else shown


#: What the unpack hook must give back, said where backward under the learner's hooks went wrong.
GIVE_BACK = "the unpack hook must return the tensor the pack hook was given (does each return its argument?)"


def call_problem(error: str) -> str:
    """The call's error, with the likely mistake when torch refused what the unpack hook returned."""
    if "unpack_hook expected to be a Tensor" in error:
        return f"{error}. Likely mistake: backward ran under your hooks and {GIVE_BACK}"
    return error


def gradient_problem(record: FunctionRecord, seed: int, index: int) -> str | None:
    """For :data:`SAVED_BACKWARD`: what is wrong with the gradient that backward computed under the
    learner's hooks (exp(x), from the tensor exp saved), or None when it is right."""
    (x,) = saved_inputs(case_seed(seed, index), SAVED_BACKWARD)
    name = "the gradient of exp(x).sum() computed under your hooks"
    verdict = compare(name, record["outputs"].get("gradient"), np.exp(x))
    if verdict.ok:
        return None
    return f"{verdict.detail} Backward used what your unpack hook returned: {GIVE_BACK}"


@grader(SAVED_TENSORS)
def grade_saved_tensors(evidence: Evidence) -> Report:
    """Grade: per function, the list of (shape, nbytes) the hooks see (1 each)."""
    report = report_for(SAVED_TENSORS)
    seed, records = evidence["seed"], evidence["cases"]
    for index, name in enumerate(SAVED_FUNCTIONS):
        record = records[name]
        error = step_error(record, "call")
        if error:
            report.add(Item(name, False, call_problem(error), 1.0))
            continue
        expected = true_saved(seed, index, name)
        problem = saved_problem(record["outputs"].get("saved"), expected, name)
        if problem is None and name == SAVED_BACKWARD:
            problem = gradient_problem(record, seed, index)
        total = sum(size for _, size in expected)
        report.add(Item(name, problem is None, problem or f"{len(expected)} tensor(s), {total} bytes", 1.0))
    add_notes(report, records.values())
    return report
