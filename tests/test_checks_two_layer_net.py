"""The checks of notebook 02 give full points to the reference, zero to a blank answer, and fewer
points, with feedback that names the mistake, to realistic wrong answers."""

from __future__ import annotations

import functools
import types
from typing import Any

import numpy as np
import pytest
from check_helpers import blank, failed, grade, item, scores_silently, scores_zero_as_blank, solution_cells

from autograder.checks import autograd_graph as checks_03
from autograder.checks import two_layer_net as checks
from autograder.checks.core import case_seed

# ---------------------------------------------------------------------------------------------------
# Reference answers: the course's own solutions, run once; the wrong answers below are hand-written
# ---------------------------------------------------------------------------------------------------

SOLUTION = solution_cells("02_two_layer_net")
relu_forward, relu_backward = SOLUTION["relu_forward"], SOLUTION["relu_backward"]
sigmoid_forward, sigmoid_backward = SOLUTION["sigmoid_forward"], SOLUTION["sigmoid_backward"]
tanh_forward, tanh_backward = SOLUTION["tanh_forward"], SOLUTION["tanh_backward"]
softmax_cross_entropy = SOLUTION["softmax_cross_entropy"]
two_layer_net = SOLUTION["two_layer_net"]
train_two_layer_net = SOLUTION["train_two_layer_net"]


def test_the_references_are_the_solutions():
    for fn in (relu_forward, softmax_cross_entropy, two_layer_net, train_two_layer_net):
        assert fn.__code__.co_filename.startswith("02_two_layer_net.py:"), fn


def _net(
    params,
    X,
    y=None,
    reg=0.0,
    *,
    relu_mask="z",
    reg_biases=False,
    half=True,
    reg_grads=True,
    softmax=softmax_cross_entropy,
):
    """The reference network, with switches for the mistakes the tests feed the check (``relu_mask``:
    the ReLU's gradient masked where z > 0, as it should be, where the upstream gradient is > 0, or None)."""
    W1, b1, W2, b2 = (params[k] for k in ("W1", "b1", "W2", "b2"))
    z = X @ W1.T + b1
    h = np.maximum(z, 0.0)
    scores = h @ W2.T + b2
    if y is None:
        return scores
    loss, ds = softmax(scores, y)
    factor = 0.5 if half else 1.0
    loss = loss + factor * reg * (np.sum(W1**2) + np.sum(W2**2))
    if reg_biases:
        loss = loss + factor * reg * (np.sum(b1**2) + np.sum(b2**2))
    dh = ds @ W2
    dz = dh * {"z": z > 0, "upstream": dh > 0, None: 1}[relu_mask]
    grads = {"W1": dz.T @ X, "b1": dz.sum(axis=0), "W2": ds.T @ h, "b2": ds.sum(axis=0)}
    if reg_grads:
        grads["W1"] = grads["W1"] + 2 * factor * reg * W1
        grads["W2"] = grads["W2"] + 2 * factor * reg * W2
        if reg_biases:
            grads["b1"] = grads["b1"] + 2 * factor * reg * b1
            grads["b2"] = grads["b2"] + 2 * factor * reg * b2
    return loss, grads


ACTIVATIONS = {
    "relu": (checks.RELU, relu_forward, relu_backward),
    "sigmoid": (checks.SIGMOID, sigmoid_forward, sigmoid_backward),
    "tanh": (checks.TANH, tanh_forward, tanh_backward),
}


# ---------------------------------------------------------------------------------------------------
# Every check: reference gets full points silently, blank gets 0
# ---------------------------------------------------------------------------------------------------

REFERENCE_RUNS = {
    "relu": (checks.check_relu, (relu_forward, relu_backward), 1.0),
    "sigmoid": (checks.check_sigmoid, (sigmoid_forward, sigmoid_backward), 1.0),
    "tanh": (checks.check_tanh, (tanh_forward, tanh_backward), 1.0),
    "softmax_cross_entropy": (checks.check_softmax_cross_entropy, (softmax_cross_entropy,), 3.0),
    "two_layer_net": (checks.check_two_layer_net, (two_layer_net,), 5.0),
}


@pytest.mark.parametrize("name", list(REFERENCE_RUNS))
@pytest.mark.parametrize("seed", [0, 7])
def test_reference_gets_full_points_without_stderr(name, seed, capfd):
    check_fn, learner, points = REFERENCE_RUNS[name]
    scores_silently(check_fn(*learner, seed=seed), points, capfd)


@pytest.mark.parametrize("name", list(REFERENCE_RUNS))
def test_blank_scores_exactly_zero(name, capfd):
    check_fn, learner, _ = REFERENCE_RUNS[name]
    scores_zero_as_blank(check_fn(*[blank] * len(learner)), capfd)


def test_training_reference_full_points_and_blank_zero(capfd):
    assert checks.check_train_two_layer_net(train_two_layer_net) == 3.0
    assert checks.check_train_two_layer_net(train_two_layer_net, seed=7) == 3.0
    assert checks.check_train_two_layer_net(blank) == 0.0
    out, err = capfd.readouterr()
    assert err == ""
    assert "not implemented yet" in out


@pytest.mark.parametrize("kind", list(ACTIVATIONS))
def test_activation_gradient_matches_torch_on_exact_inputs(kind):
    # the special case is what makes each activation check different: make sure it is what we think
    cases = checks.activation_inputs(kind, 0)
    special = cases[checks.SPECIAL_CASE[kind]]["x"]
    if kind == "relu":
        assert np.sum(special == 0) >= 3
    else:
        assert np.abs(special).max() == 800.0


# ---------------------------------------------------------------------------------------------------
# Activations: wrong answers
# ---------------------------------------------------------------------------------------------------


def relu_backward_mask_ge(dout, cache):
    return dout * (cache >= 0)


def relu_backward_mask_from_dout(dout, cache):
    return dout * (dout > 0)


def relu_backward_inplace(dout, cache):
    dout[cache <= 0] = 0
    return dout


def relu_backward_ignores_dout(dout, cache):
    return (cache > 0).astype(np.float64)


def relu_forward_caches_out(x):
    out = np.maximum(x, 0.0)
    return out, out


def relu_backward_mask_from_out_ge(dout, cache):
    return dout * (cache >= 0)  # cache is out: always >= 0, so no mask at all


def relu_forward_inplace(x):
    x[x < 0] = 0.0
    return x, x


def test_relu_inplace_forward_loses_inputs_unchanged():
    report = grade(checks.RELU, relu_forward_inplace, relu_backward)
    assert "inputs unchanged" in failed(report)
    assert "argument x" in item(report, "inputs unchanged").message


def test_relu_ignoring_dout_is_named():
    report = grade(checks.RELU, relu_forward, relu_backward_ignores_dout)
    assert report.score <= 0.5
    assert "dout is ignored" in item(report, "dx").message


def sigmoid_forward_naive(x):
    s = 1.0 / (1.0 + np.exp(-x))
    return s, s


def sigmoid_forward_where_both_branches(x):
    s = np.where(x >= 0, 1.0 / (1.0 + np.exp(-x)), np.exp(x) / (1.0 + np.exp(x)))
    return s, s


def sigmoid_forward_exp_ratio(x):
    s = np.exp(x) / (1.0 + np.exp(x))
    return s, s


def sigmoid_forward_caches_x(x):
    return sigmoid_forward(x)[0], x


def sigmoid_backward_from_x(dout, cache):
    x = cache
    return dout * x * (1.0 - x)


def sigmoid_backward_ignores_dout(dout, cache):
    return cache * (1.0 - cache)


def sigmoid_backward_inplace(dout, cache):
    dout *= cache * (1.0 - cache)
    return dout


@pytest.mark.parametrize(
    "forward", [sigmoid_forward_naive, sigmoid_forward_where_both_branches, sigmoid_forward_exp_ratio]
)
def test_unstable_sigmoid_fails_only_the_large_x_item(forward, capfd):
    report = grade(checks.SIGMOID, forward, sigmoid_backward)
    assert failed(report) == {"stable at large |x|"}
    message = item(report, "stable at large |x|").message
    assert "overflow" in message or "NaN" in message
    assert "-|x|" in message
    if message.startswith("right values"):  # the values survived, the overflow warning names exp
        assert "Likely mistake: exp evaluated at large positive arguments" in message, message
    assert capfd.readouterr().err == ""  # the overflow warning is a note, never stderr


def sigmoid_forward_warns_in_log(x):
    """Right values, and a warning that is not an overflow in exp: nothing is named about exp."""
    np.log(x)  # invalid value for x < 0, divide by zero at 0
    return sigmoid_forward(x)


def test_a_warning_other_than_an_overflow_in_exp_is_not_named_as_one():
    report = grade(checks.SIGMOID, sigmoid_forward_warns_in_log, sigmoid_backward)
    message = item(report, "stable at large |x|").message
    assert "right values, but" in message and "Likely mistake" not in message, message


def net_grads_other_keys(params, X, y=None, reg=0.0):
    result = _net(params, X, y, reg)
    if y is None:
        return result
    loss, grads = result
    return loss, {k.lower(): v for k, v in grads.items()}


def test_grads_keyed_otherwise_are_not_named_as_the_d_prefix():
    message = item(grade(checks.TWO_LAYER_NET, net_grads_other_keys), "grads keys").message
    assert "w1" in message and "Likely mistake" not in message, message


def test_sigmoid_backward_from_x_is_named():
    report = grade(checks.SIGMOID, sigmoid_forward_caches_x, sigmoid_backward_from_x)
    assert report.score <= 0.5
    assert "x * (1 - x)" in item(report, "dx").message
    # the formula is wrong, so advice about overflow would mislead
    assert "-|x|" not in item(report, "stable at large |x|").message


def test_sigmoid_inplace_dout_loses_inputs_unchanged():
    report = grade(checks.SIGMOID, sigmoid_forward, sigmoid_backward_inplace)
    assert failed(report) == {"inputs unchanged"}


def tanh_forward_from_exp(x):
    t = (np.exp(x) - np.exp(-x)) / (np.exp(x) + np.exp(-x))
    return t, t


def tanh_forward_caches_x(x):
    return np.tanh(x), x


def tanh_backward_from_x(dout, cache):
    return dout * (1.0 - cache**2)


def tanh_backward_ignores_dout(dout, cache):
    return 1.0 - cache**2


def test_tanh_backward_1_minus_x_squared_is_named():
    report = grade(checks.TANH, tanh_forward_caches_x, tanh_backward_from_x)
    assert report.score <= 0.5
    assert "1 - x**2" in item(report, "dx").message


# ---------------------------------------------------------------------------------------------------
# softmax_cross_entropy: wrong answers
# ---------------------------------------------------------------------------------------------------


def softmax_with(scores, y, *, axis=1, shift=True, eps=0.0, onehot=True):
    """A hand-written softmax cross-entropy; each switch away from its default is one wrong answer below."""
    n = scores.shape[0]
    shifted = scores - scores.max(axis=axis, keepdims=True) if shift else scores
    p = np.exp(shifted) / np.exp(shifted).sum(axis=axis, keepdims=True)
    loss = -np.log(p[np.arange(n), y] + eps).mean()
    if onehot:
        p[np.arange(n), y] -= 1.0
    return loss, p / n


def softmax_no_max_subtraction(scores, y):
    return softmax_with(scores, y, shift=False)


def softmax_sum_not_mean(scores, y):
    loss, dscores = softmax_cross_entropy(scores, y)
    n = scores.shape[0]
    return loss * n, dscores * n


def softmax_no_onehot(scores, y):
    return softmax_with(scores, y, onehot=False)


def softmax_wrong_axis(scores, y):
    return softmax_with(scores, y, axis=0)


def softmax_dscores_not_divided(scores, y):
    loss, dscores = softmax_cross_entropy(scores, y)
    return loss, dscores * scores.shape[0]


def softmax_log_p_plus_eps(scores, y):
    return softmax_with(scores, y, eps=1e-7)


def softmax_inplace(scores, y):
    scores -= scores.max(axis=1, keepdims=True)
    return softmax_cross_entropy(scores, y)


def softmax_global_max(scores, y):
    """Mistake: shifted by the batch's one maximum; right while the rows are near each other."""
    n = scores.shape[0]
    shifted = scores - scores.max()
    p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    loss = -np.log(p[np.arange(n), y]).mean()
    p[np.arange(n), y] -= 1.0
    return loss, p / n


def softmax_one_hot_from_labels(scores, y):
    """Mistake: a one-hot with y.max() + 1 columns; right while every class is in the batch."""
    loss, dscores = softmax_cross_entropy(scores, y)
    p = dscores * scores.shape[0] + np.eye(scores.shape[1])[y]
    return loss, (p - np.eye(y.max() + 1)[y]) / scores.shape[0]


def test_softmax_shifted_by_the_global_maximum_fails_rows_hundreds_apart_and_is_named(capfd):
    report = grade(checks.SOFTMAX_CROSS_ENTROPY, softmax_global_max, seed=7)
    assert failed(report) == {"large logits (|s| ~ 1000)"}
    assert "batch's one maximum" in item(report, "large logits (|s| ~ 1000)").message
    apart = checks.softmax_inputs(7)[checks.APART_CASE]["scores"]
    assert np.all(np.isfinite(np.exp(apart)))  # the naive formula is fine there; only the global shift is not
    # no shift at all fails only where a global shift fails too: both are named, as candidates
    naive = item(grade(checks.SOFTMAX_CROSS_ENTROPY, softmax_no_max_subtraction), "large logits (|s| ~ 1000)")
    assert "cannot tell apart" in naive.message and "raw scores overflows" in naive.message
    assert capfd.readouterr().err == ""


def test_softmax_one_hot_sized_from_the_labels_fails_a_missing_class_and_is_named(capfd):
    report = grade(checks.SOFTMAX_CROSS_ENTROPY, softmax_one_hot_from_labels, seed=7)
    assert "a class absent from y" in failed(report)
    for name in failed(report) - {"inputs unchanged"}:  # that one was not checked: a case raised
        assert "sized from the labels" in item(report, name).message
    assert grade(checks.SOFTMAX_CROSS_ENTROPY, softmax_eye_take_along_axis, seed=7).score == 3.0
    assert capfd.readouterr().err == ""


def test_softmax_without_max_subtraction_fails_large_logits(capfd):
    report = grade(checks.SOFTMAX_CROSS_ENTROPY, softmax_no_max_subtraction)
    assert failed(report) == {"large logits (|s| ~ 1000)"}
    assert "NaN" in item(report, "large logits (|s| ~ 1000)").message
    assert capfd.readouterr().err == ""


def test_softmax_sum_instead_of_mean_names_the_batch_size():
    report = grade(checks.SOFTMAX_CROSS_ENTROPY, softmax_sum_not_mean)
    assert {"loss", "dscores"} <= failed(report)
    assert "N=4" in item(report, "loss").message
    assert "N=4" in item(report, "dscores").message


def test_softmax_over_the_wrong_axis_is_named():
    report = grade(checks.SOFTMAX_CROSS_ENTROPY, softmax_wrong_axis)
    assert "axis 0" in item(report, "loss").message
    assert "axis 0" in item(report, "dscores").message
    assert "N = 1" in failed(report)


# ---------------------------------------------------------------------------------------------------
# two_layer_net: wrong answers
# ---------------------------------------------------------------------------------------------------


net_regularises_biases = functools.partial(_net, reg_biases=True)


net_without_half = functools.partial(_net, half=False)


net_reg_only_in_loss = functools.partial(_net, reg_grads=False)


net_without_relu_mask = functools.partial(_net, relu_mask=None)


def net_grads_prefixed(params, X, y=None, reg=0.0):
    result = _net(params, X, y, reg)
    if y is None:
        return result
    loss, grads = result
    return loss, {f"d{k}": v for k, v in grads.items()}


def net_transposed_dW1(params, X, y=None, reg=0.0):
    result = _net(params, X, y, reg)
    if y is None:
        return result
    loss, grads = result
    return loss, {**grads, "W1": grads["W1"].T}


def net_grads_alias_params(params, X, y=None, reg=0.0):
    result = _net(params, X, y, reg)
    if y is None:
        return result
    loss, computed = result
    grads = params  # "same keys as params": but this is the caller's dict
    grads.update(computed)
    return loss, grads


def net_calls_blank_relu(params, X, y=None, reg=0.0):
    blank_relu_forward(params["W1"])
    return _net(params, X, y, reg)


def blank_relu_forward(x):
    raise NotImplementedError()


def test_net_without_relu_mask_fails_first_layer_gradients():
    report = grade(checks.TWO_LAYER_NET, net_without_relu_mask)
    assert {"grads['W1']", "grads['b1']", "reg > 0"} <= failed(report)
    assert {"scores", "loss", "grads['W2']", "grads['b2']"}.isdisjoint(failed(report))
    assert "ReLU mask is missing" in item(report, "grads['W1']").message


def test_net_with_misnamed_grads_keys():
    report = grade(checks.TWO_LAYER_NET, net_grads_prefixed)
    assert {"grads keys", "grads['W1']", "grads['b2']"} <= failed(report)
    assert "dW1" in item(report, "grads keys").message
    assert (
        "Likely mistake: the gradients keyed by their names in the text" in item(report, "grads keys").message
    )
    assert "no key 'W1'" in item(report, "grads['W1']").message
    assert "no key 'W1'" in item(report, "reg > 0").message
    assert report.score < 5 / 2


def test_net_calling_a_blank_function_names_it():
    report = grade(checks.TWO_LAYER_NET, net_calls_blank_relu)
    assert report.score == 0.0
    assert "blank_relu_forward is not implemented yet" in item(report, "scores").message
    assert "two_layer_net calls it" in item(report, "scores").message


def test_net_parameters_leave_some_relu_units_inactive():
    for index, (_, n, _) in enumerate(checks.NET_CASES):
        data = checks.net_inputs(case_seed(0, index), n)
        z = data["X"] @ data["W1"].T + data["b1"]
        assert np.all(z[:, 0] < 0)  # a dead unit
        assert np.all(z != 0)
        if n > 1:
            assert np.any(z[:, 1:] > 0) and np.any(z[:, 1:] < 0)
    shapes = {data[k].shape for k in ("W1", "W2")}
    assert shapes == {(6, 4), (3, 6)}


# ---------------------------------------------------------------------------------------------------
# train_two_layer_net: wrong answers
# ---------------------------------------------------------------------------------------------------


def train_too_few_steps(X, y, seed=0):
    return train_two_layer_net(X, y, steps=30, seed=seed)


def train_gradient_ascent(X, y, seed=0):
    return train_two_layer_net(X, y, lr=-1.0, steps=200, seed=seed)


def train_linear_model(X, y, seed=0, lr=1.0, steps=500):
    """Softmax regression on X, returned as a two-layer net that computes the same linear scores.

    relu(x) - relu(-x) = x, so W1 = [I; -I] and W2 = [W, -W] make the network linear in X.
    """
    rng = np.random.default_rng(seed)
    d, c = X.shape[1], int(y.max()) + 1
    W, b = 0.01 * rng.standard_normal((c, d)), np.zeros(c)
    losses = []
    for _ in range(steps):
        loss, ds = softmax_cross_entropy(X @ W.T + b, y)
        losses.append(float(loss))
        W, b = W - lr * ds.T @ X, b - lr * ds.sum(axis=0)
    params = {
        "W1": np.vstack([np.eye(d), -np.eye(d)]),
        "b1": np.zeros(2 * d),
        "W2": np.hstack([W, -W]),
        "b2": b,
    }
    return params, losses


@pytest.mark.parametrize(
    ("fn", "cause"),
    [
        (train_too_few_steps, "Likely mistake: too few steps"),
        (train_gradient_ascent, "Likely mistake: gradient ascent"),
    ],
)
def test_training_compared_step_by_step_with_the_notebooks_loop_names_the_cause(fn, cause):
    report = grade(checks.TRAIN_TWO_LAYER_NET, fn, seed=7)
    assert cause in item(report, "accuracy >= 95%").message
    if fn is train_gradient_ascent:
        assert "part from the reference loop's at step 1" in item(report, "accuracy >= 95%").message
    # a loop from another start is not compared step by step: it is the learner's right
    other = grade(checks.TRAIN_TWO_LAYER_NET, train_linear_model, seed=7)
    assert "step by step" not in other.render() and "Step by step" not in other.render()


def train_returns_tuple_params(X, y, seed=0):
    params, losses = train_two_layer_net(X, y, seed=seed)
    return tuple(params.values()), losses


def train_float32(X, y, seed=0):
    params, losses = train_two_layer_net(X, y, seed=seed)
    return {k: v.astype(np.float32) for k, v in params.items()}, losses


def train_with_blank_net(X, y, seed=0):
    # the solution's training loop, calling a network that is still a stub
    namespace = {**SOLUTION, "two_layer_net": blank_two_layer_net}
    loop = types.FunctionType(train_two_layer_net.__code__, namespace, None, train_two_layer_net.__defaults__)
    return loop(X, y, seed=seed)


def blank_two_layer_net(params, X, y=None, reg=0.0):
    raise NotImplementedError()


def test_a_linear_model_does_not_reach_70_percent():
    report = grade(checks.TRAIN_TWO_LAYER_NET, train_linear_model)
    assert failed(report) == {"accuracy >= 70%", "accuracy >= 95%"}
    assert report.score == 1.0
    assert "linear classifier" in item(report, "accuracy >= 70%").message


@pytest.mark.parametrize(
    ("train", "reason"),
    [
        (train_returns_tuple_params, "dict"),  # params of the wrong form
        (train_with_blank_net, "blank_two_layer_net is not implemented yet"),  # names the blank network
    ],
)
def test_training_without_usable_params_scores_zero_and_says_why(train, reason):
    report = grade(checks.TRAIN_TWO_LAYER_NET, train)
    assert report.score == 0.0
    assert reason in item(report, "params and losses").message


def test_training_accuracy_does_not_trust_the_learner_forward():
    # params that the learner's own (wrong) forward would call perfect are graded by the reference
    def train_fake(X, y, seed=0):
        return {"W1": np.zeros((4, 2)), "b1": np.zeros(4), "W2": np.zeros((3, 4)), "b2": np.zeros(3)}, [0.0]

    report = grade(checks.TRAIN_TWO_LAYER_NET, train_fake)
    assert failed(report) == {"accuracy >= 70%", "accuracy >= 95%"}


def train_started_by(W1: Any, W2: Any) -> Any:
    """The solution's training loop from the given starting weights (a function of (rng, H, D, C))."""

    def train(X, y, hidden=100, lr=1.0, reg=1e-3, steps=500, seed=0):
        rng = np.random.default_rng(seed)
        d, c = X.shape[1], int(y.max()) + 1
        params = {
            "W1": W1(rng, hidden, d),
            "b1": np.zeros(hidden),
            "W2": W2(rng, c, hidden),
            "b2": np.zeros(c),
        }
        losses = []
        for _ in range(steps):
            loss, grads = two_layer_net(params, X, y, reg=reg)
            losses.append(float(loss))
            for k in params:
                params[k] -= lr * grads[k]
        return params, losses

    return train


def test_training_from_tiny_weights_says_so_not_train_longer():
    """Weights of standard deviation 0.01 (the notebook's 'too small'): the first loss is log 3, and
    the feedback says the start was too small, not 'train for more steps'."""
    tiny = train_started_by(
        lambda rng, h, d: 0.01 * rng.standard_normal((h, d)),
        lambda rng, c, h: 0.01 * rng.standard_normal((c, h)),
    )
    report = grade(checks.TRAIN_TWO_LAYER_NET, tiny)
    assert failed(report) == {"accuracy >= 95%"} and report.score == 2.0
    message = item(report, "accuracy >= 95%").message
    assert "log 3" in message and "The right size" in message
    assert "Train for more steps" not in message


def test_training_from_equal_weights_says_symmetry_was_not_broken():
    """Every weight 0.1 (the notebook's 'not all equal'): the hidden units stay alike, and the feedback
    says so instead of blaming a missing ReLU."""
    equal = train_started_by(lambda rng, h, d: np.full((h, d), 0.1), lambda rng, c, h: np.full((c, h), 0.1))
    report = grade(checks.TRAIN_TWO_LAYER_NET, equal)
    assert failed(report) == {"accuracy >= 70%", "accuracy >= 95%"} and report.score == 1.0
    message = item(report, "accuracy >= 70%").message
    assert "symmetry was never broken" in message and "Not all equal" in message
    assert "Likely mistake: W1 started with every row equal" in message
    assert "linear classifier" not in message


# ---------------------------------------------------------------------------------------------------
# Every correct form is accepted
# ---------------------------------------------------------------------------------------------------


def relu_forward_int_zero(x):
    return np.maximum(x, 0), x


def relu_forward_mask_product(x):
    return x * (x > 0), x


def relu_forward_where(x):
    return np.where(x > 0, x, 0.0), x


def relu_forward_clip_caching_out(x):
    out = np.clip(x, 0, None)
    return out, out


def relu_backward_where(dout, cache):
    return np.where(cache > 0, dout, 0.0)


def relu_backward_copy_then_zero(dout, cache):
    dx = dout.copy()
    dx[cache <= 0] = 0.0
    return dx


def relu_backward_heaviside(dout, cache):
    return dout * np.heaviside(cache, 0.0)


def sigmoid_forward_via_tanh(x):
    s = 0.5 * (1.0 + np.tanh(0.5 * x))
    return s, s


def sigmoid_forward_logaddexp(x):
    s = np.exp(-np.logaddexp(0.0, -x))
    return s, s


def sigmoid_forward_stable_branches(x):
    e = np.exp(-np.abs(x))
    s = np.empty_like(x)
    positive = x >= 0
    s[positive] = 1.0 / (1.0 + e[positive])
    s[~positive] = e[~positive] / (1.0 + e[~positive])
    return s, s


def sigmoid_backward_expanded(dout, cache):
    return dout * (cache - cache**2)


def tanh_backward_product(dout, cache):
    return dout - dout * cache * cache


CORRECT_ACTIVATIONS = {
    "relu maximum(x, 0)": (checks.RELU, relu_forward_int_zero, relu_backward),
    "relu x * (x > 0)": (checks.RELU, relu_forward_mask_product, relu_backward_where),
    "relu where": (checks.RELU, relu_forward_where, relu_backward_copy_then_zero),
    "relu clip, caching out": (checks.RELU, relu_forward_clip_caching_out, relu_backward_heaviside),
    "sigmoid via tanh": (checks.SIGMOID, sigmoid_forward_via_tanh, sigmoid_backward_expanded),
    "sigmoid via logaddexp": (checks.SIGMOID, sigmoid_forward_logaddexp, sigmoid_backward),
    "sigmoid by boolean indexing": (checks.SIGMOID, sigmoid_forward_stable_branches, sigmoid_backward),
    "tanh, dout - dout * t * t": (checks.TANH, tanh_forward, tanh_backward_product),
}


@pytest.mark.parametrize("name", list(CORRECT_ACTIVATIONS))
def test_every_correct_activation_gets_full_points(name, capfd):
    check, forward, backward = CORRECT_ACTIVATIONS[name]
    report = grade(check, forward, backward, seed=3)
    assert report.score == 1.0, report.render()
    assert report.notes == []
    assert capfd.readouterr().err == ""


def softmax_eye_take_along_axis(scores, y):
    n, c = scores.shape
    shifted = scores - scores.max(axis=1)[:, None]
    log_p = shifted - np.log(np.sum(np.exp(shifted), axis=1))[:, None]
    loss = float(-np.take_along_axis(log_p, y[:, None], axis=1).mean())
    return loss, (np.exp(log_p) - np.eye(c)[y]) / n


def softmax_0d_array_loss(scores, y):
    loss, dscores = softmax_cross_entropy(scores, y)
    return np.array(loss), dscores


def softmax_logsumexp_by_rows(scores, y):
    n = scores.shape[0]
    m = scores.max(axis=1, keepdims=True)
    lse = m + np.log(np.exp(scores - m).sum(axis=1, keepdims=True))
    loss = np.mean(lse[:, 0] - scores[np.arange(n), y])
    p = np.exp(scores - lse)
    p[np.arange(n), y] -= 1.0
    return loss, p / n


@pytest.mark.parametrize(
    "fn", [softmax_eye_take_along_axis, softmax_0d_array_loss, softmax_logsumexp_by_rows]
)
def test_every_correct_softmax_gets_full_points(fn):
    report = grade(checks.SOFTMAX_CROSS_ENTROPY, fn, seed=5)
    assert report.score == 3.0, report.render()
    assert report.notes == []


def net_with_ordered_grads_and_float_loss(params, X, y=None, reg=0.0):
    from collections import OrderedDict

    result = _net(params, X, y, reg)
    if y is None:
        return result
    loss, grads = result
    return float(loss), OrderedDict((k, grads[k]) for k in ("b2", "W2", "b1", "W1"))


def net_by_einsum(params, X, y=None, reg=0.0):
    W1, b1, W2, b2 = (params[k] for k in ("W1", "b1", "W2", "b2"))
    z = np.einsum("nd,hd->nh", X, W1) + b1
    h = np.where(z > 0, z, 0.0)
    scores = np.einsum("nh,ch->nc", h, W2) + b2
    if y is None:
        return scores
    loss, ds = softmax_logsumexp_by_rows(scores, y)
    loss += 0.5 * reg * (np.einsum("ij,ij->", W1, W1) + np.einsum("ij,ij->", W2, W2))
    dz = (ds @ W2) * (z > 0)
    grads = {"W1": dz.T @ X + reg * W1, "b1": dz.sum(0), "W2": ds.T @ h + reg * W2, "b2": ds.sum(0)}
    return np.array(loss), grads


@pytest.mark.parametrize("fn", [net_with_ordered_grads_and_float_loss, net_by_einsum])
def test_every_correct_network_gets_full_points(fn):
    report = grade(checks.TWO_LAYER_NET, fn, seed=4)
    assert report.score == 5.0, report.render()
    assert report.notes == []


# ---------------------------------------------------------------------------------------------------
# Size-1 edges: N = 1, D = 1, H = 1
# ---------------------------------------------------------------------------------------------------


def relu_forward_squeezed(x):
    return np.maximum(x, 0.0).squeeze(), x


def net_squeezed_bias_gradient(params, X, y=None, reg=0.0):
    """db1 = dz.sum(0).squeeze(): right for H > 1, a 0-d array for one hidden unit."""
    result = _net(params, X, y, reg)
    if y is None:
        return result
    loss, grads = result
    return loss, {**grads, "b1": grads["b1"].squeeze()}


def test_net_squeezed_bias_gradient_fails_only_at_one_hidden_unit():
    data, _ = checks.net_cases(0)[checks.EDGE_CASE]
    assert data["X"].shape == (4, 1) and data["W1"].shape == (1, 1) and data["W2"].shape == (3, 1)
    report = grade(checks.TWO_LAYER_NET, net_squeezed_bias_gradient)
    assert failed(report) == {"size 1 (N = 1; D = H = 1)"}
    message = item(report, "size 1 (N = 1; D = H = 1)").message
    assert message.startswith("D=1, H=1: grads['b1'] has shape (), expected (1,).")
    assert "axis of size 1" in message


# ---------------------------------------------------------------------------------------------------
# Stability in the network: scores of ~1000
# ---------------------------------------------------------------------------------------------------


def softmax_shift_then_log_p(scores, y):
    """The commonest real softmax bug: stable probabilities, then -log(p), inf where p underflows."""
    n = scores.shape[0]
    shifted = scores - scores.max(axis=1, keepdims=True)
    p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(p[np.arange(n), y]))
    p[np.arange(n), y] -= 1.0
    return loss, p / n


net_shift_then_log_p = functools.partial(_net, softmax=softmax_shift_then_log_p)


net_no_max_subtraction = functools.partial(_net, softmax=softmax_no_max_subtraction)


net_log_p_plus_eps = functools.partial(_net, softmax=softmax_log_p_plus_eps)


def test_large_scores_reach_1000_and_underflow_a_true_class():
    data, reg = checks.net_cases(0)[checks.LARGE_CASE]
    scores = _net(data, data["X"])
    assert reg == 0.0 and np.abs(scores).max() > 999
    gaps = scores.max(axis=1) - scores[np.arange(4), data["y"]]
    assert gaps.max() > 1500  # exp(-gap) is 0 in float64


@pytest.mark.parametrize("seed", [0, 7, 1234567])
def test_large_scores_put_one_row_far_above_the_others_and_leave_a_class_out_with_reg(seed):
    for cases in (checks.net_cases(seed), checks_03.loss_cases(seed)):
        data, _ = cases[checks.LARGE_CASE]
        maxima = _net(data, data["X"]).max(axis=1)
        assert maxima.max() - np.sort(maxima)[-2] > 800  # exp(-800) is 0: a global shift underflows
        data, reg = cases["reg=0.1"]
        assert reg > 0 and set(data["y"]) == set(range(checks.NET_C - 1))


NET_SOFTMAX_MISTAKES = {
    functools.partial(_net, softmax=softmax_global_max): (
        {"large scores (|s| ~ 1000)"},
        "batch's one maximum",
    ),
    functools.partial(_net, softmax=softmax_one_hot_from_labels): ({"reg > 0"}, "sized from the labels"),
}


@pytest.mark.parametrize("fn", list(NET_SOFTMAX_MISTAKES), ids=["global max", "one-hot from labels"])
def test_net_with_a_softmax_right_on_the_old_cases_fails_the_new_ones_named(fn, capfd):
    failing, phrase = NET_SOFTMAX_MISTAKES[fn]
    report = grade(checks.TWO_LAYER_NET, fn, seed=7)
    assert failing <= failed(report)
    (name,) = failing
    assert phrase in item(report, name).message, item(report, name).message
    assert grade(checks.TWO_LAYER_NET, fn).score < 5.0
    assert capfd.readouterr().err == ""


def test_net_taking_log_of_an_underflowing_probability_loses_the_large_score_item(capfd):
    report = grade(checks.TWO_LAYER_NET, net_shift_then_log_p)
    assert failed(report) == {"large scores (|s| ~ 1000)"}
    assert report.score < 5.0
    message = item(report, "large scores (|s| ~ 1000)").message
    assert "underflows to 0" in message and "log-sum-exp" in message
    assert "axis 0" not in message and "batch" not in message
    assert capfd.readouterr().err == ""


def test_net_without_max_subtraction_is_told_to_subtract_it():
    report = grade(checks.TWO_LAYER_NET, net_no_max_subtraction)
    assert failed(report) == {"large scores (|s| ~ 1000)"}
    message = item(report, "large scores (|s| ~ 1000)").message
    assert "NaN" in message and "subtract each row's maximum" in message
    assert "axis 0" not in message


def test_softmax_taking_log_of_an_underflowing_probability_is_not_called_an_axis_mistake():
    report = grade(checks.SOFTMAX_CROSS_ENTROPY, softmax_shift_then_log_p)
    assert failed(report) == {"large logits (|s| ~ 1000)"}
    message = item(report, "large logits (|s| ~ 1000)").message
    assert "underflows to 0" in message
    assert "axis 0" not in message and "batch" not in message


# ---------------------------------------------------------------------------------------------------
# Diagnoses for the silent classes: swapped returns, (1 - t)**2, masks, W as (in, out), * for @
# ---------------------------------------------------------------------------------------------------


def relu_forward_cache_out_swapped(x):
    """Caches out and returns (cache, out) the wrong way round: the backward's mask still works."""
    out = np.maximum(x, 0.0)
    return x, out


def tanh_backward_square_of_difference(dout, cache):
    return dout * (1.0 - cache) ** 2


def tanh_backward_tanh_twice(dout, cache):
    return dout * (1.0 - np.tanh(cache) ** 2)


def relu_backward_matmul(dout, cache):
    return dout @ (cache > 0)


def softmax_swapped(scores, y):
    loss, dscores = softmax_cross_entropy(scores, y)
    return dscores, loss


def net_returns_grads_first(params, X, y=None, reg=0.0):
    result = _net(params, X, y, reg)
    if y is None:
        return result
    loss, grads = result
    return grads, loss


net_mask_from_upstream = functools.partial(_net, relu_mask="upstream")


def net_dW2_from_z(params, X, y=None, reg=0.0):
    result = _net(params, X, y, reg)
    if y is None:
        return result
    loss, grads = result
    W1, b1 = params["W1"], params["b1"]
    z = X @ W1.T + b1
    _, ds = softmax_cross_entropy(np.maximum(z, 0.0) @ params["W2"].T + params["b2"], y)
    return loss, {**grads, "W2": ds.T @ z + reg * params["W2"]}


def net_weights_as_in_out(params, X, y=None, reg=0.0):
    W1, b1, W2, b2 = (params[k] for k in ("W1", "b1", "W2", "b2"))
    h = np.maximum(X @ W1 + b1, 0.0)  # W1 used as (D, H)
    scores = h @ W2 + b2
    if y is None:
        return scores
    raise AssertionError("not reached: the forward fails first")


def net_elementwise_dW2(params, X, y=None, reg=0.0):
    result = _net(params, X, y, reg)
    if y is None:
        return result
    W1, b1, W2, b2 = (params[k] for k in ("W1", "b1", "W2", "b2"))
    h = np.maximum(X @ W1.T + b1, 0.0)
    loss, ds = softmax_cross_entropy(h @ W2.T + b2, y)
    dW2 = ds.T * h  # an elementwise product where ds.T @ h belongs
    return loss, {**result[1], "W2": dW2}


#: name: (check, learner functions, the items that must fail, the phrase each of them must show).
NAMED_MISTAKES = {
    "forward returns (cache, out)": (
        checks.RELU,
        (relu_forward_cache_out_swapped, relu_backward),
        {"out", "size 1 (N = 1, D = 1)"},
        "are the return values swapped?",
    ),
    "tanh (1 - t)**2": (
        checks.TANH,
        (tanh_forward, tanh_backward_square_of_difference),
        {"dx", "size 1 (N = 1, D = 1)"},
        "(1 - t)**2 where 1 - t**2 belongs",
    ),
    "tanh applied twice": (
        checks.TANH,
        (tanh_forward, tanh_backward_tanh_twice),
        {"dx", "size 1 (N = 1, D = 1)"},
        "tanh is applied twice",
    ),
    "relu mask from dout": (
        checks.RELU,
        (relu_forward, relu_backward_mask_from_dout),
        {"dx", "size 1 (N = 1, D = 1)"},
        "computed from dout",
    ),
    "relu backward with @": (
        checks.RELU,
        (relu_forward, relu_backward_matmul),
        {"dx", "size 1 (N = 1, D = 1)"},
        "a matrix product (@ or np.dot) where the elementwise product (*) belongs",
    ),
    "softmax returns (dscores, loss)": (
        checks.SOFTMAX_CROSS_ENTROPY,
        (softmax_swapped,),
        {"loss", "dscores"},
        "the return values are swapped: this is",
    ),
    "net returns (grads, loss)": (
        checks.TWO_LAYER_NET,
        (net_returns_grads_first,),
        {"loss", "grads['W1']", "grads keys", "reg > 0"},
        "the return values are swapped",
    ),
    "net ReLU mask from the upstream gradient": (
        checks.TWO_LAYER_NET,
        (net_mask_from_upstream,),
        {"grads['W1']", "grads['b1']"},
        "taken from the upstream gradient",
    ),
    "net dW2 from z": (
        checks.TWO_LAYER_NET,
        (net_dW2_from_z,),
        {"grads['W2']"},
        "computed from z, before the ReLU",
    ),
    "net grads alias the params": (
        checks.TWO_LAYER_NET,
        (net_grads_alias_params,),
        {"inputs unchanged"},
        "W1",
    ),
    # (the main case fails too: some of its true classes have p ~ 1e-3, where the eps shows)
    "net log(p + eps)": (
        checks.TWO_LAYER_NET,
        (net_log_p_plus_eps,),
        {"large scores (|s| ~ 1000)"},
        "log(p + 1e-07)",
    ),
    "net W as (in, out)": (
        checks.TWO_LAYER_NET,
        (net_weights_as_in_out,),
        {"scores", "loss", "grads['W1']"},
        "a weight used as (in, out)?",
    ),
    "relu mask from out >= 0": (
        checks.RELU,
        (relu_forward_caches_out, relu_backward_mask_from_out_ge),
        {"dx"},
        "no mask",
    ),
    "sigmoid ignores dout": (
        checks.SIGMOID,
        (sigmoid_forward, sigmoid_backward_ignores_dout),
        {"dx"},
        "dout is ignored",
    ),
    "tanh ignores dout": (checks.TANH, (tanh_forward, tanh_backward_ignores_dout), {"dx"}, "dout is ignored"),
    "softmax without the one-hot": (
        checks.SOFTMAX_CROSS_ENTROPY,
        (softmax_no_onehot,),
        {"dscores"},
        "one-hot",
    ),
    "net dW1 transposed": (checks.TWO_LAYER_NET, (net_transposed_dW1,), {"grads['W1']"}, "transposed"),
    "net * where @ belongs": (
        checks.TWO_LAYER_NET,
        (net_elementwise_dW2,),
        {"grads['W2']"},
        "an elementwise product (*) of a (3, 5) and a (5, 6) array where a matrix product (@) belongs",
    ),
}


@pytest.mark.parametrize("name", list(NAMED_MISTAKES))
def test_each_mistake_loses_points_and_its_feedback_names_it(name):
    check, learner, items, phrase = NAMED_MISTAKES[name]
    report = grade(check, *learner)
    assert report.score < check.points
    assert items <= failed(report)
    for failing in items:
        assert phrase in item(report, failing).message, item(report, failing).message


def test_named_mistakes_leave_the_right_parts_alone():
    assert "out" not in failed(grade(checks.RELU, relu_forward, relu_backward_matmul))
    assert "scores" not in failed(grade(checks.TWO_LAYER_NET, net_elementwise_dW2))
    assert "scores" not in failed(grade(checks.TWO_LAYER_NET, net_returns_grads_first))
    # numpy's own error is kept beside the diagnosis
    assert "matmul" in item(grade(checks.TWO_LAYER_NET, net_weights_as_in_out), "loss").message


def test_shape_error_hints_stay_silent_for_other_errors():
    from autograder.grading.two_layer_net.activations import activation_error as _activation_error
    from autograder.grading.two_layer_net.net import net_error as _net_error

    assert _net_error("KeyError: 'W3'") is None
    assert _net_error("ValueError: operands could not be broadcast together with shapes (5,) (3,)") is None
    # sizes that are no weight's: not a weight used the wrong way round
    assert _net_error("matmul: ... (size 5 is different from 7)") is None
    assert _activation_error("TypeError: unsupported operand") is None
    # a sum or difference of two matrices that do not broadcast is not a product where @ belongs
    difference = (
        "operands could not be broadcast together with shapes (3,5) (5,6) (in f, line 3: d = a.T - h)"
    )
    assert _net_error("ValueError: " + difference) is None
    assert _net_error("ValueError: " + difference.replace(" - ", " * ")) is not None


def test_shape_errors_are_read_from_numpy_and_torch():
    import numpy as np
    import torch

    from autograder.checks.calling import call
    from autograder.grading.toolkit import broadcast_shapes, product_sizes

    a, b = np.ones((5, 4)), np.ones((6, 4))
    assert product_sizes(call(lambda: a @ b, name="f").error) == (6, 4)
    assert set(product_sizes(call(lambda: np.dot(a, b), name="f").error)) == {4, 6}
    assert product_sizes(call(lambda: torch.tensor(a) @ torch.tensor(b), name="f").error) == (4, 6)
    assert broadcast_shapes(call(lambda: a * b, name="f").error) == [(5, 4), (6, 4)]
    assert product_sizes("KeyError: 'W1'") is None and broadcast_shapes(None) == []


# ---------------------------------------------------------------------------------------------------
# Mistakes that fail exactly the items they should, with feedback that names them
# ---------------------------------------------------------------------------------------------------

#: name: (check, learner functions, the items that fail and no other, the item to read, its phrase).
ONLY_THESE_FAIL = {
    "relu mask x >= 0": (
        checks.RELU,
        (relu_forward, relu_backward_mask_ge),
        {"gradient 0 at x == 0"},
        "gradient 0 at x == 0",
        "x >= 0",
    ),
    "relu writes into dout": (
        checks.RELU,
        (relu_forward, relu_backward_inplace),
        {"inputs unchanged"},
        "inputs unchanged",
        "argument dout",
    ),
    "relu squeezed": (
        checks.RELU,
        (relu_forward_squeezed, relu_backward),
        {"size 1 (N = 1, D = 1)"},
        "size 1 (N = 1, D = 1)",
        "axis of size 1",
    ),
    "tanh from exp": (
        checks.TANH,
        (tanh_forward_from_exp, tanh_backward),
        {"stable at large |x|"},
        "stable at large |x|",
        "np.tanh",
    ),
    "softmax dscores not divided by N": (
        checks.SOFTMAX_CROSS_ENTROPY,
        (softmax_dscores_not_divided,),
        {"dscores", "large logits (|s| ~ 1000)", "a class absent from y"},
        "dscores",
        "N=4",
    ),
    "softmax log(p + eps)": (
        checks.SOFTMAX_CROSS_ENTROPY,
        (softmax_log_p_plus_eps,),
        {"large logits (|s| ~ 1000)"},
        "large logits (|s| ~ 1000)",
        "log-sum-exp",
    ),
    "softmax writes into scores": (
        checks.SOFTMAX_CROSS_ENTROPY,
        (softmax_inplace,),
        {"inputs unchanged"},
        "inputs unchanged",
        "argument scores",
    ),
    "net regularises biases": (
        checks.TWO_LAYER_NET,
        (net_regularises_biases,),
        {"reg > 0"},
        "reg > 0",
        "biases are regularised",
    ),
    "net without the half": (
        checks.TWO_LAYER_NET,
        (net_without_half,),
        {"reg > 0"},
        "reg > 0",
        "0.5 is missing",
    ),
    "net with reg only in the loss": (
        checks.TWO_LAYER_NET,
        (net_reg_only_in_loss,),
        {"reg > 0"},
        "reg > 0",
        "not in the gradient",
    ),
    "training too few steps": (
        checks.TRAIN_TWO_LAYER_NET,
        (train_too_few_steps,),
        {"accuracy >= 95%"},
        "accuracy >= 95%",
        "more steps",
    ),
    "training by gradient ascent": (
        checks.TRAIN_TWO_LAYER_NET,
        (train_gradient_ascent,),
        {"accuracy >= 70%", "accuracy >= 95%"},
        "accuracy >= 70%",
        "descent",
    ),
    "training in float32": (
        checks.TRAIN_TWO_LAYER_NET,
        (train_float32,),
        {"params and losses"},
        "params and losses",
        "float32",
    ),
}


@pytest.mark.parametrize("name", list(ONLY_THESE_FAIL))
def test_each_mistake_fails_only_its_items_and_is_named(name):
    check, learner, failing, name_read, phrase = ONLY_THESE_FAIL[name]
    report = grade(check, *learner)
    assert failed(report) == failing
    assert 0 < report.score < check.points
    assert phrase in item(report, name_read).message, item(report, name_read).message


def test_activation_cases_include_one_feature():
    assert checks.activation_inputs("tanh", 0)["N=4, D=1"]["x"].shape == (4, 1)
