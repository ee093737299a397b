"""The numbers and behaviours the notebooks' text states, measured on the code they describe.

Each test names the notebook and the sentence it backs. The solution functions come from the
notebook's own source in ``solutions/``: its set-up and solution cells (and, where named, the cells
defining a helper), executed as the notebook would execute them.
"""

from __future__ import annotations

import math
import re
import time
import warnings
from functools import cache
from pathlib import Path
from typing import Any

import jupytext
import numpy as np
import pytest
from check_helpers import solution_cells

SOLUTIONS = Path(__file__).resolve().parent.parent / "solutions"


#: The namespace after running the set-up and solution cells of ``solutions/<stem>.py``, plus the
#: untagged cells that define one of the functions named after the stem; once per session.
notebook = cache(solution_cells)


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
    from autograder.checks.tolerances import FINITE_DIFFERENCE
    from backprop_utils import compare

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


def test_01_reading_the_table_max_rel_err() -> None:
    """ "Reading the table" of notebook 01: max rel err is |yours - ref| / (|yours| + |ref|) with a floor
    of 1e-8; the same float64 products in two orders differ by about 1e-16, a value rounded to float32
    by up to about 3e-8 (2^-25), and the try-it's centred differences by about 1e-10."""
    from backprop_utils import compare

    rng = np.random.default_rng(1)
    a, b, c = rng.standard_normal((3, 1000))
    left, right = (a * b) * c, a * (b * c)
    rel = np.abs(left - right) / np.maximum(np.abs(left) + np.abs(right), 1e-8)
    table = compare(float64_two_orders=(left, right), float32_rounded=(left.astype(np.float32), left))
    float64, float32 = (v.max_rel_err for v in table.verdicts)
    assert table.all_ok and float64 == rel.max()
    assert 3e-17 < float64 < 3e-16
    assert 1e-8 < float32 <= 2.0**-25
    # the definition's edges: equal numbers give 0, opposite signs 1, two tiny numbers no 0 / 0
    edges = compare(x=(np.array([2.0, -1.0, 1e-12]), np.array([2.0, 1.0, -1e-12]))).verdicts[0]
    assert edges.max_rel_err == 1.0
    assert compare(x=(np.array([1e-12]), np.array([-1e-12]))).verdicts[0].max_rel_err == 2e-12 / 1e-8
    # the try-it of exercise 1: centred differences of sum(x sin x) are off by about 1e-10 relative
    ns = notebook("01_linear_layer")
    x = np.random.default_rng(0).standard_normal((3, 4))
    grad = ns["numerical_gradient"](lambda v: np.sum(v * np.sin(v)), x.copy())
    (row,) = compare(g=(grad, np.sin(x) + x * np.cos(x))).verdicts
    assert 1e-13 < row.max_rel_err < 1e-9


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
    from backprop_utils import make_sine_regression

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


# ---------------------------------------------------------------------------------------------
# 02_two_layer_net
# ---------------------------------------------------------------------------------------------


def test_02_overflow_facts() -> None:
    """Exercise 1: exp overflows above about 709 with a RuntimeWarning; the naive sigmoid at -800 is 0
    but warns; exp(x) / (1 + exp(x)) at 800 is nan; np.where evaluates both branches."""
    assert np.isfinite(np.exp(709.0))
    with pytest.warns(RuntimeWarning):
        assert np.exp(np.array(710.0)) == np.inf
    with pytest.warns(RuntimeWarning):
        assert 1 / (1 + np.exp(np.array(800.0))) == 0.0
    with pytest.warns(RuntimeWarning):
        x = np.array(800.0)
        assert np.isnan(np.exp(x) / (1 + np.exp(x)))
    with pytest.warns(RuntimeWarning):
        x = np.array([-800.0, 800.0])
        np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def test_02_sigmoid_extreme_row() -> None:
    """Try it of 1b: sigmoid of [-800, -50, 0, 50, 800] is [0, exp(-50), 0.5, 1, 1] in float64, with no
    warning from the stable solution."""
    ns = notebook("02_two_layer_net")
    x = np.array([[-800.0, -50.0, 0.0, 50.0, 800.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out, _ = ns["sigmoid_forward"](x)
    assert np.array_equal(out[0], [0.0, np.exp(-50.0), 0.5, 1.0, 1.0])


def test_02_relu_centred_difference_at_zero_is_one_half() -> None:
    """Try it of 1a: the centred difference of max(0, x) is 0.5 at x = 0, 1 or 0 elsewhere."""
    h = 1e-5
    x = np.array([-1.0, 0.0, 2.0])
    assert np.allclose((np.maximum(x + h, 0) - np.maximum(x - h, 0)) / (2 * h), [0.0, 0.5, 1.0])


def test_02_log_of_a_vanishing_probability() -> None:
    """Exercise 2: e^-1000 is exactly 0 in float64; log of it is -inf; log(p + 1e-7) is about -16."""
    assert np.exp(-1000.0) == 0.0
    with pytest.warns(RuntimeWarning):
        assert np.log(np.array(0.0)) == -np.inf
    assert np.log(0.0 + 1e-7) == pytest.approx(-16.1, abs=0.05)


def test_02_softmax_worked_cases() -> None:
    """Exercise 2: scores [0, 0], class 0 give log 2 and gradient [-0.5, 0.5]; raising the first score
    to 0.001 gives about 0.6926; the large-logit case of the try-it gives about 666.8755."""
    fn = notebook("02_two_layer_net")["softmax_cross_entropy"]
    loss, dscores = fn(np.array([[0.0, 0.0]]), np.array([0]))
    assert loss == pytest.approx(np.log(2))
    assert np.allclose(dscores, [[-0.5, 0.5]])
    assert fn(np.array([[0.001, 0.0]]), np.array([0]))[0] == pytest.approx(0.6926, abs=5e-5)
    large = np.array([[1000.0, 999.0, -1000.0], [1000.0, 0.0, 999.0], [-1000.0, 1000.0, 0.0]])
    loss, _ = fn(large, np.array([0, 1, 2]))
    assert loss == pytest.approx((2000 + 2 * np.log1p(np.exp(-1))) / 3)
    assert loss == pytest.approx(666.8755, abs=5e-5)
    assert np.log1p(np.exp(-1)) == pytest.approx(0.3133, abs=5e-5)


def test_02_penalty_worked_case() -> None:
    """Exercise 3: 0.5 * 0.1 * 3^2 = 0.45; at 3.001 it is 0.4503 (to four digits), a slope of 0.3."""
    assert 0.5 * 0.1 * 3.0**2 == pytest.approx(0.45)
    assert 0.5 * 0.1 * 3.001**2 == pytest.approx(0.4503, abs=5e-5)
    assert (0.5 * 0.1 * 3.001**2 - 0.45) / 0.001 == pytest.approx(0.3, abs=1e-3)


def _train_spiral(ns: dict[str, Any], X: np.ndarray, y: np.ndarray, params: dict[str, np.ndarray]) -> list:
    losses = []
    for _ in range(500):
        loss, grads = ns["two_layer_net"](params, X, y, reg=1e-3)
        losses.append(loss)
        for k in params:
            params[k] -= 1.0 * grads[k]
    return losses


def _accuracy(params: dict[str, np.ndarray], X: np.ndarray, y: np.ndarray) -> float:
    h = np.maximum(X @ params["W1"].T + params["b1"], 0.0)
    return float(np.mean((h @ params["W2"].T + params["b2"]).argmax(axis=1) == y))


def test_02_activation_slope_table_and_hint_numbers() -> None:
    """Exercise 1's slope table and the hints that check a derivation on it: sigmoid at 0 (0.5, slope
    0.25) and at 2 (0.880797, slope 0.104994), tanh at 0.5 (0.462117, slope 0.786448), and the
    centred difference of ReLU at 0, which is not the convention."""
    h = 1e-5

    def sigmoid(v: Any) -> Any:
        return 1.0 / (1.0 + np.exp(-v))

    def slope(f: Any, v: float) -> float:
        return float((f(v + h) - f(v - h)) / (2 * h))

    assert (round(float(sigmoid(0.0)), 6), round(slope(sigmoid, 0.0), 6)) == (0.5, 0.25)
    assert (round(float(sigmoid(2.0)), 6), round(slope(sigmoid, 2.0), 6)) == (0.880797, 0.104994)
    assert (round(float(np.tanh(0.5)), 6), round(slope(np.tanh, 0.5), 6)) == (0.462117, 0.786448)
    assert slope(lambda v: np.maximum(v, 0.0), 0.0) == 0.5


def test_02_initialisation_scale_hints() -> None:
    """Exercise 4's Hints 2 and 3: on inputs of mean square 1, weights of variance 2 / D keep the mean
    square after the ReLU near 1, whatever D; standard deviation 0.01 shrinks it to about 1e-4 * D / 2."""
    rng = np.random.default_rng(0)
    for d in (2, 10, 50):
        Z = rng.standard_normal((4000, d))
        W1 = rng.standard_normal((1000, d))
        assert abs(np.mean(np.maximum(Z @ (W1 * np.sqrt(2 / d)).T, 0) ** 2) - 1.0) < 0.1
        assert np.mean(np.maximum(Z @ (W1 * 0.01).T, 0) ** 2) < 1e-4 * d


def test_02_spiral_training_claims() -> None:
    """Exercise 4: the defaults reach 97-99% in about a second or less, the loss starts around 1.5 and is
    about 0.3 after 100 steps; equal starting weights stay equal (51%); weights of standard deviation
    0.01 reach about 89% after 500 steps; a linear classifier stays near 50% (54%)."""
    ns = notebook("02_two_layer_net")
    from backprop_utils import make_spiral

    for seed in (0, 5, 7):
        X, y = make_spiral(seed=seed)
        start = time.perf_counter()
        params, losses = ns["train_two_layer_net"](X, y)
        assert time.perf_counter() - start < 1.5
        assert 0.97 <= _accuracy(params, X, y) <= 0.99 + 1e-9
        assert 1.4 < losses[0] < 1.6 and 0.25 < losses[100] < 0.4

    X, y = make_spiral(seed=0)
    equal = {
        "W1": np.full((100, 2), 0.1),
        "b1": np.zeros(100),
        "W2": np.full((3, 100), 0.1),
        "b2": np.zeros(3),
    }
    _train_spiral(ns, X, y, equal)
    assert np.allclose(equal["W1"], equal["W1"][0]) and np.allclose(equal["W2"], equal["W2"][:, :1])
    assert _accuracy(equal, X, y) == pytest.approx(0.51, abs=0.005)

    rng = np.random.default_rng(0)
    small = {
        "W1": 0.01 * rng.standard_normal((100, 2)),
        "b1": np.zeros(100),
        "W2": 0.01 * rng.standard_normal((3, 100)),
        "b2": np.zeros(3),
    }
    _train_spiral(ns, X, y, small)
    assert 0.85 < _accuracy(small, X, y) < 0.93

    W, b = np.zeros((3, 2)), np.zeros(3)
    for _ in range(3000):
        s = X @ W.T + b
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(y)), y] -= 1
        p /= len(y)
        W -= p.T @ X
        b -= p.sum(axis=0)
    assert np.mean((X @ W.T + b).argmax(axis=1) == y) == pytest.approx(0.54, abs=0.005)


# ---------------------------------------------------------------------------------------------
# 03_autograd_graph
# ---------------------------------------------------------------------------------------------


def test_03_reading_the_grad_of_a_non_leaf_warns_and_gives_none() -> None:
    """retain_grad: an intermediate result's .grad stays None after backward, and reading it warns."""
    import torch

    w = torch.tensor([1.0, 2.0], requires_grad=True)
    h = w * 3
    h.sum().backward()
    with pytest.warns(UserWarning, match="non-leaf"):
        assert h.grad is None


def test_03_zero_grad_sets_the_grads_to_none_by_default() -> None:
    """Gradients accumulate: optimizer.zero_grad() sets the grads to None by default."""
    import torch

    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (3 * w).sum().backward()
    optimizer = torch.optim.SGD([w], lr=0.1)
    optimizer.zero_grad()
    assert w.grad is None


def test_03_diamond_derivative_and_orders() -> None:
    """The diamond: dL/da = cos^2 a - sin^2 a + 1; breadth first and first-reached orders run
    ExpBackward0 before one of the nodes that send it gradient; the solution's order does not."""
    import torch

    ns = notebook("03_autograd_graph", "breadth_first", "first_reached")
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    a = torch.exp(x)
    a.retain_grad()
    out = (torch.sin(a) * torch.cos(a) + a).sum()
    out.backward(retain_graph=True)
    ad = a.detach()
    assert torch.allclose(a.grad, torch.cos(ad) ** 2 - torch.sin(ad) ** 2 + 1)

    # The two walks the notebook shows, from its own cells.
    names = ns["breadth_first"](out)
    senders = {"SinBackward0", "CosBackward0", "AddBackward0"}
    assert any(names.index(s) > names.index("ExpBackward0") for s in senders)
    first_reached = ns["first_reached"](out)
    assert any(first_reached.index(s) > first_reached.index("ExpBackward0") for s in senders)

    order = ns["backward_order"](out)
    assert all(order.index(s) < order.index("ExpBackward0") for s in senders)


def test_03_hint_4_finished_list_of_the_diamond() -> None:
    """Hint 4 of backward_order: a depth-first walk that puts a node on the finished list after its
    children gives, on the diamond above it, AccumulateGrad, Exp, Sin, Cos, Mul, Add, Sum."""
    import torch

    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    a = torch.exp(x)
    out = (torch.sin(a) * torch.cos(a) + a).sum()
    seen, finished = set(), []

    def visit(node: Any) -> None:
        if node is None or node in seen:
            return
        seen.add(node)
        for child, _ in node.next_functions:
            visit(child)
        finished.append(type(node).__name__)

    visit(out.grad_fn)
    assert finished == [
        "AccumulateGrad",
        "ExpBackward0",
        "SinBackward0",
        "CosBackward0",
        "MulBackward0",
        "AddBackward0",
        "SumBackward0",
    ]
    assert notebook("03_autograd_graph")["backward_order"](out) == finished[::-1]


def test_03_try_it_graphs_have_the_checks_node_counts() -> None:
    """The try-it of backward_order: its chain, diamond and network have as many nodes as the graphs the
    check builds (6, 8 and 18, for every seed), and the network written with @ and + has two more."""
    import re as regex

    import torch
    import torch.nn.functional as F

    from autograder.checks.autograd_graph import GRAPH_CASES, build_graph
    from autograder.grading.autograd_graph import graph_structure

    counts = {
        kind: {len(graph_structure(build_graph(kind, seed))[0]) for seed in (0, 1, 7)} for kind in GRAPH_CASES
    }
    assert counts == {"chain": {6}, "diamond": {8}, "two-layer net": {18}}

    nb = jupytext.read(SOLUTIONS / "03_autograd_graph.py", fmt="py:percent")
    (cell,) = [
        c
        for c in nb.cells
        if c.cell_type == "code" and 'graphs["network"]' in c.source and "def graph_of" in c.source
    ]
    namespace: dict[str, Any] = {"np": np, "torch": torch, "F": F, "cache": __import__("functools").cache}
    source = cell.source.split("for name, result in graphs.items():")[0]
    exec(
        compile(source, "03_autograd_graph.py", "exec"), namespace
    )  # builds the graphs, runs no learner code
    graph_of = namespace["graph_of"]
    assert {k: len(graph_of(g)[0]) for k, g in namespace["graphs"].items()} == {
        "chain": 6,
        "diamond": 8,
        "network": 18,
    }
    params, X, y = namespace["params"], namespace["X"], namespace["y"]
    scores = torch.relu(X @ params["W1"].T + params["b1"]) @ params["W2"].T + params["b2"]
    by_hand = F.cross_entropy(scores, y) + 0.05 * ((params["W1"] ** 2).sum() + (params["W2"] ** 2).sum())
    assert len(graph_of(by_hand)[0]) == 20
    assert regex.search(
        r"\(6 nodes.*\n.*\(8 nodes.*\n.*\(18 nodes", nb.cells[nb.cells.index(cell) - 1].source, regex.S
    )


def test_03_network_graph_is_a_few_dozen_nodes_deep() -> None:
    """Exercise 2: a recursive walk is fine, the graphs are a few dozen nodes deep (far below Python's
    recursion limit)."""

    # The network of the notebook's cell that draws it (the cell that defines breadth_first).
    ns = notebook("03_autograd_graph", "breadth_first", "first_reached")
    loss = ns["two_layer_loss_torch"](ns["params"], ns["X"], ns["y"], reg=0.1)

    def depth(node: Any) -> int:
        children = [c for c, _ in node.next_functions if c is not None]
        return 1 + max((depth(c) for c in children), default=0)

    assert depth(loss.grad_fn) < 50
    assert len(ns["backward_order"](loss)) < 50


def test_03_spiral_with_autograd() -> None:
    """Exercise 3's demo: 300 steps reach 97-99% training accuracy in about a second."""
    import torch

    from backprop_utils import make_spiral

    ns = notebook("03_autograd_graph")
    X, y = make_spiral(seed=0)
    X_t, y_t = torch.tensor(X), torch.tensor(y)
    rng = np.random.default_rng(0)
    params = {
        "W1": torch.tensor(rng.standard_normal((100, 2)) * np.sqrt(2 / 2), requires_grad=True),
        "b1": torch.zeros(100, dtype=torch.float64, requires_grad=True),
        "W2": torch.tensor(rng.standard_normal((3, 100)) * np.sqrt(1 / 100), requires_grad=True),
        "b2": torch.zeros(3, dtype=torch.float64, requires_grad=True),
    }
    start = time.perf_counter()
    for _ in range(300):
        ns["two_layer_loss_torch"](params, X_t, y_t, reg=1e-3).backward()
        ns["sgd_step"](list(params.values()), lr=1.0)
    assert time.perf_counter() - start < 3.0
    p = {k: v.detach().numpy() for k, v in params.items()}
    assert 0.97 <= _accuracy(p, X, y) <= 0.99 + 1e-9


# ---------------------------------------------------------------------------------------------
# 04_custom_functions
# ---------------------------------------------------------------------------------------------


def test_04_writing_into_grad_output_of_a_sum_warns_and_zeroes_the_gradient() -> None:
    """Exercise 1: under out.sum().backward(), grad_output[x <= 0] = 0 prints two deprecation warnings
    and silently turns the whole gradient into zeros (no error)."""
    import torch

    WritesIntoGradOutput = mistake("MyReLU writes into grad_output (04)")
    x = torch.tensor([[1.0, -1.0], [2.0, -3.0]], dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        WritesIntoGradOutput.apply(x).sum().backward()
    assert len([w for w in caught if "expanded tensors is deprecated" in str(w.message)]) == 2
    assert torch.equal(x.grad, torch.zeros_like(x))


def test_04_needs_input_grad_has_one_entry_per_argument_of_apply() -> None:
    """Exercise 2: three bools for apply(x, W, b) and apply(x, W, None), two for apply(x, W); reading
    entry 2 after apply(x, W) raises IndexError."""
    import torch

    LinearFunction = notebook("04_custom_functions")["LinearFunction"]
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    W = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert LinearFunction.apply(x, W, b).grad_fn.needs_input_grad == (True, True, True)
    assert LinearFunction.apply(x, W, None).grad_fn.needs_input_grad == (True, True, False)
    two = LinearFunction.apply(x, W).grad_fn.needs_input_grad
    assert two == (True, True)
    with pytest.raises(IndexError):
        two[2]


def test_04_unsummed_bias_gradient_passes_backward_and_gradcheck() -> None:
    """Exercise 2: a bias gradient returned as grad_output itself, (N, out), is summed by the engine:
    .backward() and gradcheck pass."""
    import torch

    class Unsummed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, W, b):
            ctx.save_for_backward(x, W)
            return x @ W.T + b

        @staticmethod
        def backward(ctx, g):
            x, W = ctx.saved_tensors
            return g @ W, g.T @ x, g

    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    W = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, 5, dtype=torch.float64)
    Unsummed.apply(x, W, b).backward(g)
    assert b.grad.shape == (5,) and torch.allclose(b.grad, g.sum(0))
    assert torch.autograd.gradcheck(Unsummed.apply, (x, W, b))
    assert Unsummed.apply(x, W, b).grad_fn.apply(g)[2].shape == (4, 5)


def test_04_output_kept_on_ctx_escapes_the_version_counter() -> None:
    """Exercise 1b: had Exp kept its output as ctx.result, doubling the output in place would make
    backward run and return a gradient twice too large, with no error."""
    import torch
    from test_checks_custom_functions import ExpOutputOnCtx as ExpOnCtx  # the check's wrong answer

    x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    out = ExpOnCtx.apply(x)
    with torch.no_grad():
        out.mul_(2)
    out.backward(torch.ones_like(out))
    assert torch.allclose(x.grad, 2 * x.detach().exp())


def test_04_jacobian_errors() -> None:
    """Exercise 4: on the tanh layer the error is about 1e-10 in float64 and 0.04 to 0.15 in float32;
    a backward that doubles the gradient of x ** 2 gives exactly 2 max |x|."""
    import torch

    # The notebook's cell that defines the tanh layer also defines the planted bug, DoubledSquare.
    ns = notebook("04_custom_functions", "layer")
    layer, DoubledSquare, max_jacobian_error = ns["layer"], ns["DoubledSquare"], ns["max_jacobian_error"]
    generator = torch.Generator().manual_seed(0)
    for _ in range(4):
        inputs64 = tuple(
            torch.randn(s, dtype=torch.float64, generator=generator, requires_grad=True)
            for s in [(4, 3), (5, 3), (5,)]
        )
        inputs32 = tuple(t.detach().float().requires_grad_(True) for t in inputs64)
        assert 1e-11 < max_jacobian_error(layer, inputs64) < 1e-9
        assert 0.02 < max_jacobian_error(layer, inputs32) < 0.2

    x = torch.tensor([0.5, -1.5], dtype=torch.float64, requires_grad=True)
    assert max_jacobian_error(DoubledSquare.apply, (x,)) == pytest.approx(3.0, abs=1e-6)


# ---------------------------------------------------------------------------------------------
# 05_beyond_the_basics
# ---------------------------------------------------------------------------------------------


def test_05_writing_into_the_grad_output_of_a_sum_raises() -> None:
    """Exercise 6a: grad_output.mul_(...) under y.sum() raises an error (the stride-0 view)."""
    import torch

    P3InPlace = mistake("Legendre backward in place (05)")
    x = torch.linspace(-2, 2, 7, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError, match="single memory location"):
        P3InPlace.apply(x).sum().backward()


def test_05_legendre_numbers() -> None:
    """Exercise 6: P3(1) = 1, P3(1.001) is about 1.006; the tutorial's loop goes from a sum of squared
    errors of 461.9 to 8.94."""
    import torch

    ns = notebook("05_beyond_the_basics")
    P3 = ns["LegendrePolynomial3"].apply
    assert float(P3(torch.tensor([1.0], dtype=torch.float64))[0]) == pytest.approx(1.0)
    assert float(P3(torch.tensor([1.001], dtype=torch.float64))[0]) == pytest.approx(1.006, abs=5e-4)
    x = torch.linspace(-math.pi, math.pi, 2000, dtype=torch.float64)
    y = torch.sin(x)

    def sse(a: float, b: float, c: float, d: float) -> float:
        t = c + d * x
        return float(((a + b * 0.5 * (5 * t**3 - 3 * t) - y) ** 2).sum())

    assert sse(0.0, -1.0, 0.0, 0.3) == pytest.approx(461.9, abs=0.05)
    assert sse(*ns["fit_legendre"](x, y)) == pytest.approx(8.94, abs=0.005)


def test_05_numpy_cube_twice_names_once_differentiable() -> None:
    """Exercise 3: differentiating NumpyCube twice raises a RuntimeError that names the decorator."""
    import torch

    NumpyCube = notebook("05_beyond_the_basics")["NumpyCube"]
    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    (dx,) = torch.autograd.grad(NumpyCube.apply(x), x, g, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        dx.sum().backward()


# ---------------------------------------------------------------------------------------------
# The try-it cells: self-contained after a kernel restart, and never "ok" for a known mistake
# ---------------------------------------------------------------------------------------------

STEMS = (
    "01_linear_layer",
    "02_two_layer_net",
    "03_autograd_graph",
    "04_custom_functions",
    "05_beyond_the_basics",
    "06_memory_efficient_attention",
)


def _exercises(stem: str) -> list[tuple[str, list[int]]]:
    """For each tests cell: the source of the solution cells it grades (those since the previous
    tests cell) and the indices of its try-it cells (the untagged code cells between the last of
    those solution cells and the tests cell)."""
    cells = jupytext.read(SOLUTIONS / f"{stem}.py", fmt="py:percent").cells
    found, solutions, try_its = [], [], []
    for i, cell in enumerate(cells):
        if cell.cell_type != "code":
            continue
        kind = cell.metadata.get("title")
        if kind == "solution":
            solutions.append(cell.source)
            try_its = []
        elif kind is None and solutions:
            try_its.append(i)
        elif kind == "tests" and solutions:  # a tests cell that grades an earlier answer (06's exercise 4,
            found.append(("\n".join(solutions), try_its))  # what FlashAttention saves) has no try-it
            solutions, try_its = [], []
    return found


def run_try_it(stem: str, index: int, mistake: str = "") -> tuple[bool, str]:
    """Run cell ``index`` of the notebook in a fresh namespace holding only the set-up cell and the
    solution cells above it (a restarted kernel in which the learner ran their own cells), after
    ``mistake``, code that redefines one of the learner's functions. Returns whether every
    comparison table of the cell said ok and the cell raised nothing, and what the cell printed (with
    the error, if any)."""
    import contextlib
    import io

    import matplotlib.pyplot as plt
    import torch

    cells = jupytext.read(SOLUTIONS / f"{stem}.py", fmt="py:percent").cells
    namespace: dict[str, Any] = {"__name__": "__main__"}
    tables: list[Any] = []
    printed = io.StringIO()
    default_dtype = torch.get_default_dtype()
    try:
        for cell in cells[:index]:
            if cell.cell_type == "code" and cell.metadata.get("title") in ("locked", "solution"):
                exec(compile(cell.source, f"{stem}.py", "exec"), namespace)
        exec(compile(mistake, "mistake", "exec"), namespace)
        compare = namespace["compare"]

        def recording_compare(*args: Any, **kwargs: Any) -> Any:
            table = compare(*args, **kwargs)
            tables.append(table)
            return table

        namespace["compare"] = recording_compare
        with contextlib.redirect_stdout(printed), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                exec(compile(cells[index].source, f"{stem}.py, cell {index + 1}", "exec"), namespace)
            except Exception as error:  # the learner sees the error: a verdict, but not "ok"
                return False, printed.getvalue() + f"\n{type(error).__name__}: {error}"
    finally:
        torch.set_default_dtype(default_dtype)
        plt.close("all")
    return all(t.all_ok for t in tables), printed.getvalue()


@pytest.mark.parametrize("stem", STEMS)
def test_try_it_cells_run_after_a_restart_and_say_ok_for_the_solution(stem: str) -> None:
    """Each try-it cell needs only the set-up cell and the exercise cells, and passes the solution:
    every table row ok, no line that says WRONG."""
    exercises = _exercises(stem)
    assert exercises and all(try_its for _, try_its in exercises), stem
    for _, try_its in exercises:
        for index in try_its:
            ok, printed = run_try_it(stem, index)
            assert ok, (stem, index, printed)
            assert "WRONG" not in printed, (stem, index, printed)


#: Known mistakes: (notebook, the function it redefines, its code). A mistake in one method of an
#: autograd Function subclasses the solution's class and overrides only that method.
MISTAKES = {
    "mse divided by N (01)": (
        "01_linear_layer",
        "mse_loss",
        """
def mse_loss(pred, target):
    diff = pred - target
    return float(np.sum(diff**2) / pred.shape[0]), 2 * diff / pred.shape[0]
""",
    ),
    "numerical_gradient restores x by arithmetic (01)": (
        "01_linear_layer",
        "numerical_gradient",
        """
def numerical_gradient(f, x, h=1e-5):
    grad = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        x[i] += h; a = f(x); x[i] -= 2 * h; b = f(x); x[i] += h
        grad[i] = (a - b) / (2 * h)
    return grad
""",
    ),
    "relu writes into dout (02)": (
        "02_two_layer_net",
        "relu_backward",
        """
def relu_backward(dout, cache):
    dout[cache <= 0] = 0
    return dout
""",
    ),
    "naive sigmoid (02)": (
        "02_two_layer_net",
        "sigmoid_forward",
        """
def sigmoid_forward(x):
    s = 1 / (1 + np.exp(-x))
    return s, s
""",
    ),
    "softmax gradient without 1/N (02)": (
        "02_two_layer_net",
        "softmax_cross_entropy",
        """
_correct = softmax_cross_entropy
def softmax_cross_entropy(scores, y):
    loss, dscores = _correct(scores, y)
    return loss, dscores * scores.shape[0]
""",
    ),
    "breadth-first order (03)": (
        "03_autograd_graph",
        "backward_order",
        """
def backward_order(result):
    nodes, seen = [result.grad_fn], {result.grad_fn}
    for node in nodes:
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                nodes.append(child)
    return [type(n).__name__ for n in nodes]
""",
    ),
    "sgd_step without clearing the gradients (03)": (
        "03_autograd_graph",
        "sgd_step",
        """
def sgd_step(params, lr):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
""",
    ),
    "MyReLU writes into grad_output (04)": (
        "04_custom_functions",
        "MyReLU",
        "from test_checks_custom_functions import ReLUInPlace as MyReLU  # the check test's own\n",
    ),
    "LinearFunction ignores needs_input_grad (04)": (
        "04_custom_functions",
        "LinearFunction",
        """
class LinearFunction(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_bias = None if bias is None else grad_output.sum(0)
        return grad_output.mm(weight), grad_output.t().mm(input), grad_bias
""",
    ),
    "Exp keeps its output on ctx (04)": (
        "04_custom_functions",
        "Exp",
        """
class Exp(Exp):
    @staticmethod
    def forward(ctx, x):
        ctx.result = torch.exp(x)
        return ctx.result

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.result
""",
    ),
    "backward_by_hand through the engine (04)": (
        "04_custom_functions",
        "backward_by_hand",
        """
def backward_by_hand(function, x, W, b, grad):
    inputs = [t for t in (x, W, b) if t is not None and t.requires_grad]
    found = iter(torch.autograd.grad(function.apply(x, W, b), inputs, grad))
    return tuple(next(found) if t is not None and t.requires_grad else None for t in (x, W, b))
""",
    ),
    "train_spiral records the loss after the update (04)": (
        "04_custom_functions",
        "train_spiral",
        """
_correct = train_spiral
def train_spiral(linear_cls, seed=0, steps=30, hidden=32, lr=1.0):
    return _correct(linear_cls, seed=seed, steps=steps + 1, hidden=hidden, lr=lr)[1:]
""",
    ),
    "MaxWithIndex without mark_non_differentiable (05)": (
        "05_beyond_the_basics",
        "MaxWithIndex",
        """
class MaxWithIndex(MaxWithIndex):
    @staticmethod
    def forward(ctx, scores):
        values, indices = scores.max(dim=1)
        ctx.save_for_backward(indices)
        ctx.num_classes = scores.shape[1]
        return values, indices
""",
    ),
    "SquareAndCube without set_materialize_grads (05)": (
        "05_beyond_the_basics",
        "SquareAndCube",
        """
class SquareAndCube(SquareAndCube):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2, x**3

    @staticmethod
    def backward(ctx, grad_square, grad_cube):
        (x,) = ctx.saved_tensors
        return 2 * x * grad_square + 3 * x**2 * grad_cube
""",
    ),
    "Legendre backward in place (05)": (
        "05_beyond_the_basics",
        "LegendrePolynomial3",
        """
class LegendrePolynomial3(LegendrePolynomial3):
    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        return grad_output.mul_(1.5 * (5 * input**2 - 1))
""",
    ),
    "saved_tensors counts elements, not bytes (06)": (
        "06_memory_efficient_attention",
        "saved_tensors",
        """
_correct = saved_tensors
def saved_tensors(fn, *args):
    return [(shape, nbytes // 4) for shape, nbytes in _correct(fn, *args)]
""",
    ),
    "attention without the scale (06)": (
        "06_memory_efficient_attention",
        "attention",
        """
_correct = attention
def attention(q, k, v, is_causal=False):
    return _correct(q * math.sqrt(q.shape[-1]), k, v, is_causal)
""",
    ),
    "attention's causal mask aligned bottom-right (06)": (
        "06_memory_efficient_attention",
        "attention",
        """
def attention(q, k, v, is_causal=False):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        n_q, n_k = scores.shape[-2:]
        allowed = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
""",
    ),
    "FlashAttention's accumulator not rescaled (06)": (
        "06_memory_efficient_attention",
        "flash_forward",
        """
def flash_forward(q, k, v, is_causal=False, tile=16):
    rows = torch.arange(q.shape[-2])[:, None]
    m = q.new_full(q.shape[:-1], float("-inf"))
    ell = q.new_zeros(q.shape[:-1])
    acc = q.new_zeros(*q.shape[:-1], v.shape[-1])
    for start in range(0, k.shape[-2], tile):
        s = q @ k[..., start : start + tile, :].transpose(-2, -1) / math.sqrt(q.shape[-1])
        if is_causal:
            cols = torch.arange(start, start + s.shape[-1])[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[..., None])
        alpha = torch.exp(m - m_new)
        ell = alpha * ell + p.sum(dim=-1)
        acc = acc + p @ v[..., start : start + tile, :]
        m = m_new
    return acc / ell[..., None], m + torch.log(ell)
""",
    ),
    "FlashAttention's dS without D (06)": (
        "06_memory_efficient_attention",
        "flash_backward",
        """
_correct = flash_backward
def flash_backward(q, k, v, o, L, grad_o, is_causal=False, tile=16):
    return _correct(q, k, v, torch.zeros_like(o), L, grad_o, is_causal, tile)
""",
    ),
    "FlashAttention views grad_output (06)": (
        "06_memory_efficient_attention",
        "FlashAttention",
        """
_Correct = FlashAttention
class FlashAttention(_Correct):
    @staticmethod
    def backward(ctx, grad_output):
        flat = grad_output.view(-1, grad_output.shape[-1])
        return _Correct.backward(ctx, flat.view(grad_output.shape))
""",
    ),
    "attention_op's fake kernel of the wrong shape (06)": (
        "06_memory_efficient_attention",
        "attention_op",
        """
@attention_op.register_fake
def _(q, k, v, is_causal=False):
    return q.new_empty(q.shape[:-1])
""",
    ),
}


def mistake(name: str) -> Any:
    """The wrong function or class of ``MISTAKES[name]``, defined after the notebook's solutions."""
    stem, function, source = MISTAKES[name]
    namespace = dict(notebook(stem))
    exec(compile(source, name, "exec"), namespace)
    return namespace[function]


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_try_it_cells_do_not_say_ok_for_a_known_mistake(name: str) -> None:
    """The issue's examples and their kin: some try-it cell of the exercise flags each mistake, by a
    table row that is not ok, a line that says WRONG, or an error."""
    stem, function, mistake = MISTAKES[name]
    (try_its,) = [
        t for source, t in _exercises(stem) if re.search(rf"^(def|class) {function}\(", source, re.M)
    ]
    verdicts = [run_try_it(stem, index, mistake) for index in try_its]
    assert any(not ok or "WRONG" in printed for ok, printed in verdicts), verdicts


def test_05_setup_context_gets_forwards_defaults_filled_in() -> None:
    """Exercise 1: setup_context receives three inputs even for apply(x, W), the last None, and
    needs_input_grad has three entries."""
    import torch

    seen: list[int] = []

    class Recorder(torch.autograd.Function):
        @staticmethod
        def forward(input, weight, bias=None):
            return input @ weight.T

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen.append(inputs)

        @staticmethod
        def backward(ctx, grad_output):
            seen.append(ctx.needs_input_grad)
            return grad_output @ torch.ones(5, 3, dtype=grad_output.dtype), None, None

    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    W = torch.randn(5, 3, dtype=torch.float64)
    Recorder.apply(x, W).sum().backward()
    assert len(seen[0]) == 3 and seen[0][2] is None
    assert seen[1] == (True, False, False)


def test_05_ctx_features() -> None:
    """Exercise 4: a non-differentiable output gets requires_grad False and backward still receives a
    gradient for it (zeros); InplaceReLU on a leaf that requires grad is refused."""
    import torch

    received: list[Any] = []

    class MaxRecording(torch.autograd.Function):
        @staticmethod
        def forward(ctx, scores):
            values, indices = scores.max(dim=1)
            ctx.mark_non_differentiable(indices)
            return values, indices

        @staticmethod
        def backward(ctx, grad_values, grad_indices):
            received.append(grad_indices)
            return torch.zeros(4, 5, dtype=torch.float64)

    scores = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    values, indices = MaxRecording.apply(scores)
    assert not indices.requires_grad
    values.sum().backward()
    assert received[0] is not None and not received[0].any()

    InplaceReLU = notebook("05_beyond_the_basics")["InplaceReLU"]
    leaf = torch.randn(3, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError):
        InplaceReLU.apply(leaf)


def test_04_backward_by_hand_through_the_engine_shows_the_summed_bias_rather_than_an_error() -> None:
    """The try-it's own UnsummedBias works inside the engine too: a backward_by_hand that goes through
    autograd sees its summed (out,) bias gradient flagged, not an error raised by the course's code."""
    stem, function, source = MISTAKES["backward_by_hand through the engine (04)"]
    (try_its,) = [t for s, t in _exercises(stem) if re.search(rf"^def {function}\(", s, re.M)]
    ok, printed = run_try_it(stem, try_its[-1], source)
    assert not ok and "Error" not in printed, printed


def test_05_cube_try_it_prints_false_for_a_detached_backward() -> None:
    """gradgradcheck in the try-it prints False for a backward that cuts the graph, and the table
    below it still shows which second derivative is missing."""
    source = """
class Cube(Cube):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x.detach() ** 2 * grad_output
"""
    (try_its,) = [t for s, t in _exercises("05_beyond_the_basics") if re.search(r"^class Cube\(", s, re.M)]
    ok, printed = run_try_it("05_beyond_the_basics", try_its[0], source)
    assert not ok and "gradgradcheck(Cube): False" in printed and "Error" not in printed, printed


def test_05_a_backward_that_cuts_the_graph_fails_or_gives_zero_and_either_decorator_order_works() -> None:
    """Exercise 3's text: a numpy backward without the decorator fails the second derivative with an
    error that does not name the cause; a detached one gives zero; once_differentiable raises its own
    error whether it is written below @staticmethod or above it."""
    import torch
    from torch.autograd.function import once_differentiable

    def numpy_cube_backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.from_numpy(3 * x.detach().numpy() ** 2 * grad_output.detach().numpy())

    class Plain(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x**3

        backward = staticmethod(numpy_cube_backward)

    class Detached(Plain):
        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            return 3 * x.detach() ** 2 * grad_output

    class Below(Plain):
        backward = staticmethod(once_differentiable(numpy_cube_backward))

    class Above(Plain):
        backward = once_differentiable(staticmethod(numpy_cube_backward))

    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    g = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    (dx,) = torch.autograd.grad(Plain.apply(x), x, g, create_graph=True)
    with pytest.raises(RuntimeError) as error:
        dx.sum().backward()
    assert "once_differentiable" not in str(error.value)
    (dx,) = torch.autograd.grad(Detached.apply(x), x, g, create_graph=True)
    (second,) = torch.autograd.grad(dx.sum(), x, allow_unused=True, materialize_grads=True)
    assert not second.any()
    for decorated in (Below, Above):
        (dx,) = torch.autograd.grad(decorated.apply(x), x, g, create_graph=True)
        with pytest.raises(RuntimeError, match="once_differentiable"):
            dx.sum().backward()


def test_04_mul_constant_try_it_counts_the_values_backward_returns() -> None:
    """A backward that returns only dL/dx is told it returned 1 value for 2 inputs, not "too many values
    to unpack" (what unpacking a lone (3, 4) tensor into two names said before)."""
    source = """
class MulConstant(MulConstant):
    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant
"""
    (try_its,) = [
        t for s, t in _exercises("04_custom_functions") if re.search(r"^class MulConstant\(", s, re.M)
    ]
    ok, printed = run_try_it("04_custom_functions", try_its[0], source)
    assert "returned 1 value(s) for forward's 2 inputs: WRONG" in printed and "Error" not in printed, printed


# ---------------------------------------------------------------------------------------------
# 06_memory_efficient_attention
# ---------------------------------------------------------------------------------------------


def test_06_what_plain_and_flash_attention_save_at_n_1024() -> None:
    """Exercise 4: at N = 1024, d = 16, float32, plain attention saves two 1024 x 1024 matrices and a few
    (1024, 16) ones; FlashAttention four (1024, 16) tensors and one (1024,); the ratio is about 32."""
    import torch

    ns = notebook("06_memory_efficient_attention")
    q, k, v = (torch.randn(1024, 16, dtype=torch.float32, requires_grad=True) for _ in range(3))
    plain = ns["saved_tensors"](ns["attention"], q, k, v)
    flash = ns["saved_tensors"](ns["FlashAttention"].apply, q, k, v)
    assert sorted(shape for shape, _ in plain) == [
        (16, 1024),
        (1024, 16),
        (1024, 16),
        (1024, 1024),
        (1024, 1024),
    ]
    assert sorted(shape for shape, _ in flash) == [(1024,), *[(1024, 16)] * 4]
    plain_bytes, flash_bytes = (sum(nbytes for _, nbytes in saved) for saved in (plain, flash))
    assert (plain_bytes, flash_bytes) == (8_585_216, 266_240)
    assert round(plain_bytes / flash_bytes, 1) == 32.2


def test_06_expected_errors_of_flash_attention() -> None:
    """Exercise 3: "About 1e-15 in float64, 1e-6 in float32" against F.scaled_dot_product_attention."""
    import torch
    import torch.nn.functional as F

    FlashAttention = notebook("06_memory_efficient_attention")["FlashAttention"]
    torch.manual_seed(0)
    for dtype, bound in ((torch.float64, 1e-14), (torch.float32, 1e-5)):
        q, k, v = (torch.randn(2, 45, 8, dtype=dtype, requires_grad=True) for _ in range(3))
        g = torch.randn(2, 45, 8, dtype=dtype)
        out = FlashAttention.apply(q, k, v, True)
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        mine, refs = (torch.autograd.grad(o, (q, k, v), g) for o in (out, ref))
        errors = [(a - b).abs().max().item() for a, b in zip((out, *mine), (ref, *refs), strict=True)]
        assert max(errors) < bound, (dtype, errors)


def test_06_defining_an_operator_again_replaces_it() -> None:
    """Exercise 5: "Defining an operator of the same name again replaces the earlier definition":
    re-running the cell is safe and the last version wins."""
    import torch

    def define(factor: float) -> Any:
        # the schema given: this module's annotations are strings (``from __future__ import annotations``)
        @torch.library.custom_op(
            "backprop_course::claims_probe", mutates_args=(), schema="(Tensor x) -> Tensor"
        )
        def probe(x):
            return x * factor

        return probe

    define(2.0)
    latest = define(3.0)
    x = torch.ones(2)
    assert latest(x).tolist() == [3.0, 3.0]
    assert torch.ops.backprop_course.claims_probe(x).tolist() == [3.0, 3.0]


def test_05_a_value_forward_computes_and_saves_is_a_constant_to_the_second_derivative() -> None:
    """Exercise 3: "Forward itself runs with autograd off: a value it computes and saves reaches backward
    as a constant": the derivative saved from forward gives the right first derivative and a second
    derivative through x of zero, where the saved x gives 6 x g v."""
    import torch
    from test_checks_beyond_basics import CubeSavesDerivative

    grad_mode: list[bool] = []

    class Probe(torch.autograd.Function):
        forward = staticmethod(lambda ctx, x: grad_mode.append(torch.is_grad_enabled()) or x.clone())
        backward = staticmethod(lambda ctx, grad_output: grad_output)

    Probe.apply(torch.ones(2, requires_grad=True))
    assert grad_mode == [False]
    Cube = notebook("05_beyond_the_basics")["Cube"]
    x, g, v = (torch.randn(4, 3, dtype=torch.float64) for _ in range(3))
    x.requires_grad_()
    g.requires_grad_()  # as in the try-it and the check: the second derivatives through x and through g
    for fn, expected in ((CubeSavesDerivative, torch.zeros_like(x)), (Cube, 6 * x * g * v)):
        (dx,) = torch.autograd.grad(fn.apply(x), x, g, create_graph=True)
        assert torch.allclose(dx, 3 * x**2 * g)
        (hx,) = torch.autograd.grad((dx * v).sum(), x, allow_unused=True)
        hx = torch.zeros_like(x) if hx is None else hx
        assert torch.allclose(hx, expected.detach())


def test_05_ties_go_to_the_returned_index_with_max_and_are_shared_with_amax() -> None:
    """Exercise 4: the backward of ``scores.max(dim=1)`` gives a tied row's gradient to the index it
    returns alone; ``torch.amax`` shares it between the tied entries."""
    import torch

    scores = torch.tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 2.0]], requires_grad=True)
    values, indices = scores.max(dim=1)
    (by_max,) = torch.autograd.grad(values.sum(), scores)
    chosen = torch.zeros_like(scores)
    chosen[torch.arange(2), indices] = 1.0
    assert torch.equal(by_max, chosen)
    (by_amax,) = torch.autograd.grad(torch.amax(scores, dim=1).sum(), scores)
    assert torch.equal(by_amax, torch.tensor([[0.0, 0.5, 0.5], [0.5, 0.0, 0.5]]))


def test_06_torch_compile_traces_numpy_calls_on_arrays_made_from_tensors() -> None:
    """Exercise 5: numpy is not among what breaks the graph: torch.compile traces numpy calls on arrays
    made from tensors, with no graph break (``fullgraph=True`` compiles)."""
    import numpy as np
    import torch

    def f(x):
        return torch.from_numpy(np.sin(x.numpy()) * 2.0)

    x = torch.randn(5)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    assert torch.allclose(compiled(x), f(x))
