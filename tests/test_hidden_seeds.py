"""Every hidden test depends on its fresh seed: evidence made on the visible seed earns nothing there.

The engine replaces each hidden test's seed with one drawn for the run (:mod:`autograder.grading.seeds`),
and a grader remakes the inputs from the seed the evidence carries. That protects the hidden test only
if what a grader checks changes with the seed: a check whose data, sizes and expected answers were the
same for every seed would let an answer fitted to the public visible call (a remembered output, a fit of
the notebook's own data) pass the hidden test too. Here every test cell of the course is replayed: the
course's solution runs on the visible seed, its evidence is relabelled with a hidden seed, and the
trusted side grades it. It must lose the hidden test's points, while the honest evidence of the same
solution on the hidden seed earns them all.
"""

from __future__ import annotations

import ast
from functools import cache
from typing import Any

import pytest
from check_helpers import solution_cells

from autograder.checks import all_checks
from autograder.checks import evidence as evidence_json
from autograder.course import is_grade
from autograder.course.build import assignments, source_notebook

#: A seed as the engine draws them (in ``SEED_RANGE``), fixed so that the test is the same every run.
HIDDEN_SEED = 1_234_567

#: What replayed evidence still earns, by check, and why: a property that is the same for every seed's
#: inputs (a shape, a type, whether a Function saves through ``save_for_backward``, whether it raises when
#: differentiated twice) is the same in the visible call's evidence. Every item that measures a value
#: is the seed's own; each check here still loses most of its points, and every check not named loses all.
STRUCTURAL = {
    "numerical_gradient": "the shape and dtype of the returned gradient",
    "fit_cubic": "the shapes of the returned W and b",
    "two_layer_net": "the keys of the returned gradients",
    "train_two_layer_net": "the form of (params, losses)",
    "two_layer_loss_torch": "that the loss is part of the autograd graph",
    "mul_constant": "tensors saved through save_for_backward",
    "my_relu": "tensors saved through save_for_backward",
    "linear_function": "needs_input_grad honoured; tensors saved through save_for_backward",
    "backward_by_hand": "one gradient entry per input",
    "linear_module": "parameters registered; LinearFunction used",
    "linear_function_func": "the form of the direct backward call",
    "batched_linear": "the form of the direct backward call",
    "double_backward": "the form of Cube's direct backward; NumpyCube raises when differentiated twice",
    "ctx_features": "indices marked non-differentiable, in place marked dirty, None for an unused output",
    "softmax_cross_entropy_function": "the form of the direct backward call",
    "legendre": "the form of the direct backward call",
    "fit_legendre": "the form of (a, b, c, d); a loss that went down",
    "saved_tensors": "an empty list where nothing requires grad",
    "attention_op": "opcheck's verdicts and the fake kernel's layout, which judge the operator's form",
}


def _test_cells() -> list[tuple[str, str, ast.Call]]:
    """(assignment, grade id, the hidden call) of every test cell of the course."""
    found = []
    for assignment in assignments():
        for cell in source_notebook(assignment.source).cells:
            if not is_grade(cell):
                continue
            calls = [
                node
                for node in ast.walk(ast.parse(cell.source))
                if isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id.startswith("check_")
            ]
            final = max(calls, key=lambda n: (n.lineno, n.col_offset))
            found.append((assignment.name, cell.metadata["nbgrader"]["grade_id"], final))
    return found


@cache
def _solution(assignment: str) -> dict[str, Any]:
    return solution_cells(assignment)


def _evidence(check: Any, learner: list[Any], seed: int) -> dict[str, Any]:
    """The check's evidence, through the engine's JSON round trip."""
    return evidence_json.loads(evidence_json.dumps(check.collect(*learner, seed=seed)))


TEST_CELLS = _test_cells()


def test_every_declared_check_is_replayed() -> None:
    named = {call.func.id.removeprefix("check_") for _, _, call in TEST_CELLS}
    assert named == set(all_checks())
    assert set(STRUCTURAL) <= named


@pytest.mark.parametrize(("assignment", "grade_id", "call"), TEST_CELLS, ids=[c[1] for c in TEST_CELLS])
def test_visible_evidence_relabelled_with_a_hidden_seed_fails(
    assignment: str, grade_id: str, call: ast.Call
) -> None:
    check = all_checks()[call.func.id.removeprefix("check_")]
    namespace = _solution(assignment)
    learner = [eval(compile(ast.Expression(arg), grade_id, "eval"), namespace) for arg in call.args]  # noqa: S307
    visible = _evidence(check, learner, 0)
    assert visible["seed"] == 0

    honest = check.grade(_evidence(check, learner, HIDDEN_SEED))
    assert honest.score == check.points, honest.render()

    replayed = check.grade({**visible, "seed": HIDDEN_SEED})
    earned = {item.name for item in replayed.items if item.passed}
    assert replayed.score < check.points, f"{check.name}: the visible call's evidence passes the hidden test"
    if check.name not in STRUCTURAL:
        assert replayed.score == 0.0, (
            f"{check.name}: replayed evidence earns {replayed.score} for {earned}: make those items "
            "depend on the seed's inputs or, if they judge only the form of the answer (a shape, "
            f"save_for_backward), add {check.name!r} to STRUCTURAL in this file, saying which"
        )
    else:
        assert replayed.score <= check.points / 2, f"{check.name}: replayed evidence earns {earned}"
        assert replayed.score > 0, (
            f"{check.name} now depends on its seed in every item: take it off STRUCTURAL"
        )


def test_no_drawn_seed_meets_the_visible_calls_data() -> None:
    """What makes the four checks that used to ignore their seed fail replayed evidence holds for every
    seed the engine draws, not only for HIDDEN_SEED: the drawn values never come near the visible ones."""
    import numpy as np

    from autograder.checks.core import case_seed
    from autograder.checks.custom_functions import spiral_recipe
    from autograder.checks.jacobian_layers import planted_error
    from autograder.checks.linear_layer import fit_data
    from autograder.checks.two_layer_net import TURNS, training_data
    from autograder.grading.seeds import draw
    from backprop_utils.data import make_spiral

    visible_sine = next(iter(fit_data(0).values()))[1]
    visible_plant = planted_error(0)["sizes"]["float64"]
    for seed in [draw() for _ in range(100)]:
        (_, sine), (_, shifted) = fit_data(seed).values()
        assert np.corrcoef(sine, visible_sine)[0, 1] < 0, "a hidden sine is mirrored"
        assert np.mean(shifted - sine) >= 1.5, "and shifted further than the visible 1"
        recipe = spiral_recipe(seed)
        assert recipe["steps"] != 30 and recipe["hidden"] != 32, "the visible call's sizes are never drawn"
        assert abs(planted_error(seed)["sizes"]["float64"] - visible_plant) > 1e-6
        turned, unturned = training_data(seed)[0][-1], make_spiral(seed=case_seed(seed, 1))[0][-1]
        cosine = turned @ unturned / (np.linalg.norm(turned) * np.linalg.norm(unturned))
        assert cosine <= np.cos(TURNS[0]) + 1e-9, "a hidden spiral is turned by 90 degrees or more"
