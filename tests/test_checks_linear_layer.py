"""The checks of notebook 01: correct answers earn full points, blanks zero, realistic mistakes lose points.

Each wrong implementation below is a mistake a learner could plausibly make. A test asserts that it
loses points, which property fails, and, where the check claims to diagnose it, that the feedback
names the mistake.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from check_helpers import blank, failed, grade, item, solution_cells

from autograder.checks import (
    CHECKS,
    check_fit_cubic,
    check_linear_layer,
    check_mse_loss,
    check_numerical_gradient,
)
from autograder.checks import linear_layer as checks_linear
from autograder.checks.evidence import NotAnArray
from autograder.checks.linear_layer import (
    FIT_CUBIC,
    GRADIENT_SHAPES,
    LINEAR_LAYER,
    MSE_LOSS,
    NUMERICAL_GRADIENT,
    cubic_features,
    gradient_inputs,
    numpy_function,
    wavy,
)
from autograder.checks.tolerances import FINITE_DIFFERENCE
from autograder.grading.linear_layer import forward_difference

SEEDS = (0, 7)  # the visible seed and the hidden one of the notebook's test cells

# ---------------------------------------------------------------------------------------------------
# Reference answers: the course's own solutions, run once; the wrong answers below are hand-written
# ---------------------------------------------------------------------------------------------------

SOLUTION = solution_cells("01_linear_layer")
numerical_gradient = SOLUTION["numerical_gradient"]
linear_forward, linear_backward = SOLUTION["linear_forward"], SOLUTION["linear_backward"]
mse_loss = SOLUTION["mse_loss"]
fit_cubic = SOLUTION["fit_cubic"]


def test_the_references_are_the_solutions():
    for fn in (numerical_gradient, linear_forward, linear_backward, mse_loss, fit_cubic):
        assert fn.__code__.co_filename.startswith("01_linear_layer.py:"), fn


# --------------------------------------------------------------------------------------------
# numerical_gradient
# --------------------------------------------------------------------------------------------


def forward_differences(f, x, h=1e-5):
    """Mistake: (f(x + h) - f(x)) / h, accurate only to ~h f''."""
    fx, grad = f(x), np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        stepped = x.copy()
        stepped[index] += h
        grad[index] = (f(stepped) - fx) / h
    return grad


def divided_by_h(f, x, h=1e-5):
    """Mistake: the centred difference divided by h instead of 2h."""
    grad = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + h
        f_plus = f(x)
        x[index] = saved - h
        f_minus = f(x)
        x[index] = saved
        grad[index] = (f_plus - f_minus) / h
    return grad


def sign_flipped(f, x, h=1e-5):
    """Mistake: f(x - h) - f(x + h)."""
    return -numerical_gradient(f, x, h)


def never_restored(f, x, h=1e-5):
    """Mistake: every element is left at x - h."""
    grad = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + h
        f_plus = f(x)
        x[index] = saved - h
        f_minus = f(x)
        grad[index] = (f_plus - f_minus) / (2 * h)
    return grad


def restored_by_arithmetic(f, x, h=1e-5):
    """Mistake: adding h back instead of restoring the saved value leaves rounding errors in x."""
    grad = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        x[index] += h
        f_plus = f(x)
        x[index] -= 2 * h
        f_minus = f(x)
        x[index] += h
        grad[index] = (f_plus - f_minus) / (2 * h)
    return grad


def only_1d(f, x, h=1e-5):
    """Mistake: indexes x[i] as if x were 1-D; on a matrix it shifts whole rows."""
    grad = np.zeros(x.shape)
    for i in range(len(x)):
        saved = x[i].copy()
        x[i] = saved + h
        f_plus = f(x)
        x[i] = saved - h
        f_minus = f(x)
        x[i] = saved
        grad[i] = (f_plus - f_minus) / (2 * h)
    return grad


def only_2d(f, x, h=1e-5):
    """Mistake: two nested loops over rows and columns, so 1-D and 3-D x fail."""
    grad = np.zeros(x.shape)
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            saved = x[i, j]
            x[i, j] = saved + h
            f_plus = f(x)
            x[i, j] = saved - h
            f_minus = f(x)
            x[i, j] = saved
            grad[i, j] = (f_plus - f_minus) / (2 * h)
    return grad


def ignores_h(f, x, h=1e-5):
    """Mistake: a hard-coded step instead of the argument h."""
    return numerical_gradient(f, x, 1e-5)


def float32_result(f, x, h=1e-5):
    """Mistake: the gradient array is allocated as float32."""
    return numerical_gradient(f, x, h).astype(np.float32)


@pytest.mark.parametrize("seed", SEEDS)
def test_numerical_gradient_reference_gets_full_points(seed: int, capfd: pytest.CaptureFixture) -> None:
    assert check_numerical_gradient(numerical_gradient, seed=seed) == NUMERICAL_GRADIENT.points
    out, err = capfd.readouterr()
    assert err == ""
    assert "3 / 3 points" in out


def test_numerical_gradient_blank_scores_zero(capfd: pytest.CaptureFixture) -> None:
    assert check_numerical_gradient(blank) == 0.0
    out, err = capfd.readouterr()
    assert err == "" and "NotImplementedError" in out


@pytest.mark.parametrize("seed", SEEDS)
def test_numerical_gradient_rejects_forward_differences(seed: int) -> None:
    report = grade(CHECKS["numerical_gradient"], forward_differences, seed=seed)
    assert report.score < NUMERICAL_GRADIENT.points
    assert {"values, 2-D x", "values, 1-D and 3-D x", "uses h"} <= failed(report)
    assert "forward differences" in item(report, "values, 2-D x").message
    assert item(report, "x unchanged").passed


def test_numerical_gradient_rejects_dividing_by_h() -> None:
    report = grade(CHECKS["numerical_gradient"], divided_by_h)
    assert report.score < NUMERICAL_GRADIENT.points
    assert "divided by h instead of 2 h" in item(report, "values, 2-D x").message
    assert "divided by h instead of 2 h" in item(report, "uses h").message


def test_numerical_gradient_rejects_a_flipped_sign() -> None:
    report = grade(CHECKS["numerical_gradient"], sign_flipped)
    assert {"values, 2-D x", "values, 1-D and 3-D x", "uses h"} <= failed(report)
    assert "sign flipped" in item(report, "values, 2-D x").message


def test_numerical_gradient_rejects_x_left_changed() -> None:
    report = grade(CHECKS["numerical_gradient"], never_restored)
    assert report.score < NUMERICAL_GRADIENT.points
    assert not item(report, "x unchanged").passed
    assert "restore each element" in item(report, "x unchanged").message
    assert "Likely mistake: each element left at x - h, never put back" in item(report, "x unchanged").message


def moves_x_elsewhere(f, x, h=1e-5):
    """Right values, then x scaled in place: not a step left behind, so no step is named."""
    grad = centred(f, x, h)
    x *= 1.5
    return grad


def centred(f, x, h):
    grad = np.zeros(x.shape)
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + h
        f_plus = f(x)
        x[index] = saved - h
        f_minus = f(x)
        x[index] = saved
        grad[index] = (f_plus - f_minus) / (2 * h)
    return grad


def test_an_x_changed_otherwise_names_no_step_left_behind() -> None:
    report = grade(CHECKS["numerical_gradient"], moves_x_elsewhere)
    message = item(report, "x unchanged").message
    assert "changed by up to" in message and "Likely mistake" not in message, message


def test_numerical_gradient_rejects_restoring_by_adding_h_back() -> None:
    report = grade(CHECKS["numerical_gradient"], restored_by_arithmetic)
    # The values are right; only the caller's x is off, by rounding errors.
    assert failed(report) == {"x unchanged"}
    assert "rounding" in item(report, "x unchanged").message
    assert "saved value" in item(report, "x unchanged").message
    assert "Likely mistake: each element put back by arithmetic" in item(report, "x unchanged").message


def test_numerical_gradient_rejects_code_written_for_1d_arrays() -> None:
    report = grade(CHECKS["numerical_gradient"], only_1d)
    assert report.score < NUMERICAL_GRADIENT.points
    assert {"values, 2-D x", "values, 1-D and 3-D x"} <= failed(report)
    assert "Likely mistake: x[i] indexes a whole slice" in item(report, "values, 2-D x").message
    # forward differences are their own mistake, not this one
    report = grade(CHECKS["numerical_gradient"], forward_differences)
    assert "whole slice" not in item(report, "values, 2-D x").message


def test_numerical_gradient_rejects_code_written_for_2d_arrays() -> None:
    report = grade(CHECKS["numerical_gradient"], only_2d)
    assert report.score < NUMERICAL_GRADIENT.points
    assert item(report, "values, 2-D x").passed
    assert not item(report, "values, 1-D and 3-D x").passed
    assert "Likely mistake: a loop written for 2-D arrays" in item(report, "values, 1-D and 3-D x").message
    assert "IndexError" in item(report, "values, 1-D and 3-D x").message


def test_numerical_gradient_rejects_ignoring_h() -> None:
    report = grade(CHECKS["numerical_gradient"], ignores_h)
    assert failed(report) == {"uses h"}
    assert "not used" in item(report, "uses h").message


def test_numerical_gradient_rejects_float32() -> None:
    report = grade(CHECKS["numerical_gradient"], float32_result)
    assert not item(report, "shape and dtype").passed
    assert "float32" in item(report, "shape and dtype").message


def test_test_functions_separate_centred_from_forward_differences() -> None:
    """The reason given for FINITE_DIFFERENCE holds on the check's own cases, for many seeds:
    forward differences miss the tolerance by far more than centred ones stay inside it."""
    import torch

    from autograder.grading import reference

    tol = FINITE_DIFFERENCE
    for seed in range(20):
        for index, shape in enumerate(GRADIENT_SHAPES.values()):
            data = gradient_inputs(1000 * seed + index, shape)
            f = numpy_function(wavy, data["c"])
            exact = reference.gradient(lambda t, c=data["c"]: wavy(t, torch, torch.from_numpy(c)), data["x"])
            bound = tol.atol + tol.rtol * np.abs(exact)
            forward = np.max(np.abs(forward_difference(f, data["x"], 1e-5) - exact) / bound)
            centred = np.max(np.abs(numerical_gradient(f, data["x"].copy()) - exact) / bound)
            assert forward > 50, (seed, shape, forward)
            assert centred < 0.2, (seed, shape, centred)


# --------------------------------------------------------------------------------------------
# linear_forward / linear_backward
# --------------------------------------------------------------------------------------------


def backward_transposed_dW(dout, cache):
    """Mistake: dW = x.T @ dout, the transpose of the right answer."""
    x, W = cache
    return dout @ W, x.T @ dout, dout.sum(axis=0)


def backward_db_not_summed(dout, cache):
    """Mistake: db = dout, which broadcasting would hide in an update b -= lr * db."""
    x, W = cache
    return dout @ W, dout.T @ x, dout


def backward_db_wrong_axis(dout, cache):
    """Mistake: the bias gradient summed over the output axis."""
    x, W = cache
    return dout @ W, dout.T @ x, dout.sum(axis=1)


def backward_ignores_dout(dout, cache):
    """Mistake: dx computed as if dout were all ones."""
    x, W = cache
    return np.ones_like(dout) @ W, dout.T @ x, dout.sum(axis=0)


def forward_without_bias(x, W, b):
    """Mistake: the bias is forgotten."""
    return x @ W.T, (x, W)


def backward_mean_over_batch(dout, cache):
    """Mistake: the gradients are divided by N (the loss already did it)."""
    x, W = cache
    n = dout.shape[0]
    return dout @ W, dout.T @ x / n, dout.mean(axis=0)


@pytest.mark.parametrize("seed", SEEDS)
def test_linear_layer_reference_gets_full_points(seed: int, capfd: pytest.CaptureFixture) -> None:
    assert check_linear_layer(linear_forward, linear_backward, seed=seed) == LINEAR_LAYER.points
    assert capfd.readouterr().err == ""


def test_linear_layer_blank_scores_zero() -> None:
    assert check_linear_layer(blank, blank) == 0.0
    assert check_linear_layer(linear_forward, blank) < LINEAR_LAYER.points


def test_linear_layer_rejects_a_transposed_dW() -> None:
    report = grade(CHECKS["linear_layer"], linear_forward, backward_transposed_dW)
    assert not item(report, "dW").passed
    assert "transpose" in item(report, "dW").message


@pytest.mark.parametrize(
    ("backward", "diagnosis"),
    [(backward_db_not_summed, "not summed over the batch"), (backward_db_wrong_axis, "axis 1")],
)
def test_linear_layer_rejects_a_bias_gradient_not_summed_over_the_batch(backward, diagnosis: str) -> None:
    report = grade(CHECKS["linear_layer"], linear_forward, backward)
    assert not item(report, "db").passed
    assert diagnosis in item(report, "db").message


def test_linear_layer_rejects_ignoring_dout() -> None:
    report = grade(CHECKS["linear_layer"], linear_forward, backward_ignores_dout)
    assert not item(report, "dx").passed
    assert "upstream gradient dout is ignored" in item(report, "dx").message


def test_linear_layer_rejects_a_missing_bias() -> None:
    report = grade(CHECKS["linear_layer"], forward_without_bias, linear_backward)
    assert not item(report, "out").passed
    assert "bias is missing" in item(report, "out").message


def test_linear_layer_rejects_a_mean_over_the_batch() -> None:
    report = grade(CHECKS["linear_layer"], linear_forward, backward_mean_over_batch)
    assert {"dW", "db"} <= failed(report)
    assert "N=4" in item(report, "dW").message


# --------------------------------------------------------------------------------------------
# mse_loss
# --------------------------------------------------------------------------------------------


def mse_sum(pred, target):
    """Mistake: the sum of squares, not the mean."""
    diff = pred - target
    return float(np.sum(diff**2)), 2.0 * diff


def mse_no_factor_2(pred, target):
    """Mistake: the 2 of the derivative of the square is dropped."""
    diff = pred - target
    return float(np.mean(diff**2)), diff / diff.size


def mse_divided_by_n(pred, target):
    """Mistake: divided by the batch size N instead of the number of elements N * M."""
    diff = pred - target
    n = pred.shape[0]
    return float(np.sum(diff**2) / n), 2.0 * diff / n


def mse_sign_flipped(pred, target):
    """Mistake: (target - pred) in the gradient."""
    diff = pred - target
    return float(np.mean(diff**2)), 2.0 * (target - pred) / diff.size


def mse_per_row(pred, target):
    """Mistake: the loss is averaged over axis 1 only, an array of shape (N,)."""
    diff = pred - target
    return np.mean(diff**2, axis=1), 2.0 * diff / diff.size


def mse_in_place(pred, target):
    """Mistake: pred is overwritten by the difference."""
    pred -= target
    return float(np.mean(pred**2)), 2.0 * pred / pred.size


def mse_squeezed(pred, target):
    """Mistake: a careless squeeze drops the axes of size 1 from dpred."""
    diff = np.squeeze(pred - target)
    return float(np.mean(diff**2)), 2.0 * diff / diff.size


@pytest.mark.parametrize("seed", SEEDS)
def test_mse_loss_reference_gets_full_points(seed: int, capfd: pytest.CaptureFixture) -> None:
    assert check_mse_loss(mse_loss, seed=seed) == MSE_LOSS.points
    assert capfd.readouterr().err == ""


def test_mse_loss_accepts_a_numpy_scalar_loss() -> None:
    def mse_numpy_scalar(pred, target):
        diff = pred - target
        return np.mean(diff**2), 2.0 * diff / diff.size

    assert check_mse_loss(mse_numpy_scalar) == MSE_LOSS.points


def test_mse_loss_blank_scores_zero() -> None:
    assert check_mse_loss(blank) == 0.0


def test_mse_loss_rejects_a_sum() -> None:
    report = grade(CHECKS["mse_loss"], mse_sum)
    assert {"loss", "dpred"} <= failed(report)
    assert "summed over all elements" in item(report, "loss").message
    assert "gradient of the sum" in item(report, "dpred").message


def test_mse_loss_rejects_a_missing_factor_2() -> None:
    report = grade(CHECKS["mse_loss"], mse_no_factor_2)
    assert item(report, "loss").passed
    assert not item(report, "dpred").passed
    assert "factor 2" in item(report, "dpred").message


def test_mse_loss_rejects_dividing_by_n_only() -> None:
    report = grade(CHECKS["mse_loss"], mse_divided_by_n)
    assert {"loss", "dpred"} <= failed(report)
    assert "instead of N * M" in item(report, "loss").message
    assert "instead of N * M" in item(report, "dpred").message
    # With M = 1 the two agree: that case alone could not tell them apart.
    assert item(report, "M = 1, pred of shape (N, 1)").passed


def test_mse_loss_divided_by_n_is_named_at_n_equal_1() -> None:
    """At N = 1 dividing by N divides by 1: the N = 1 item names that, not 'summed over all elements',
    which a learner who divided by N could not recognise."""
    report = grade(CHECKS["mse_loss"], mse_divided_by_n)
    message = item(report, "N = 1").message
    assert not item(report, "N = 1").passed
    assert "divided by N, which is 1 here" in message and "N * M = 3" in message
    assert "summed over all elements" not in message


def test_mse_loss_rejects_a_flipped_sign() -> None:
    report = grade(CHECKS["mse_loss"], mse_sign_flipped)
    assert failed(report) >= {"dpred"}
    assert "sign flipped" in item(report, "dpred").message


def test_mse_loss_rejects_a_loss_per_row() -> None:
    report = grade(CHECKS["mse_loss"], mse_per_row)
    assert not item(report, "loss").passed
    assert "shape (4,)" in item(report, "loss").message
    assert "averaged over each row" in item(report, "loss").message


def test_mse_loss_rejects_changing_pred() -> None:
    report = grade(CHECKS["mse_loss"], mse_in_place)
    assert not item(report, "inputs unchanged").passed
    assert "pred" in item(report, "inputs unchanged").message


def test_mse_loss_rejects_squeezing() -> None:
    report = grade(CHECKS["mse_loss"], mse_squeezed)
    assert item(report, "dpred").passed
    assert {"M = 1, pred of shape (N, 1)", "N = 1"} <= failed(report)


# --------------------------------------------------------------------------------------------
# fit_cubic
# --------------------------------------------------------------------------------------------


def make_fit(
    lr: float = 0.5,
    steps: int = 1000,
    sign: float = 1.0,
    update_bias: bool = True,
    return_initial: bool = False,
    loss_scale: str = "mean",
    reshape_target: bool = True,
    W_shape: tuple[int, ...] = (1, 3),
):
    """A fit_cubic with the given defaults and, optionally, one mistake built in."""

    def fit_cubic(x, y, lr=lr, steps=steps):
        features = cubic_features(x)
        target = y.reshape(-1, 1) if reshape_target else y
        W = 0.1 * np.random.default_rng(0).standard_normal((1, 3))
        b = np.zeros(1)
        W0, b0 = W.copy(), b.copy()
        losses = []
        for _ in range(steps):
            pred, cache = linear_forward(features, W, b)
            loss, dpred = mse_loss(pred, target)
            _, dW, db = linear_backward(dpred, cache)
            W -= sign * lr * dW
            if update_bias:
                b -= sign * lr * db
            losses.append(loss * (pred.size if loss_scale == "sum" else 1))
        if return_initial:
            return W0, b0, losses
        return W.reshape(W_shape), b, losses

    return fit_cubic


@pytest.mark.parametrize("seed", SEEDS)
def test_fit_cubic_reference_gets_full_points(seed: int, capfd: pytest.CaptureFixture) -> None:
    assert check_fit_cubic(fit_cubic, seed=seed) == FIT_CUBIC.points
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize(("lr", "steps"), [(0.1, 2000), (0.3, 1000), (0.5, 500)])
def test_fit_cubic_accepts_other_converging_hyperparameters(lr: float, steps: int) -> None:
    assert check_fit_cubic(make_fit(lr=lr, steps=steps)) == FIT_CUBIC.points


def test_fit_cubic_accepts_losses_as_an_array() -> None:
    def fit_array(x, y):
        W, b, losses = fit_cubic(x, y)
        return W, b, np.array(losses)

    assert check_fit_cubic(fit_array) == FIT_CUBIC.points


def test_fit_cubic_blank_scores_zero(capfd: pytest.CaptureFixture) -> None:
    assert check_fit_cubic(blank) == 0.0
    assert capfd.readouterr().err == ""


def test_fit_cubic_scaffold_without_a_loop_scores_zero() -> None:
    """Deleting the stub's raise and writing nothing returns the scaffold's W, b and an empty list:
    the shapes the notebook set up earn nothing."""

    def scaffold_only(x, y, lr=0.5, steps=1000):
        W = 0.1 * np.random.default_rng(0).standard_normal((1, 3))
        b = np.zeros(1)
        losses = []
        return W, b, losses

    report = grade(CHECKS["fit_cubic"], scaffold_only)
    assert report.score == 0.0
    assert "no training step ran" in item(report, "W and b shapes").message


@pytest.mark.parametrize(("lr", "steps"), [(0.05, 1000), (0.5, 30)])
def test_fit_cubic_rejects_a_fit_that_has_not_converged(lr: float, steps: int) -> None:
    report = grade(CHECKS["fit_cubic"], make_fit(lr=lr, steps=steps))
    assert 0 < report.score < FIT_CUBIC.points
    assert not item(report, "converged").passed
    assert "not converged" in item(report, "converged").message
    # A slow loop loses the convergence points once: the shifted curve is judged relative to the sine.
    assert item(report, "shifted curve").passed


def test_fit_cubic_rejects_a_learning_rate_far_too_small() -> None:
    report = grade(CHECKS["fit_cubic"], make_fit(lr=1e-3, steps=100))
    assert {"beats the constant predictor", "converged"} <= failed(report)
    # The bias does learn here, only slowly: the feedback must not claim it is never updated.
    assert "never updated" not in item(report, "shifted curve").message


def test_fit_cubic_with_an_extra_one_over_n_in_linear_backward_points_at_the_gradient_scale() -> None:
    """The notebook's loop with Exercise 2's mistake (dW and db divided by N once more): every step is N
    times too short. The fit is graded as before; the feedback says N times too small, not 'train longer'."""

    def fit_with_mean_backward(x, y, lr=0.5, steps=1000):
        features, target = cubic_features(x), y.reshape(-1, 1)
        W, b = 0.1 * np.random.default_rng(0).standard_normal((1, 3)), np.zeros(1)
        losses = []
        for _ in range(steps):
            pred, cache = linear_forward(features, W, b)
            loss, dpred = mse_loss(pred, target)
            _, dW, db = backward_mean_over_batch(dpred, cache)
            W -= lr * dW
            b -= lr * db
            losses.append(loss)
        return W, b, losses

    report = grade(CHECKS["fit_cubic"], fit_with_mean_backward)
    assert failed(report) == {"converged"} and report.score == FIT_CUBIC.points - 1.0
    message = item(report, "converged").message
    assert "N = 256 times too small" in message and "linear_backward" in message
    assert "more steps or a larger lr" not in message


def test_fit_cubic_stopped_early_says_too_few_steps() -> None:
    report = grade(CHECKS["fit_cubic"], make_fit(lr=0.5, steps=30))
    assert "too few steps" in item(report, "converged").message


def test_fit_cubic_survives_divergence(capfd: pytest.CaptureFixture) -> None:
    """A flipped update sign sends W to inf and NaN: the check must grade it, not crash or warn."""
    score = check_fit_cubic(make_fit(sign=-1.0))
    out, err = capfd.readouterr()
    assert err == ""
    assert score < 1.0
    assert "diverged" in out
    report = grade(CHECKS["fit_cubic"], make_fit(sign=-1.0))
    assert {"loss curve", "beats the constant predictor", "converged", "shifted curve"} <= failed(report)
    assert "W -= lr * dW" in item(report, "converged").message
    assert "Likely mistake: gradient ascent, W += lr * dW" in item(report, "converged").message
    assert "Likely mistake: gradient ascent" in item(report, "loss curve").message
    # diverging with the right sign, from a learning rate far too large, is not named as ascent
    report = grade(CHECKS["fit_cubic"], make_fit(lr=50.0))
    assert "diverged" in item(report, "converged").message
    assert "ascent" not in report.render(), report.render()


def fit_cubic_on_the_notebooks_x(x, y, lr=0.5, steps=1000):
    """Ignores x and rebuilds the notebook's points: right on the visible call's data only."""
    return fit_cubic(np.linspace(-1.0, 1.0, len(y)), y, lr, steps)


def test_fit_cubic_hidden_data_has_other_points_in_another_order() -> None:
    visible, hidden = checks_linear.fit_data(0)["sine"][0], checks_linear.fit_data(7)["sine"][0]
    assert np.array_equal(visible, np.linspace(-1.0, 1.0, visible.size))
    assert hidden.shape == visible.shape and not np.allclose(hidden, visible, atol=0.05)
    assert not np.array_equal(checks_linear.fit_data(7)["sine"][0], checks_linear.fit_data(8)["sine"][0])


def test_fit_cubic_that_ignores_x_passes_the_visible_call_and_fails_a_hidden_one_named() -> None:
    assert grade(CHECKS["fit_cubic"], fit_cubic_on_the_notebooks_x).score == FIT_CUBIC.points
    report = grade(CHECKS["fit_cubic"], fit_cubic_on_the_notebooks_x, seed=7)
    assert "converged" in failed(report)
    for name in failed(report):
        assert "ignores its x argument" in item(report, name).message
        assert "initial parameters" not in item(report, name).message
    # the other mistakes of fit_cubic are not blamed on x
    for fn in (make_fit(return_initial=True), make_fit(lr=0.5, steps=30), make_fit(sign=-1.0)):
        assert all("ignores its x" not in i.message for i in grade(CHECKS["fit_cubic"], fn, seed=7).items)


def test_fit_cubic_rejects_a_bias_that_never_learns() -> None:
    report = grade(CHECKS["fit_cubic"], make_fit(update_bias=False))
    assert failed(report) == {"shifted curve"}
    assert "b is never updated" in item(report, "shifted curve").message


def test_fit_cubic_rejects_returning_the_initial_parameters() -> None:
    report = grade(CHECKS["fit_cubic"], make_fit(return_initial=True))
    assert report.score <= 0.5
    assert {"loss curve", "beats the constant predictor", "converged"} <= failed(report)
    assert "initial parameters" in item(report, "converged").message


def test_fit_cubic_does_not_trust_reported_losses() -> None:
    report = grade(CHECKS["fit_cubic"], make_fit(loss_scale="sum"))
    assert failed(report) == {"loss curve"}
    assert "your last recorded loss" in item(report, "loss curve").message
    assert (
        "Likely mistake: the sum of squared errors recorded, not their mean"
        in item(report, "loss curve").message
    )


def test_fit_cubic_reports_the_broadcasting_trap() -> None:
    """pred (N, 1) - y (N,) broadcasts to (N, N); the update then fails, and the feedback says where."""
    report = grade(CHECKS["fit_cubic"], make_fit(reshape_target=False))
    assert report.score == 0.0
    assert "ValueError" in item(report, "converged").message


def test_fit_cubic_rejects_a_weight_of_the_wrong_shape() -> None:
    report = grade(CHECKS["fit_cubic"], make_fit(W_shape=(3,)))
    assert failed(report) == {"W and b shapes"}
    assert "shape (3,)" in item(report, "W and b shapes").message


# --------------------------------------------------------------------------------------------
# All checks
# --------------------------------------------------------------------------------------------


def _is_plain(value: Any) -> bool:
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    return value is None or isinstance(value, (str, int, float, bool, np.ndarray, NotAnArray))


@pytest.mark.parametrize(
    ("name", "learner"),
    [
        ("numerical_gradient", (numerical_gradient,)),
        ("linear_layer", (linear_forward, linear_backward)),
        ("mse_loss", (mse_loss,)),
        ("fit_cubic", (fit_cubic,)),
        ("fit_cubic", (make_fit(sign=-1.0),)),
        ("mse_loss", (mse_per_row,)),
    ],
)
def test_evidence_is_plain_data_and_grading_is_pure(name: str, learner: tuple) -> None:
    """Evidence can be re-graded outside the learner's kernel, and re-grading gives the same verdict."""
    check = CHECKS[name]
    evidence = check.collect(*learner, seed=3)
    assert _is_plain(evidence)
    first, second = check.grade(evidence), check.grade(evidence)
    assert first.render() == second.render()
    assert 0.0 <= first.score <= check.points
