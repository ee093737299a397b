"""The grader of notebook 05's exercise 4: mark_non_differentiable, mark_dirty, set_materialize_grads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.checks.beyond_basics.ctx_features import CTX_FEATURES, ctx_inputs
from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference, report_for
from autograder.grading.beyond_basics.items import Record, recorded, verdict_item
from autograder.grading.hard_inputs import ties_item
from autograder.grading.toolkit import add_notes, backward_returns, step_error, tensors_unchanged_item


@grader(CTX_FEATURES)
def grade_ctx_features(evidence: Evidence) -> Report:
    """Grade each of the three lessons by its effect: MaxWithIndex values and indices (0.5), indices
    marked non-differentiable (0.5), its gradient with exact shape from a direct call (0.5), ties (0.5);
    InplaceReLU returns its input object, modified (0.5), with the right values and gradient (0.5);
    SquareAndCube outputs and gradients when one or both outputs are used (0.5), its backward called
    directly with a None gradient (0.5), and backward receiving None, not zeros, for the unused
    output (0.5: only ``set_materialize_grads(False)`` does that)."""
    report = report_for(CTX_FEATURES)
    data = ctx_inputs(evidence["seed"])
    cases = evidence["cases"]
    mx, rl, sc = cases["max"], cases["relu"], cases["square_cube"]
    ref = reference.ctx_features(data)

    mo = mx["outputs"]
    report.add(
        verdict_item(
            "MaxWithIndex: values and indices",
            mx,
            ("forward",),
            lambda: [
                compare("values", mo.get("values"), ref["values"]),
                compare("indices", mo.get("indices"), ref["indices"], dtype=np.int64),
            ],
            0.5,
        )
    )
    report.add(
        _property_item(
            "MaxWithIndex: indices not differentiable",
            mx,
            ("forward",),
            _non_differentiable_problem,
            "the indices are marked non-differentiable (requires_grad False), the values require grad",
        )
    )
    report.add(
        verdict_item(
            "MaxWithIndex: gradient",
            mx,
            ("forward", "autograd", "direct"),
            lambda: [
                compare("grad of scores", recorded(mx, "autograd", "ds"), ref["ds"]),
                compare(
                    "grad of scores from a direct backward call",
                    _first(mx["outputs"]["direct"]),
                    ref["ds"],
                ),
            ],
            0.5,
        )
    )

    report.add(ties_item(mx, data["ties"], data["gv"]))

    ro = rl["outputs"]
    report.add(
        _property_item(
            "InplaceReLU: in place, marked dirty",
            rl,
            ("forward",),
            _dirty_problem,
            "returns its input, modified in place (version counter bumped)",
        )
    )
    report.add(
        verdict_item(
            "InplaceReLU: values and gradient",
            rl,
            ("forward", "autograd"),
            lambda: [
                compare("out", ro.get("out"), ref["relu"]),
                compare("the input after the call", ro.get("h_after"), ref["relu"]),
                compare("grad of the input", recorded(rl, "autograd", "da"), ref["da"]),
            ],
            0.5,
        )
    )

    so = sc["outputs"]
    report.add(
        verdict_item(
            "SquareAndCube: outputs and gradients",
            sc,
            ("forward", "autograd"),
            lambda: [
                compare("square", so.get("sq"), ref["sq"]),
                compare("cube", so.get("cu"), ref["cu"]),
                compare("grad, both outputs used", so.get("d_both"), ref["d_both"]),
                compare("grad, only the square used", so.get("d_sq"), ref["d_sq"]),
                compare("grad, only the cube used", so.get("d_cu"), ref["d_cu"]),
            ],
            0.5,
        )
    )
    report.add(
        verdict_item(
            "SquareAndCube: backward with None",
            sc,
            ("forward", "direct_sq", "direct_cu"),
            lambda: [
                compare("backward(ctx, g2, None)", _first(so["direct_sq"]), ref["d_sq"]),
                compare("backward(ctx, None, g3)", _first(so["direct_cu"]), ref["d_cu"]),
            ],
            0.5,
        )
    )
    report.add(
        _property_item(
            "SquareAndCube: None for an unused output",
            sc,
            ("forward", "autograd"),
            _materialize_problem,
            "with only the square used, backward received None for the cube's gradient, not zeros",
        )
    )
    add_notes(report, (mx, rl, sc))
    changed = tensors_unchanged_item(
        {"max": mx, "square_cube": sc}, {"max": {"s": data["s"]}, "square_cube": {"z": data["z"]}}
    )
    if not changed.passed and not changed.message.startswith("not checked"):
        report.notes.append(
            "MaxWithIndex or SquareAndCube changed its input in place (only InplaceReLU should)."
        )
    return report


def _first(returned: Record) -> Any:
    """The first gradient a recorded backward return value gives (PyTorch reads a lone tensor as one)."""
    grads, _ = backward_returns(returned, 1, "backward", ["grad"])
    return grads[0]


def _property_item(
    name: str, record: Record, steps: tuple[str, ...], problem: Callable[[Record], str | None], passed: str
) -> Item:
    """An item (0.5 points) on one property of a Function: the first failing step's own error, else what
    ``problem`` finds wrong in the recorded outputs, else it passes with ``passed``."""
    failure = step_error(record, *steps) or problem(record["outputs"])
    return Item(name, failure is None, failure or passed, 0.5)


def _non_differentiable_problem(out: Record) -> str | None:
    if out.get("indices_requires_grad") is not False:
        return "the indices require grad: mark them with ctx.mark_non_differentiable(indices) in forward."
    if out.get("values_requires_grad") is not True:
        return "the values do not require grad: only the indices are non-differentiable."
    marked = out.get("marked_non_differentiable") or []
    if marked == [False, True]:
        return None
    if any(marked):
        return (
            "forward marked the values as non-differentiable. Likely mistake: ctx.mark_non_differentiable "
            "given the values (or both outputs); mark only the indices."
        )
    return (
        "forward did not mark the indices. Likely mistake: ctx.mark_non_differentiable(indices) is never "
        "called in forward: int64 indices "
        "never require grad, so nothing fails today, but autograd is not told that this output has "
        "no gradient (a float mask or count returned the same way would require grad and get one)."
    )


def _dirty_problem(out: Record) -> str | None:
    if out.get("version_bumped") is not True:
        return (
            "the input was not modified in place (its version counter did not change). Likely mistake: "
            "the ReLU is computed out of place (clamp, torch.relu, x * mask) or on a copy of x; use "
            "clamp_ or an indexed assignment on the input itself."
        )
    if out.get("same_object") is not True:
        return (
            "the output is not the input object. Likely mistake: forward changes x in place but returns "
            "another tensor (a copy or a view of x); call ctx.mark_dirty(x) and return x itself."
        )
    return None


def _materialize_problem(out: Record) -> str | None:
    received = out.get("grads_none_square_only")
    if received == [False, True]:
        return None
    if received == [False, False]:
        return (
            "with only the square used, backward received a tensor of zeros for the cube's gradient. "
            "Likely mistake: forward never calls ctx.set_materialize_grads(False): autograd then "
            "materializes the missing gradient, and backward multiplies by zeros for nothing."
        )
    return f"backward received {received} (None or not, per output); expected [False, True]."
