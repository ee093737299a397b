"""The grader of notebook 01's cubic fit: the learner's loss curve against the course's own run."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from autograder.checks.compare import compare
from autograder.checks.core import Evidence
from autograder.checks.linear_layer import (
    CLEARLY_BETTER,
    FIT_CASES,
    FIT_CUBIC,
    SHAPE_PROBLEMS,
    FitCase,
    cubic_features,
    fit_data,
)
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import REPORTED_LOSS, TRAINING
from autograder.grading import grader, reference
from autograder.grading.toolkit import ItemOf, judge
from autograder.grading.training import IGNORED_X, fitted_the_notebooks_x


def refit_loss(W: Any, b: Any, x: np.ndarray, y: np.ndarray) -> tuple[float | None, str | None]:
    """The mean squared error of the returned W and b on (x, y), recomputed here; never the learner's.

    Returns (loss, None), or (None, why it cannot be computed). The loss may be NaN or inf.
    """
    if not isinstance(W, np.ndarray) or not isinstance(b, np.ndarray):
        return None, "W and b must be numpy arrays"
    if W.size != 3 or b.size != 1 or W.dtype.kind not in "fiu" or b.dtype.kind not in "fiu":
        return None, f"W has shape {W.shape} and b {b.shape}, expected (1, 3) and (1,)"
    with np.errstate(all="ignore"):
        pred = cubic_features(x) @ W.reshape(1, 3).astype(np.float64).T + b.reshape(1).astype(np.float64)
        return float(np.mean((pred - y.reshape(-1, 1)) ** 2)), None


def _fit_shapes_item(outputs: dict[str, Any], best: dict[str, np.ndarray]) -> Item:
    losses = outputs.get("losses")
    if isinstance(losses, np.ndarray) and losses.size == 0:
        # The notebook creates W and b before the loop: their shapes earn nothing until a step has run.
        return Item("W and b shapes", False, "not checked: losses is empty, so no training step ran.", 0.5)
    for name in ("W", "b"):
        verdict = compare(name, outputs.get(name), best[name])
        if verdict.problem in SHAPE_PROBLEMS:
            return Item("W and b shapes", False, verdict.message(), 0.5)
    return Item("W and b shapes", True, "W (1, 3) and b (1,), float64", 0.5)


def _loss_curve_item(losses: Any, loss: float | None, n: int, ascent: bool = False) -> Item:
    """The recorded losses: one finite loss per step, going down, the last one the returned W and b's
    (``n`` points: a last loss n times theirs is a sum recorded for the mean; ``ascent``: the curve is the
    notebook's loop with the update's sign flipped)."""
    name, weight = "loss curve", 0.5
    if not isinstance(losses, np.ndarray):
        got = getattr(losses, "type_name", type(losses).__name__)
        return Item(name, False, f"losses should be a list of floats, one per step; got a {got}.", weight)
    if losses.ndim != 1 or losses.size < 2:
        return Item(
            name, False, f"losses should hold one loss per step; it has {losses.size} value(s).", weight
        )
    if not np.all(np.isfinite(losses)):
        first = int(np.argmax(~np.isfinite(losses)))
        said = f"losses has NaN or inf values, first at step {first}: training diverged."
        return Item(name, False, f"{said} {ASCENT}" if ascent else said, weight)
    if not losses[-1] < losses[0]:
        return Item(
            name, False, f"the loss went from {losses[0]:.4g} to {losses[-1]:.4g}: it should go down.", weight
        )
    if loss is None or not np.isfinite(loss):
        return Item(name, False, "not checked: the returned W and b cannot be evaluated.", weight)
    if abs(losses[-1] - loss) > REPORTED_LOSS.atol + REPORTED_LOSS.rtol * abs(loss):
        summed = loss > 0 and abs(losses[-1] / (n * loss) - 1.0) < 1e-6
        return Item(
            name,
            False,
            f"your last recorded loss is {losses[-1]:.4g}, but the W and b you returned give {loss:.4g}"
            + (
                f". Likely mistake: the sum of squared errors recorded, not their mean (N = {n} times it)"
                if summed
                else ""
            )
            + ": record the mean squared error of the parameters you update, and return those parameters.",
            weight,
        )
    return Item(
        name, True, f"goes down from {losses[0]:.4g} to {losses[-1]:.4g} over {losses.size} steps", weight
    )


MAIN, SHIFTED = FIT_CASES


@dataclass(frozen=True)
class _Run:
    """What every item reads: the recorded cases, the data remade from the seed, each case's least-squares
    fit, the loss of the learner's W and b recomputed here (None, with ``why``, where it cannot be), and
    whether the fit is the notebook's own points' rather than the x given."""

    cases: dict[str, FitCase]
    data: dict[str, tuple[np.ndarray, np.ndarray]]
    best: dict[str, dict[str, np.ndarray]]
    losses: dict[str, float | None]
    why: dict[str, str | None]
    ignored_x: bool

    @classmethod
    def of(cls, evidence: Evidence) -> _Run:
        cases, data = evidence["cases"], fit_data(evidence["seed"])
        best = {label: reference.least_squares(cubic_features(x), y) for label, (x, y) in data.items()}
        refits = {
            label: refit_loss(cases[label]["outputs"].get("W"), cases[label]["outputs"].get("b"), *xy)
            for label, xy in data.items()
        }
        out = cases[MAIN]["outputs"]
        ignored_x = bool(fitted_the_notebooks_x(out.get("W"), out.get("b"), *data[MAIN]))
        losses = {label: loss for label, (loss, _) in refits.items()}
        return cls(cases, data, best, losses, {label: why for label, (_, why) in refits.items()}, ignored_x)

    @property
    def outputs(self) -> dict[str, Any]:
        return self.cases[MAIN]["outputs"]

    def unusable(self) -> str | None:
        """Why the main fit's loss cannot be judged (none, or not finite), else None."""
        loss = self.losses[MAIN]
        if loss is None:
            return f"cannot evaluate your model: {self.why[MAIN]}."
        if not np.isfinite(loss):
            said = "the returned W and b give a loss of NaN or inf: training diverged."
            if self.ascent:
                return f"{said} {ASCENT}"
            return f"{said} Is the update W -= lr * dW (a + there climbs the loss), and is lr small enough?"
        return None

    @cached_property
    def ascent(self) -> bool:
        """Whether the learner's losses are the notebook's loop with the update's sign flipped."""
        return ascent_replayed(self.outputs.get("losses"), *self.data[MAIN])

    def advice(self) -> str:
        """The likely reason a finite fit is poor."""
        if self.ignored_x:
            return " " + IGNORED_X
        return _fit_advice(self.losses[MAIN], self.constant, self.outputs.get("losses"), *self.data[MAIN])

    @property
    def constant(self) -> float:
        """The loss of always predicting the mean of y."""
        return float(np.var(self.data[MAIN][1]))


def _shapes_item(run: _Run) -> Item:
    """W (1, 3) and b (1,) (0.5)."""
    return _fit_shapes_item(run.outputs, run.best[MAIN])


def _curve_item(run: _Run) -> Item:
    """The recorded losses are those of the learner's own W and b (0.5)."""
    curve = _loss_curve_item(run.outputs.get("losses"), run.losses[MAIN], len(run.data[MAIN][0]), run.ascent)
    if run.ignored_x and not curve.passed:
        return Item(
            curve.name, False, f"your losses are not those of your W and b at the x given. {IGNORED_X}", 0.5
        )
    return curve


def _beats_item(run: _Run) -> Item:
    """The final loss is less than half the constant predictor's (0.5)."""
    name, unusable = "beats the constant predictor", run.unusable()
    if unusable:
        return Item(name, False, unusable, 0.5)
    loss, constant = run.losses[MAIN], run.constant
    beats = loss <= CLEARLY_BETTER * constant
    message = f"final loss {loss:.5f}; always predicting the mean of y gives {constant:.5f}"
    return Item(
        name,
        beats,
        message if beats else f"{message}, and a fit should reach less than half of that.{run.advice()}",
        0.5,
    )


def _converged_item(run: _Run) -> Item:
    """The final loss is within 5% of the least-squares optimum (1)."""
    name, unusable = "converged", run.unusable()
    if unusable:
        return Item(name, False, unusable, 1.0)
    loss, optimum = run.losses[MAIN], float(run.best[MAIN]["loss"])
    converged = loss <= optimum * (1 + TRAINING.rtol) + TRAINING.atol
    message = f"final loss {loss:.5f}; the least-squares optimum is {optimum:.5f}"
    if converged:
        return Item(name, True, f"{message} (within {TRAINING.rtol:.0%})", 1.0)
    return Item(
        name, False, f"{message}, and a converged fit is within {TRAINING.rtol:.0%} of it.{run.advice()}", 1.0
    )


def _shifted_unusable(run: _Run) -> str | None:
    """Why the shifted curve's fit cannot be judged against the sine's, or None."""
    if run.cases[SHIFTED]["error"]:
        return run.cases[SHIFTED]["error"]
    if run.losses[SHIFTED] is None:
        return f"cannot evaluate your model: {run.why[SHIFTED]}."
    main_loss, loss = run.losses[MAIN], run.losses[SHIFTED]
    if main_loss is None or not np.isfinite(main_loss) or not np.isfinite(loss):
        return "not checked, the fit on the sine did not give a finite loss."
    return None


def _shifted_curve_item(run: _Run) -> Item:
    """The shifted curve is fitted as close to its best as the sine (0.5): relative to the sine's own
    fit, so that a loop that has not converged loses points once, not twice."""
    name, weight = "shifted curve", 0.5
    unusable = _shifted_unusable(run)
    if unusable:
        return Item(name, False, f"on the {SHIFTED}: {unusable}", weight)
    ratio_main = run.losses[MAIN] / float(run.best[MAIN]["loss"])
    loss, optimum = run.losses[SHIFTED], float(run.best[SHIFTED]["loss"])
    ratio = loss / optimum
    said = f"on the {SHIFTED} the final loss is {loss:.5f}"
    if ratio <= max(ratio_main, 1.0) * (1 + TRAINING.rtol):
        return Item(name, True, f"{said}, as close to its best as on the sine", weight)
    why = (
        " Likely mistake: b is never updated (b -= lr * db), so the model cannot move the curve up."
        if ratio_main <= 1 + TRAINING.rtol
        else " A model whose bias learns fits both equally well: is b updated (b -= lr * db)?"
    )
    return Item(
        name,
        False,
        f"{said}, {ratio:.2f} times the best {optimum:.5f} (on the sine: {ratio_main:.2f} times).{why}",
        weight,
    )


#: What is checked, in order, with the weights each has when the main case raised (and all fail).
ITEMS: tuple[ItemOf[_Run], ...] = (
    _shapes_item,
    _curve_item,
    _beats_item,
    _converged_item,
    _shifted_curve_item,
)
WEIGHTS = {
    "W and b shapes": 0.5,
    "loss curve": 0.5,
    "beats the constant predictor": 0.5,
    "converged": 1.0,
    "shifted curve": 0.5,
}


def _all_sunk(run: _Run) -> list[Item]:
    """Every item, failed with the sine fit's error (it raised)."""
    return [Item(name, False, run.cases[MAIN]["error"], weight) for name, weight in WEIGHTS.items()]


@grader(FIT_CUBIC)
def grade_fit_cubic(evidence: Evidence) -> Report:
    """Grade recorded evidence: W and b shapes (0.5), the loss curve (0.5), beats the constant predictor
    (0.5), converged to the least-squares loss (1), fits the shifted curve as well (0.5); every item
    fails with the sine fit's error when it raised."""
    run = _Run.of(evidence)
    items = (_all_sunk,) if run.cases[MAIN]["error"] else ITEMS
    return judge(FIT_CUBIC, items, run, run.cases.values())


#: The notebook's fit_cubic: its default learning rate, and the W and b its scaffold starts from.
NOTEBOOK_LR = 0.5


def _notebook_start() -> tuple[np.ndarray, np.ndarray]:
    return 0.1 * np.random.default_rng(0).standard_normal((1, 3)), np.zeros(1)


def first_step_lr(losses: Any, x: np.ndarray, y: np.ndarray) -> float | None:
    """The learning rate that, with the right gradients, takes the notebook's starting W and b to the
    second recorded loss in one step; None when the losses do not start there (another start, or
    losses recorded after each update) or no such step exists.

    The loss is quadratic in (W, b): along the right gradient g from the start it is
    ``L0 - a |g|^2 + a^2 mean((A g)^2)``, so the step length a is a root of a quadratic (the smaller
    one: the first descent step). A learner whose gradients are all k times too small shows a = lr / k.
    """
    if not (isinstance(losses, np.ndarray) and losses.ndim == 1 and losses.size >= 2):
        return None
    W0, b0 = _notebook_start()
    A = np.c_[cubic_features(x), np.ones(len(x))]
    residual = A @ np.r_[W0.ravel(), b0] - y
    start = float(np.mean(residual**2))
    if not np.isclose(losses[0], start, rtol=1e-9, atol=0.0) or not np.isfinite(losses[1]):
        return None
    g = 2.0 / len(x) * A.T @ residual
    slope, curvature, drop = float(g @ g), float(np.mean((A @ g) ** 2)), start - float(losses[1])
    discriminant = slope**2 - 4.0 * curvature * drop
    if drop <= 0 or curvature <= 0 or discriminant < 0:
        return None
    return (slope - np.sqrt(discriminant)) / (2.0 * curvature)


def _fit_advice(loss: float, constant: float, losses: Any, x: np.ndarray, y: np.ndarray) -> str:
    """The likely reason a finite fit is poor, from the learner's own loss curve when it is usable."""
    if (
        isinstance(losses, np.ndarray)
        and losses.ndim == 1
        and losses.size >= 2
        and np.all(np.isfinite(losses))
    ):
        if losses[-1] < 0.9 * loss:
            return (
                f" Likely mistake: your losses end at {losses[-1]:.5f}, lower than the loss of the W and b "
                "you returned: are you returning the initial parameters, or copies made before training?"
            )
        if losses[-1] >= losses[0]:
            return " Likely mistake: the loss never went down: is the update sign flipped (W += lr * dW)?"
    if loss > constant:
        return " Likely mistake: worse than a constant: is the update sign flipped, or W never updated?"
    step = first_step_lr(losses, x, y)
    n = len(x)
    if step is not None and abs(NOTEBOOK_LR / step / n - 1.0) < 0.05:
        return (
            f" Likely mistake: your gradients are N = {n} times too small. Your first step lowered the "
            f"loss as far as a step of lr = {step:.3g} with the right gradients does, "
            f"{NOTEBOOK_LR} / {n}: if your lr is the notebook's {NOTEBOOK_LR}, a 1/N too many divides dW and "
            "db (in linear_backward, or in mse_loss's dpred). The checks of Exercises 2 and 3 say which; "
            "more steps would hide it."
        )
    if step is not None and abs(NOTEBOOK_LR / step - 1.0) < 0.05 and losses.size < 1000:
        return (
            " Likely mistake: not converged: too few steps. Your steps are right (those of "
            f"lr = {NOTEBOOK_LR} with the right gradients), but {losses.size} of them do not reach the "
            "optimum; the notebook's 1000 do."
        )
    return (
        " Likely mistake: not converged yet (is the loss curve still falling?). With the notebook's "
        f"lr = {NOTEBOOK_LR} and 1000 steps, right gradients converge: if you changed them, more steps or a "
        "larger lr; if you kept them, your gradients are too small (see the checks of Exercises 2 and 3)."
    )


ASCENT = (
    "Likely mistake: gradient ascent, W += lr * dW: your losses are, step by step, those of the notebook's "
    "loop from its start with the update's sign flipped, which climbs the loss until it overflows; the "
    "update is W -= lr * dW (and b -= lr * db)."
)


def ascent_replayed(losses: Any, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether ``losses`` are, at every step, those of the notebook's loop (its start, lr = 0.5) with the
    update's sign flipped: equal where finite (three steps at least), and not finite where it is not."""
    if not (isinstance(losses, np.ndarray) and losses.ndim == 1 and 3 <= losses.size <= 100_000):
        return False
    if np.isfinite(losses).all():  # named only where training diverged
        return False
    W0, b0 = _notebook_start()
    A = np.c_[cubic_features(x), np.ones(len(x))]
    theta, replay = np.r_[W0.ravel(), b0], np.empty(losses.size)
    with np.errstate(all="ignore"):
        for i in range(losses.size):
            residual = A @ theta - y
            replay[i] = np.mean(residual**2)
            theta = theta + NOTEBOOK_LR * 2.0 / len(x) * (A.T @ residual)
        finite = np.isfinite(losses)
        if finite.sum() < 3 or not np.array_equal(finite, np.isfinite(replay)):
            return False
        return bool(np.allclose(losses[finite], replay[finite], rtol=1e-6, atol=0.0))
