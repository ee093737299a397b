"""The grader of notebook 04's three elementwise Functions: MulConstant, Exp and MyReLU."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.compare import compare
from autograder.checks.core import Evidence, NotAnArray
from autograder.checks.custom_functions.elementwise import (
    ELEMENTWISE,
    EXP,
    MUL_CONSTANT,
    MY_RELU,
    elementwise_inputs,
)
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.custom_functions.items import (
    INPLACE_ERROR,
    autograd_verdicts,
    ctx_item,
    grads_item,
    through_autograd_item,
    verdicts_item,
)
from autograder.grading.function_contract import contract_items
from autograder.grading.toolkit import add_notes, step_error, tensors_unchanged_item


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
        return Item(name, False, ctx_item(record, "Exp", weight).message, weight)
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
        grads_item(
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
    report.add(through_autograd_item(record, expected, "x.grad", {"x": mistakes["grad_x"]}))

    srecord, sdata, sref = cases[special], inputs[special], refs[special]
    if kind == "exp":
        report.add(_exp_saved_item(srecord, sdata))
    elif kind == "my_relu":
        smistakes = {"grad_x": _elementwise_mistakes(kind, sdata, sref)["grad_x"]}
        item = grads_item("gradient 0 at x == 0", srecord, [sref["grad"]], names, label, 1.0, smistakes)
        if item.passed:
            err, verdicts = autograd_verdicts(
                srecord, {"autograd:x": sref["grad"]}, ("autograd",), {"x": smistakes["grad_x"]}
            )
            item = verdicts_item(
                item.name, err, verdicts, 1.0, "the gradient is 0 where x == 0, as torch.relu's"
            )
        report.add(item)
    else:
        item = grads_item(special, srecord, expected_direct(sdata, sref), names, label, 0.5)
        if item.passed:
            err, verdicts = autograd_verdicts(srecord, {"autograd:x": sref["grad"]}, ("autograd",))
            item = verdicts_item(item.name, err, verdicts, 0.5, "right values and shapes")
        report.add(item)

    item = grads_item(
        "N = 1", cases[single], expected_direct(inputs[single], refs[single]), names, label, 0.5
    )
    if item.passed:
        out = cases[single]["outputs"].get("out")
        item = Item.from_verdicts("N = 1", [compare("out", out, refs[single]["out"], batch_size=1)], 0.5)
    report.add(item)
    if kind != "exp":
        report.add(ctx_item(record, label))
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
