"""The grader of notebook 05's exercise 3: double backward (Cube) and once_differentiable (NumpyCube)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.checks.beyond_basics.double_backward import DOUBLE_BACKWARD, DOUBLE_SHAPE, double_inputs
from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.functions import FunctionRecord
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference
from autograder.grading.beyond_basics.items import exact_shapes_item, recorded, verdict_item
from autograder.grading.function_contract import contract_items
from autograder.grading.toolkit import ItemOf, judge, step_error, tensors_unchanged_item

#: What torch says when a once_differentiable backward is differentiated.
ONCE_DIFFERENTIABLE_MESSAGE = "marked with @once_differentiable"


@dataclass(frozen=True)
class _Run:
    """What every item reads: the two Functions' records, the inputs remade from the seed, the references."""

    cube: FunctionRecord
    npc: FunctionRecord
    data: dict[str, np.ndarray]
    ref: dict[str, np.ndarray]

    @classmethod
    def of(cls, evidence: Evidence) -> _Run:
        data, cases = double_inputs(evidence["seed"]), evidence["cases"]
        ref = reference.cube_second_derivatives(data["x"], data["g"], data["v"])
        return cls(cases["Cube"], cases["NumpyCube"], data, ref)

    @property
    def second(self) -> FunctionRecord:
        """Cube's record with the second derivative's error explained (:func:`_second_hint`)."""
        errors = {**self.cube["errors"], "second": _second_hint(step_error(self.cube, "second"))}
        return {**self.cube, "errors": errors}

    @property
    def originals(self) -> dict[str, dict[str, np.ndarray]]:
        ran = {"x": self.data["x"], "grad_output": self.data["g"]}
        return {"Cube": ran, "NumpyCube": ran}


def _cube_item(run: _Run) -> Item:
    """Cube's output and gradient (0.5)."""
    cube, ref, x = run.cube, run.ref, run.data["x"]
    return verdict_item(
        "Cube: y and dx",
        cube,
        ("forward", "autograd"),
        lambda: [
            compare("y", cube["outputs"].get("y"), ref["y"]),
            compare(
                "dx",
                recorded(cube, "autograd", "dx"),
                ref["dx"],
                mistakes={"grad_output is ignored": 3 * x**2},
            ),
        ],
        0.5,
    )


def _cube_direct_item(run: _Run) -> Item:
    """The exact shape of Cube's backward called directly (0.5)."""
    return exact_shapes_item("Cube: direct backward", run.cube, {"dx": DOUBLE_SHAPE}, 0.5)


def _second_x_item(run: _Run) -> Item:
    """The second derivative through x (1)."""
    x, hx = run.data["x"], run.cube["outputs"].get("hx")
    detached = {
        "the saved x was detached (or backward ran under no_grad): dx does not depend on x": np.zeros_like(x)
    }
    return verdict_item(
        "second derivative through x",
        run.second,
        ("second",),
        lambda: [compare("d<dx, v>/dx", _zero_if_none(hx, x), run.ref["hx"], mistakes=detached)],
        1.0,
    )


def _second_grad_output_item(run: _Run) -> Item:
    """The second derivative through grad_output (0.5)."""
    g, hg = run.data["g"], run.cube["outputs"].get("hg")
    unused = {"backward does not use grad_output with differentiable operations": np.zeros_like(g)}
    return verdict_item(
        "second derivative through grad_output",
        run.second,
        ("second",),
        lambda: [compare("d<dx, v>/dgrad_output", _zero_if_none(hg, g), run.ref["hg"], mistakes=unused)],
        0.5,
    )


def _numpy_cube_item(run: _Run) -> Item:
    """NumpyCube's output and gradient (1)."""
    npc, ref = run.npc, run.ref
    return verdict_item(
        "NumpyCube: y and dx",
        npc,
        ("forward", "autograd"),
        lambda: [
            compare("y", npc["outputs"].get("y"), ref["y"]),
            compare("dx", recorded(npc, "autograd", "dx"), ref["dx"]),
        ],
        1.0,
    )


def _unchanged_item(run: _Run) -> Item:
    """No input and no upstream gradient changed in place (0.5)."""
    return tensors_unchanged_item({"Cube": run.cube, "NumpyCube": run.npc}, run.originals)


def _contract_items(run: _Run) -> list[Item]:
    """The Function contract's items."""
    return contract_items({"Cube": run.cube, "NumpyCube": run.npc}, "Cube", run.originals)


def _second_hint(error: str | None) -> str | None:
    """Name the likely mistake when differentiating the learner's gradient found no graph."""
    if error and "does not require grad" in error:
        return (
            f"{error}. Likely mistake: backward is not built from differentiable torch operations "
            "(numpy, .detach() or torch.no_grad() cut the graph), so its result cannot be differentiated."
        )
    return error


def _zero_if_none(value: Any, like: np.ndarray) -> Any:
    """An unused input gets None from autograd.grad: its derivative is zero, which compare can name."""
    return np.zeros_like(like) if value is None else value


def _once_differentiable_item(run: _Run) -> Item:
    """Differentiating NumpyCube's gradient raises torch's once_differentiable error (0.5)."""
    record = run.npc
    name, weight = "NumpyCube raises when differentiated twice", 0.5
    error = step_error(record, "twice")
    if error:
        return Item(name, False, error, weight)
    kind, message = record["outputs"].get("twice_error_type"), record["outputs"].get("twice_error")
    if kind is None:
        return Item(
            name,
            False,
            "differentiating NumpyCube's gradient raised nothing: decorate backward with "
            "@once_differentiable (below @staticmethod) so that a second derivative is refused.",
            weight,
        )
    if kind == "RuntimeError" and isinstance(message, str) and ONCE_DIFFERENTIABLE_MESSAGE in message:
        return Item(name, True, f"RuntimeError: {message}", weight)
    return Item(
        name,
        False,
        f"it raised {kind}: {message}. Torch says '{ONCE_DIFFERENTIABLE_MESSAGE}' only when backward is "
        "decorated with @once_differentiable: without it, the numpy backward silently cuts the graph.",
        weight,
    )


#: What is checked, in order.
ITEMS: tuple[ItemOf[_Run], ...] = (
    _cube_item,
    _cube_direct_item,
    _second_x_item,
    _second_grad_output_item,
    _numpy_cube_item,
    _once_differentiable_item,
    _unchanged_item,
    _contract_items,
)


@grader(DOUBLE_BACKWARD)
def grade_double_backward(evidence: Evidence) -> Report:
    """Grade: Cube's output and gradient (0.5), the exact shape of a direct backward call (0.5),
    the second derivative through x (1) and through grad_output (0.5); NumpyCube's output and
    gradient (1); differentiating NumpyCube twice raises torch's once_differentiable error (0.5: the
    stub carries the decorator, the item catches a learner who removes it or bypasses it);
    inputs unchanged (0.5); the Function contract."""
    run = _Run.of(evidence)
    return judge(DOUBLE_BACKWARD, ITEMS, run, evidence["cases"].values())
