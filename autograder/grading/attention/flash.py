"""The grader of ``check_flash_attention``: o, L and every gradient against the float64 reference, the
backward called directly, and the one Function contract."""

from __future__ import annotations

import numpy as np

from autograder.checks.attention import CONTRACT_CASE, FLASH_ARGS, FLASH_ATTENTION
from autograder.checks.attention_inputs import Case, case_inputs, flash_cases
from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence, case_seed
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.attention.common import (
    case_verdicts,
    inherit,
    pattern_diagnosis,
    tolerance,
    values_item,
)
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


def l_verdict(record: Record, case: Case, data: dict[str, np.ndarray], ref: np.ndarray) -> Verdict | str:
    """The logsumexp L, found among the tensors the hooks saw by its shape (*batch, Nq): its verdict, or
    why it cannot be judged."""
    error = step_error(record, "forward")
    if error:
        return error
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
        return (
            f"no saved tensor has L's shape {tuple(wanted)}{extra}; the shapes saved: {shapes}. "
            "forward must save the logsumexp L = m + log(l) of each query's scores with save_for_backward"
        )
    mistakes = l_mistakes(data, case.causal)
    verdicts = [
        compare("L", e.get("value"), ref, tol=tolerance(case), dtype=np.dtype(case.dtype), mistakes=mistakes)
        for e in found
    ]
    return next((v for v in verdicts if v.ok), verdicts[0])


def direct_item(
    record: Record, case: Case, ref: dict[str, np.ndarray], label: str, named: str | None
) -> Item:
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
        inherit(compare(n, g, ref[n], tol=tolerance(case)), named, "this case's o, L or gradients")
        for n, g in zip(("dq", "dk", "dv"), grads, strict=False)
    ]
    return Item.from_verdicts(name, verdicts, 0.5)


def _with_pattern(item: Item, pattern: str | None) -> Item:
    if item.passed or pattern is None or "Likely mistake" in item.message:
        return item
    return Item(item.name, False, f"{item.message} Likely mistake: {pattern}", item.weight)


def _case_items(
    lab: str, record: Record, case: Case, data: dict[str, np.ndarray], ref: dict[str, np.ndarray]
) -> tuple[list[Item], str | None]:
    """The items o, L and (dq, dk, dv) of one case, and the mistake named for it (or None). A value computed
    from a wrong one (L from o's mask, the gradients from L) is given the mistake named for that one."""
    verdicts = case_verdicts(record, case, data, ref, flash=True)
    l_found = l_verdict(record, case, data, ref["L"])
    if isinstance(l_found, str):
        l_entry = Item(f"L, {lab}", False, l_found, 0.25)
    else:
        l_found = inherit(l_found, next((v.likely for v in verdicts["o"] if v.likely), None), "o")
        l_entry = Item.from_verdicts(f"L, {lab}", [l_found], 0.25)
        verdicts["grads"] = [inherit(v, l_found.likely, "L") for v in verdicts["grads"]]
    grads = values_item(f"dq, dk, dv, {lab}", record, verdicts["grads"], ("forward", "autograd"), 0.5)
    grads = Item(grads.name, grads.passed, _named(grads.message) or "", 0.5)
    found = [values_item(f"o, {lab}", record, verdicts["o"], ("forward",), 0.5), l_entry, grads]
    return found, next((v.likely for v in [*verdicts["o"], *verdicts["grads"]] if v.likely), None)


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
    named: dict[str, str | None] = {}
    for lab, case in cases.items():
        items[lab], named[lab] = _case_items(lab, records[lab], case, datas[lab], refs[lab])
    passed = {lab: found[0].passed and found[2].passed for lab, found in items.items()}
    pattern = pattern_diagnosis(passed, cases)
    for lab in cases:
        for item in items[lab]:
            report.add(_with_pattern(item, pattern))
    contract = list(cases)[CONTRACT_CASE]
    report.add(direct_item(records[contract], cases[contract], refs[contract], label, named.get(contract)))
    originals = {
        lab: {"q": d["q"], "k": d["k"], "v": d["v"], "grad_output": d["g"]} for lab, d in datas.items()
    }
    report.add(tensors_unchanged_item(records, originals))
    for item in contract_items(records, label, {contract: originals[contract]}):
        report.add(item)
    add_notes(report, records.values())
    return report


__all__ = ["direct_item", "grade_flash_attention", "l_verdict"]
