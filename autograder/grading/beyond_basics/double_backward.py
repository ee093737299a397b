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
from autograder.grading.function_contract import contract_of, unchanged_item
from autograder.grading.toolkit import ItemOf, judge, step_error

#: The mistakes that leave the second derivative through x, and through grad_output, zero.
DETACHED = (
    "dx does not depend on x through operations autograd recorded: backward used a value it cannot trace "
    "back to x (one computed in forward, where autograd records nothing, and saved; x detached; or one "
    "computed under no_grad); compute the derivative in backward, from the saved x"
)
NOT_DIFFERENTIABLE = "backward does not use grad_output with differentiable operations"

#: What torch says when a once_differentiable backward is differentiated.
ONCE_DIFFERENTIABLE_MESSAGE = "marked with @once_differentiable"


@dataclass(frozen=True)
class _Run:
    """What every item reads: the records (``Cube``, ``NumpyCube``), the inputs remade from the seed
    and the references."""

    cases: dict[str, FunctionRecord]
    data: dict[str, np.ndarray]
    ref: dict[str, np.ndarray]

    @property
    def cube(self) -> FunctionRecord:
        return self.cases["Cube"]

    @property
    def npc(self) -> FunctionRecord:
        return self.cases["NumpyCube"]

    @property
    def second(self) -> FunctionRecord:
        """Cube's record with the second derivative's error explained (:func:`_second_hint`)."""
        errors = {**self.cube["errors"], "second": _second_hint(step_error(self.cube, "second"))}
        return {**self.cube, "errors": errors}

    @property
    def originals(self) -> dict[str, dict[str, np.ndarray]]:
        ran = {"x": self.data["x"], "grad_output": self.data["g"]}
        return {"Cube": ran, "NumpyCube": ran}


def _y_and_dx_item(name: str, label: str, weight: float, named: bool) -> ItemOf[_Run]:
    """One Function's output and gradient; with ``named``, a gradient that ignores grad_output is named."""

    def item(run: _Run) -> Item:
        record, ref, x = run.cases[label], run.ref, run.data["x"]
        ignored = {"grad_output is ignored": 3 * x**2} if named else None
        return verdict_item(
            name,
            record,
            ("forward", "autograd"),
            lambda: [
                compare("y", record["outputs"].get("y"), ref["y"]),
                compare("dx", recorded(record, "autograd", "dx"), ref["dx"], mistakes=ignored),
            ],
            weight,
        )

    return item


def _cube_direct_item(run: _Run) -> Item:
    """The exact shape of Cube's backward called directly (0.5)."""
    return exact_shapes_item("Cube: direct backward", run.cube, {"dx": DOUBLE_SHAPE}, 0.5)


def _second_item(name: str, wrt: str, key: str, unused: str, weight: float) -> ItemOf[_Run]:
    """The second derivative of <dx, v> through the input ``wrt`` (``x`` or ``g``, the upstream gradient),
    recorded as ``key``; ``unused`` names the mistake that leaves it zero (None from autograd.grad)."""

    def item(run: _Run) -> Item:
        like = run.data[wrt]
        got = _zero_if_none(run.cube["outputs"].get(key), like)
        title = f"d<dx, v>/d{'x' if wrt == 'x' else 'grad_output'}"
        mistakes = {unused: np.zeros_like(like)}
        return verdict_item(
            name,
            run.second,
            ("second",),
            lambda: [compare(title, got, run.ref[key], mistakes=mistakes)],
            weight,
        )

    return item


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
            "differentiating NumpyCube's gradient raised nothing. Likely mistake: backward is not "
            "decorated with @once_differentiable (a decorated backward always refuses a second "
            "derivative); decorate it (below @staticmethod) so that a second derivative is refused.",
            weight,
        )
    if kind == "RuntimeError" and isinstance(message, str) and ONCE_DIFFERENTIABLE_MESSAGE in message:
        return Item(name, True, f"RuntimeError: {message}", weight)
    cut = isinstance(message, str) and "does not require grad" in message
    why = "Likely mistake: backward is not decorated with @once_differentiable" if cut else "Without it"
    return Item(
        name,
        False,
        f"it raised {kind}: {message}. Torch says '{ONCE_DIFFERENTIABLE_MESSAGE}' only when backward is "
        f"decorated with @once_differentiable. {why}: the numpy backward silently cuts the graph.",
        weight,
    )


#: What is checked, in order.
ITEMS: tuple[ItemOf[_Run], ...] = (
    _y_and_dx_item("Cube: y and dx", "Cube", 0.5, named=True),
    _cube_direct_item,
    _second_item("second derivative through x", "x", "hx", DETACHED, 1.0),
    _second_item("second derivative through grad_output", "g", "hg", NOT_DIFFERENTIABLE, 0.5),
    _y_and_dx_item("NumpyCube: y and dx", "NumpyCube", 1.0, named=False),
    _once_differentiable_item,
    unchanged_item,
    contract_of("Cube"),
)


@grader(DOUBLE_BACKWARD)
def grade_double_backward(evidence: Evidence) -> Report:
    """Grade: Cube's output and gradient (0.5), the exact shape of a direct backward call (0.5),
    the second derivative through x (1) and through grad_output (0.5); NumpyCube's output and
    gradient (1); differentiating NumpyCube twice raises torch's once_differentiable error (0.5: the
    stub carries the decorator, the item catches a learner who removes it or bypasses it);
    inputs unchanged (0.5); the Function contract."""
    data = double_inputs(evidence["seed"])
    run = _Run(evidence["cases"], data, reference.cube_second_derivatives(data["x"], data["g"], data["v"]))
    return judge(DOUBLE_BACKWARD, ITEMS, run, run.cases.values())
