"""The grader of notebook 04's train_spiral: the learner's Linear against nn.Linear, step by step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.custom_functions.train_spiral import TRAIN_SPIRAL, SpiralRun, spiral_recipe
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import FLOAT64
from autograder.grading import grader, reference
from autograder.grading.toolkit import ItemOf, describe, judge
from autograder.grading.training import loop_difference
from backprop_utils.data import make_spiral


def reference_train_spiral(seed: int, *, zero_grad: bool = True, lr: float | None = None) -> list[float]:
    """The course's own run of the recipe with ``nn.Linear``, with the steps, hidden units and learning
    rate the check passes for ``seed``: the loss before each SGD step. ``zero_grad=False`` or another
    ``lr`` replay a learner's mistake (grading names one only when its curve is the learner's)."""
    recipe = spiral_recipe(seed)
    steps, hidden, lr = recipe["steps"], recipe["hidden"], recipe["lr"] if lr is None else lr
    X, y = make_spiral(seed=seed)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    with reference.torch_seeded(seed):
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


SPIRAL_SEEDED_LATE = (
    "Step 0 is the loss of the initial parameters, before any update, so they differ from the recipe's. "
    "Likely mistake: torch.manual_seed(seed) called after the layers are built: torch's generator was not "
    "in the seeded state when the first layer drew its weights, and was in it when training began; seed "
    "first, then build the layers."
)


def _step_zero_text(run: SpiralRun) -> str:
    """What step 0 differing says: the seed set after the layers when the generator's recorded states show
    it (not seeded when the first layer was built, seeded when the first forward pass began), else the
    candidates."""
    if run.get("seeded_at_build") is False and run.get("seeded_at_first_step") is True:
        return SPIRAL_SEEDED_LATE
    return SPIRAL_STEP_ZERO


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


def _losses_problem(run: SpiralRun, label: str, steps: int) -> str | None:
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


@dataclass(frozen=True)
class _Run:
    """What every item reads: the two runs, the number of steps the check asked for, and the seed."""

    mine: SpiralRun
    theirs: SpiralRun
    steps: int
    seed: int

    @classmethod
    def of(cls, evidence: Evidence) -> _Run:
        runs, seed = evidence["runs"], evidence["seed"]
        return cls(runs["your Linear"], runs["nn.Linear"], spiral_recipe(seed)["steps"], seed)

    @property
    def problem(self) -> str | None:
        """Why the two runs' losses cannot be compared, or None."""
        mine, theirs = self.mine, self.theirs
        if mine["error"] and not theirs["error"] and "is not implemented yet" in mine["error"]:
            # the stub that raised is Linear's, since the same train_spiral runs with nn.Linear
            return (
                "your Linear is not implemented yet (it raises NotImplementedError); "
                "train_spiral runs with nn.Linear"
            )
        return _losses_problem(mine, "your Linear", self.steps) or _losses_problem(
            theirs, "nn.Linear", self.steps
        )


def _losses_item(run: _Run) -> Item:
    """One finite loss per step in each run (0.5)."""
    problem = run.problem
    return Item("losses", problem is None, problem or f"{run.steps} finite losses per run", 0.5)


def _same_item(run: _Run) -> Item:
    """The learner's Linear, actually used, gives the same losses as nn.Linear step by step (1)."""
    name, mine, theirs = "same as nn.Linear", run.mine, run.theirs
    if run.problem:
        return Item(name, False, f"not checked: {run.problem}")
    if mine["made"] == 0 and theirs["made"] == 0:
        return Item(
            name,
            False,
            "train_spiral made no layer of the class it is given (with your Linear, and with nn.Linear). "
            "Likely mistake: train_spiral ignores its linear_cls argument and builds its layers from a fixed "
            "class; build both layers from it, linear_cls(2, hidden) and linear_cls(hidden, 3).",
        )
    if min(mine["made"], theirs["made"]) < 2 or min(mine["forward"], theirs["forward"]) < run.steps:
        return Item(
            name,
            False,
            "train_spiral must build both layers from the class it is given (linear_cls(2, hidden) and "
            f"linear_cls(hidden, 3)) and call them at every step; it made {mine['made']} and ran "
            f"{mine['forward']} forward passes of your Linear.",
        )
    verdict = compare("losses with your Linear", mine["losses"], theirs["losses"])
    if verdict.ok:
        return Item(
            name,
            True,
            f"the same loss at every one of {run.steps} steps (max abs error {verdict.max_abs_err:.1e})",
        )
    close = np.isclose(mine["losses"], theirs["losses"], rtol=FLOAT64.rtol, atol=FLOAT64.atol)
    return Item(
        name,
        False,
        f"{verdict.message()} The runs part at step {int(np.argmin(close))}: if step 0 already differs, the "
        "initial parameters differ (check Linear's initialisation); otherwise a gradient does.",
    )


def _recipe_item(run: _Run) -> Item:
    """The nn.Linear run follows the recipe: it matches the course's own run (0.5); a replayed mistake
    whose curve is the learner's is named."""
    name = "follows the recipe"
    unusable = _losses_problem(run.theirs, "nn.Linear", run.steps)
    if unusable:
        return Item(name, False, f"not checked: {unusable}", 0.5)
    ref = np.array(reference_train_spiral(run.seed))
    verdict = compare("losses with nn.Linear", run.theirs["losses"], ref)
    if verdict.ok:
        return Item(name, True, "the nn.Linear run matches the course's own", 0.5)
    why = loop_difference(run.theirs["losses"], ref, _spiral_replays(run.seed), _step_zero_text(run.theirs))
    return Item(name, False, f"{verdict.message()} {why}".strip(), 0.5)


#: What is checked, in order.
ITEMS: tuple[ItemOf[_Run], ...] = (_losses_item, _same_item, _recipe_item)


@grader(TRAIN_SPIRAL)
def grade_train_spiral(evidence: Evidence) -> Report:
    """Grade recorded evidence: one finite loss per step (0.5); the learner's Linear, actually used, gives
    the same losses as nn.Linear step by step (1); the nn.Linear run follows the recipe, i.e. matches
    the course's own run (0.5)."""
    run = _Run.of(evidence)
    return judge(TRAIN_SPIRAL, ITEMS, run, evidence["runs"].values())
