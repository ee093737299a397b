"""The graders of notebook 04's checks (see :mod:`autograder.checks.custom_functions` for their inputs).

The evidence of a Function is the case records of :mod:`autograder.checks.functions`; every item
reads them through :func:`~autograder.grading.toolkit.step_error` (each step blamed for its own
failure) and a backward's return value through
:func:`~autograder.grading.toolkit.backward_returns` (the one rule for what a correct answer is).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence, NotAnArray
from autograder.checks.custom_functions import (
    BACKWARD_BY_HAND,
    BY_HAND_CASES,
    ELEMENTWISE,
    EXP,
    GRAD_NAMES,
    LINEAR_FUNCTION,
    LINEAR_MODULE,
    MAIN,
    MAX_JACOBIAN_ERROR,
    MIXED,
    MUL_CONSTANT,
    MY_RELU,
    NONE_BIAS,
    OMITTED,
    SINGLE,
    SIZE_ONE,
    TRAIN_SPIRAL,
    by_hand_inputs,
    elementwise_inputs,
    linear_function_inputs,
    module_inputs,
    spiral_recipe,
)
from autograder.checks.jacobian_layers import (
    DTYPES,
    PLANTED,
    jacobian_inputs,
    planted_error,
    planted_layer,
    tanh_linear,
)
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import FLOAT64, JACOBIAN_FLOAT32, JACOBIAN_FLOAT64
from autograder.grading import grader, reference, report_for
from autograder.grading.function_contract import (
    contract_items,
    ctx_attributes_message,
    needs_input_grad_diagnosis,
    wrong_order,
    wrong_order_message,
)
from autograder.grading.toolkit import (
    SQUEEZED_BIAS,
    add_notes,
    backward_returns,
    describe,
    error_or_verdicts,
    step_error,
    tensors_unchanged_item,
)
from autograder.grading.training import loop_difference
from backprop_utils.data import make_spiral

#: The message fragment of PyTorch's version-counter error: a tensor saved with save_for_backward
#: was modified in place before backward unpacked it.
INPLACE_ERROR = "modified by an inplace operation"

JACOBIAN_EPS = 1e-6


def reference_jacobians(
    fn: Callable[..., torch.Tensor], inputs: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The float64 Jacobian of ``fn(*inputs)`` with respect to each input, as (out.numel, in.numel)."""
    tensors = tuple(torch.tensor(v, dtype=torch.float64) for v in inputs.values())
    out = fn(*tensors)
    jac = torch.autograd.functional.jacobian(fn, tensors)
    return {
        k: j.reshape(out.numel(), t.numel()).numpy().copy()
        for k, j, t in zip(inputs, jac, tensors, strict=True)
    }


def _grads_item(
    name: str,
    record: dict[str, Any],
    expected: Sequence[np.ndarray | None],
    names: Sequence[str],
    label: str,
    weight: float,
    mistakes: dict[str, dict[str, Any]] | None = None,
    only: Sequence[int] | None = None,
    batch_size: int | None = None,
) -> Item:
    """Backward called directly: one entry per forward input, each the exact shape and value expected.

    ``expected`` has one entry per input of forward, None where the gradient must be None. ``only``
    restricts the item to some entries (the others may be None or anything). The return value is
    read as PyTorch reads it (:func:`backward_returns`): an item fails on a wrong count only when
    the count concerns the entries it judges.
    """
    error = step_error(record, "forward", "direct")
    if error:
        return Item(name, False, error, weight)
    n = len(expected)
    indices = list(range(n) if only is None else only)
    grads, problem = backward_returns(record["outputs"]["direct"], n, label, list(names))
    given = len(record["outputs"]["direct"]["grads"])
    if problem and (only is None or given > n or any(i >= given for i in indices)):
        return Item(name, False, problem, weight)
    for i in indices:
        want, got = expected[i], grads[i]
        if want is None:
            if got is not None:
                return Item(
                    name,
                    False,
                    f"{names[i]} should be None (its input has no gradient), but backward returned "
                    f"{describe(got)}: a non-tensor input or one that needs no gradient gets None.",
                    weight,
                )
            continue
        if got is None:
            return Item(name, False, f"{names[i]} is None; expected a tensor of shape {want.shape}.", weight)
        verdict = compare(names[i], got, want, mistakes=(mistakes or {}).get(names[i]), batch_size=batch_size)
        if not verdict.ok:
            return Item(name, False, verdict.message(), weight)
    shapes = ", ".join(
        f"{names[i]} {tuple(expected[i].shape)}" if expected[i] is not None else f"{names[i]} None"
        for i in indices
    )
    return Item(name, True, f"exact shapes and values: {shapes}", weight)


def _autograd_verdicts(
    record: dict[str, Any],
    expected: dict[str, np.ndarray],
    stages: Sequence[str],
    mistakes: dict | None = None,
    batch_size: int | None = None,
) -> tuple[str | None, list[Verdict]]:
    """Compare ``.grad`` after ``.backward()`` / ``.sum().backward()`` and the Jacobian with the reference."""
    verdicts = []
    forward_error = step_error(record, "forward")
    if forward_error:  # the forward's own failure, never reported as a failure of backward
        return forward_error, []
    for stage in stages:
        error = step_error(record, stage)
        if error:
            what = {"sum": "out.sum().backward()", "autograd": "out.backward(grad_output)"}.get(stage, stage)
            return f"{what} failed: {error}", []
        if stage == "jacobian":
            for k, j in record["outputs"]["jacobian"].items():
                verdicts.append(
                    compare(
                        f"the Jacobian with respect to {k}",
                        j,
                        expected[f"jacobian:{k}"],
                        batch_size=batch_size,
                    )
                )
        else:
            earlier_ok = all(v.ok for v in verdicts)
            for k, g in record["outputs"][stage].items():
                title = f"{k}.grad after out.sum().backward()" if stage == "sum" else f"{k}.grad"
                verdict = compare(
                    title,
                    g,
                    expected[f"{stage}:{k}"],
                    mistakes=(mistakes or {}).get(k),
                    batch_size=batch_size,
                )
                if stage == "sum" and not verdict.ok and earlier_ok:
                    # right with a random upstream gradient, wrong with .sum()'s: the difference is
                    # that .sum() passes an expanded tensor whose elements share one memory location
                    verdict = dataclasses.replace(
                        verdict,
                        likely="an in-place write into grad_output: out.sum().backward() passes an "
                        "expanded all-ones tensor whose elements share one memory location, so writing "
                        "into it changes every element; compute a new tensor instead",
                    )
                verdicts.append(verdict)
    return None, verdicts


def _verdicts_item(
    name: str, error: str | None, verdicts: list[Verdict], weight: float, ok_text: str
) -> Item:
    item = error_or_verdicts(name, error, verdicts, weight)
    return Item(name, True, ok_text, weight) if item.passed else item


def _through_autograd_item(
    record: dict[str, Any],
    expected: dict[str, np.ndarray],
    what: str,
    mistakes: dict | None = None,
    batch_size: int | None = None,
) -> Item:
    """The "through autograd" item (1): gradients for a random upstream, for ``.sum()``, and the Jacobian."""
    err, verdicts = _autograd_verdicts(
        record, expected, ("autograd", "sum", "jacobian"), mistakes, batch_size
    )
    text = f"{what} after .backward(grad_output) and after .sum().backward(), and the float64 Jacobian"
    return _verdicts_item("through autograd", err, verdicts, 1.0, text)


def _elementwise_reference(kind: str, data: dict[str, Any]) -> dict[str, np.ndarray]:
    """out, the gradient of x for grad_output, and the local derivative, by torch autograd in float64."""
    c = data["constant"]
    fn = {"mul_constant": lambda t: t * c, "exp": torch.exp, "my_relu": torch.relu}[kind]
    x = torch.tensor(data["x"], dtype=torch.float64, requires_grad=True)
    out = fn(x)
    (grad,) = torch.autograd.grad(out, x, torch.tensor(data["grad_output"]))
    (local,) = torch.autograd.grad(fn(x).sum(), x)
    return {"out": out.detach().numpy(), "grad": grad.numpy(), "local": local.numpy()}


def _elementwise_mistakes(kind: str, data: dict[str, Any], ref: dict[str, np.ndarray]) -> dict[str, Any]:
    x, g = data["x"], data["grad_output"]
    ignored = "grad_output is ignored (the local derivative alone is returned)"
    if kind == "mul_constant":
        return {
            "out": {},
            "grad_x": {ignored: np.full_like(x, data["constant"]), "grad_output returned unscaled": g},
        }
    if kind == "exp":
        return {
            "out": {},
            "grad_x": {
                ignored: np.exp(x),
                "grad_output * x: the saved input used where the output belongs": g * x,
            },
        }
    return {
        "out": {"the negative part is kept instead of the positive one": np.minimum(x, 0.0)},
        "grad_x": {
            "gradient 1 at x == 0 (a mask from x >= 0); torch.relu's gradient at 0 is 0": g * (x >= 0),
            "no mask at all: grad_output returned as it is": g,
            ignored: (x > 0).astype(np.float64),
        },
    }


def _ctx_item(record: dict[str, Any], label: str, weight: float = 0.5) -> Item:
    name = "tensors via save_for_backward"
    error = step_error(record, "forward", "direct")
    if error:
        return Item(name, False, f"not checked: {error}", weight)
    stashed = record["outputs"].get("ctx_tensors") or []
    if stashed:
        return Item(name, False, ctx_attributes_message(stashed) + ".", weight)
    return Item(name, True, "no tensor is kept as a ctx attribute", weight)


def _exp_saved_item(record: dict[str, Any], data: dict[str, Any]) -> Item:
    """Exp must save its output (one tensor, equal to exp(x)) with save_for_backward, and use it."""
    name, weight = "saves its output", 1.0
    error = step_error(record, "forward", "direct")
    if error:
        return Item(name, False, error, weight)
    stashed = record["outputs"].get("ctx_tensors") or []
    saved = record["outputs"].get("saved")
    out = np.exp(data["x"])
    if isinstance(saved, NotAnArray):
        return Item(name, False, "reading ctx.saved_tensors raised an error.", weight)
    if stashed:
        return Item(name, False, _ctx_item(record, "Exp", weight).message, weight)
    arrays = [s for s in saved if isinstance(s, np.ndarray)]
    if len(saved) != 1 or len(arrays) != 1:
        return Item(
            name,
            False,
            f"ctx.saved_tensors holds {len(saved)} tensor(s); Exp should save exactly one, its output "
            "(ctx.save_for_backward(result)).",
            weight,
        )
    if compare("saved", arrays[0], data["x"]).ok:
        return Item(
            name,
            False,
            "Exp saved its input x and recomputes exp in backward: save the output instead, "
            "ctx.save_for_backward(result); the derivative of exp is exp itself, so the output is "
            "all backward needs and nothing is computed twice.",
            weight,
        )
    if not compare("saved", arrays[0], out).ok:
        return Item(name, False, "the saved tensor is neither the output nor the input of forward.", weight)
    inplace_error = step_error(record, "inplace")
    if not inplace_error or INPLACE_ERROR not in inplace_error:
        return Item(
            name,
            False,
            "after the output was doubled in place, backward still ran without PyTorch's "
            "'modified by an inplace operation' error: backward must read the output from "
            "ctx.saved_tensors (which checks that it is unchanged), not from anywhere else.",
            weight,
        )
    return Item(
        name,
        True,
        "saved_tensors holds the output; editing it in place makes backward refuse to run, as it should",
        weight,
    )


@grader(MUL_CONSTANT)
@grader(EXP)
@grader(MY_RELU)
def grade_elementwise(evidence: Evidence) -> Report:
    """Grade recorded evidence: forward (1), backward called directly (1), through autograd (1), the
    special case (Exp: saves its output 1; MyReLU: gradient 0 at 0, 1; MulConstant: int constant 0.5),
    N = 1 (0.5), tensors via save_for_backward (0.5, not Exp: its special case covers it), inputs
    unchanged (0.5)."""
    kind, seed, cases = evidence["check"], evidence["seed"], evidence["cases"]
    label = ELEMENTWISE[kind]["label"]
    report = report_for({"mul_constant": MUL_CONSTANT, "exp": EXP, "my_relu": MY_RELU}[kind])
    inputs = elementwise_inputs(kind, seed)
    main, single, special = inputs
    names = ["grad_x", "grad_constant"] if kind == "mul_constant" else ["grad_x"]

    def expected_direct(data: dict[str, Any], ref: dict[str, np.ndarray]) -> list[np.ndarray | None]:
        return [ref["grad"], None] if kind == "mul_constant" else [ref["grad"]]

    refs = {case: _elementwise_reference(kind, data) for case, data in inputs.items()}
    record, data, ref = cases[main], inputs[main], refs[main]
    mistakes = _elementwise_mistakes(kind, data, ref)

    error = step_error(record, "forward")
    if error:
        report.add(Item("forward", False, error, 1.0))
    else:
        report.add(
            Item.from_verdicts(
                "forward",
                [compare("out", record["outputs"].get("out"), ref["out"], mistakes=mistakes["out"])],
            )
        )
    report.add(
        _grads_item(
            "backward called directly",
            record,
            expected_direct(data, ref),
            names,
            label,
            1.0,
            {"grad_x": mistakes["grad_x"]},
        )
    )
    expected = {
        "autograd:x": ref["grad"],
        "sum:x": ref["local"],
        "jacobian:x": np.diag(ref["local"].reshape(-1)),
    }
    report.add(_through_autograd_item(record, expected, "x.grad", {"x": mistakes["grad_x"]}))

    srecord, sdata, sref = cases[special], inputs[special], refs[special]
    if kind == "exp":
        report.add(_exp_saved_item(srecord, sdata))
    elif kind == "my_relu":
        smistakes = {"grad_x": _elementwise_mistakes(kind, sdata, sref)["grad_x"]}
        item = _grads_item("gradient 0 at x == 0", srecord, [sref["grad"]], names, label, 1.0, smistakes)
        if item.passed:
            err, verdicts = _autograd_verdicts(
                srecord, {"autograd:x": sref["grad"]}, ("autograd",), {"x": smistakes["grad_x"]}
            )
            item = _verdicts_item(
                item.name, err, verdicts, 1.0, "the gradient is 0 where x == 0, as torch.relu's"
            )
        report.add(item)
    else:
        item = _grads_item(special, srecord, expected_direct(sdata, sref), names, label, 0.5)
        if item.passed:
            err, verdicts = _autograd_verdicts(srecord, {"autograd:x": sref["grad"]}, ("autograd",))
            item = _verdicts_item(item.name, err, verdicts, 0.5, "right values and shapes")
        report.add(item)

    item = _grads_item(
        "N = 1", cases[single], expected_direct(inputs[single], refs[single]), names, label, 0.5
    )
    if item.passed:
        out = cases[single]["outputs"].get("out")
        item = Item.from_verdicts("N = 1", [compare("out", out, refs[single]["out"], batch_size=1)], 0.5)
    report.add(item)
    if kind != "exp":
        report.add(_ctx_item(record, label))
    ran = {"x": data["x"], "grad_output": data["grad_output"]}
    for item in contract_items({main: record}, label, {main: ran}):
        report.add(item)
    report.add(
        tensors_unchanged_item(
            cases, {case: {"x": d["x"], "grad_output": d["grad_output"]} for case, d in inputs.items()}
        )
    )
    add_notes(report, cases.values())
    return report


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
        item = _grads_item(
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
        wanted = {f"autograd:{k}": ref[d] for k, d in (("x", "dx"), ("W", "dW"), ("b", "db"))}
        err, verdicts = _autograd_verdicts(record, wanted, ("autograd",), batch_size=n)
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
        item = _grads_item(
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
        err, verdicts = _autograd_verdicts(
            record, {"autograd:x": ref["dx"], "autograd:W": ref["dW"]}, ("autograd",)
        )
        if err or not all(v.ok for v in verdicts):
            text = err or next(v.message() for v in verdicts if not v.ok)
            return Item(name, False, f"{label}: {text}", weight)
    return Item(name, True, "apply(x, W) and apply(x, W, None) both work, with grad_bias None", weight)


def _linear_ctx_item(record: dict[str, Any]) -> Item:
    item = _ctx_item(record, "LinearFunction")
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
        item = _grads_item(
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
        "autograd:x": ref["dx"],
        "autograd:W": ref["dW"],
        "autograd:b": ref["db"],
        "sum:x": ref["sum_dx"],
        "sum:W": ref["sum_dW"],
        "sum:b": ref["sum_db"],
    }
    jac = reference_jacobians(F.linear, {"x": data["x"], "W": data["W"], "b": data["b"]})
    wanted.update({f"jacobian:{k}": v for k, v in jac.items()})
    report.add(_through_autograd_item(record, wanted, "every .grad", batch_size=data["x"].shape[0]))
    report.add(_no_bias_item(cases, inputs, refs))

    single = cases[SINGLE]
    item = _grads_item(
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


def _raw_expected(data: dict[str, Any]) -> list[np.ndarray | None]:
    x, W, g = data["x"], data["W"], data["grad"]
    rx, rw, rb = data["requires"]
    return [
        g @ W if rx else None,
        g.T @ x if rw else None,
        g.copy() if data["b"] is not None and rb else None,
    ]


@grader(BACKWARD_BY_HAND)
def grade_backward_by_hand(evidence: Evidence) -> Report:
    """Grade recorded evidence: a tuple with one entry per forward input (0.5); exactly what RawLinear's
    backward returns, unsummed bias gradient and Nones included, in every case (1); no side effects:
    no ``.grad`` filled in, the same answer twice, inputs unchanged (0.5)."""
    report = report_for(BACKWARD_BY_HAND)
    cases = evidence["cases"]
    inputs = by_hand_inputs(evidence["seed"])
    names = ["grad_input", "grad_weight", "grad_bias"]
    first = cases[BY_HAND_CASES[0][0]]
    if first["error"]:
        for name, weight in (
            ("one entry per input", 0.5),
            ("what grad_fn.apply returns", 1.0),
            ("no side effects", 0.5),
        ):
            report.add(Item(name, False, first["error"], weight))
        report.notes += first["notes"]
        return report
    returned = first["results"][0]
    n = len(returned["grads"])
    if returned["kind"] not in ("tuple", "list") or n != 3:
        report.add(
            Item(
                "one entry per input",
                False,
                f"backward_by_hand returned a {returned['kind']} of {n} value(s); out.grad_fn.apply(grad) "
                "returns a tuple with one entry per input of forward (x, W, b): return it as it is.",
                0.5,
            )
        )
    else:
        report.add(Item("one entry per input", True, "a tuple (grad_input, grad_weight, grad_bias)", 0.5))

    item = Item(
        "what grad_fn.apply returns",
        True,
        "exactly what backward returned, bias gradient (4, 5) unsummed",
        1.0,
    )
    for label, data in inputs.items():
        record = cases[label]
        if record["error"]:
            item = Item(item.name, False, f"when {label}: {record['error']}", 1.0)
            break
        # what backward_by_hand returns is grad_fn.apply's tuple, passed on as a tuple or a list alike
        result = {**record["results"][0], "kind": "tuple"}
        fake = {"outputs": {"direct": result}, "errors": {"forward": None, "direct": None}}
        mistakes = {
            "grad_bias": {
                "summed over the batch: that is what .backward() leaves in b.grad (the engine sum-reduces "
                "a gradient to its input's shape); grad_fn.apply runs backward alone and returns its "
                "(N, out) result untouched": data["grad"].sum(0)
            }
        }
        expected = _raw_expected(data)
        checked = _grads_item(item.name, fake, expected, names, "RawLinear", 1.0, mistakes)
        if not checked.passed:
            item = Item(item.name, False, f"when {label}: {checked.message}", 1.0)
            break
    report.add(item)

    item = Item("no side effects", True, "no .grad filled in, the same result twice, inputs unchanged", 0.5)
    for label, data in inputs.items():
        record = cases[label]
        if record["error"]:
            item = Item(item.name, False, f"not checked: when {label}: {record['error']}", 0.5)
            break
        filled = [k for k, v in record["grads_after"].items() if v is not None]
        if filled:
            item = Item(
                item.name,
                False,
                f"when {label}, {', '.join(k + '.grad' for k in filled)} was filled in: grad_fn.apply runs "
                "backward without the engine, which is what fills .grad; do not call .backward() here.",
                0.5,
            )
            break
        r1, r2 = record["results"]
        same = len(r1["grads"]) == len(r2["grads"]) and all(
            (a is None and b is None)
            or (
                isinstance(a, np.ndarray)
                and isinstance(b, np.ndarray)
                and a.shape == b.shape
                and np.array_equal(a, b)
            )
            for a, b in zip(r1["grads"], r2["grads"], strict=True)
        )
        if not same:
            item = Item(
                item.name, False, f"when {label}, a second call returned something else than the first.", 0.5
            )
            break
        for k in ("x", "W", "b", "grad"):
            before, after = data.get(k), record["inputs_after"].get(k)
            if isinstance(before, np.ndarray) and not (
                isinstance(after, np.ndarray) and np.array_equal(before, after)
            ):
                item = Item(item.name, False, f"when {label}, {k} was changed in place.", 0.5)
                break
        if not item.passed:
            break
    if item.passed and not report.items[0].passed:
        # A function that returns nothing useful has no side effects either: that earns nothing.
        item = Item(item.name, False, "not checked: it did not return one gradient per input", 0.5)
    report.add(item)
    add_notes(report, cases.values())
    return report


def jacobian_error(
    fn: Callable[..., torch.Tensor],
    arrays: Sequence[np.ndarray],
    dtype: torch.dtype,
    eps: float = JACOBIAN_EPS,
    scheme: str = "centred",
) -> float:
    """The course's own max |analytical - numerical| over every Jacobian entry, computed in ``dtype``
    with centred differences of step ``eps`` (what gradcheck compares).

    ``scheme`` computes a known mistake's value instead, to name it: ``"forward"`` differences
    (f(x + eps) - f(x)) / eps, or ``"not_restored"``, centred differences that leave each element at
    old - eps, so that every later column is taken at a shifted point."""
    tensors = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    # The analytical side from PyTorch's own routine, not from a copy of the exercise's loop.
    blocks = torch.autograd.functional.jacobian(fn, tuple(tensors))
    worst = 0.0
    for k, t in enumerate(tensors):
        analytical = blocks[k].reshape(-1, t.numel()).double().numpy()
        numerical = np.zeros_like(analytical)
        with torch.no_grad():
            values = [s.detach().clone() for s in tensors]
            flat = values[k].view(-1)
            base = fn(*values).reshape(-1).double()
            for j in range(t.numel()):
                old = flat[j].item()
                flat[j] = old + eps
                plus = fn(*values).reshape(-1).double()
                if scheme == "forward":
                    flat[j] = old
                    numerical[:, j] = ((plus - base) / eps).numpy()
                    continue
                flat[j] = old - eps
                minus = fn(*values).reshape(-1).double()
                if scheme != "not_restored":
                    flat[j] = old
                numerical[:, j] = ((plus - minus) / (2 * eps)).numpy()
        worst = max(worst, float(np.max(np.abs(analytical - numerical))))
    return worst


def _jacobian_value(record: dict[str, Any]) -> tuple[float | None, str | None]:
    if record["error"]:
        return None, record["error"]
    value = record["value"]
    if not isinstance(value, np.ndarray) or value.size != 1 or value.dtype.kind not in "fiu":
        return None, f"max_jacobian_error returned {describe(value)}; expected one number (a Python float)."
    number = float(value.reshape(()))
    if not math.isfinite(number) or number < 0:
        return (
            None,
            f"max_jacobian_error returned {number}: a maximum absolute difference is finite and >= 0.",
        )
    return number, None


_FORWARD_DIFFERENCES = (
    "forward differences (f(x + eps) - f(x)) / eps, whose error is ~eps * f''; centred differences "
    "(f(x + eps) - f(x - eps)) / (2 eps) are accurate to ~eps**2"
)
_NOT_RESTORED = (
    "an element not put back to its old value after its two evaluations, so that every later column "
    "of the numerical Jacobian is taken at a point shifted by eps"
)


def _small_jacobian_hint(value: float, arrays: Sequence[np.ndarray]) -> str:
    """Name the mistake whose float64 error, recomputed on the same inputs, is the learner's (within 1%);
    both candidates when neither matches: each gives an error of order eps."""
    for scheme, mistake in (("forward", _FORWARD_DIFFERENCES), ("not_restored", _NOT_RESTORED)):
        if math.isclose(
            value, jacobian_error(tanh_linear, arrays, torch.float64, scheme=scheme), rel_tol=0.01
        ):
            return f" Likely mistake: {mistake}."
    return (
        f" Likely mistake, one of two that give an error of this size: {_FORWARD_DIFFERENCES}; "
        f"or {_NOT_RESTORED}."
    )


def _planted_problem(evidence: Evidence, label: str, tolerance: float) -> str | None:
    """Why the learner's answer on the layer with the seed's planted error is not the course's (within
    ``tolerance``), or None. Without this case a number that is right in size for any inputs (one
    computed on the notebook's own inputs, or none at all) would pass: this one is the seed's."""
    seed = evidence["seed"]
    value, problem = _jacobian_value(evidence["cases"][PLANTED[label]])
    size = planted_error(seed)["sizes"][label]
    where = f"on the same layer with one Jacobian entry's analytical value off by {size:.6g}"
    if problem:
        return f"{where}: {problem}"
    arrays = list(jacobian_inputs(seed).values())
    expected = jacobian_error(planted_layer(seed, label), arrays, DTYPES[label])
    if abs(value - expected) <= tolerance:
        return None
    return (
        f"{where}, your {label} error is {value:.6g}, the course's {expected:.6g} (to {tolerance:.2g}): the "
        "largest difference is that entry's. Likely mistake: the error is not computed on the fn and "
        "inputs given (a fixed function, fixed inputs, or a remembered number)."
    )


@grader(MAX_JACOBIAN_ERROR)
def grade_max_jacobian_error(evidence: Evidence) -> Report:
    """Grade recorded evidence: the float64 error is at most 1e-8 (1), the float32 one is large, within a
    factor 10 of the course's own float32 error (1); on the layer with the seed's planted error each
    dtype's answer is the course's, to 1e-8 and to that factor (part of each item). Every reference is
    recomputed here."""
    report = report_for(MAX_JACOBIAN_ERROR)
    arrays = list(jacobian_inputs(evidence["seed"]).values())
    cases = evidence["cases"]
    ref64 = jacobian_error(tanh_linear, arrays, torch.float64)
    value, problem = _jacobian_value(cases["float64"])
    name = "float64: small"
    if problem:
        report.add(Item(name, False, problem))
    elif value > JACOBIAN_FLOAT64.atol:
        hint = (
            _small_jacobian_hint(value, arrays)
            if value < 1e-4
            else " Likely mistake: the analytical and numerical Jacobians are not laid out alike "
            "(transposed?), or a gradient is wrong."
        )
        report.add(
            Item(
                name,
                False,
                f"your float64 error is {value:.3g}, the course's {ref64:.3g}; it should be below "
                f"{JACOBIAN_FLOAT64.atol:g}.{hint}",
            )
        )
    elif value == 0.0:
        # Finite differences never agree with the analytical Jacobian to the last bit: an error of exactly 0
        # means the two were not both computed in float64 (or one was compared with itself).
        report.add(
            Item(
                name,
                False,
                f"your float64 error is exactly 0, the course's {ref64:.3g}: centred differences in float64 "
                "differ from the analytical Jacobian by rounding at least. Likely mistake: a Jacobian stored "
                "in another dtype (torch.zeros(...) without dtype= is float32), or a Jacobian compared with "
                "itself.",
            )
        )
    else:
        planted = _planted_problem(evidence, "float64", JACOBIAN_FLOAT64.atol)
        report.add(Item(name, planted is None, planted or f"{value:.3g} (the course's own: {ref64:.3g})"))

    ref32 = jacobian_error(tanh_linear, arrays, torch.float32)
    value, problem = _jacobian_value(cases["float32"])
    name = "float32: large"
    low, high = max(JACOBIAN_FLOAT32.atol, ref32 / JACOBIAN_FLOAT32.rtol), ref32 * JACOBIAN_FLOAT32.rtol
    if problem:
        report.add(Item(name, False, problem))
    elif not low <= value <= high:
        hint = (
            " Likely mistake: the computation is not done in the inputs' dtype (converted to float64?): "
            "keep every tensor in the dtype it arrives in, so that float32 rounding shows."
            if value < low
            else " Likely mistake: a gradient or the finite-difference formula is wrong."
        )
        report.add(
            Item(
                name,
                False,
                f"your float32 error is {value:.3g}; expected between {low:.3g} and {high:.3g} "
                f"(the course's: {ref32:.3g}).{hint}",
            )
        )
    else:
        planted = _planted_problem(evidence, "float32", high)
        text = f"{value:.3g} (the course's own: {ref32:.3g}), far above gradcheck's atol 1e-5"
        report.add(Item(name, planted is None, planted or text))
    add_notes(report, cases.values())
    return report


def _nn_linear_params(data: dict[str, Any]) -> dict[str, np.ndarray]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(data["torch_seed"])
        ref = nn.Linear(data["in"], data["out"], bias=data["bias"])
    return {n: p.detach().numpy().copy() for n, p in ref.named_parameters()}


def _bias_first_params(data: dict[str, Any]) -> dict[str, np.ndarray]:
    """nn.Linear's initialisation with the two draws in the wrong order: a mistake feedback can name."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(data["torch_seed"])
        params = {}
        if data["bias"]:
            bound = 1 / math.sqrt(data["in"])
            params["bias"] = torch.empty(data["out"]).uniform_(-bound, bound).numpy()
        weight = torch.empty(data["out"], data["in"])
        nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
        params["weight"] = weight.numpy()
    return params


@grader(LINEAR_MODULE)
def grade_linear_module(evidence: Evidence) -> Report:
    """Grade recorded evidence: parameters registered (0.5), initialised exactly like nn.Linear (1),
    forward and backward match F.linear in float64 (1), bias=False (0.5), uses LinearFunction (0.5)."""
    report = report_for(LINEAR_MODULE)
    cases = evidence["cases"]
    inputs = module_inputs(evidence["seed"])
    with_bias = [label for label, d in inputs.items() if d["bias"]]
    no_bias = [label for label, d in inputs.items() if not d["bias"]][0]

    def failing(name: str, labels: Sequence[str], weight: float, step: str = "error") -> Item | None:
        """The item, failed with the first error of the step it needs (or of an earlier one), if any."""
        steps = ("error", "forward_error", "backward_error")
        for label in labels:
            for key in steps[: steps.index(step) + 1]:
                if cases[label][key]:
                    return Item(name, False, f"{label}: {cases[label][key]}", weight)
        return None

    item = failing("parameters registered", list(inputs), 0.5)
    if item is None:
        item = Item(
            "parameters registered", True, "named_parameters() gives weight (out, in) and bias (out,)", 0.5
        )
        for label, data in inputs.items():
            names = cases[label]["names"]
            wanted = ["weight", "bias"] if data["bias"] else ["weight"]
            if sorted(names) != sorted(wanted):
                item = Item(
                    item.name,
                    False,
                    f"{label}: named_parameters() gives {names or 'nothing'}, expected {wanted}: wrap each "
                    "tensor in nn.Parameter and assign it as self.weight / self.bias (with bias=False, "
                    "self.register_parameter('bias', None)).",
                    0.5,
                )
                break
    report.add(item)

    init = failing("initialised like nn.Linear", list(inputs), 1.0)
    if init is None:
        init = Item(
            "initialised like nn.Linear",
            True,
            "the same weight and bias as nn.Linear from the same torch.manual_seed",
            1.0,
        )
        for label, data in inputs.items():
            ref = _nn_linear_params(data)
            got = cases[label]["params"]
            swapped = _bias_first_params(data)
            for n, want in ref.items():
                mistakes = {
                    "the bias drawn before the weight: nn.Linear initialises the weight first, so the "
                    "same seed gives other numbers": swapped[n]
                }
                verdict = compare(f"{n} of {label}", got.get(n), want, dtype=np.float32, mistakes=mistakes)
                if not verdict.ok:
                    hint = (
                        " Likely mistake: a different initialisation or order of draws: nn.Linear makes "
                        "torch.empty(out, in) and torch.empty(out), then calls kaiming_uniform_(weight, "
                        "a=math.sqrt(5)) and, for the bias, uniform_(-1/sqrt(in), 1/sqrt(in)), in that order."
                        if verdict.problem == "values" and not verdict.likely
                        else ""
                    )
                    init = Item(init.name, False, verdict.message() + hint, 1.0)
                    break
            if not init.passed:
                break
    report.add(init)

    def forward_item(name: str, labels: Sequence[str], weight: float) -> Item:
        item = failing(name, labels, weight, "backward_error")
        if item is not None:
            return item
        for label in labels:
            data, record = inputs[label], cases[label]
            params = record["params64"]
            W = params.get("weight")
            if not isinstance(W, np.ndarray) or W.shape != (data["out"], data["in"]):
                return Item(
                    name, False, f"{label}: not checked, weight is not an (out, in) parameter.", weight
                )
            b = params.get("bias") if data["bias"] else np.zeros(data["out"])
            if not isinstance(b, np.ndarray) or b.shape != (data["out"],):
                return Item(name, False, f"{label}: not checked, bias is not an (out,) parameter.", weight)
            ref = reference.linear(data["x"], W, b, data["grad_output"])
            n = data["x"].shape[0]
            verdicts = [
                compare("out", record["out"], ref["out"], batch_size=n),
                compare("x.grad", record["grads"].get("x"), ref["dx"], batch_size=n),
                compare("weight.grad", record["grads"].get("weight"), ref["dW"], batch_size=n),
            ]
            if data["bias"]:
                verdicts.append(compare("bias.grad", record["grads"].get("bias"), ref["db"], batch_size=n))
            bad = [v for v in verdicts if not v.ok]
            if bad:
                return Item(name, False, f"{label}: {bad[0].message()}", weight)
        return Item(name, True, "out and every gradient match F.linear in float64", weight)

    report.add(forward_item("forward and backward", with_bias, 1.0))
    report.add(forward_item("bias=False", [no_bias], 0.5))

    item = failing("uses LinearFunction", with_bias, 0.5, "forward_error")
    if item is None:
        name = cases[with_bias[0]]["grad_fn"]
        if name == "LinearFunctionBackward":
            item = Item("uses LinearFunction", True, "the output's grad_fn is LinearFunctionBackward", 0.5)
        else:
            item = Item(
                "uses LinearFunction",
                False,
                f"the output's grad_fn is {name}: forward should return "
                "LinearFunction.apply(x, self.weight, self.bias).",
                0.5,
            )
    report.add(item)
    add_notes(report, cases.values())
    return report


def reference_train_spiral(seed: int, *, zero_grad: bool = True, lr: float | None = None) -> list[float]:
    """The course's own run of the recipe with ``nn.Linear``, with the steps, hidden units and learning
    rate the check passes for ``seed``: the loss before each SGD step. ``zero_grad=False`` or another
    ``lr`` replay a learner's mistake (grading names one only when its curve is the learner's)."""
    recipe = spiral_recipe(seed)
    steps, hidden, lr = recipe["steps"], recipe["hidden"], recipe["lr"] if lr is None else lr
    X, y = make_spiral(seed=seed)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, 3)).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(Xt), yt)
        if zero_grad:
            optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


#: Learning rates a learner may have written in place of the ``lr`` argument, replayed one by one.
OTHER_SPIRAL_LRS = (0.1, 0.5, 0.01, 0.05, 1e-3)

SPIRAL_STEP_ZERO = (
    "Step 0 is the loss of the initial parameters, before any update, so they differ from the recipe's. "
    "Candidates: torch.manual_seed(seed) called after the layers are built (or not at all), the layers "
    "built in another order or size, another data set than make_spiral(seed=seed), or float32 instead of "
    ".double()."
)


def _spiral_replays(seed: int) -> dict[str, Any]:
    """The mistakes whose replayed curve is compared with the learner's nn.Linear run, step by step."""
    replays: dict[str, Any] = {
        "the gradients are never zeroed (no optimizer.zero_grad()), so each step adds the new gradient to "
        "all the old ones; the curves agree for two steps and part at step 2": lambda: np.array(
            reference_train_spiral(seed, zero_grad=False)
        )
    }
    for lr in OTHER_SPIRAL_LRS:
        replays[f"a learning rate of {lr:g} instead of the lr argument ({spiral_recipe(seed)['lr']:g})"] = (
            lambda lr=lr: np.array(reference_train_spiral(seed, lr=lr))
        )
    return replays


def _losses_problem(run: dict[str, Any], label: str, steps: int) -> str | None:
    if run["error"]:
        return f"with {label}: {run['error']}"
    losses = run["losses"]
    if not isinstance(losses, np.ndarray) or losses.ndim != 1:
        return f"with {label}: train_spiral returned {describe(losses)}; expected a list of floats."
    if losses.size != steps:
        return f"with {label}: {losses.size} losses for steps={steps}; record one loss per step."
    if not np.all(np.isfinite(losses)):
        return f"with {label}: the losses contain NaN or inf: training diverged."
    return None


@grader(TRAIN_SPIRAL)
def grade_train_spiral(evidence: Evidence) -> Report:
    """Grade recorded evidence: one finite loss per step (0.5); the learner's Linear, actually used, gives
    the same losses as nn.Linear step by step (1); the nn.Linear run follows the recipe, i.e. matches
    the course's own run (0.5)."""
    report = report_for(TRAIN_SPIRAL)
    runs = evidence["runs"]
    mine, theirs = runs["your Linear"], runs["nn.Linear"]
    steps = spiral_recipe(evidence["seed"])["steps"]
    problem = _losses_problem(mine, "your Linear", steps) or _losses_problem(theirs, "nn.Linear", steps)
    if mine["error"] and not theirs["error"] and "is not implemented yet" in mine["error"]:
        # the stub that raised is Linear's, since the same train_spiral runs with nn.Linear
        problem = (
            "your Linear is not implemented yet (it raises NotImplementedError); "
            "train_spiral runs with nn.Linear"
        )
    report.add(Item("losses", problem is None, problem or f"{steps} finite losses per run", 0.5))

    name = "same as nn.Linear"
    if problem:
        report.add(Item(name, False, f"not checked: {problem}"))
    elif min(mine["made"], theirs["made"]) < 2 or min(mine["forward"], theirs["forward"]) < steps:
        report.add(
            Item(
                name,
                False,
                "train_spiral must build both layers from the class it is given (linear_cls(2, hidden) and "
                f"linear_cls(hidden, 3)) and call them at every step; it made {mine['made']} and ran "
                f"{mine['forward']} forward passes of your Linear.",
            )
        )
    else:
        verdict = compare("losses with your Linear", mine["losses"], theirs["losses"])
        if verdict.ok:
            report.add(
                Item(
                    name,
                    True,
                    f"the same loss at every one of {steps} steps (max abs error {verdict.max_abs_err:.1e})",
                )
            )
        else:
            close = np.isclose(mine["losses"], theirs["losses"], rtol=FLOAT64.rtol, atol=FLOAT64.atol)
            step = int(np.argmin(close))
            report.add(
                Item(
                    name,
                    False,
                    f"{verdict.message()} The runs part at step {step}: if step 0 already differs, the "
                    "initial parameters differ (check Linear's initialisation); otherwise a gradient does.",
                )
            )

    reference_losses = reference_train_spiral(evidence["seed"])
    name = "follows the recipe"
    unusable = _losses_problem(theirs, "nn.Linear", steps)
    if unusable:
        report.add(Item(name, False, f"not checked: {unusable}", 0.5))
    else:
        verdict = compare("losses with nn.Linear", theirs["losses"], np.array(reference_losses))
        text = "the nn.Linear run matches the course's own"
        if not verdict.ok:
            ref = np.array(reference_losses)
            why = loop_difference(theirs["losses"], ref, _spiral_replays(evidence["seed"]), SPIRAL_STEP_ZERO)
            text = f"{verdict.message()} {why}".strip()
        report.add(Item(name, verdict.ok, text, 0.5))
    add_notes(report, runs.values())
    return report
