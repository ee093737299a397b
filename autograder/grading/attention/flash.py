"""The grader of ``check_flash_attention``: o, L and every gradient against the float64 reference, the
backward called directly, and the one Function contract."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.attention import CONTRACT_CASE, FLASH_ARGS, FLASH_ATTENTION
from autograder.checks.attention_inputs import Case, case_inputs, flash_cases
from autograder.checks.compare import compare
from autograder.checks.core import Evidence, case_seed
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.attention.common import case_verdicts, pattern_diagnosis, tolerance, values_item
from autograder.grading.attention.reference import attention_reference, l_mistakes
from autograder.grading.function_contract import contract_items
from autograder.grading.toolkit import Record, add_notes, backward_returns, step_error, tensors_unchanged_item

#: PyTorch's error when backward returns a tensor for an argument that is not a tensor.
NOT_A_VARIABLE = "but the corresponding forward input was not a Variable"
GRADIENT_FOR_CAUSAL = (
    "Likely mistake: backward returns a gradient for is_causal, a bool: return None in its place "
    "(return dq, dk, dv, None)"
)


def _named(error: str | None) -> str | None:
    if error and NOT_A_VARIABLE in error:
        return f"{error}. {GRADIENT_FOR_CAUSAL}"
    return error


def l_item(label: str, record: Record, case: Case, data: dict[str, np.ndarray], ref: np.ndarray) -> Item:
    """The logsumexp L, found among the tensors the hooks saw by its shape (*batch, Nq)."""
    name = f"L, {label}"
    error = step_error(record, "forward")
    if error:
        return Item(name, False, error, 0.25)
    wanted = [*case.batch, case.nq]
    saved = record["outputs"].get("hooks", [])
    found = [e for e in saved if e["shape"] == wanted]
    if not found:
        shapes = ", ".join(str(tuple(e["shape"])) for e in saved) or "none"
        extra = (
            " (save L without its trailing axis of 1)"
            if any(e["shape"] == [*wanted, 1] for e in saved)
            else ""
        )
        return Item(
            name,
            False,
            f"no saved tensor has L's shape {tuple(wanted)}{extra}; the shapes saved: {shapes}. "
            "forward must save the logsumexp L = m + log(l) of each query's scores with save_for_backward",
            0.25,
        )
    verdicts = [
        compare(
            "L",
            e.get("value"),
            ref,
            tol=tolerance(case),
            dtype=np.dtype(case.dtype),
            mistakes=l_mistakes(data, case.causal),
        )
        for e in found
    ]
    right = [v for v in verdicts if v.ok]
    return Item.from_verdicts(name, right[:1] or verdicts[:1], 0.25)


def direct_item(record: Record, case: Case, ref: dict[str, np.ndarray], label: str) -> Item:
    """Backward called directly returns (dq, dk, dv, None), each of its input's exact shape."""
    name = "backward called directly"
    error = step_error(record, "direct: apply", "direct")
    if error:
        return Item(name, False, _named(error) or error, 0.5)
    grads, problem = backward_returns(record["outputs"]["direct"], 4, label, FLASH_ARGS)
    if grads[3] is not None:
        return Item(
            name,
            False,
            f"backward returned {type(grads[3]).__name__} for is_causal. {GRADIENT_FOR_CAUSAL}",
            0.5,
        )
    if problem:
        return Item(name, False, problem, 0.5)
    verdicts = [
        compare(n, g, ref[n], tol=tolerance(case)) for n, g in zip(("dq", "dk", "dv"), grads, strict=False)
    ]
    return Item.from_verdicts(name, verdicts, 0.5)


def _with_pattern(item: Item, pattern: str | None) -> Item:
    if item.passed or pattern is None or "Likely mistake" in item.message:
        return item
    return Item(item.name, False, f"{item.message} Likely mistake: {pattern}", item.weight)


@grader(FLASH_ATTENTION)
def grade_flash_attention(evidence: Evidence) -> Report:
    """Grade: per case, o (0.5), L among the saved tensors (0.25), dq, dk, dv through autograd (0.5);
    backward called directly (0.5); inputs and upstream gradients unchanged (0.5); the Function contract
    (0.5 per item)."""
    report = report_for(FLASH_ATTENTION)
    seed, records = evidence["seed"], evidence["cases"]
    cases = flash_cases(seed)
    label = "FlashAttention"
    datas = {lab: case_inputs(case_seed(seed, i), c) for i, (lab, c) in enumerate(cases.items())}
    refs = {lab: attention_reference(datas[lab], c.causal) for lab, c in cases.items()}
    items: dict[str, list[Item]] = {}
    passed: dict[str, bool] = {}
    for lab, case in cases.items():
        record = records[lab]
        verdicts = case_verdicts(record, case, datas[lab], refs[lab], flash=True)
        steps = ("forward", "autograd")
        items[lab] = [
            values_item(f"o, {lab}", record, verdicts["o"], ("forward",), 0.5),
            l_item(lab, record, case, datas[lab], refs[lab]["L"]),
            values_item(f"dq, dk, dv, {lab}", record, verdicts["grads"], steps, 0.5),
        ]
        items[lab][2] = Item(
            items[lab][2].name, items[lab][2].passed, _named(items[lab][2].message) or "", 0.5
        )
        passed[lab] = items[lab][0].passed and items[lab][2].passed
    pattern = pattern_diagnosis(passed, cases)
    for lab in cases:
        for item in items[lab]:
            report.add(_with_pattern(item, pattern))
    contract = list(cases)[CONTRACT_CASE]
    report.add(direct_item(records[contract], cases[contract], refs[contract], label))
    originals = {
        lab: {"q": d["q"], "k": d["k"], "v": d["v"], "grad_output": d["g"]} for lab, d in datas.items()
    }
    report.add(tensors_unchanged_item(records, originals))
    for item in contract_items(records, label, {contract: originals[contract]}):
        report.add(item)
    add_notes(report, records.values())
    return report


__all__ = ["grade_flash_attention", "l_item", "direct_item", "Any"]
