"""The grader of notebook 05's exercise 3: double backward (Cube) and once_differentiable (NumpyCube)."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.beyond_basics.double_backward import DOUBLE_BACKWARD, DOUBLE_SHAPE, double_inputs
from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference, report_for
from autograder.grading.beyond_basics.items import Record, exact_shapes_item, recorded, verdict_item
from autograder.grading.function_contract import contract_items
from autograder.grading.toolkit import add_notes, step_error, tensors_unchanged_item

#: What torch says when a once_differentiable backward is differentiated.
ONCE_DIFFERENTIABLE_MESSAGE = "marked with @once_differentiable"


@grader(DOUBLE_BACKWARD)
def grade_double_backward(evidence: Evidence) -> Report:
    """Grade: Cube's output and gradient (0.5), the exact shape of a direct backward call (0.5),
    the second derivative through x (1) and through grad_output (0.5); NumpyCube's output and
    gradient (1); differentiating NumpyCube twice raises torch's once_differentiable error (0.5: the
    stub carries the decorator, the item catches a learner who removes it or bypasses it);
    inputs unchanged (0.5)."""
    report = report_for(DOUBLE_BACKWARD)
    data = double_inputs(evidence["seed"])
    cube, npc = evidence["cases"]["Cube"], evidence["cases"]["NumpyCube"]
    ref = reference.cube_second_derivatives(data["x"], data["g"], data["v"])
    x, g, v = data["x"], data["g"], data["v"]
    co = cube["outputs"]
    report.add(
        verdict_item(
            "Cube: y and dx",
            cube,
            ("forward", "autograd"),
            lambda: [
                compare("y", co.get("y"), ref["y"]),
                compare(
                    "dx",
                    recorded(cube, "autograd", "dx"),
                    ref["dx"],
                    mistakes={"grad_output is ignored": 3 * x**2},
                ),
            ],
            0.5,
        )
    )
    report.add(exact_shapes_item("Cube: direct backward", cube, {"dx": DOUBLE_SHAPE}, 0.5))
    second = {**cube, "errors": {**cube["errors"], "second": _second_hint(step_error(cube, "second"))}}
    hx_mistakes = {
        "the saved x was detached (or backward ran under no_grad): dx does not depend on x": np.zeros_like(x)
    }
    report.add(
        verdict_item(
            "second derivative through x",
            second,
            ("second",),
            lambda: [compare("d<dx, v>/dx", _zero_if_none(co.get("hx"), x), ref["hx"], mistakes=hx_mistakes)],
            1.0,
        )
    )
    report.add(
        verdict_item(
            "second derivative through grad_output",
            second,
            ("second",),
            lambda: [
                compare(
                    "d<dx, v>/dgrad_output",
                    _zero_if_none(co.get("hg"), g),
                    ref["hg"],
                    mistakes={
                        "backward does not use grad_output with differentiable operations": np.zeros_like(g)
                    },
                )
            ],
            0.5,
        )
    )
    report.add(
        verdict_item(
            "NumpyCube: y and dx",
            npc,
            ("forward", "autograd"),
            lambda: [
                compare("y", npc["outputs"].get("y"), ref["y"]),
                compare("dx", recorded(npc, "autograd", "dx"), ref["dx"]),
            ],
            1.0,
        )
    )
    report.add(_once_differentiable_item(npc, v))
    ran = {"x": x, "grad_output": g}
    report.add(tensors_unchanged_item(evidence["cases"], {"Cube": ran, "NumpyCube": ran}))
    for item in contract_items(evidence["cases"], "Cube", {"Cube": ran, "NumpyCube": ran}):
        report.add(item)
    add_notes(report, evidence["cases"].values())
    return report


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


def _once_differentiable_item(record: Record, v: np.ndarray) -> Item:
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
