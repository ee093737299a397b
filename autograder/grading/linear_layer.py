"""The graders of notebook 01's checks (see :mod:`autograder.checks.linear_layer` for their inputs)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence, case_seed
from autograder.checks.linear_layer import (
    CLEARLY_BETTER,
    DEFAULT_STEP,
    FIT_CASES,
    FIT_CUBIC,
    GRADIENT_SHAPES,
    LINEAR_CASES,
    LINEAR_LAYER,
    MSE_CASES,
    MSE_LOSS,
    NUMERICAL_GRADIENT,
    SHAPE_PROBLEMS,
    STEP_CASE,
    _gradient_cases,
    cubic_features,
    fit_data,
    linear_inputs,
    mse_inputs,
    numpy_function,
)
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import FINITE_DIFFERENCE, FLOAT64, LOSS, REPORTED_LOSS, TRAINING
from autograder.grading import grader, reference, report_for
from autograder.grading.toolkit import add_notes, inputs_unchanged_item
from autograder.grading.training import IGNORED_X, fitted_the_notebooks_x


def _linear_verdicts(record: dict[str, Any], data: dict[str, np.ndarray]) -> dict[str, Verdict]:
    ref = reference.linear(data["x"], data["W"], data["b"], data["dout"])
    out, n = record["outputs"], data["x"].shape[0]
    ones = np.ones_like(data["dout"])
    mistakes = {
        "out": {"the bias is missing": data["x"] @ data["W"].T},
        "dx": {
            "the upstream gradient dout is ignored (dx computed as if dout were all ones)": ones @ data["W"]
        },
        "dW": {
            "the upstream gradient dout is ignored (dW computed as if dout were all ones)": ones.T @ data["x"]
        },
        "db": {
            "summed over axis 1 instead of the batch axis 0": data["dout"].sum(axis=1),
            "dout was not summed over the batch axis 0": data["dout"],
        },
    }
    return {
        name: compare(name, out.get(name), ref[name], mistakes=mistakes[name], batch_size=n)
        for name in ("out", "dx", "dW", "db")
    }


@grader(LINEAR_LAYER)
def grade_linear_layer(evidence: Evidence) -> Report:
    """Grade recorded evidence: out (2), dx, dW, db (1 each), the N = 1 case (1), inputs unchanged (0.5)."""
    report = report_for(LINEAR_LAYER)
    seed, cases = evidence["seed"], evidence["cases"]
    originals = {}
    verdicts: dict[str, dict[str, Verdict]] = {}
    for index, (label, dims) in enumerate(LINEAR_CASES.items()):
        data = linear_inputs(case_seed(seed, index), *dims)
        originals[label] = data
        verdicts[label] = _linear_verdicts(cases[label], data)

    main, single = LINEAR_CASES
    error = cases[main]["error"]
    for name, weight in (("out", 2.0), ("dx", 1.0), ("dW", 1.0), ("db", 1.0)):
        verdict = verdicts[main][name]
        if verdict.problem == "missing" and error:
            report.add(Item(name, False, error, weight))
        else:
            report.add(Item.from_verdicts(name, [verdict], weight))

    if cases[single]["error"]:
        report.add(Item("N = 1", False, cases[single]["error"]))
    else:
        report.add(Item.from_verdicts("N = 1", list(verdicts[single].values())))
    report.add(inputs_unchanged_item(cases, originals))
    add_notes(report, cases.values())
    return report


def forward_difference(f: Callable[[np.ndarray], float], x: np.ndarray, h: float) -> np.ndarray:
    """``(f(x + h e_i) - f(x)) / h``: the wrong answer the centred difference exists to avoid."""
    x = np.array(x, dtype=np.float64, copy=True)
    fx = f(x)
    grad = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + h
        grad[index] = (f(x) - fx) / h
        x[index] = saved
    return grad


def _gradient_verdict(
    label: str, record: dict[str, Any], fn: Callable[..., Any], data: dict, h: float | None
) -> Verdict:
    """The learner's gradient for one case against autograd's (or, for a large h, the exact centred
    difference), with the forward difference and the missing 1/2 as named mistakes."""
    x, c = data["x"], data["c"]
    exact = reference.gradient(lambda t: fn(t, torch, torch.from_numpy(c)), x)
    f = numpy_function(fn, c)
    if h is None:
        expected = exact
        step = DEFAULT_STEP
        mistakes = {
            "forward differences (f(x + h) - f(x)) / h, which are accurate only to ~h * f''; "
            "use the centred (f(x + h) - f(x - h)) / (2 h)": forward_difference(f, x, step),
            "divided by h instead of 2 h": 2.0 * exact,
        }
    else:
        # Centred difference of c * x**3 with step h, exactly: c * ((x + h)**3 - (x - h)**3) / (2 h).
        expected = exact + c * h**2
        step = h
        mistakes = {
            f"the h you were given is not used: these are the exact derivatives, while the centred "
            f"difference with h = {h} is c * (3 x**2 + h**2) for this cubic": exact,
            "forward differences (f(x + h) - f(x)) / h; use the centred (f(x + h) - f(x - h)) / (2 h)": (
                forward_difference(f, x, step)
            ),
            "divided by h instead of 2 h": 2.0 * expected,
        }
    return compare(
        f"gradient ({label})",
        record["outputs"].get("grad"),
        expected,
        tol=FINITE_DIFFERENCE,
        mistakes=mistakes,
    )


def _values_item(name: str, labels: list[str], records: dict, verdicts: dict, weight: float) -> Item:
    for label in labels:
        if records[label]["error"]:
            return Item(name, False, f"{label}: {records[label]['error']}", weight)
    return Item.from_verdicts(name, [verdicts[label] for label in labels], weight)


def _x_unchanged_item(records: dict[str, dict[str, Any]], originals: dict[str, np.ndarray]) -> Item:
    name, weight = "x unchanged", 0.5
    for label, record in records.items():
        if record["error"]:
            return Item(name, False, f"not checked: case {label} did not run", weight)
    for label, record in records.items():
        after, before = record["inputs_after"]["x"], originals[label]
        if isinstance(after, np.ndarray) and after.shape == before.shape and np.array_equal(after, before):
            continue
        message = f"in case {label}, x is not the same after your function returned"
        if isinstance(after, np.ndarray) and after.shape == before.shape:
            change = float(np.max(np.abs(after - before)))
            if change <= 1e-12 * (1.0 + float(np.max(np.abs(before)))):
                message += (
                    f" (changed by at most {change:.1e}, a rounding error): adding and subtracting h "
                    "does not give back exactly the number you started from; save the element before "
                    "you change it and put that saved value back"
                )
            else:
                message += (
                    f" (changed by up to {change:.3g}): restore each element to its saved value after "
                    "evaluating f at x + h and x - h"
                )
        return Item(name, False, message + ".", weight)
    return Item(name, True, "every element of x was restored exactly", weight)


@grader(NUMERICAL_GRADIENT)
def grade_numerical_gradient(evidence: Evidence) -> Report:
    """Grade recorded evidence: shape and dtype (0.5), values on 2-D x (1), on 1-D and 3-D x (1),
    the step h is used (0.5), x unchanged (0.5)."""
    report = report_for(NUMERICAL_GRADIENT)
    seed, records = evidence["seed"], evidence["cases"]
    cases = _gradient_cases(seed)
    verdicts = {label: _gradient_verdict(label, records[label], *case) for label, case in cases.items()}
    shaped = list(GRADIENT_SHAPES)

    errors = [f"{label}: {records[label]['error']}" for label in shaped if records[label]["error"]]
    bad_shape = [v for label, v in verdicts.items() if label in shaped and v.problem in SHAPE_PROBLEMS]
    if errors:
        report.add(Item("shape and dtype", False, errors[0], 0.5))
    elif bad_shape:
        report.add(Item("shape and dtype", False, bad_shape[0].message(), 0.5))
    else:
        report.add(Item("shape and dtype", True, "float64, shaped like x, for 1-D, 2-D and 3-D x", 0.5))
    report.add(_values_item("values, 2-D x", shaped[:1], records, verdicts, 1.0))
    report.add(_values_item("values, 1-D and 3-D x", shaped[1:], records, verdicts, 1.0))
    report.add(_values_item("uses h", [STEP_CASE], records, verdicts, 0.5))
    report.add(_x_unchanged_item(records, {label: case[1]["x"] for label, case in cases.items()}))
    add_notes(report, records.values())
    return report


def _mse_verdicts(record: dict[str, Any], data: dict[str, np.ndarray]) -> dict[str, Verdict]:
    ref = reference.mse(data["pred"], data["target"])
    diff = data["pred"] - data["target"]
    n, size = diff.shape[0], diff.size
    square = diff**2
    mistakes = {
        "loss": {
            "summed over all elements instead of averaged (the mean divides by N * M)": square.sum(),
            "divided by N, the batch size, instead of N * M, the number of elements": square.sum() / n,
            "averaged over each row only (axis=1): the loss is one number, the mean over all elements": (
                square.mean(axis=1)
            ),
            "averaged over the batch axis only (axis=0): the loss is one number, the mean over all "
            "elements": square.mean(axis=0),
        },
        "dpred": {
            "the factor 2 from the derivative of (pred - target)**2 is missing": diff / size,
            "sign flipped: the derivative of (pred - target)**2 with respect to pred is "
            "2 * (pred - target), not 2 * (target - pred)": -2.0 * diff / size,
            "divided by N, the batch size, instead of N * M, the number of elements": 2.0 * diff / n,
            "not divided by N * M: this is the gradient of the sum, not of the mean": 2.0 * diff,
        },
    }
    if n == 1:
        # With one row, dividing by N divides by 1: the sum and the division by N are one mistake here,
        # named as what it is (the N = 1 item is where a learner meets it).
        one_row = (
            f"divided by N, which is 1 here (or not divided at all): the mean divides by N * M = {size}, "
            "the number of elements, also when N = 1"
        )
        mistakes["loss"] = {one_row: square.sum(), **mistakes["loss"]}
        mistakes["dpred"] = {one_row: 2.0 * diff, **mistakes["dpred"]}
    out = record["outputs"]
    return {
        name: compare(name, out.get(name), ref[name], tol=tol, mistakes=mistakes[name], batch_size=n)
        for name, tol in (("loss", LOSS), ("dpred", FLOAT64))
    }


@grader(MSE_LOSS)
def grade_mse_loss(evidence: Evidence) -> Report:
    """Grade recorded evidence: loss (1) and dpred (1) for N=4, M=3; the M = 1 case (0.5); the N = 1
    case (0.5); inputs unchanged (0.5)."""
    report = report_for(MSE_LOSS)
    seed, cases = evidence["seed"], evidence["cases"]
    originals, verdicts = {}, {}
    for index, (label, dims) in enumerate(MSE_CASES.items()):
        data = mse_inputs(case_seed(seed, index), *dims)
        originals[label] = data
        verdicts[label] = _mse_verdicts(cases[label], data)

    main, column, single = MSE_CASES
    for name in ("loss", "dpred"):
        verdict = verdicts[main][name]
        if verdict.problem == "missing" and cases[main]["error"]:
            report.add(Item(name, False, cases[main]["error"], 1.0))
        else:
            report.add(Item.from_verdicts(name, [verdict], 1.0))
    for item_name, label in (("M = 1, pred of shape (N, 1)", column), ("N = 1", single)):
        if cases[label]["error"]:
            report.add(Item(item_name, False, cases[label]["error"], 0.5))
        else:
            report.add(Item.from_verdicts(item_name, list(verdicts[label].values()), 0.5))
    report.add(inputs_unchanged_item(cases, originals))
    add_notes(report, cases.values())
    return report


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


def _loss_curve_item(losses: Any, loss: float | None) -> Item:
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
        return Item(
            name, False, f"losses has NaN or inf values, first at step {first}: training diverged.", weight
        )
    if not losses[-1] < losses[0]:
        return Item(
            name, False, f"the loss went from {losses[0]:.4g} to {losses[-1]:.4g}: it should go down.", weight
        )
    if loss is None or not np.isfinite(loss):
        return Item(name, False, "not checked: the returned W and b cannot be evaluated.", weight)
    if abs(losses[-1] - loss) > REPORTED_LOSS.atol + REPORTED_LOSS.rtol * abs(loss):
        return Item(
            name,
            False,
            f"your last recorded loss is {losses[-1]:.4g}, but the W and b you returned give {loss:.4g}: "
            "record the mean squared error of the parameters you update, and return those parameters.",
            weight,
        )
    return Item(
        name, True, f"goes down from {losses[0]:.4g} to {losses[-1]:.4g} over {losses.size} steps", weight
    )


@grader(FIT_CUBIC)
def grade_fit_cubic(evidence: Evidence) -> Report:
    """Grade recorded evidence: W and b shapes (0.5), the loss curve (0.5), beats the constant predictor
    (0.5), converged to the least-squares loss (1), fits the shifted curve as well (0.5)."""
    report = report_for(FIT_CUBIC)
    seed, cases = evidence["seed"], evidence["cases"]
    main, shifted = FIT_CASES
    data = fit_data(seed)
    best = {label: reference.least_squares(cubic_features(x), y) for label, (x, y) in data.items()}
    losses: dict[str, float | None] = {}
    why: dict[str, str | None] = {}
    for label, (x, y) in data.items():
        outputs = cases[label]["outputs"]
        losses[label], why[label] = refit_loss(outputs.get("W"), outputs.get("b"), x, y)

    error = cases[main]["error"]
    if error:
        for name, weight in (
            ("W and b shapes", 0.5),
            ("loss curve", 0.5),
            ("beats the constant predictor", 0.5),
            ("converged", 1.0),
            ("shifted curve", 0.5),
        ):
            report.add(Item(name, False, error, weight))
        add_notes(report, cases.values())
        return report

    outputs = cases[main]["outputs"]
    report.add(_fit_shapes_item(outputs, best[main]))
    ignored_x = fitted_the_notebooks_x(outputs.get("W"), outputs.get("b"), *data[main])
    curve = _loss_curve_item(outputs.get("losses"), losses[main])
    if ignored_x and not curve.passed:
        curve = Item(
            curve.name, False, f"your losses are not those of your W and b at the x given. {IGNORED_X}", 0.5
        )
    report.add(curve)

    loss, optimum = losses[main], float(best[main]["loss"])
    constant = float(np.var(data[main][1]))
    if loss is None:
        unusable = f"cannot evaluate your model: {why[main]}."
        report.add(Item("beats the constant predictor", False, unusable, 0.5))
        report.add(Item("converged", False, unusable, 1.0))
    elif not np.isfinite(loss):
        diverged = (
            "the returned W and b give a loss of NaN or inf: training diverged. Is the update "
            "W -= lr * dW (a + there climbs the loss), and is lr small enough?"
        )
        report.add(Item("beats the constant predictor", False, diverged, 0.5))
        report.add(Item("converged", False, diverged, 1.0))
    else:
        advice = (
            " " + IGNORED_X if ignored_x else _fit_advice(loss, constant, outputs.get("losses"), *data[main])
        )
        beats = loss <= CLEARLY_BETTER * constant
        message = f"final loss {loss:.5f}; always predicting the mean of y gives {constant:.5f}"
        if not beats:
            message += f", and a fit should reach less than half of that.{advice}"
        report.add(Item("beats the constant predictor", beats, message, 0.5))
        converged = loss <= optimum * (1 + TRAINING.rtol) + TRAINING.atol
        message = f"final loss {loss:.5f}; the least-squares optimum is {optimum:.5f}"
        if converged:
            message += f" (within {TRAINING.rtol:.0%})"
        else:
            message += f", and a converged fit is within {TRAINING.rtol:.0%} of it.{advice}"
        report.add(Item("converged", converged, message, 1.0))
    report.add(_shifted_item(losses, best, why, cases[shifted]["error"]))
    add_notes(report, cases.values())
    return report


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


def _shifted_item(
    losses: dict[str, float | None], best: dict[str, dict[str, np.ndarray]], why: dict, error: str | None
) -> Item:
    name, weight = "shifted curve", 0.5
    main, shifted = FIT_CASES
    if error:
        return Item(name, False, f"on the {shifted}: {error}", weight)
    if losses[shifted] is None:
        return Item(name, False, f"on the {shifted}: cannot evaluate your model: {why[shifted]}.", weight)
    main_loss, loss = losses[main], losses[shifted]
    if main_loss is None or not np.isfinite(main_loss) or not np.isfinite(loss):
        return Item(
            name,
            False,
            f"on the {shifted}: not checked, the fit on the sine did not give a finite loss.",
            weight,
        )
    # Relative to the sine's own fit, so that a loop that has not converged loses points once, not twice.
    ratio_main = main_loss / float(best[main]["loss"])
    optimum = float(best[shifted]["loss"])
    ratio = loss / optimum
    if ratio <= max(ratio_main, 1.0) * (1 + TRAINING.rtol):
        return Item(
            name,
            True,
            f"on the {shifted} the final loss is {loss:.5f}, as close to its best as on the sine",
            weight,
        )
    message = (
        f"on the {shifted} the final loss is {loss:.5f}, {ratio:.2f} times the best {optimum:.5f} "
        f"(on the sine: {ratio_main:.2f} times)."
    )
    if ratio_main <= 1 + TRAINING.rtol:
        message += (
            " Likely mistake: b is never updated (b -= lr * db), so the model cannot move the curve up."
        )
    else:
        message += " A model whose bias learns fits both equally well: is b updated (b -= lr * db)?"
    return Item(name, False, message, weight)
