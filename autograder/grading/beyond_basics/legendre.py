"""The graders of notebook 05's exercise 6: LegendrePolynomial3 and the curve fit."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

import numpy as np

from autograder.checks.beyond_basics.legendre import (
    FIT_INIT,
    FIT_LEGENDRE,
    FIT_LR,
    FIT_STEPS,
    LEGENDRE,
    LEGENDRE_SHAPE,
    fit_legendre_data,
    legendre_inputs,
)
from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.functions import FunctionRecord
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import TRAINING
from autograder.grading import grader, reference
from autograder.grading.beyond_basics.items import exact_shapes_item, recorded, verdict_item
from autograder.grading.function_contract import contract_of, unchanged_item
from autograder.grading.toolkit import ItemOf, judge, step_error
from autograder.grading.training import replayed_fit_mistake


@dataclass(frozen=True)
class _Run:
    """What every item reads: the one case (label, record), its inputs remade from the seed, the reference."""

    label: str
    record: FunctionRecord
    x: np.ndarray
    g: np.ndarray
    ref: dict[str, np.ndarray]

    @classmethod
    def of(cls, evidence: Evidence) -> _Run:
        data = legendre_inputs(evidence["seed"])
        ((label, record),) = evidence["cases"].items()
        return cls(label, record, data["x"], data["g"], reference.legendre3(data["x"], data["g"]))

    @property
    def cases(self) -> dict[str, FunctionRecord]:
        return {self.label: self.record}

    @property
    def originals(self) -> dict[str, dict[str, np.ndarray]]:
        return {self.label: {"x": self.x, "grad_output": self.g}}


def _y_item(run: _Run) -> Item:
    """P3(x) (1)."""
    x, got = run.x, run.record["outputs"].get("y")
    halved = {"the factor 0.5 is missing": 5 * x**3 - 3 * x}
    return verdict_item(
        "y", run.record, ("forward",), lambda: [compare("y", got, run.ref["y"], mistakes=halved)], 1.0
    )


def _dx_item(run: _Run) -> Item:
    """Its gradient for a random upstream gradient (1)."""
    x, g = run.x, run.g
    mistakes = {
        "grad_output is ignored": 1.5 * (5 * x**2 - 1),
        "the derivative of 5x^3 is 15x^2, so P3'(x) = 1.5 (5x^2 - 1), not 0.5 (5x^2 - 3)": 0.5
        * (5 * x**2 - 3)
        * g,
    }
    got = recorded(run.record, "autograd", "dx")
    return verdict_item(
        "dx",
        run.record,
        ("forward", "autograd"),
        lambda: [compare("dx", got, run.ref["dx"], mistakes=mistakes)],
        1.0,
    )


def _direct_item(run: _Run) -> Item:
    """The exact shape of backward called directly (0.5)."""
    return exact_shapes_item("direct backward", run.record, {"dx": LEGENDRE_SHAPE}, 0.5)


def _sum_item(run: _Run) -> Item:
    """The gradient of y.sum(), whose upstream gradient is a stride-0 tensor not to be written to (0.5)."""
    ones_ref = reference.legendre3(run.x, np.ones_like(run.x))["dx"]
    got = recorded(run.record, "sum", "dx")
    return verdict_item(
        "dx of y.sum()",
        run.record,
        ("forward", "sum"),
        lambda: [compare("dx of y.sum()", got, ones_ref)],
        0.5,
    )


#: What is checked of LegendrePolynomial3, in order.
ITEMS: tuple[ItemOf[_Run], ...] = (
    _y_item,
    _dx_item,
    _direct_item,
    _sum_item,
    unchanged_item,
    contract_of("LegendrePolynomial3"),
)


@grader(LEGENDRE)
def grade_legendre(evidence: Evidence) -> Report:
    """Grade: P3(x) (1), its gradient for a random upstream gradient (1), the exact shape of a direct
    backward call (0.5), the gradient of y.sum(), whose upstream gradient is a stride-0 tensor that
    must not be written to (0.5), inputs unchanged (0.5), the Function contract."""
    run = _Run.of(evidence)
    return judge(LEGENDRE, ITEMS, run, [run.record])


@lru_cache(maxsize=4)
def reference_fit_loss(seed: int) -> float:
    x, y = fit_legendre_data(seed)
    return float(reference.legendre_fit(x, y, FIT_INIT, FIT_LR, FIT_STEPS)["loss"])


def legendre_model_loss(params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """The tutorial's loss, the sum of squared errors of a + b P3(c + d x), recomputed in trusted code."""
    a, b, c, d = (float(p) for p in params)
    z = c + d * x
    with np.errstate(all="ignore"):
        return float(np.sum((a + b * 0.5 * (5 * z**3 - 3 * z) - y) ** 2))


IGNORED_X_LEGENDRE = (
    "Likely mistake: fit_legendre ignores its x argument. Your (a, b, c, d) are exactly what the "
    "tutorial's loop reaches on its own evenly spaced points torch.linspace(-pi, pi, 2000) for this y; the "
    "check passed other points: fit the x you are given."
)


def fitted_the_tutorials_x(params: np.ndarray, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether ``params`` are the tutorial loop's result at evenly spaced points although x is others."""
    demo = np.linspace(-math.pi, math.pi, x.size)
    if np.allclose(x, demo):
        return False
    replay = reference.legendre_fit(demo, y, FIT_INIT, FIT_LR, FIT_STEPS)["params"]
    return bool(np.allclose(params, replay, rtol=1e-6, atol=1e-9))


@dataclass(frozen=True)
class _FitRun:
    """What the fit's items read: the fit's record, why its parameters cannot be judged (or None), and
    otherwise the sum of squared errors they give, at the start, and the tutorial loop's."""

    record: FunctionRecord
    unusable: str | None
    loss: float = math.nan
    start: float = math.nan
    target: float = math.nan
    ignored_x: bool = False
    mistake: str | None = None

    @classmethod
    def of(cls, evidence: Evidence) -> _FitRun:
        (record,) = evidence["cases"].values()
        params = record["outputs"].get("params")
        unusable = step_error(record, "fit") or _params_problem(params)
        if unusable:
            return cls(record, unusable)
        x, y = fit_legendre_data(evidence["seed"])
        loss, target = legendre_model_loss(params, x, y), reference_fit_loss(evidence["seed"])
        ignored_x = not _reached(loss, target) and fitted_the_tutorials_x(params, x, y)
        mistake = None if ignored_x or _reached(loss, target) else _replayed_mistake(params, x, y)
        start = legendre_model_loss(np.array(FIT_INIT), x, y)
        return cls(record, None, loss, start, target, ignored_x, mistake)


def _replayed_mistake(params: np.ndarray, x: np.ndarray, y: np.ndarray) -> str | None:
    """The tutorial's loop with one mistake, replayed on the check's x and y, whose parameters are the
    learner's (docs/checks.md item 28: named only when one replay ends exactly there)."""
    path = partial(reference.legendre_fit_path, x, y, FIT_INIT)
    stopped = (
        f"Likely mistake: the loop stops after {{k}} steps, where the tutorial's runs {FIT_STEPS}: your "
        "(a, b, c, d) are exactly its parameters after step {k}."
    )
    mean = (
        "Likely mistake: the loss is the mean of the squared errors, not their sum{early}: your (a, b, c, "
        f"d) are exactly where that loop goes, each step {x.size} times smaller than the tutorial's with "
        f"lr={FIT_LR:g}."
    )
    ascent = (
        "Likely mistake: gradient ascent, p += lr * p.grad (or a learning rate of the wrong sign){early}: "
        "your (a, b, c, d) are exactly where that loop goes, up the loss; the update is p -= lr * p.grad."
    )
    replays = {
        stopped: path(FIT_LR, FIT_STEPS),
        mean: path(FIT_LR, FIT_STEPS, mean=True),
        ascent: path(-FIT_LR, FIT_STEPS),
    }
    return replayed_fit_mistake(params, replays, FIT_STEPS)


def _params_problem(params: Any) -> str | None:
    """Why the returned parameters are not four finite numbers, or None."""
    if isinstance(params, np.ndarray) and params.shape == (4,) and np.all(np.isfinite(params)):
        return None
    message = f"the parameters are not four finite numbers: {params}"
    if isinstance(params, np.ndarray) and params.shape == (4,):
        message += (
            ": training diverged. Likely mistake: gradients never cleared after an update (they add up "
            "step after step: p.grad = None, or p.grad.zero_()), an update of the wrong sign "
            "(p -= lr * p.grad; a + climbs), or a learning rate other than 5e-6."
        )
    return message


def _reached(loss: float, target: float) -> bool:
    return bool(np.isfinite(loss) and loss <= target * (1 + TRAINING.rtol) + TRAINING.atol)


def _not_usable(run: _FitRun) -> str:
    """What an item that needs the parameters says when there are none: the fit's own error, if it raised."""
    error = step_error(run.record, "fit")
    return error or "not checked: no usable parameters."


def _returns_item(run: _FitRun) -> Item:
    """Four finite numbers returned (0.5)."""
    if run.unusable:
        return Item("returns (a, b, c, d)", False, run.unusable, 0.5)
    params = run.record["outputs"]["params"]
    return Item("returns (a, b, c, d)", True, "a={:.4g}, b={:.4g}, c={:.4g}, d={:.4g}".format(*params), 0.5)


def _went_down_item(run: _FitRun) -> Item:
    """A loss below the starting point's (0.5)."""
    if run.unusable:
        return Item("loss went down", False, _not_usable(run), 0.5)
    went_down = bool(np.isfinite(run.loss) and run.loss < run.start)
    message = f"sum of squared errors {run.loss:.4g}, from {run.start:.4g} at the start"
    if not went_down:
        up = (
            f": it should go down. {run.mistake}"
            if run.mistake
            else ": it should go down. Is the update p -= lr * p.grad?"
        )
        message += f". {IGNORED_X_LEGENDRE}" if run.ignored_x else up
    return Item("loss went down", went_down, message, 0.5)


def _reached_item(run: _FitRun) -> Item:
    """A loss within 5% of what the tutorial's loop reaches from the same start (1)."""
    name = "reaches the tutorial's loss"
    if run.unusable:
        return Item(name, False, _not_usable(run), 1.0)
    reached = _reached(run.loss, run.target)
    message = f"sum of squared errors {run.loss:.4g}; the tutorial's loop reaches {run.target:.4g}"
    if run.ignored_x:
        message += f". {IGNORED_X_LEGENDRE}"
    elif not reached:
        message += (
            f" and a fit should be within {TRAINING.rtol:.0%} of it. Start from a=0, b=-1, c=0, d=0.3 with "
            f"lr={FIT_LR:g} for {FIT_STEPS} steps, the loss being the sum (not the mean) of squared errors."
        ) + (f" {run.mistake}" if run.mistake else "")
    return Item(name, reached, message, 1.0)


#: What is checked of the fit, in order.
FIT_ITEMS: tuple[ItemOf[_FitRun], ...] = (_returns_item, _went_down_item, _reached_item)


@grader(FIT_LEGENDRE)
def grade_fit_legendre(evidence: Evidence) -> Report:
    """Grade: four finite numbers returned (0.5), a loss below the starting point's (0.5), and a loss
    within 5% of what the tutorial's loop reaches from the same start (1); every item fails with the
    fit's error when it raised."""
    run = _FitRun.of(evidence)
    return judge(FIT_LEGENDRE, FIT_ITEMS, run, [run.record])
