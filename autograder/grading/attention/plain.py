"""The grader of ``check_attention``: plain softmax attention, differentiated by autograd."""

from __future__ import annotations

from autograder.checks.attention import ATTENTION
from autograder.checks.attention_inputs import attention_cases, case_inputs
from autograder.checks.core import Evidence, case_seed
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.attention.common import case_verdicts, values_item
from autograder.grading.attention.reference import attention_reference
from autograder.grading.toolkit import add_notes, tensors_unchanged_item


@grader(ATTENTION)
def grade_attention(evidence: Evidence) -> Report:
    """Grade: per case, o (1) and dq, dk, dv through autograd (1); inputs and the upstream gradient
    unchanged (0.5)."""
    report = report_for(ATTENTION)
    seed, records = evidence["seed"], evidence["cases"]
    cases = attention_cases(seed)
    datas = {label: case_inputs(case_seed(seed, i), case) for i, (label, case) in enumerate(cases.items())}
    for label, case in cases.items():
        record, data = records[label], datas[label]
        verdicts = case_verdicts(record, case, data, attention_reference(data, case.causal))
        report.add(values_item(f"o, {label}", record, verdicts["o"], ("forward",), 1.0))
        report.add(
            values_item(f"dq, dk, dv, {label}", record, verdicts["grads"], ("forward", "autograd"), 1.0)
        )
    originals = {
        label: {"q": d["q"], "k": d["k"], "v": d["v"], "grad_output": d["g"]} for label, d in datas.items()
    }
    report.add(tensors_unchanged_item(records, originals))
    add_notes(report, records.values())
    return report


__all__ = ["grade_attention", "Item"]
