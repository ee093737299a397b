"""The grader of notebook 05's exercise 5: SoftmaxCrossEntropy, fused and stable."""

from __future__ import annotations

import numpy as np

from autograder.checks.beyond_basics.softmax_cross_entropy import (
    SCE_CASES,
    SOFTMAX_CROSS_ENTROPY_FUNCTION,
    all_sce_inputs,
)
from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.report import Report
from autograder.checks.tolerances import LOSS
from autograder.grading import grader, reference, report_for
from autograder.grading.beyond_basics.items import exact_shapes_item, recorded, verdict_item
from autograder.grading.function_contract import contract_items
from autograder.grading.hard_inputs import hard_inputs_item
from autograder.grading.toolkit import add_notes, tensors_unchanged_item


@grader(SOFTMAX_CROSS_ENTROPY_FUNCTION)
def grade_softmax_cross_entropy_function(evidence: Evidence) -> Report:
    """Grade: loss (1) and dscores for a random upstream scalar (1) for N=5, C=3; N = 1 (0.5); logits
    of magnitude 1000 (0.5); a direct backward call returns dscores (N, C) and None for the targets
    (0.5); rows far apart, the true class at the bottom of large scores, a class left out of the labels
    (0.5); inputs unchanged (0.5); the Function contract (tensors on ctx attributes, 0.5)."""
    report = report_for(SOFTMAX_CROSS_ENTROPY_FUNCTION)
    seed, cases = evidence["seed"], evidence["cases"]
    labels = list(SCE_CASES)
    datas = all_sce_inputs(seed)
    refs = {}
    for lab, data in datas.items():
        r = reference.softmax_cross_entropy(data["scores"], data["y"])
        refs[lab] = {"loss": r["loss"], "dscores": r["dscores"] * data["u"], "dscores_at_1": r["dscores"]}
    main = labels[0]
    rec, data, ref = cases[main], datas[main], refs[main]
    n = data["scores"].shape[0]
    report.add(
        verdict_item(
            "loss",
            rec,
            ("forward",),
            lambda: [compare("loss", rec["outputs"].get("loss"), ref["loss"], tol=LOSS, batch_size=n)],
            1.0,
        )
    )
    report.add(
        verdict_item(
            "dscores",
            rec,
            ("forward", "autograd"),
            lambda: [
                compare(
                    "dscores",
                    recorded(rec, "autograd", "dscores"),
                    ref["dscores"],
                    batch_size=n,
                    mistakes={"grad_output is ignored (backward must multiply by it)": ref["dscores_at_1"]},
                )
            ],
            1.0,
        )
    )
    for lab, name in ((labels[1], "N = 1"), (labels[2], "logits of magnitude 1000")):
        size = datas[lab]["scores"].shape[0]
        report.add(
            verdict_item(
                name,
                cases[lab],
                ("forward", "autograd"),
                lambda lab=lab, size=size: [
                    compare(
                        "loss",
                        cases[lab]["outputs"].get("loss"),
                        refs[lab]["loss"],
                        tol=LOSS,
                        batch_size=size,
                    ),
                    compare(
                        "dscores",
                        recorded(cases[lab], "autograd", "dscores"),
                        refs[lab]["dscores"],
                        mistakes={"grad_output is ignored": refs[lab]["dscores_at_1"]},
                        batch_size=size,
                    ),
                ],
                0.5,
            )
        )
    report.add(
        exact_shapes_item("direct backward", rec, {"dscores": data["scores"].shape, "dtargets": None}, 0.5)
    )
    report.add(hard_inputs_item(cases, datas, refs))
    originals = {lab: {"scores": d["scores"], "y": d["y"]} for lab, d in datas.items()}
    for lab, d in datas.items():
        originals[lab]["grad_output"] = np.asarray(d["u"])
    report.add(tensors_unchanged_item(cases, originals))
    ran = {"scores": data["scores"], "y": data["y"], "grad_output": np.asarray(data["u"])}
    for item in contract_items(cases, "SoftmaxCrossEntropy", {main: ran}):
        report.add(item)
    add_notes(report, cases.values())
    return report
