"""The grader of notebook 05's exercise 4: mark_non_differentiable, mark_dirty, set_materialize_grads."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.checks.beyond_basics.ctx_features import CTX_FEATURES, ctx_inputs
from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.functions import FunctionRecord
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference
from autograder.grading.beyond_basics.items import Record, recorded, verdict_item
from autograder.grading.hard_inputs import ties_item
from autograder.grading.toolkit import ItemOf, backward_returns, judge, step_error, tensors_unchanged_item


@dataclass(frozen=True)
class _Run:
    """What every item reads: the record of each Function, the inputs remade from the seed, the references."""

    mx: FunctionRecord
    rl: FunctionRecord
    sc: FunctionRecord
    data: dict[str, np.ndarray]
    ref: dict[str, np.ndarray]

    @classmethod
    def of(cls, evidence: Evidence) -> _Run:
        data, cases = ctx_inputs(evidence["seed"]), evidence["cases"]
        sc = _none_gradient_explained(cases["square_cube"])
        return cls(cases["max"], cases["relu"], sc, data, reference.ctx_features(data))


def _max_values_item(run: _Run) -> Item:
    """MaxWithIndex's values and int64 indices (0.5)."""
    out, ref = run.mx["outputs"], run.ref
    return verdict_item(
        "MaxWithIndex: values and indices",
        run.mx,
        ("forward",),
        lambda: [
            compare("values", out.get("values"), ref["values"]),
            compare("indices", out.get("indices"), ref["indices"], dtype=np.int64),
        ],
        0.5,
    )


def _max_marked_item(run: _Run) -> Item:
    """The indices marked non-differentiable, the values not (0.5)."""
    passed = "the indices are marked non-differentiable (requires_grad False), the values require grad"
    name = "MaxWithIndex: indices not differentiable"
    return _property_item(name, run.mx, ("forward",), _non_differentiable_problem, passed)


def _max_gradient_item(run: _Run) -> Item:
    """The gradient of the scores through autograd and from backward called directly (0.5)."""
    mx, ds = run.mx, run.ref["ds"]
    direct = "grad of scores from a direct backward call"
    return verdict_item(
        "MaxWithIndex: gradient",
        mx,
        ("forward", "autograd", "direct"),
        lambda: [
            compare("grad of scores", recorded(mx, "autograd", "ds"), ds),
            compare(direct, _first(mx["outputs"]["direct"]), ds),
        ],
        0.5,
    )


def _max_ties_item(run: _Run) -> Item:
    """Rows with a tie at their maximum (0.5)."""
    return ties_item(run.mx, run.data["ties"], run.data["gv"])


def _relu_dirty_item(run: _Run) -> Item:
    """InplaceReLU returns its input object, modified in place (0.5)."""
    passed = "returns its input, modified in place (version counter bumped)"
    return _property_item("InplaceReLU: in place, marked dirty", run.rl, ("forward",), _dirty_problem, passed)


def _relu_values_item(run: _Run) -> Item:
    """InplaceReLU's output, its input after the call and the input's gradient (0.5)."""
    rl, out, ref = run.rl, run.rl["outputs"], run.ref
    return verdict_item(
        "InplaceReLU: values and gradient",
        rl,
        ("forward", "autograd"),
        lambda: [
            compare("out", out.get("out"), ref["relu"]),
            compare("the input after the call", out.get("h_after"), ref["relu"]),
            compare("grad of the input", recorded(rl, "autograd", "da"), ref["da"]),
        ],
        0.5,
    )


#: SquareAndCube's recorded values, each with its title in feedback.
SQUARE_CUBE_VALUES = {
    "sq": "square",
    "cu": "cube",
    "d_both": "grad, both outputs used",
    "d_sq": "grad, only the square used",
    "d_cu": "grad, only the cube used",
}


def _square_cube_values_item(run: _Run) -> Item:
    """SquareAndCube's outputs, and its gradients when one or both outputs are used (0.5)."""
    out, ref = run.sc["outputs"], run.ref
    return verdict_item(
        "SquareAndCube: outputs and gradients",
        run.sc,
        ("forward", "autograd"),
        lambda: [
            compare(title, out.get(key), ref[key], mistakes=_square_cube_mistakes(ref).get(key))
            for key, title in SQUARE_CUBE_VALUES.items()
        ],
        0.5,
    )


def _square_cube_mistakes(ref: dict[str, np.ndarray]) -> dict[str, dict[str, np.ndarray]]:
    """With both outputs used, a backward that returns one output's term alone (an if/else on which
    gradient is not None, where both terms belong when both are there)."""
    dropped = (
        "backward returns only the {kept}'s term and drops the {other}'s: with both outputs used, add "
        "both terms"
    )
    return {
        "d_both": {
            dropped.format(kept="square", other="cube"): ref["d_sq"],
            dropped.format(kept="cube", other="square"): ref["d_cu"],
        }
    }


#: PyTorch's error for arithmetic on a gradient that arrived as None.
_NONE_OPERAND = re.compile(
    r"TypeError: unsupported operand type\(s\) for [^:]+: .*'NoneType'.*\(in backward, line"
)


def _none_gradient_explained(record: Record) -> Record:
    """The record, its backward's errors from arithmetic on a None gradient ending with that mistake."""
    likely = (
        ". Likely mistake: backward computes with a gradient that is None: with "
        "ctx.set_materialize_grads(False), an unused output's gradient arrives as None; add only the terms "
        "whose gradient is not None"
    )
    errors = {
        step: f"{error}{likely}" if isinstance(error, str) and _NONE_OPERAND.search(error) else error
        for step, error in record["errors"].items()
    }
    return {**record, "errors": errors}


def _square_cube_direct_item(run: _Run) -> Item:
    """SquareAndCube's backward called directly with a None gradient for either output (0.5)."""
    out, ref = run.sc["outputs"], run.ref
    return verdict_item(
        "SquareAndCube: backward with None",
        run.sc,
        ("forward", "direct_sq", "direct_cu"),
        lambda: [
            compare("backward(ctx, g2, None)", _first(out["direct_sq"]), ref["d_sq"]),
            compare("backward(ctx, None, g3)", _first(out["direct_cu"]), ref["d_cu"]),
        ],
        0.5,
    )


def _square_cube_none_item(run: _Run) -> Item:
    """Backward receives None, not zeros, for the unused output (0.5: set_materialize_grads(False))."""
    passed = "with only the square used, backward received None for the cube's gradient, not zeros"
    name = "SquareAndCube: None for an unused output"
    return _property_item(name, run.sc, ("forward", "autograd"), _materialize_problem, passed)


#: What is checked, in order: three lessons, each by its effect.
ITEMS: tuple[ItemOf[_Run], ...] = (
    _max_values_item,
    _max_marked_item,
    _max_gradient_item,
    _max_ties_item,
    _relu_dirty_item,
    _relu_values_item,
    _square_cube_values_item,
    _square_cube_direct_item,
    _square_cube_none_item,
)


@grader(CTX_FEATURES)
def grade_ctx_features(evidence: Evidence) -> Report:
    """Grade each of the three lessons by its effect: MaxWithIndex values and indices (0.5), indices
    marked non-differentiable (0.5), its gradient with exact shape from a direct call (0.5), ties (0.5);
    InplaceReLU returns its input object, modified (0.5), with the right values and gradient (0.5);
    SquareAndCube outputs and gradients when one or both outputs are used (0.5), its backward called
    directly with a None gradient (0.5), and backward receiving None, not zeros, for the unused
    output (0.5: only ``set_materialize_grads(False)`` does that). An input changed in place where
    only InplaceReLU should is a note."""
    run = _Run.of(evidence)
    report = judge(CTX_FEATURES, ITEMS, run, (run.mx, run.rl, run.sc))
    changed = tensors_unchanged_item(
        {"max": run.mx, "square_cube": run.sc},
        {"max": {"s": run.data["s"]}, "square_cube": {"z": run.data["z"]}},
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
        indices = out.get("indices")
        if isinstance(indices, np.ndarray) and indices.dtype.kind == "f":
            return (
                f"the indices require grad, and are {indices.dtype}. Likely mistake: the indices converted "
                "to floating point (indices.double(), .float(), .to(scores.dtype)) and not marked: a float "
                "output requires grad and gets a gradient; return max's int64 indices and mark them with "
                "ctx.mark_non_differentiable(indices) in forward."
            )
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
