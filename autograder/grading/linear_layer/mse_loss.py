"""The grader of notebook 01's mean squared error and its gradient."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence, case_seed
from autograder.checks.linear_layer import MSE_CASES, MSE_LOSS, mse_inputs
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import FLOAT64, LOSS
from autograder.grading import grader, reference, report_for
from autograder.grading.toolkit import add_notes, inputs_unchanged_item


def _mse_verdicts(record: dict[str, Any], data: dict[str, np.ndarray]) -> dict[str, Verdict]:
    ref = reference.mse(data["pred"], data["target"])
    diff = data["pred"] - data["target"]
    n, size = diff.shape[0], diff.size
    square = diff**2
    mistakes = {
        "loss": {
            "summed over all elements instead of averaged (the mean divides by N * M)": square.sum(),
            "divided by N, the batch size, instead of N * M, the number of elements": square.sum() / n,
            "averaged over each row only (axis=1): the loss is one number, the mean over all elements": (
                square.mean(axis=1)
            ),
            "averaged over the batch axis only (axis=0): the loss is one number, the mean over all "
            "elements": square.mean(axis=0),
        },
        "dpred": {
            "the factor 2 from the derivative of (pred - target)**2 is missing": diff / size,
            "sign flipped: the derivative of (pred - target)**2 with respect to pred is "
            "2 * (pred - target), not 2 * (target - pred)": -2.0 * diff / size,
            "divided by N, the batch size, instead of N * M, the number of elements": 2.0 * diff / n,
            "not divided by N * M: this is the gradient of the sum, not of the mean": 2.0 * diff,
        },
    }
    if n == 1:
        # With one row, dividing by N divides by 1: the sum and the division by N are one mistake here,
        # named as what it is (the N = 1 item is where a learner meets it).
        one_row = (
            f"divided by N, which is 1 here (or not divided at all): the mean divides by N * M = {size}, "
            "the number of elements, also when N = 1"
        )
        mistakes["loss"] = {one_row: square.sum(), **mistakes["loss"]}
        mistakes["dpred"] = {one_row: 2.0 * diff, **mistakes["dpred"]}
    out = record["outputs"]
    return {
        name: compare(name, out.get(name), ref[name], tol=tol, mistakes=mistakes[name], batch_size=n)
        for name, tol in (("loss", LOSS), ("dpred", FLOAT64))
    }


@grader(MSE_LOSS)
def grade_mse_loss(evidence: Evidence) -> Report:
    """Grade recorded evidence: loss (1) and dpred (1) for N=4, M=3; the M = 1 case (0.5); the N = 1
    case (0.5); inputs unchanged (0.5)."""
    report = report_for(MSE_LOSS)
    seed, cases = evidence["seed"], evidence["cases"]
    originals, verdicts = {}, {}
    for index, (label, dims) in enumerate(MSE_CASES.items()):
        data = mse_inputs(case_seed(seed, index), *dims)
        originals[label] = data
        verdicts[label] = _mse_verdicts(cases[label], data)

    main, column, single = MSE_CASES
    for name in ("loss", "dpred"):
        verdict = verdicts[main][name]
        if verdict.problem == "missing" and cases[main]["error"]:
            report.add(Item(name, False, cases[main]["error"], 1.0))
        else:
            report.add(Item.from_verdicts(name, [verdict], 1.0))
    for item_name, label in (("M = 1, pred of shape (N, 1)", column), ("N = 1", single)):
        if cases[label]["error"]:
            report.add(Item(item_name, False, cases[label]["error"], 0.5))
        else:
            report.add(Item.from_verdicts(item_name, list(verdicts[label].values()), 0.5))
    report.add(inputs_unchanged_item(cases, originals))
    add_notes(report, cases.values())
    return report
