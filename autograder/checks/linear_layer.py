"""Checks for notebook 01, one linear layer by hand: the collect half (numpy only, no PyTorch).

``numerical_gradient`` (centred finite differences), ``linear_forward``/``linear_backward``,
``mse_loss``, and ``fit_cubic`` (gradient descent with those functions on a noisy sine curve).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypedDict

import numpy as np

from autograder.checks.calling import call
from autograder.checks.core import (
    Check,
    Evidence,
    NotAnArray,
    case_seed,
    freeze,
    register,
    run_check,
    run_forward_backward,
    unpack,
)
from backprop_utils.data import make_sine_regression

# Pairwise-distinct sizes, so that a transposed weight gradient or a bias summed over the wrong axis
# cannot have the right shape; N = 1 hides batch-scaling bugs, so it is a case of its own.
LINEAR_CASES: dict[str, tuple[int, int, int]] = {"N=4, D=3, M=5": (4, 3, 5), "N=1, D=3, M=5": (1, 3, 5)}


def linear_inputs(seed: int, n: int, d: int, m: int) -> dict[str, np.ndarray]:
    """Inputs for one case: non-trivial x (N, D), W (M, D), b (M,), and a random upstream dout (N, M)."""
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((n, d)),
        "W": rng.standard_normal((m, d)) + 0.5,
        "b": rng.standard_normal(m),
        "dout": rng.standard_normal((n, m)),
    }


def collect_linear_layer(linear_forward: Any, linear_backward: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``linear_forward``/``linear_backward`` on every case and record the results."""
    cases = {}
    for index, (label, dims) in enumerate(LINEAR_CASES.items()):
        data = linear_inputs(case_seed(seed, index), *dims)
        inputs = {k: data[k] for k in ("x", "W", "b")}
        cases[label] = run_forward_backward(
            linear_forward, linear_backward, inputs, data["dout"], ["dx", "dW", "db"]
        )
    return {"check": "linear_layer", "seed": seed, "cases": cases}


LINEAR_LAYER = register(
    Check("linear_layer", "linear_forward and linear_backward", 4.0, collect_linear_layer)
)


def check_linear_layer(linear_forward: Any, linear_backward: Any, *, seed: int = 0) -> float:
    """Grade ``linear_forward`` and ``linear_backward`` against PyTorch; print feedback; return points."""
    return run_check(LINEAR_LAYER, linear_forward, linear_backward, seed=seed)


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


def _gradient_cases(seed: int) -> dict[str, tuple[Callable[..., Any], dict[str, np.ndarray], float | None]]:
    """Each case: (test function, inputs, the h passed to the learner or None for the default)."""
    cases: dict[str, tuple[Callable[..., Any], dict[str, np.ndarray], float | None]] = {}
    for index, (label, shape) in enumerate(GRADIENT_SHAPES.items()):
        cases[label] = (wavy, gradient_inputs(case_seed(seed, index), shape), None)
    cases[STEP_CASE] = (
        cubic,
        gradient_inputs(case_seed(seed, len(GRADIENT_SHAPES)), STEP_SHAPE),
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


NUMERICAL_GRADIENT = register(
    Check("numerical_gradient", "numerical_gradient", 3.0, collect_numerical_gradient)
)


def check_numerical_gradient(numerical_gradient: Any, *, seed: int = 0) -> float:
    """Grade ``numerical_gradient`` against PyTorch autograd; print feedback; return points."""
    return run_check(NUMERICAL_GRADIENT, numerical_gradient, seed=seed)


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
        args = {k: np.array(v, copy=True) for k, v in mse_inputs(case_seed(seed, index), *dims).items()}
        outcome = call(mse_loss, args["pred"], args["target"], name="mse_loss")
        values, error = unpack(outcome, ["loss", "dpred"], "mse_loss")
        cases[label] = {
            "outputs": {k: freeze(v) for k, v in values.items()},
            "error": error,
            "notes": outcome.notes,
            "inputs_after": {k: freeze(v) for k, v in args.items()},
        }
    return {"check": "mse_loss", "seed": seed, "cases": cases}


MSE_LOSS = register(Check("mse_loss", "mse_loss", 3.0, collect_mse_loss))


def check_mse_loss(mse_loss: Any, *, seed: int = 0) -> float:
    """Grade ``mse_loss`` against PyTorch's ``mse_loss``; print feedback; return points."""
    return run_check(MSE_LOSS, mse_loss, seed=seed)


#: The second data set is the same curve moved up: its best fit needs a bias of about its shift, which
#: a loop that never updates b cannot reach (on the centred sine the best bias is ~0, so there
#: forgetting the bias update costs nothing and goes unnoticed). The visible call (seed 0) fits the
#: notebook's own data, shifted by SHIFT; every other seed mirrors the curve, scales it by a drawn
#: amplitude and shifts it by a drawn amount above SHIFT, so that W and b fitted to the visible data
#: are worse than a constant on a hidden test's, and fit its shifted curve worse still (docs/checks.md 32).
SHIFT = 1.0
AMPLITUDES, SHIFTS = (-1.4, -0.6), (1.5, 2.5)


FIT_CASES = ("sine", "sine shifted up")


#: "Clearly better than predicting the mean": at most this fraction of the constant predictor's loss.
CLEARLY_BETTER = 0.5


def cubic_features(x: np.ndarray) -> np.ndarray:
    """The columns x, x**2, x**3 of the cubic model, (N, 3)."""
    return np.stack([x, x**2, x**3], axis=1)


def fit_data(seed: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The data sets the check fits: the notebook's noisy sine for this seed, and the same shifted up;
    for any seed but the visible 0, mirrored, scaled and shifted by amounts drawn from the seed, at
    points x drawn from the seed in [-1, 1], denser towards the ends: a fit that ignores its x argument
    and rebuilds the notebook's ``np.linspace(-1, 1, 256)`` fits the visible call and, about ten times
    the optimum's loss, not these (docs/checks.md 32)."""
    x, y = make_sine_regression(seed=seed)
    scale, shift = 1.0, SHIFT
    if seed != 0:
        rng = np.random.default_rng(case_seed(seed, 1))
        scale = rng.uniform(*AMPLITUDES)
        shift = rng.uniform(*SHIFTS)
        x = np.sort(np.sin(np.pi / 2 * rng.uniform(-1.0, 1.0, x.size)))  # denser towards -1 and 1
        y = np.sin(np.pi * x) + (y - np.sin(np.pi * np.linspace(-1.0, 1.0, x.size)))  # the same noise
    return {FIT_CASES[0]: (x, scale * y), FIT_CASES[1]: (x, scale * y + shift)}


def _losses_as_array(losses: Any) -> np.ndarray:
    return np.array([float(v) for v in losses], dtype=np.float64)


class FitCase(TypedDict):
    """The evidence of one call of ``fit_cubic``: what it returned (``outputs``: ``W``, ``b`` frozen and
    ``losses`` as float64, empty when it raised or returned something else than three values), its
    error (None when it returned them) and the warnings it printed."""

    outputs: dict[str, Any]
    error: str | None
    notes: list[str]


def collect_fit_cubic(fit_cubic: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``fit_cubic(x, y)`` with its own defaults on each data set; record W, b, losses."""
    cases: dict[str, FitCase] = {}
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


FIT_CUBIC = register(Check("fit_cubic", "fit_cubic", 3.0, collect_fit_cubic))


def check_fit_cubic(fit_cubic: Any, *, seed: int = 0) -> float:
    """Run ``fit_cubic`` on data made from ``seed``; grade its W and b; print feedback; return points.

    The loss is recomputed from W and b here: the losses ``fit_cubic`` reports are never trusted.
    """
    return run_check(FIT_CUBIC, fit_cubic, seed=seed)
