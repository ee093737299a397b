"""The grader of notebook 02's softmax cross-entropy, stable for large scores."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence
from autograder.checks.report import Report
from autograder.checks.tolerances import LOSS
from autograder.checks.two_layer_net import (
    APART_CASE,
    MISSING_CLASS_CASE,
    SOFTMAX_CASES,
    SOFTMAX_CROSS_ENTROPY,
    softmax_inputs,
)
from autograder.grading import grader, reference, report_for
from autograder.grading.softmax_mistakes import (
    GLOBAL_MAX,
    OVERFLOW,
    merge_alike,
    one_hot_from_labels,
    softmax_loss_mistakes,
    wrong_softmaxes,
)
from autograder.grading.toolkit import (
    add_notes,
    error_or_verdicts,
    explain_errors,
    inputs_unchanged_item,
    verdict_or_error,
)
from autograder.grading.two_layer_net.items import first_failure, stability_item

#: What a stable softmax does, said where a large-scores item fails and no mistake was named.
LOG_SUM_EXP_HINT = (
    " Subtract each row's maximum before exp, and take the log of the probabilities as "
    "s - max - log(sum(exp(s - max))) rather than log(softmax)."
)


def _softmax_mistakes(
    scores: np.ndarray, y: np.ndarray, ref: dict[str, np.ndarray]
) -> dict[str, dict[str, Any]]:
    n = scores.shape[0]
    rows = np.arange(n)
    onehot = np.zeros_like(scores)
    onehot[rows, y] = 1.0
    wrong = wrong_softmaxes(scores)
    naive, p, p0, p_global = (wrong[k] for k in ("naive", "right", "batch_axis", "global_max"))
    dscores: dict[str, Any] = {
        k: v
        for k, v in merge_alike({OVERFLOW: (naive - onehot) / n, GLOBAL_MAX: (p_global - onehot) / n}).items()
        if not np.all(np.isfinite(v))
    }
    dscores["the one-hot of y is not subtracted (dscores = softmax / N)"] = p / n
    if np.all(np.isfinite(p0)):
        dscores["softmax normalised over the batch (axis 0) instead of over the classes (axis 1)"] = (
            p0 - onehot
        ) / n
    swapped = "the return values are swapped: this is {}; return (loss, dscores), in that order"
    dscores[swapped.format("the loss")] = ref["loss"]
    loss = softmax_loss_mistakes(scores, y)
    loss[swapped.format("dscores")] = ref["dscores"]
    return {"loss": loss, "dscores": dscores}


def _softmax_verdicts(record: dict[str, Any], data: dict[str, np.ndarray]) -> list[Verdict]:
    ref = reference.softmax_cross_entropy(data["scores"], data["y"])
    mistakes = _softmax_mistakes(data["scores"], data["y"], ref)
    n = data["scores"].shape[0]
    out = record["outputs"]
    return [
        compare("loss", out.get("loss"), ref["loss"], tol=LOSS, mistakes=mistakes["loss"], batch_size=n),
        compare("dscores", out.get("dscores"), ref["dscores"], mistakes=mistakes["dscores"], batch_size=n),
    ]


@grader(SOFTMAX_CROSS_ENTROPY)
def grade_softmax_cross_entropy(evidence: Evidence) -> Report:
    """Grade evidence: loss (1), dscores (1), N = 1 (0.5), a class absent from y (0.5), large logits and rows
    hundreds apart (1), inputs unchanged (0.5)."""
    report = report_for(SOFTMAX_CROSS_ENTROPY)
    inputs = softmax_inputs(evidence["seed"])
    cases = {
        label: explain_errors(
            {label: evidence["cases"][label]},
            lambda e, d=data: one_hot_from_labels(e, d["scores"].shape[1], d["y"]),
        )[label]
        for label, data in inputs.items()
    }
    verdicts = {label: _softmax_verdicts(cases[label], data) for label, data in inputs.items()}
    main, single, large = SOFTMAX_CASES
    error = cases[main]["error"]
    for verdict in verdicts[main]:
        report.add(verdict_or_error(verdict.name, verdict, error, 1.0))
    report.add(error_or_verdicts("N = 1", cases[single]["error"], verdicts[single], 0.5))
    absent = cases[MISSING_CLASS_CASE]["error"]
    report.add(error_or_verdicts("a class absent from y", absent, verdicts[MISSING_CLASS_CASE], 0.5))
    ordinary_ok = not cases[main]["error"] and all(v.ok for v in verdicts[main] + verdicts[single])
    report.add(
        stability_item(
            "large logits (|s| ~ 1000)",
            [cases[APART_CASE], cases[large]],
            first_failure(verdicts[APART_CASE] + verdicts[large]),
            LOG_SUM_EXP_HINT if ordinary_ok else "",
            "finite, right loss and dscores with no floating-point warning",
        )
    )
    report.add(inputs_unchanged_item(cases, inputs))
    add_notes(report, cases.values())
    return report
