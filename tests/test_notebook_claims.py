"""The numbers and behaviours the notebooks' text states, measured on the code they describe.

Each test names the notebook and the sentence it backs. The solution functions come from the
notebook's own source in ``solutions/``: its set-up and solution cells (and, where named, the cells
defining a helper), executed as the notebook would execute them.
"""

from __future__ import annotations

import time
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import jupytext
import numpy as np
import pytest

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions"


@cache
def notebook(stem: str, *helpers: str) -> dict[str, Any]:
    """The namespace after running the set-up and solution cells of ``solutions/<stem>.py``, plus the
    untagged cells that define one of the functions named in ``helpers``."""
    nb = jupytext.read(SOLUTIONS / f"{stem}.py", fmt="py:percent")
    namespace: dict[str, Any] = {"__name__": f"notebook_{stem}"}
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        kind = cell.metadata.get("title")
        wanted = kind in ("locked", "solution") or (
            kind is None and any(f"def {name}(" in cell.source for name in helpers)
        )
        if wanted:
            exec(compile(cell.source, f"{stem}.py", "exec"), namespace)
    return namespace


# ---------------------------------------------------------------------------------------------
# 01_linear_layer
# ---------------------------------------------------------------------------------------------


def test_01_adding_then_subtracting_h_does_not_always_restore_x() -> None:
    """Hint 3 of exercise 1: `0.5 + 1e-5 - 1e-5 == 0.5` is False, and +h, -2h, +h changes about three
    random values in four."""
    h = 1e-5
    assert 0.5 + h - h != 0.5
    x = np.random.default_rng(0).standard_normal(100_000)
    changed = np.mean(x + h - 2 * h + h != x)
    assert 0.65 < changed < 0.85


def test_01_centred_difference_of_a_cube_is_exactly_3x2_plus_h2() -> None:
    """Try it of exercise 1: the centred difference of sum(x**3) is 3x^2 + h^2, and a function that
    steps by 1e-5 instead of h = 1e-3 fails the comparison."""
    ns = notebook("01_linear_layer")
    from autograder.tolerances import FINITE_DIFFERENCE
    from utils import compare

    x = np.random.default_rng(0).standard_normal((2, 3, 4))
    h = 1e-3
    grad = ns["numerical_gradient"](lambda a: np.sum(a**3), x.copy(), h=h)
    assert np.allclose(grad, 3 * x**2 + h**2, rtol=0, atol=1e-9)
    ignores_h = ns["numerical_gradient"](lambda a: np.sum(a**3), x.copy(), h=1e-5)
    assert not compare(tol=FINITE_DIFFERENCE, g=(ignores_h, 3 * x**2 + h**2)).all_ok
    assert compare(tol=FINITE_DIFFERENCE, g=(grad, 3 * x**2 + h**2)).all_ok


def test_01_centred_and_forward_difference_errors() -> None:
    """Exercise 1: with h = 1e-5 the centred difference is within about 1e-10 to 1e-9 of the true
    gradient, a forward difference about 1e-5 away."""
    ns = notebook("01_linear_layer")
    x = np.random.default_rng(0).standard_normal((3, 4))
    exact = np.sin(x) + x * np.cos(x)
    error = np.max(np.abs(ns["numerical_gradient"](lambda a: np.sum(a * np.sin(a)), x) - exact))
    assert 1e-12 < error < 5e-9
    h = 1e-5
    f0 = np.sum(x * np.sin(x))
    forward = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        step = x.copy()
        step[index] += h
        forward[index] = (np.sum(step * np.sin(step)) - f0) / h
    assert 1e-6 < np.max(np.abs(forward - exact)) < 1e-4


def test_01_mse_worked_example() -> None:
    """Exercise 3: pred [[3, 1]] against [[1, 1]] gives L = 2; pred[0, 0] = 3.001 gives 2.0020005;
    the differences [[1, 2, 0], [0, 1, 2]] give 10 / 6."""
    mse_loss = notebook("01_linear_layer")["mse_loss"]
    loss, dpred = mse_loss(np.array([[3.0, 1.0]]), np.array([[1.0, 1.0]]))
    assert loss == pytest.approx(2.0)
    assert np.allclose(dpred, [[2.0, 0.0]])
    assert mse_loss(np.array([[3.001, 1.0]]), np.array([[1.0, 1.0]]))[0] == pytest.approx(2.0020005)
    assert mse_loss(np.array([[1.0, 2, 0], [0, 1, 2]]), np.zeros((2, 3)))[0] == pytest.approx(10 / 6)
    assert mse_loss(np.array([[1.0], [2.0], [4.0]]), np.zeros((3, 1)))[0] == pytest.approx(7.0)


def test_01_learning_rates() -> None:
    """Exercise 4: least squares about 0.0073; lr 0.1 to 0.85 within 5% after 1000 steps, in well
    under a second; lr 0.05 about twice the optimum; the threshold 2 / largest curvature about 0.89;
    lr 0.9 near 1e13, lr 1 near 1e186, lr 1.5 NaN."""
    ns = notebook("01_linear_layer", "cubic_features")
    from utils import make_sine_regression

    x, y = make_sine_regression()
    features = ns["cubic_features"](x)
    A = np.c_[features, np.ones(len(x))]
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    best = float(np.mean((A @ coef - y) ** 2))
    assert best == pytest.approx(0.0073, abs=5e-5)
    assert 2 / np.linalg.eigvalsh(2 / len(x) * A.T @ A).max() == pytest.approx(0.89, abs=0.005)

    def final_loss(lr: float) -> float:
        W, b, _ = ns["fit_cubic"](x, y, lr=lr)
        return float(np.mean((features @ W.T + b - y.reshape(-1, 1)) ** 2))

    for lr in (0.1, 0.2, 0.5, 0.8, 0.85):
        start = time.perf_counter()
        assert final_loss(lr) <= 1.05 * best, lr
        assert time.perf_counter() - start < 1.0
    assert 1.8 < final_loss(0.05) / best < 2.5
    with warnings.catch_warnings(), np.errstate(over="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")
        assert 1e12 < final_loss(0.9) < 1e14
        assert 1e185 < final_loss(1.0) < 1e187
        assert np.isnan(final_loss(1.5))
