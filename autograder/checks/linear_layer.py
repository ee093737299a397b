"""Checks for notebook 01, one linear layer by hand.

``numerical_gradient`` (centred finite differences), ``linear_forward``/``linear_backward``,
``mse_loss``, and ``fit_cubic`` (gradient descent with those functions on a noisy sine curve).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autograder import reference
from autograder.calling import call
from autograder.checks.core import (
    Check,
    Evidence,
    NotAnArray,
    collect_notes,
    freeze,
    inputs_unchanged_item,
    register,
    run_check,
    run_forward_backward,
    unpack,
)
from autograder.compare import Verdict, compare
from autograder.report import Item, Report
from autograder.tolerances import FINITE_DIFFERENCE, FLOAT64, LOSS, REPORTED_LOSS, TRAINING
from backprop_utils.data import make_sine_regression

# Pairwise-distinct sizes, so that a transposed weight gradient or a bias summed over the wrong axis
# cannot have the right shape; N = 1 hides batch-scaling bugs, so it is a case of its own.
LINEAR_CASES: dict[str, tuple[int, int, int]] = {"N=4, D=3, M=5": (4, 3, 5), "N=1, D=3, M=5": (1, 3, 5)}


LINEAR_LAYER_POINTS = 4.0


def linear_inputs(seed: int, n: int, d: int, m: int) -> dict[str, np.ndarray]:
    """Inputs for one case: non-trivial x (N, D), W (M, D), b (M,), and a random upstream dout (N, M)."""
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((n, d)),
        "W": rng.standard_normal((m, d)) + 0.5,
        "b": rng.standard_normal(m),
        "dout": rng.standard_normal((n, m)),
    }


def _case_seed(seed: int, index: int) -> int:
    return 1000 * seed + index


def collect_linear_layer(linear_forward: Any, linear_backward: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``linear_forward``/``linear_backward`` on every case and record the results."""
    cases = {}
    for index, (label, dims) in enumerate(LINEAR_CASES.items()):
        data = linear_inputs(_case_seed(seed, index), *dims)
        inputs = {k: data[k] for k in ("x", "W", "b")}
        cases[label] = run_forward_backward(
            linear_forward, linear_backward, inputs, data["dout"], ["dx", "dW", "db"]
        )
    return {"check": "linear_layer", "seed": seed, "cases": cases}


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


def grade_linear_layer(evidence: Evidence) -> Report:
    """Grade recorded evidence: out (2), dx, dW, db (1 each), the N = 1 case (1), inputs unchanged (0.5)."""
    report = Report("linear_forward and linear_backward", LINEAR_LAYER_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    originals = {}
    verdicts: dict[str, dict[str, Verdict]] = {}
    for index, (label, dims) in enumerate(LINEAR_CASES.items()):
        data = linear_inputs(_case_seed(seed, index), *dims)
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
    collect_notes(report, cases)
    return report


LINEAR_LAYER = register(
    Check(
        "linear_layer",
        "linear_forward and linear_backward",
        LINEAR_LAYER_POINTS,
        collect_linear_layer,
        grade_linear_layer,
    )
)


def check_linear_layer(linear_forward: Any, linear_backward: Any, *, seed: int = 0) -> float:
    """Grade ``linear_forward`` and ``linear_backward`` against PyTorch; print feedback; return points."""
    return run_check(LINEAR_LAYER, linear_forward, linear_backward, seed=seed)


# --------------------------------------------------------------------------------------------
# numerical_gradient
# --------------------------------------------------------------------------------------------

NUMERICAL_GRADIENT_POINTS = 3.0

# x of several shapes: an implementation that loops over rows and columns fails on 1-D and 3-D x,
# one written for 1-D x fails on the others.
GRADIENT_SHAPES: dict[str, tuple[int, ...]] = {
    "2-D x of shape (3, 4)": (3, 4),
    "1-D x of shape (5,)": (5,),
    "3-D x of shape (2, 3, 4)": (2, 3, 4),
}
#: A large step on a cubic: the centred difference is then visibly not the gradient, so an
#: implementation that ignores ``h`` (or uses another formula) gives other values.
STEP_CASE, STEP_SHAPE, LARGE_STEP = "h = 0.1 on a cubic", (2, 5), 0.1
DEFAULT_STEP = 1e-5
#: Verdict problems that mean the value is not a float64 array of the expected shape.
SHAPE_PROBLEMS = ("missing", "type", "shape", "dtype")


def wavy(x: Any, lib: Any, c: Any) -> Any:
    """``sum(c * sin(3 x)) + sum(exp(x)) / 2 + log(sum(exp(x)))`` with ``lib`` numpy or torch.

    Its second derivative is up to ~30 where its slope is small, so forward differences with
    h = 1e-5 are off by ~80 to 1000 times the FINITE_DIFFERENCE tolerance, while centred
    differences stay ~20 times inside it; the log-sum-exp term couples every element to every other.
    """
    return lib.sum(c * lib.sin(3.0 * x)) + 0.5 * lib.sum(lib.exp(x)) + lib.log(lib.sum(lib.exp(x)))


def cubic(x: Any, lib: Any, c: Any) -> Any:
    """``sum(c * x**3)``: its centred difference with step h is exactly ``c * (3 x**2 + h**2)``."""
    return lib.sum(c * x**3)


def gradient_inputs(seed: int, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    """Non-trivial x and coefficients c, both of ``shape``; |c| in [1, 3] with random signs."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    c = rng.uniform(1.0, 3.0, shape) * rng.choice([-1.0, 1.0], shape)
    return {"x": x, "c": c}


def numpy_function(fn: Callable[..., Any], c: np.ndarray) -> Callable[[np.ndarray], float]:
    """The scalar function handed to the learner: ``fn`` evaluated with numpy, returned as a float."""

    def f(x: np.ndarray) -> float:
        return float(fn(np.asarray(x), np, c))

    return f


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


def _gradient_cases(seed: int) -> dict[str, tuple[Callable[..., Any], dict[str, np.ndarray], float | None]]:
    """Each case: (test function, inputs, the h passed to the learner or None for the default)."""
    cases: dict[str, tuple[Callable[..., Any], dict[str, np.ndarray], float | None]] = {}
    for index, (label, shape) in enumerate(GRADIENT_SHAPES.items()):
        cases[label] = (wavy, gradient_inputs(_case_seed(seed, index), shape), None)
    cases[STEP_CASE] = (
        cubic,
        gradient_inputs(_case_seed(seed, len(GRADIENT_SHAPES)), STEP_SHAPE),
        LARGE_STEP,
    )
    return cases


def collect_numerical_gradient(numerical_gradient: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``numerical_gradient`` on every case; record the result and x afterwards."""
    cases = {}
    for label, (fn, data, h) in _gradient_cases(seed).items():
        x = np.array(data["x"], copy=True)
        f = numpy_function(fn, data["c"])
        kwargs = {} if h is None else {"h": h}
        outcome = call(numerical_gradient, f, x, name="numerical_gradient", **kwargs)
        cases[label] = {
            "outputs": {"grad": freeze(outcome.result)} if outcome.ok else {},
            "error": outcome.error,
            "notes": outcome.notes,
            "inputs_after": {"x": freeze(x)},
        }
    return {"check": "numerical_gradient", "seed": seed, "cases": cases}


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


def grade_numerical_gradient(evidence: Evidence) -> Report:
    """Grade recorded evidence: shape and dtype (0.5), values on 2-D x (1), on 1-D and 3-D x (1),
    the step h is used (0.5), x unchanged (0.5)."""
    report = Report("numerical_gradient", NUMERICAL_GRADIENT_POINTS)
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
    collect_notes(report, records)
    return report


NUMERICAL_GRADIENT = register(
    Check(
        "numerical_gradient",
        "numerical_gradient",
        NUMERICAL_GRADIENT_POINTS,
        collect_numerical_gradient,
        grade_numerical_gradient,
    )
)


def check_numerical_gradient(numerical_gradient: Any, *, seed: int = 0) -> float:
    """Grade ``numerical_gradient`` against PyTorch autograd; print feedback; return points."""
    return run_check(NUMERICAL_GRADIENT, numerical_gradient, seed=seed)


# --------------------------------------------------------------------------------------------
# mse_loss
# --------------------------------------------------------------------------------------------

MSE_LOSS_POINTS = 3.0

# N != M, so that dividing by N instead of N * M is visible; M = 1 is the shape of a regression
# target; N = 1 hides batch-scaling mistakes, so it is a case of its own.
MSE_CASES: dict[str, tuple[int, int]] = {"N=4, M=3": (4, 3), "N=5, M=1": (5, 1), "N=1, M=3": (1, 3)}


def mse_inputs(seed: int, n: int, m: int) -> dict[str, np.ndarray]:
    """Random predictions and targets, both (N, M)."""
    rng = np.random.default_rng(seed)
    return {"pred": rng.standard_normal((n, m)), "target": rng.standard_normal((n, m))}


def collect_mse_loss(mse_loss: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``mse_loss`` on every case and record the results and the inputs afterwards."""
    cases = {}
    for index, (label, dims) in enumerate(MSE_CASES.items()):
        args = {k: np.array(v, copy=True) for k, v in mse_inputs(_case_seed(seed, index), *dims).items()}
        outcome = call(mse_loss, args["pred"], args["target"], name="mse_loss")
        values, error = unpack(outcome, ["loss", "dpred"], "mse_loss")
        cases[label] = {
            "outputs": {k: freeze(v) for k, v in values.items()},
            "error": error,
            "notes": outcome.notes,
            "inputs_after": {k: freeze(v) for k, v in args.items()},
        }
    return {"check": "mse_loss", "seed": seed, "cases": cases}


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
    out = record["outputs"]
    return {
        name: compare(name, out.get(name), ref[name], tol=tol, mistakes=mistakes[name], batch_size=n)
        for name, tol in (("loss", LOSS), ("dpred", FLOAT64))
    }


def grade_mse_loss(evidence: Evidence) -> Report:
    """Grade recorded evidence: loss (1) and dpred (1) for N=4, M=3; the M = 1 case (0.5); the N = 1
    case (0.5); inputs unchanged (0.5)."""
    report = Report("mse_loss", MSE_LOSS_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    originals, verdicts = {}, {}
    for index, (label, dims) in enumerate(MSE_CASES.items()):
        data = mse_inputs(_case_seed(seed, index), *dims)
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
    collect_notes(report, cases)
    return report


MSE_LOSS = register(Check("mse_loss", "mse_loss", MSE_LOSS_POINTS, collect_mse_loss, grade_mse_loss))


def check_mse_loss(mse_loss: Any, *, seed: int = 0) -> float:
    """Grade ``mse_loss`` against PyTorch's ``mse_loss``; print feedback; return points."""
    return run_check(MSE_LOSS, mse_loss, seed=seed)


# --------------------------------------------------------------------------------------------
# fit_cubic
# --------------------------------------------------------------------------------------------

FIT_CUBIC_POINTS = 3.0

#: The second data set is the same curve moved up: its best fit needs a bias of about SHIFT, which
#: a loop that never updates b cannot reach (on the centred sine the best bias is ~0, so there
#: forgetting the bias update costs nothing and goes unnoticed).
SHIFT = 1.0
FIT_CASES = ("sine", f"sine shifted up by {SHIFT:g}")
#: "Clearly better than predicting the mean": at most this fraction of the constant predictor's loss.
CLEARLY_BETTER = 0.5


def cubic_features(x: np.ndarray) -> np.ndarray:
    """The columns x, x**2, x**3 of the cubic model, (N, 3)."""
    return np.stack([x, x**2, x**3], axis=1)


def fit_data(seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The data sets the check fits: the notebook's noisy sine for this seed, and the same shifted up."""
    x, y = make_sine_regression(seed=seed)
    return {FIT_CASES[0]: (x, y), FIT_CASES[1]: (x, y + SHIFT)}


def _losses_as_array(losses: Any) -> np.ndarray:
    return np.array([float(v) for v in losses], dtype=np.float64)


def collect_fit_cubic(fit_cubic: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``fit_cubic(x, y)`` with its own defaults on each data set; record W, b, losses."""
    cases = {}
    for label, (x, y) in fit_data(seed).items():
        outcome = call(fit_cubic, x.copy(), y.copy(), name="fit_cubic")
        values, error = unpack(outcome, ["W", "b", "losses"], "fit_cubic")
        outputs: dict[str, Any] = {}
        notes = list(outcome.notes)
        if error is None:
            outputs = {"W": freeze(values["W"]), "b": freeze(values["b"])}
            converted = call(_losses_as_array, values["losses"], name="converting losses to floats")
            outputs["losses"] = (
                converted.result if converted.ok else NotAnArray(type(values["losses"]).__name__)
            )
        cases[label] = {"outputs": outputs, "error": error, "notes": notes}
    return {"check": "fit_cubic", "seed": seed, "cases": cases}


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


def grade_fit_cubic(evidence: Evidence) -> Report:
    """Grade recorded evidence: W and b shapes (0.5), the loss curve (0.5), beats the constant predictor
    (0.5), converged to the least-squares loss (1), fits the shifted curve as well (0.5)."""
    report = Report("fit_cubic", FIT_CUBIC_POINTS)
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
        collect_notes(report, cases)
        return report

    outputs = cases[main]["outputs"]
    report.add(_fit_shapes_item(outputs, best[main]))
    report.add(_loss_curve_item(outputs.get("losses"), losses[main]))

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
        advice = _fit_advice(loss, constant, outputs.get("losses"))
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
    collect_notes(report, cases)
    return report


def _fit_advice(loss: float, constant: float, losses: Any) -> str:
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
    return " Likely mistake: not converged yet: more steps or a larger lr (is the loss curve still falling?)"


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


FIT_CUBIC = register(Check("fit_cubic", "fit_cubic", FIT_CUBIC_POINTS, collect_fit_cubic, grade_fit_cubic))


def check_fit_cubic(fit_cubic: Any, *, seed: int = 0) -> float:
    """Run ``fit_cubic`` on data made from ``seed``; grade its W and b; print feedback; return points.

    The loss is recomputed from W and b here: the losses ``fit_cubic`` reports are never trusted.
    """
    return run_check(FIT_CUBIC, fit_cubic, seed=seed)
