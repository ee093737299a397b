"""The grader of notebook 04's LinearFunction: every gradient, every requires_grad mix, no bias."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch.nn.functional as F

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence, NotAnArray
from autograder.checks.custom_functions.linear_function import (
    GRAD_NAMES,
    LINEAR_FUNCTION,
    MAIN,
    MIXED,
    NONE_BIAS,
    OMITTED,
    SINGLE,
    SIZE_ONE,
    linear_function_inputs,
)
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference, report_for
from autograder.grading.custom_functions.items import (
    autograd_verdicts,
    ctx_item,
    grads_item,
    reference_jacobians,
    through_autograd_item,
)
from autograder.grading.function_contract import (
    contract_items,
    needs_input_grad_diagnosis,
    wrong_order,
    wrong_order_message,
)
from autograder.grading.toolkit import (
    SQUEEZED_BIAS,
    add_notes,
    backward_returns,
    step_error,
    tensors_unchanged_item,
)


def _linear_reference(data: dict[str, Any]) -> dict[str, np.ndarray]:
    b = data["b"] if data["bias"] == "bias" else np.zeros(data["W"].shape[0])
    ref = reference.linear(data["x"], data["W"], b, data["grad_output"])
    ones = reference.linear(data["x"], data["W"], b, np.ones_like(data["grad_output"]))
    ref.update({f"sum_{k}": ones[k] for k in ("dx", "dW", "db")})
    return ref


def _linear_mistakes(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    x, W, g = data["x"], data["W"], data["grad_output"]
    ones = np.ones_like(g)
    mistakes: dict[str, dict[str, Any]] = {
        "out": {"the bias is missing": x @ W.T},
        "grad_input": {"grad_output is ignored (computed as if it were all ones)": ones @ W},
        "grad_weight": {
            "grad_output is ignored (computed as if it were all ones)": ones.T @ x,
            "transposed: input.t().mm(grad_output) is (in, out); the weight is (out, in), so "
            "grad_output.t().mm(input)": x.T @ g,
        },
        "grad_bias": {
            "grad_output returned without .sum(0): autograd would silently sum it for you, so .backward() "
            "and gradcheck pass, but backward must return a gradient of the bias's shape (out,)": g,
            "summed with keepdim: shape (1, out), where the bias is (out,)": g.sum(0, keepdims=True),
            "summed over axis 1 instead of the batch axis 0": g.sum(1),
        },
    }
    if g.shape[0] == 1:  # one row: grad_output itself and its keepdim sum are the same (1, out) array
        mistakes["grad_bias"] = {
            "a (1, out) gradient, which with N = 1 is both grad_output returned without .sum(0) and "
            ".sum(0, keepdim=True); backward must return the bias's shape (out,)": g,
            **{k: v for k, v in mistakes["grad_bias"].items() if k.startswith("summed over axis 1")},
        }
    if g.shape[1] == 1:  # the line of older PyTorch docs, right for every out_features but 1
        mistakes["grad_bias"][SQUEEZED_BIAS] = g.sum(0).squeeze(0)
    return mistakes


def _expected_direct(data: dict[str, Any], ref: dict[str, np.ndarray]) -> list[np.ndarray | None]:
    """One entry per input of forward (two for ``apply(x, W)``), None where the gradient must be None."""
    rx, rw, rb = data["requires"]
    has_bias = data["bias"] == "bias"
    expected = [
        ref["dx"] if rx else None,
        ref["dW"] if rw else None,
        ref["db"] if (has_bias and rb) else None,
    ]
    return expected[:2] if data["bias"] == "omitted" else expected


def _linear_cases_item(
    name: str,
    weight: float,
    labels: Sequence[str],
    cases: dict[str, Any],
    inputs: dict[str, Any],
    refs: dict[str, Any],
) -> Item | None:
    """Backward called directly (every needed gradient's exact shape and value), then through autograd,
    in each case of ``labels``: the first failure, as an item naming its case, or None when all pass.
    Gradients that are not needed (None expected) are not looked at: needs_input_grad has its item."""
    for label in labels:
        data, ref, record = inputs[label], refs[label], cases[label]
        n = data["x"].shape[0]
        expected = _expected_direct(data, ref)
        needed = [i for i, e in enumerate(expected) if e is not None]
        item = grads_item(
            name,
            record,
            expected,
            GRAD_NAMES,
            "LinearFunction",
            weight,
            _linear_mistakes(data),
            only=needed,
            batch_size=n,
        )
        if not item.passed:
            return Item(name, False, f"when {label}: {item.message}", weight)
        wanted = {"autograd": {"x": ref["dx"], "W": ref["dW"], "b": ref["db"]}}
        err, verdicts = autograd_verdicts(record, wanted, batch_size=n)
        if err or not all(v.ok for v in verdicts):
            text = err or next(v.message() for v in verdicts if not v.ok)
            return Item(name, False, f"when {label}: {text}", weight)
    return None


def _mixed_values_item(cases: dict[str, Any], inputs: dict[str, Any], refs: dict[str, Any]) -> Item:
    """The needed gradients are right in every mixed requires_grad case (unneeded ones not looked at)."""
    name, weight = "mixed requires_grad", 1.0
    failure = _linear_cases_item(name, weight, MIXED, cases, inputs, refs)
    return failure or Item(name, True, "right gradients when only some inputs require grad", weight)


def _size_one_item(cases: dict[str, Any], inputs: dict[str, Any], refs: dict[str, Any]) -> Item:
    """in_features = 1 and out_features = 1: every gradient's exact shape from backward called directly,
    then through autograd (which refuses a 0-d bias gradient there)."""
    name, weight = "in = 1, out = 1", 0.5
    failure = _linear_cases_item(name, weight, SIZE_ONE, cases, inputs, refs)
    return failure or Item(
        name, True, "exact shapes and values with one input feature and with one output feature", weight
    )


def _needs_input_grad_item(cases: dict[str, Any], inputs: dict[str, Any], order: list[int] | None) -> Item:
    """backward returns None for every input whose ctx.needs_input_grad entry is False, judged by the
    Function contract's rule (:func:`needs_input_grad_diagnosis`) over the cases where one input alone
    requires grad, then the case where two do; with ``order`` (gradients returned in the wrong order),
    the entries are read in the order the learner meant."""
    name, weight = "needs_input_grad", 0.5
    names = [n.removeprefix("grad_") for n in GRAD_NAMES]
    computed: dict[str, set[str]] = {}
    several: list[tuple[str, list[Any], tuple[bool, ...]]] = []
    for label in MIXED:
        record = cases[label]
        error = step_error(record, "forward", "direct")
        if error:
            return Item(name, False, f"not checked: when {label}: {error}", weight)
        grads, _ = backward_returns(record["outputs"]["direct"], 3, "LinearFunction", list(GRAD_NAMES))
        if order is not None:
            grads = [grads[i] for i in order]
        requires = inputs[label]["requires"]
        if sum(requires) == 1:
            computed[names[requires.index(True)]] = {names[i] for i, g in enumerate(grads) if g is not None}
        else:
            several.append((label, grads, requires))
    problem = needs_input_grad_diagnosis(computed, names)
    if problem:
        return Item(name, False, f"{problem} (a whole matrix product wasted for a frozen weight).", weight)
    for label, grads, requires in several:
        for i, needed in enumerate(requires):
            if not needed and grads[i] is not None:
                return Item(
                    name,
                    False,
                    f"when {label}, backward computed {GRAD_NAMES[i]} although ctx.needs_input_grad[{i}] is "
                    f"False: compute each gradient only when it is asked for (if ctx.needs_input_grad[{i}]: "
                    "...), else return None; it is wasted work, a whole matrix product for a frozen weight.",
                    weight,
                )
    return Item(name, True, "None exactly for the inputs that need no gradient", weight)


def _no_bias_item(cases: dict[str, Any], inputs: dict[str, Any], refs: dict[str, Any]) -> Item:
    name, weight = "no bias", 1.0
    for label in (OMITTED, NONE_BIAS):
        data, ref, record = inputs[label], refs[label], cases[label]
        error = step_error(record, "forward")
        if error:
            return Item(name, False, f"{label}: {error}", weight)
        verdict = compare("out", record["outputs"].get("out"), data["x"] @ data["W"].T)
        if not verdict.ok:
            return Item(name, False, f"{label}: {verdict.message()}", weight)
        # apply(x, W) has two inputs (a trailing None is accepted, as PyTorch does); apply(x, W, None) three
        item = grads_item(
            name,
            record,
            _expected_direct(data, ref),
            GRAD_NAMES,
            "LinearFunction",
            weight,
            _linear_mistakes(data),
        )
        if not item.passed:
            return Item(name, False, f"{label}: {item.message}", weight)
        err, verdicts = autograd_verdicts(record, {"autograd": {"x": ref["dx"], "W": ref["dW"]}})
        if err or not all(v.ok for v in verdicts):
            text = err or next(v.message() for v in verdicts if not v.ok)
            return Item(name, False, f"{label}: {text}", weight)
    return Item(name, True, "apply(x, W) and apply(x, W, None) both work, with grad_bias None", weight)


def _linear_ctx_item(record: dict[str, Any]) -> Item:
    item = ctx_item(record, "LinearFunction")
    if not item.passed:
        return item
    saved = record["outputs"].get("saved")
    if isinstance(saved, NotAnArray) or not any(isinstance(s, np.ndarray) for s in saved or []):
        return Item(
            item.name,
            False,
            "ctx.saved_tensors is empty: save input and weight (and bias) with ctx.save_for_backward.",
            item.weight,
        )
    return item


@grader(LINEAR_FUNCTION)
def grade_linear_function(evidence: Evidence) -> Report:
    """Grade recorded evidence: forward (1); grad_input, grad_weight, grad_bias from backward called
    directly (1 each, exact shapes); through autograd, .sum() and float64 Jacobian (1); no bias both
    ways (1); N = 1 (0.5); in = 1 and out = 1 (0.5); mixed requires_grad (1); needs_input_grad (0.5);
    save_for_backward (0.5);
    inputs unchanged (0.5)."""
    report = report_for(LINEAR_FUNCTION)
    seed, cases = evidence["seed"], evidence["cases"]
    inputs = linear_function_inputs(seed)
    refs = {label: _linear_reference(data) for label, data in inputs.items()}
    record, data, ref = cases[MAIN], inputs[MAIN], refs[MAIN]
    mistakes = _linear_mistakes(data)

    error = step_error(record, "forward")
    if error:
        report.add(Item("forward", False, error, 1.0))
    else:
        n = data["x"].shape[0]
        verdict = compare(
            "out", record["outputs"].get("out"), ref["out"], mistakes=mistakes["out"], batch_size=n
        )
        if verdict.problem == "shape" and verdict.likely is None:
            verdict = Verdict(
                verdict.name,
                False,
                "shape",
                verdict.detail,
                "input.mm(weight.t()) is (N, out): is the .t() missing?",
            )
        report.add(Item.from_verdicts("forward", [verdict]))

    expected = _expected_direct(data, ref)
    order = _returned_order(record, expected)
    for i, grad in enumerate(GRAD_NAMES):
        item = grads_item(
            grad,
            record,
            expected,
            GRAD_NAMES,
            "LinearFunction",
            1.0,
            mistakes,
            only=[i],
            batch_size=data["x"].shape[0],
        )
        if item.passed:
            item = Item(
                grad,
                True,
                f"{grad}: exact shape {tuple(expected[i].shape)} and values, from backward called directly",
            )
        report.add(item)

    wanted = {
        "autograd": {"x": ref["dx"], "W": ref["dW"], "b": ref["db"]},
        "sum": {"x": ref["sum_dx"], "W": ref["sum_dW"], "b": ref["sum_db"]},
    }
    jac = reference_jacobians(F.linear, {"x": data["x"], "W": data["W"], "b": data["b"]})
    wanted["jacobian"] = jac
    report.add(through_autograd_item(record, wanted, "every .grad", batch_size=data["x"].shape[0]))
    report.add(_no_bias_item(cases, inputs, refs))

    single = cases[SINGLE]
    item = grads_item(
        "N = 1",
        single,
        _expected_direct(inputs[SINGLE], refs[SINGLE]),
        GRAD_NAMES,
        "LinearFunction",
        0.5,
        _linear_mistakes(inputs[SINGLE]),
    )
    if item.passed:
        verdict = compare("out", single["outputs"].get("out"), refs[SINGLE]["out"], batch_size=1)
        item = Item.from_verdicts("N = 1", [verdict], 0.5)
    report.add(item)
    report.add(_size_one_item(cases, inputs, refs))
    report.add(_mixed_values_item(cases, inputs, refs))
    report.add(_needs_input_grad_item(cases, inputs, order))
    report.add(_linear_ctx_item(record))
    originals = {
        label: {"x": d["x"], "W": d["W"], "b": d["b"], "grad_output": d["grad_output"]}
        for label, d in inputs.items()
    }
    report.add(tensors_unchanged_item(cases, originals))
    ran = {k: data[k] for k in ("x", "W", "b", "grad_output")}
    for item in contract_items({MAIN: record}, "LinearFunction", {MAIN: ran}, order=order):
        report.add(item)
    if order is not None:
        _name_the_order(report, order)
    add_notes(report, cases.values())
    return report


def _returned_order(record: dict[str, Any], expected: list[np.ndarray | None]) -> list[int] | None:
    """The permutation of a backward whose right gradients are returned in the wrong order, else None."""
    if step_error(record, "forward", "direct"):
        return None
    direct = record["outputs"]["direct"]
    grads, _ = backward_returns(direct, len(expected), "LinearFunction", list(GRAD_NAMES))
    return wrong_order(grads, expected, [n.removeprefix("grad_") for n in GRAD_NAMES])


#: Items whose failure the order of backward's return value cannot explain.
_NOT_ABOUT_THE_ORDER = ("forward", "inputs unchanged", "tensors via save_for_backward")


def _name_the_order(report: Report, order: list[int]) -> None:
    """Each failing gradient item says what explains its failure: the order (its own words kept after)."""
    said = wrong_order_message(order, [n.removeprefix("grad_") for n in GRAD_NAMES], "LinearFunction")
    for index, item in enumerate(report.items):
        if not item.passed and item.name not in _NOT_ABOUT_THE_ORDER:
            report.items[index] = Item(item.name, False, f"{said}. (Seen: {item.message})", item.weight)
