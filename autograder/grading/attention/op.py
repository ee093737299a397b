"""The grader of ``check_attention_op``: values and gradients, opcheck's verdicts, the fake kernel, and
``torch.compile(fullgraph=True)`` (backend ``aot_eager``)."""

from __future__ import annotations

from typing import Any

from autograder.checks.attention import ATTENTION_OP, op_cases
from autograder.checks.attention_inputs import case_inputs
from autograder.checks.calling import NAME_LENGTH
from autograder.checks.compare import compare
from autograder.checks.core import Evidence, case_seed
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.attention.common import case_verdicts, tolerance, values_item
from autograder.grading.attention.reference import attention_reference
from autograder.grading.toolkit import Record, add_notes, step_error


def opcheck_item(record: Record) -> Item:
    """Every test utility of ``torch.library.opcheck`` passed; the failing ones named."""
    name = "torch.library.opcheck"
    error = step_error(record, "opcheck")
    if error:
        return Item(name, False, error, 1.0)
    results = record["outputs"]["opcheck"]
    failed = {util: message for util, message in results.items() if message}
    if failed:
        util, message = next(iter(failed.items()))
        return Item(name, False, f"{', '.join(failed)} failed; {util}: {message}", 1.0)
    return Item(name, True, f"{', '.join(results)} passed", 1.0)


def fake_item(record: Record) -> Item:
    """The fake kernel gives the real kernel's shape, dtype and strides."""
    name = "fake kernel"
    error = step_error(record, "fake")
    if error:
        return Item(name, False, error, 0.5)
    real, fake = record["outputs"]["fake"]["real"], record["outputs"]["fake"]["fake"]
    for key, what in (("shape", "shape"), ("dtype", "dtype"), ("stride", "strides")):
        if real[key] != fake[key]:
            return Item(
                name,
                False,
                f"the fake kernel's output has {what} {fake[key]}, the real kernel's {real[key]}. "
                f"Likely mistake: the function given to register_fake makes its output with the wrong "
                f"{what}; it must return a tensor like the real output (torch.empty_like(q) for o), "
                "without computing it",
                0.5,
            )
    return Item(name, True, f"shape, dtype and strides of the real output ({real['shape']})", 0.5)


def compile_item(record: Record, ref: dict[str, Any], evidence: Evidence) -> Item:
    """``torch.compile(fullgraph=True, backend="aot_eager")`` of a module calling the operator: values
    and gradients as without it; a graph break named with its cause (and, where the object is not an
    operator at all, that this is why compile traced into its Python code)."""
    name = "torch.compile(fullgraph=True)"
    error = step_error(record, "compile")
    if error and evidence.get("custom_op") is False:
        # the learner's names, as the kernel reported them: bounded again here (evidence is untrusted)
        op, kind = (
            str(evidence.get(k, d))[:NAME_LENGTH] for k, d in (("op", "attention_op"), ("kind", "function"))
        )
        what = f"{op} is a {kind}"
        error += (
            f". Likely mistake: {what}, not the operator torch.library.custom_op returns, so "
            "torch.compile traces its Python code and meets what it cannot trace; an operator is one "
            "opaque node of the graph"
        )
    if error:
        return Item(name, False, error, 1.0)
    got = record["outputs"]["compiled"]
    verdicts = [compare("o", got["out"], 2.0 * ref["out"])]
    verdicts += [compare(n, got[n], 2.0 * ref[n]) for n in ("dq", "dk", "dv")]
    return Item.from_verdicts(name, verdicts, 1.0)


@grader(ATTENTION_OP)
def grade_attention_op(evidence: Evidence) -> Report:
    """Grade: per case, o and dq, dk, dv (0.5 each); opcheck (1); the fake kernel (0.5); torch.compile (1)."""
    report = report_for(ATTENTION_OP)
    seed, records = evidence["seed"], evidence["cases"]
    cases = op_cases(seed)
    first = None
    for index, (label, case) in enumerate(cases.items()):
        record, data = records[label], case_inputs(case_seed(seed, index), case)
        ref = attention_reference(data, case.causal)
        verdicts = case_verdicts(record, case, data, ref)
        report.add(values_item(f"o, {label}", record, verdicts["o"], ("forward",), 0.5))
        report.add(
            values_item(f"dq, dk, dv, {label}", record, verdicts["grads"], ("forward", "autograd"), 0.5)
        )
        if first is None:
            first = (record, ref)
    record, ref = first
    for item in (opcheck_item(record), fake_item(record), compile_item(record, ref, evidence)):
        report.add(item)
    add_notes(report, records.values())
    return report


__all__ = ["grade_attention_op", "tolerance"]
