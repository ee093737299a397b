"""The grader of notebook 04's LinearFunction: every gradient, every requires_grad mix, no bias."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
from autograder.checks.functions import FunctionRecord
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference
from autograder.grading.custom_functions.items import (
    ExpectedGrads,
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
    SAVED_OUTPUT,
    SQUEEZED_BIAS,
    ItemOf,
    backward_returns,
    explain_linear_forward_errors,
    judge,
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
            SAVED_OUTPUT: g.T @ (x @ W.T + (data["b"] if data["bias"] == "bias" else 0.0)),
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


@dataclass(frozen=True)
class _Run:
    """What every item reads: the recorded cases, their inputs remade from the seed, their references,
    and the order of a backward that returns the right gradients in the wrong order (else None)."""

    cases: dict[str, FunctionRecord]
    inputs: dict[str, dict[str, Any]]
    refs: dict[str, dict[str, np.ndarray]]
    order: list[int] | None

    @classmethod
    def of(cls, evidence: Evidence) -> _Run:
        inputs = linear_function_inputs(evidence["seed"])
        refs = {label: _linear_reference(data) for label, data in inputs.items()}
        cases = explain_linear_forward_errors(evidence["cases"], inputs)
        order = _returned_order(cases[MAIN], _expected_direct(inputs[MAIN], refs[MAIN]))
        return cls(cases, inputs, refs, order)

    def grads_item(self, name: str, label: str, weight: float, **options: Any) -> Item:
        """Backward called directly in case ``label``: every gradient's exact shape and value."""
        data = self.inputs[label]
        expected = _expected_direct(data, self.refs[label])
        return grads_item(
            name,
            self.cases[label],
            expected,
            GRAD_NAMES,
            "LinearFunction",
            weight,
            _linear_mistakes(data),
            **options,
        )


def _autograd_problem(
    record: FunctionRecord, wanted: ExpectedGrads, batch_size: int | None = None
) -> str | None:
    """The first wrong ``.grad`` through autograd (or the error that stopped it), else None."""
    err, verdicts = autograd_verdicts(record, wanted, batch_size=batch_size)
    return err or next((v.message() for v in verdicts if not v.ok), None)


def _cases_failure(run: _Run, name: str, weight: float, labels: Sequence[str]) -> Item | None:
    """Backward called directly (every needed gradient's exact shape and value), then through autograd,
    in each case of ``labels``: the first failure, as an item naming its case, or None when all pass.
    Gradients that are not needed (None expected) are not looked at: needs_input_grad has its item."""
    for label in labels:
        ref, n = run.refs[label], run.inputs[label]["x"].shape[0]
        needed = [i for i, e in enumerate(_expected_direct(run.inputs[label], ref)) if e is not None]
        item = run.grads_item(name, label, weight, only=needed, batch_size=n)
        wanted = {"autograd": {"x": ref["dx"], "W": ref["dW"], "b": ref["db"]}}
        problem = item.message if not item.passed else _autograd_problem(run.cases[label], wanted, n)
        if problem:
            return Item(name, False, f"when {label}: {problem}", weight)
    return None


def _mixed_values_item(run: _Run) -> Item:
    """The needed gradients are right in every mixed requires_grad case (unneeded ones not looked at)."""
    name, weight = "mixed requires_grad", 1.0
    failure = _cases_failure(run, name, weight, MIXED)
    return failure or Item(name, True, "right gradients when only some inputs require grad", weight)


def _size_one_item(run: _Run) -> Item:
    """in_features = 1 and out_features = 1: every gradient's exact shape from backward called directly,
    then through autograd (which refuses a 0-d bias gradient there)."""
    name, weight = "in = 1, out = 1", 0.5
    failure = _cases_failure(run, name, weight, SIZE_ONE)
    return failure or Item(
        name, True, "exact shapes and values with one input feature and with one output feature", weight
    )


def _mixed_returns(run: _Run) -> dict[str, list[Any]] | str:
    """What backward returned in each mixed requires_grad case, read in the order the learner meant
    (with ``run.order``), or the first error that stopped one."""
    returned = {}
    for label in MIXED:
        error = step_error(run.cases[label], "forward", "direct")
        if error:
            return f"not checked: when {label}: {error}"
        direct = run.cases[label]["outputs"]["direct"]
        grads, _ = backward_returns(direct, 3, "LinearFunction", list(GRAD_NAMES))
        returned[label] = grads if run.order is None else [grads[i] for i in run.order]
    return returned


def _needs_input_grad_item(run: _Run) -> Item:
    """backward returns None for every input whose ctx.needs_input_grad entry is False, judged by the
    Function contract's rule (:func:`needs_input_grad_diagnosis`) over the cases where one input alone
    requires grad, then for each case where two do."""
    name, weight = "needs_input_grad", 0.5
    returned = _mixed_returns(run)
    if isinstance(returned, str):
        return Item(name, False, returned, weight)
    names = [n.removeprefix("grad_") for n in GRAD_NAMES]
    requires = {label: run.inputs[label]["requires"] for label in MIXED}
    computed = {
        names[r.index(True)]: {names[i] for i, g in enumerate(returned[label]) if g is not None}
        for label, r in requires.items()
        if sum(r) == 1
    }
    problem = needs_input_grad_diagnosis(computed, names)
    if problem:
        return Item(name, False, f"{problem} (a whole matrix product wasted for a frozen weight).", weight)
    for label, r in requires.items():
        wasted = [
            i for i, needed in enumerate(r) if sum(r) != 1 and not needed and returned[label][i] is not None
        ]
        if wasted:
            return Item(name, False, f"when {label}, {_wasted(wasted[0])}", weight)
    return Item(name, True, "None exactly for the inputs that need no gradient", weight)


def _wasted(i: int) -> str:
    return (
        f"backward computed {GRAD_NAMES[i]} although ctx.needs_input_grad[{i}] is False: compute each "
        f"gradient only when it is asked for (if ctx.needs_input_grad[{i}]: ...), else return None; it is "
        "wasted work, a whole matrix product for a frozen weight."
    )


def _no_bias_problem(run: _Run, label: str) -> str | None:
    """Why apply(x, W) or apply(x, W, None) (``label``) is wrong: forward, backward called directly (two
    inputs for the first, a trailing None accepted as PyTorch does; three for the second), autograd."""
    data, ref, record = run.inputs[label], run.refs[label], run.cases[label]
    error = step_error(record, "forward")
    if error:
        return error
    verdict = compare("out", record["outputs"].get("out"), data["x"] @ data["W"].T)
    if not verdict.ok:
        return verdict.message()
    item = run.grads_item("no bias", label, 1.0)
    if not item.passed:
        return item.message
    return _autograd_problem(record, {"autograd": {"x": ref["dx"], "W": ref["dW"]}})


def _no_bias_item(run: _Run) -> Item:
    """The bias omitted both ways (1)."""
    for label in (OMITTED, NONE_BIAS):
        problem = _no_bias_problem(run, label)
        if problem:
            return Item("no bias", False, f"{label}: {problem}", 1.0)
    return Item("no bias", True, "apply(x, W) and apply(x, W, None) both work, with grad_bias None", 1.0)


def _linear_ctx_item(run: _Run) -> Item:
    """Tensors kept with save_for_backward, and something kept there (0.5)."""
    record = run.cases[MAIN]
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


def _forward_item(run: _Run) -> Item:
    """The main case's output, a shape mistake named as a missing .t() (1)."""
    record, data, ref = run.cases[MAIN], run.inputs[MAIN], run.refs[MAIN]
    error = step_error(record, "forward")
    if error:
        return Item("forward", False, error, 1.0)
    mistakes, n = _linear_mistakes(data)["out"], data["x"].shape[0]
    verdict = compare("out", record["outputs"].get("out"), ref["out"], mistakes=mistakes, batch_size=n)
    if verdict.problem == "shape" and verdict.likely is None:
        missing_t = "input.mm(weight.t()) is (N, out): is the .t() missing?"
        verdict = Verdict(verdict.name, False, "shape", verdict.detail, missing_t)
    return Item.from_verdicts("forward", [verdict])


def _gradient_items(run: _Run) -> list[Item]:
    """grad_input, grad_weight and grad_bias from backward called directly in the main case (1 each)."""
    expected, n = _expected_direct(run.inputs[MAIN], run.refs[MAIN]), run.inputs[MAIN]["x"].shape[0]
    items = []
    for i, grad in enumerate(GRAD_NAMES):
        item = run.grads_item(grad, MAIN, 1.0, only=[i], batch_size=n)
        if item.passed:
            shape = tuple(expected[i].shape)
            item = Item(grad, True, f"{grad}: exact shape {shape} and values, from backward called directly")
        items.append(item)
    return items


def _through_autograd_item(run: _Run) -> Item:
    """Every .grad after .backward(grad_output) and .sum().backward(), and the float64 Jacobian (1)."""
    data, ref = run.inputs[MAIN], run.refs[MAIN]
    wanted = {
        "autograd": {"x": ref["dx"], "W": ref["dW"], "b": ref["db"]},
        "sum": {"x": ref["sum_dx"], "W": ref["sum_dW"], "b": ref["sum_db"]},
        "jacobian": reference_jacobians(F.linear, {"x": data["x"], "W": data["W"], "b": data["b"]}),
    }
    return through_autograd_item(run.cases[MAIN], wanted, "every .grad", batch_size=data["x"].shape[0])


def _single_item(run: _Run) -> Item:
    """N = 1: backward called directly, then the output (0.5)."""
    item = run.grads_item("N = 1", SINGLE, 0.5)
    if not item.passed:
        return item
    verdict = compare("out", run.cases[SINGLE]["outputs"].get("out"), run.refs[SINGLE]["out"], batch_size=1)
    return Item.from_verdicts("N = 1", [verdict], 0.5)


def _unchanged_item(run: _Run) -> Item:
    """No input and no upstream gradient changed in place, in any case (0.5)."""
    keys = ("x", "W", "b", "grad_output")
    originals = {label: {k: d[k] for k in keys} for label, d in run.inputs.items()}
    return tensors_unchanged_item(run.cases, originals)


def _contract_items(run: _Run) -> list[Item]:
    """The Function contract's items on the main case."""
    ran = {k: run.inputs[MAIN][k] for k in ("x", "W", "b", "grad_output")}
    return contract_items({MAIN: run.cases[MAIN]}, "LinearFunction", {MAIN: ran}, order=run.order)


#: What is checked, in order.
ITEMS: tuple[ItemOf[_Run], ...] = (
    _forward_item,
    _gradient_items,
    _through_autograd_item,
    _no_bias_item,
    _single_item,
    _size_one_item,
    _mixed_values_item,
    _needs_input_grad_item,
    _linear_ctx_item,
    _unchanged_item,
    _contract_items,
)


@grader(LINEAR_FUNCTION)
def grade_linear_function(evidence: Evidence) -> Report:
    """Grade recorded evidence: forward (1); grad_input, grad_weight, grad_bias from backward called
    directly (1 each, exact shapes); through autograd, .sum() and float64 Jacobian (1); no bias both
    ways (1); N = 1 (0.5); in = 1 and out = 1 (0.5); mixed requires_grad (1); needs_input_grad (0.5);
    save_for_backward (0.5); inputs unchanged (0.5); the Function contract. Gradients returned in the
    wrong order are named as such in every item they fail."""
    run = _Run.of(evidence)
    report = judge(LINEAR_FUNCTION, ITEMS, run, run.cases.values())
    if run.order is not None:
        _name_the_order(report, run.order)
    return report


def _returned_order(record: FunctionRecord, expected: list[np.ndarray | None]) -> list[int] | None:
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
