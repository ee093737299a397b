"""The grader of notebook 01's linear layer: forward and backward in numpy."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence, case_seed
from autograder.checks.linear_layer import LINEAR_CASES, LINEAR_LAYER, linear_inputs
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference, report_for
from autograder.grading.toolkit import add_notes, inputs_unchanged_item


def _linear_verdicts(record: dict[str, Any], data: dict[str, np.ndarray]) -> dict[str, Verdict]:
    ref = reference.linear(data["x"], data["W"], data["b"], data["dout"])
    out, n = record["outputs"], data["x"].shape[0]
    ones = np.ones_like(data["dout"])
    mistakes = {
        "out": {"the bias is missing": data["x"] @ data["W"].T},
        "dx": {
            "the upstream gradient dout is ignored (dx computed as if dout were all ones)": ones @ data["W"]
        },
        "dW": {
            "the upstream gradient dout is ignored (dW computed as if dout were all ones)": ones.T @ data["x"]
        },
        "db": {
            "summed over axis 1 instead of the batch axis 0": data["dout"].sum(axis=1),
            "dout was not summed over the batch axis 0": data["dout"],
        },
    }
    return {
        name: compare(name, out.get(name), ref[name], mistakes=mistakes[name], batch_size=n)
        for name in ("out", "dx", "dW", "db")
    }


@grader(LINEAR_LAYER)
def grade_linear_layer(evidence: Evidence) -> Report:
    """Grade recorded evidence: out (2), dx, dW, db (1 each), the N = 1 case (1), inputs unchanged (0.5)."""
    report = report_for(LINEAR_LAYER)
    seed, cases = evidence["seed"], evidence["cases"]
    originals = {}
    verdicts: dict[str, dict[str, Verdict]] = {}
    for index, (label, dims) in enumerate(LINEAR_CASES.items()):
        data = linear_inputs(case_seed(seed, index), *dims)
        originals[label] = data
        verdicts[label] = _linear_verdicts(cases[label], data)

    main, single = LINEAR_CASES
    error = cases[main]["error"]
    for name, weight in (("out", 2.0), ("dx", 1.0), ("dW", 1.0), ("db", 1.0)):
        verdict = verdicts[main][name]
        if verdict.problem == "missing" and error:
            report.add(Item(name, False, error, weight))
        else:
            report.add(Item.from_verdicts(name, [verdict], weight))

    if cases[single]["error"]:
        report.add(Item("N = 1", False, cases[single]["error"]))
    else:
        report.add(Item.from_verdicts("N = 1", list(verdicts[single].values())))
    report.add(inputs_unchanged_item(cases, originals))
    add_notes(report, cases.values())
    return report
