"""The grader of notebook 04's three elementwise Functions: MulConstant, Exp and MyReLU."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from autograder.checks.compare import compare
from autograder.checks.core import Check, Evidence, NotAnArray
from autograder.checks.custom_functions.elementwise import (
    ELEMENTWISE,
    EXP,
    MUL_CONSTANT,
    MY_RELU,
    elementwise_inputs,
)
from autograder.checks.functions import FunctionRecord
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


@dataclass(frozen=True)
class Elementwise:
    """One elementwise Function's declaration: its check, the float64 function it computes, the names of
    the gradients its backward returns, the wrong answers its feedback names, and its special case's
    item (judged on the case labelled third in :data:`ELEMENTWISE`)."""

    check: Check
    function: Callable[[torch.Tensor, float], torch.Tensor]
    grad_names: tuple[str, ...]
    mistakes: Callable[[dict[str, Any]], dict[str, dict[str, Any]]]
    special_item: Callable[[Elementwise, Case], Item]
    #: Whether "tensors via save_for_backward" is an item of its own (Exp's special case covers it).
    ctx_item: bool = True

    @property
    def label(self) -> str:
        """The Function's class name, as feedback names it."""
        return str(ELEMENTWISE[self.check.name]["label"])


@dataclass(frozen=True)
class Case:
    """One case of an elementwise check: its label, the learner's record, the inputs and the float64
    reference."""

    label: str
    record: FunctionRecord
    data: dict[str, Any]
    ref: dict[str, np.ndarray]


IGNORED = "grad_output is ignored (the local derivative alone is returned)"


def _reference(
    function: Callable[[torch.Tensor, float], torch.Tensor], data: dict[str, Any]
) -> dict[str, Any]:
    """out, the gradient of x for grad_output, and the local derivative, by torch autograd in float64."""
    x = torch.tensor(data["x"], dtype=torch.float64, requires_grad=True)
    out = function(x, data["constant"])
    (grad,) = torch.autograd.grad(out, x, torch.tensor(data["grad_output"]))
    (local,) = torch.autograd.grad(function(x, data["constant"]).sum(), x)
    return {"out": out.detach().numpy(), "grad": grad.numpy(), "local": local.numpy()}


def _expected_direct(kind: Elementwise, case: Case) -> list[np.ndarray | None]:
    """grad_x, then None for every other input (MulConstant's constant is not a tensor)."""
    return [case.ref["grad"]] + [None] * (len(kind.grad_names) - 1)


def _special_values_item(
    kind: Elementwise, case: Case, name: str, weight: float, passed: str, named: bool
) -> Item:
    """Backward called directly, then through autograd, on the special case; with ``named``, the feedback
    names the Function's known mistakes on this case's inputs."""
    grad_x = kind.mistakes(case.data)["grad_x"] if named else None
    direct = {"grad_x": grad_x} if named else None
    item = grads_item(
        name, case.record, _expected_direct(kind, case), kind.grad_names, kind.label, weight, direct
    )
    if not item.passed:
        return item
    err, verdicts = autograd_verdicts(case.record, {"autograd": {"x": case.ref["grad"]}}, {"x": grad_x})
    return verdicts_item(item.name, err, verdicts, weight, passed)


def _int_constant_item(kind: Elementwise, case: Case) -> Item:
    """MulConstant with an int constant (0.5), the item named after its case."""
    return _special_values_item(kind, case, case.label, 0.5, "right values and shapes", named=False)


def _zero_at_zero_item(kind: Elementwise, case: Case) -> Item:
    """MyReLU where x holds exact zeros (1): torch.relu's gradient there is 0."""
    passed = "the gradient is 0 where x == 0, as torch.relu's"
    return _special_values_item(kind, case, "gradient 0 at x == 0", 1.0, passed, named=True)


def _exp_special_item(kind: Elementwise, case: Case) -> Item:
    return _exp_saved_item(case.record, case.data)


def _mul_constant_mistakes(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    x, g = data["x"], data["grad_output"]
    return {
        "out": {},
        "grad_x": {IGNORED: np.full_like(x, data["constant"]), "grad_output returned unscaled": g},
    }


def _exp_mistakes(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    x, g = data["x"], data["grad_output"]
    saved_input = "grad_output * x: the saved input used where the output belongs"
    return {"out": {}, "grad_x": {IGNORED: np.exp(x), saved_input: g * x}}


def _my_relu_mistakes(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    x, g = data["x"], data["grad_output"]
    return {
        "out": {"the negative part is kept instead of the positive one": np.minimum(x, 0.0)},
        "grad_x": {
            "gradient 1 at x == 0 (a mask from x >= 0); torch.relu's gradient at 0 is 0": g * (x >= 0),
            "no mask at all: grad_output returned as it is": g,
            IGNORED: (x > 0).astype(np.float64),
        },
    }


def _exp_saved_problem(record: FunctionRecord, data: dict[str, Any]) -> str | None:
    """Why what Exp saved is not its output, as one tensor through save_for_backward, or None."""
    stashed = record["outputs"].get("ctx_tensors") or []
    saved = record["outputs"].get("saved")
    if isinstance(saved, NotAnArray):
        return "reading ctx.saved_tensors raised an error."
    if stashed:
        return ctx_item(record, "Exp").message
    arrays = [s for s in saved if isinstance(s, np.ndarray)]
    if len(saved) != 1 or len(arrays) != 1:
        return (
            f"ctx.saved_tensors holds {len(saved)} tensor(s); Exp should save exactly one, its output "
            "(ctx.save_for_backward(result))."
        )
    if compare("saved", arrays[0], data["x"]).ok:
        return (
            "Exp saved its input x. Likely mistake: ctx.save_for_backward(x), the input, where the output "
            "belongs: save the output instead, ctx.save_for_backward(result); the derivative of exp is "
            "exp itself, so the output is all backward needs and nothing is computed twice."
        )
    if not compare("saved", arrays[0], np.exp(data["x"])).ok:
        return "the saved tensor is neither the output nor the input of forward."
    return None


def _exp_saved_item(record: FunctionRecord, data: dict[str, Any]) -> Item:
    """Exp must save its output (one tensor, equal to exp(x)) with save_for_backward, and use it: after
    the output is edited in place, backward must refuse to run."""
    name, weight = "saves its output", 1.0
    problem = step_error(record, "forward", "direct") or _exp_saved_problem(record, data)
    if problem:
        return Item(name, False, problem, weight)
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
    passed = "saved_tensors holds the output; editing it in place makes backward refuse to run, as it should"
    return Item(name, True, passed, weight)


#: Every elementwise Function, declared once; a kind of :data:`ELEMENTWISE` without a declaration
#: here is an error when this module is imported, never a silent fall-through to another kind.
KINDS: dict[str, Elementwise] = {
    "mul_constant": Elementwise(
        MUL_CONSTANT,
        lambda t, c: t * c,
        ("grad_x", "grad_constant"),
        _mul_constant_mistakes,
        _int_constant_item,
    ),
    "exp": Elementwise(EXP, lambda t, c: torch.exp(t), ("grad_x",), _exp_mistakes, _exp_special_item, False),
    "my_relu": Elementwise(
        MY_RELU, lambda t, c: torch.relu(t), ("grad_x",), _my_relu_mistakes, _zero_at_zero_item
    ),
}


def require_declarations(kinds: dict[str, Elementwise], declared: dict[str, Any]) -> None:
    """Raise, naming the fix, unless every elementwise kind of ``declared`` (the collect side's
    :data:`ELEMENTWISE`) has its entry in ``kinds`` and ``kinds`` has no other."""
    missing, extra = sorted(set(declared) - set(kinds)), sorted(set(kinds) - set(declared))
    if missing:
        raise RuntimeError(
            f"elementwise kinds without a declaration: {missing}: add an Elementwise(check, function, "
            "gradient names, named mistakes, special-case item) for each to KINDS in "
            "autograder/grading/custom_functions/elementwise.py"
        )
    if extra:
        raise RuntimeError(
            f"KINDS in autograder/grading/custom_functions/elementwise.py declares {extra}, which "
            "ELEMENTWISE in autograder/checks/custom_functions/elementwise.py does not: add their label and "
            "cases there, or remove them from KINDS"
        )


require_declarations(KINDS, ELEMENTWISE)


def _forward_item(case: Case, mistakes: dict[str, Any]) -> Item:
    error = step_error(case.record, "forward")
    if error:
        return Item("forward", False, error, 1.0)
    out = case.record["outputs"].get("out")
    return Item.from_verdicts("forward", [compare("out", out, case.ref["out"], mistakes=mistakes["out"])])


def _main_items(kind: Elementwise, case: Case) -> list[Item]:
    """Forward (1), backward called directly (1), through autograd (1), on the main case."""
    mistakes = kind.mistakes(case.data)
    direct = grads_item(
        "backward called directly",
        case.record,
        _expected_direct(kind, case),
        kind.grad_names,
        kind.label,
        1.0,
        {"grad_x": mistakes["grad_x"]},
    )
    local = case.ref["local"]
    expected = {
        "autograd": {"x": case.ref["grad"]},
        "sum": {"x": local},
        "jacobian": {"x": np.diag(local.reshape(-1))},
    }
    autograd = through_autograd_item(case.record, expected, "x.grad", {"x": mistakes["grad_x"]})
    return [_forward_item(case, mistakes), direct, autograd]


def _single_item(kind: Elementwise, case: Case) -> Item:
    """N = 1 (0.5): backward called directly, then the output."""
    item = grads_item("N = 1", case.record, _expected_direct(kind, case), kind.grad_names, kind.label, 0.5)
    if not item.passed:
        return item
    out = case.record["outputs"].get("out")
    return Item.from_verdicts("N = 1", [compare("out", out, case.ref["out"], batch_size=1)], 0.5)


@grader(MUL_CONSTANT)
@grader(EXP)
@grader(MY_RELU)
def grade_elementwise(evidence: Evidence) -> Report:
    """Grade recorded evidence: forward (1), backward called directly (1), through autograd (1), the
    special case (Exp: saves its output 1; MyReLU: gradient 0 at 0, 1; MulConstant: int constant 0.5),
    N = 1 (0.5), tensors via save_for_backward (0.5, not Exp: its special case covers it), inputs
    unchanged (0.5)."""
    kind, cases = KINDS[evidence["check"]], evidence["cases"]
    inputs = elementwise_inputs(kind.check.name, evidence["seed"])
    main, single, special = (Case(c, cases[c], d, _reference(kind.function, d)) for c, d in inputs.items())
    report = report_for(kind.check)
    items = [*_main_items(kind, main), kind.special_item(kind, special), _single_item(kind, single)]
    items += [ctx_item(main.record, kind.label)] if kind.ctx_item else []
    ran = {"x": main.data["x"], "grad_output": main.data["grad_output"]}
    items += contract_items({main.label: main.record}, kind.label, {main.label: ran})
    originals = {c: {"x": d["x"], "grad_output": d["grad_output"]} for c, d in inputs.items()}
    items.append(tensors_unchanged_item(cases, originals))
    for item in items:
        report.add(item)
    add_notes(report, cases.values())
    return report
