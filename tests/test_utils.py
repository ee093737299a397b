"""What the notebooks import: data sets, seeding, plots and the comparison table.

Plots run on the Agg backend (MPLBACKEND=Agg, set by conftest.py before anything imports pyplot).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection

from backprop_utils import (
    ComparisonTable,
    compare,
    make_sine_regression,
    make_spiral,
    plot_decision_boundary,
    plot_fit,
    plot_losses,
    seed_everything,
)


@pytest.fixture(autouse=True)
def close_figures() -> Iterator[None]:
    """Every figure a test opens is closed, so tests neither leak memory nor warn about open figures."""
    yield
    plt.close("all")


# ----------------------------------------------------------------------------- data


def test_sine_regression_shapes_dtypes_and_range() -> None:
    x, y = make_sine_regression(n=100)
    assert x.shape == y.shape == (100,)
    assert x.dtype == y.dtype == np.float64
    assert x[0] == -1.0 and x[-1] == 1.0 and np.all(np.diff(x) > 0)
    # noise is small: y stays close to sin(pi x)
    assert np.std(y - np.sin(np.pi * x)) == pytest.approx(0.05, rel=0.3)


@pytest.mark.parametrize(("make", "varies"), [(make_sine_regression, 1), (make_spiral, 0)])
def test_data_is_deterministic_per_seed(make, varies: int) -> None:
    """The same seed gives the same arrays; another seed changes them (y of the sine: its x is a grid)."""
    first, again, other = make(seed=3), make(seed=3), make(seed=4)
    for array, same in zip(first, again, strict=True):
        np.testing.assert_array_equal(array, same)
    assert not np.array_equal(first[varies], other[varies])


def test_spiral_shapes_dtypes_and_balanced_classes() -> None:
    X, y = make_spiral(n_per_class=50, n_classes=4)
    assert X.shape == (200, 2) and X.dtype == np.float64
    assert y.shape == (200,) and y.dtype == np.int64
    assert np.bincount(y).tolist() == [50, 50, 50, 50]
    assert np.all(np.linalg.norm(X, axis=1) <= 1.0 + 1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spiral_is_not_linearly_separable(seed: int) -> None:
    X, y = make_spiral(seed=seed)
    A = np.c_[X, np.ones(len(X))]
    onehot = np.eye(3)[y]

    # least-squares linear classifier
    W_ls = np.linalg.lstsq(A, onehot, rcond=None)[0]
    least_squares_accuracy = np.mean(np.argmax(A @ W_ls, axis=1) == y)

    # softmax regression, fitted by gradient descent to convergence
    W = np.zeros((3, 3))
    for _ in range(1000):
        z = A @ W
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        W -= A.T @ (p - onehot) / len(X)
    softmax_accuracy = np.mean(np.argmax(A @ W, axis=1) == y)

    assert least_squares_accuracy < 0.7
    assert softmax_accuracy < 0.7


# ----------------------------------------------------------------------------- seeding


def draw() -> tuple[float, float, float]:
    return random.random(), float(np.random.rand()), float(torch.rand(1))


def test_seed_everything_reproduces_every_generator() -> None:
    rng1 = seed_everything(5)
    first = draw()
    r1 = rng1.standard_normal(3)
    rng2 = seed_everything(5)
    assert draw() == first
    np.testing.assert_array_equal(rng2.standard_normal(3), r1)
    assert isinstance(rng2, np.random.Generator)


def test_seed_everything_differs_across_seeds() -> None:
    seed_everything(1)
    a = draw()
    seed_everything(2)
    b = draw()
    assert all(x != y for x, y in zip(a, b, strict=True))


# ----------------------------------------------------------------------------- plots


def test_plot_losses_log_scale_and_line() -> None:
    ax = plot_losses([1.0, 0.5, 0.25])
    assert isinstance(ax, Axes)
    (line,) = ax.lines
    assert line.get_ydata().tolist() == [1.0, 0.5, 0.25]
    assert ax.get_yscale() == "log"
    assert ax.get_xlabel() == "step" and ax.get_ylabel() == "loss"


def test_plot_losses_linear_when_not_positive_or_asked() -> None:
    assert plot_losses([1.0, 0.0]).get_yscale() == "linear"
    assert plot_losses([1.0, 0.5], log=False).get_yscale() == "linear"
    assert plot_losses([]).get_yscale() == "linear"


def test_plot_losses_accepts_tensors_that_require_grad() -> None:
    w = torch.ones(1, requires_grad=True)
    losses = [(w * 2).sum(), (w * 1).sum()]
    (line,) = plot_losses(losses).lines
    assert line.get_ydata().tolist() == [2.0, 1.0]


def test_plot_losses_draws_on_given_axes() -> None:
    _, ax = plt.subplots()
    assert plot_losses([1.0], ax=ax) is ax


def test_plot_fit_points_line_and_legend() -> None:
    x, y = make_sine_regression(n=20)
    shuffle = np.random.default_rng(0).permutation(20)
    ax = plot_fit(x[shuffle], y[shuffle], np.sin(np.pi * x[shuffle]))
    assert isinstance(ax, Axes)
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(points.get_offsets()) == 20
    (line,) = ax.lines
    assert np.all(np.diff(line.get_xdata()) > 0)  # drawn in order of x, not zigzagging
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["data", "fit"]


def test_plot_fit_accepts_column_vectors_and_tensors() -> None:
    x, y = make_sine_regression(n=10)
    y_fit = torch.tensor(y, requires_grad=True)[:, None] * 1.0
    ax = plot_fit(torch.tensor(x)[:, None], y[:, None], y_fit)
    (line,) = ax.lines
    assert len(line.get_xdata()) == 10


def test_plot_decision_boundary_calls_predict_with_points() -> None:
    X, y = make_spiral(n_per_class=20)
    seen: list[np.ndarray] = []

    def predict(points: np.ndarray) -> np.ndarray:
        seen.append(points)
        return (points[:, 0] > 0).astype(np.int64)

    ax = plot_decision_boundary(predict, X, y, resolution=30)
    assert isinstance(ax, Axes)
    (points,) = seen
    assert points.shape == (30 * 30, 2) and points.dtype == np.float64
    scatter = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert len(scatter) == 1 and len(scatter[0].get_offsets()) == 60
    assert len(ax.collections) == 2  # the filled regions and the data points
    assert ax.get_title() == "decision boundary"


def test_plot_decision_boundary_regions_and_points_share_colours() -> None:
    X, y = make_spiral(n_per_class=20)
    # predicts classes 0 and 1 only: class 1's region must still have class 1's colour
    ax = plot_decision_boundary(lambda p: (p[:, 0] > 0).astype(int), X, y, resolution=20)
    regions, points = ax.collections
    assert regions.norm is points.norm
    assert regions.get_cmap() is points.get_cmap()


def test_plot_decision_boundary_accepts_scores_as_tensors() -> None:
    X, y = make_spiral(n_per_class=10)
    W = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    ax = plot_decision_boundary(lambda p: torch.from_numpy(p) @ W, X, y, resolution=10)
    assert len(ax.collections) == 2


# ----------------------------------------------------------------------------- compare table


def test_compare_table_rows_and_all_ok() -> None:
    dx = np.arange(6.0).reshape(2, 3) + 1
    table = compare(dx=(dx, dx), dW=(dx.T, dx))
    assert isinstance(table, ComparisonTable)
    assert not table.all_ok
    ok_row, bad_row = table.rows()
    assert ok_row == ("dx", "yes", "0.0e+00", "0.0e+00", "ok")
    assert bad_row[:4] == ("dW", "no", "-", "-")
    assert bad_row[4].endswith("The values: transposed (the values are right, the axes are swapped).")
    assert compare(dx=(dx, dx)).all_ok


def test_compare_table_verdict_names_the_mistake() -> None:
    dx = np.arange(6.0).reshape(2, 3) + 1
    (row,) = compare(dx=(-dx, dx)).rows()
    assert row[1] == "yes"
    assert row[4].startswith("dx values differ in 6 of 6 elements")
    assert row[4].endswith("The values: sign flipped.")


@pytest.mark.parametrize(
    ("mine", "shown", "guess"),
    [
        # an in-place write into grad_output gives zeros too: the table cannot tell which
        (np.zeros((2, 3)), "The values: all zeros.", "placeholder"),
        # a factor 3 may be grad_output ignored, a wrong constant or a scale applied twice
        (
            3 * (np.arange(6.0).reshape(2, 3) + 1),
            "The values: 3 times too large, a constant factor.",
            "twice",
        ),
        (2 * (np.arange(6.0).reshape(2, 3) + 1), "The values: twice too large.", "square"),
        (np.full((2, 3), np.nan), "6 NaN value(s) of 6", "overflow"),
    ],
)
def test_compare_table_shows_the_pattern_never_a_guessed_cause(
    mine: np.ndarray, shown: str, guess: str
) -> None:
    """A try-it cell sees two arrays only: it says what the values show and leaves causes to the test."""
    (row,) = compare(dx=(mine, np.arange(6.0).reshape(2, 3) + 1)).rows()
    assert shown in row[4], row[4]
    assert guess not in row[4] and "?" not in row[4] and "Likely mistake" not in row[4], row[4]


def test_compare_table_text_columns() -> None:
    dx = np.ones((2, 3))
    text = repr(compare(dx=(dx, dx), db=(None, np.ones(3))))
    header, first, second = text.splitlines()
    assert header.split("  ")[0] == "name"
    for column in ("name", "shape ok", "max abs err", "max rel err", "verdict"):
        assert column in header
    assert first.startswith("dx  ") and first.endswith("ok")
    assert second.startswith("db  ") and second.endswith("db is None: nothing was returned for it.")
    # columns line up: the verdict starts at the same offset on every line
    assert header.index("verdict") == first.index("ok") == second.index("db is None")


def test_compare_table_html_escapes() -> None:
    # a type name with angle brackets must not become markup
    class Weird:
        pass

    Weird.__name__ = "<b>weird</b>"
    html = compare(dx=(Weird(), np.ones(3)))._repr_html_()
    assert html.startswith("<table><thead><tr><th>name</th>")
    assert "<b>weird</b>" not in html and "&lt;b&gt;weird&lt;/b&gt;" in html
    assert html.count("<tr>") == 2


def test_compare_table_accepts_float32_and_tensors() -> None:
    x, w = np.random.default_rng(0).standard_normal((2, 16, 8))
    ref = x @ w.T
    mine = torch.tensor(x, dtype=torch.float32, requires_grad=True) @ torch.tensor(w.T, dtype=torch.float32)
    table = compare(out=(mine, ref), out32=(ref.astype(np.float32), ref))
    assert table.all_ok, repr(table)


def test_compare_table_accepts_a_reference_list_and_checks_pairs() -> None:
    assert compare(db=(np.array([1.0, 2.0]), [1.0, 2.0])).all_ok
    with pytest.raises(TypeError, match=r"compare\(db=...\) takes a pair"):
        compare(db=np.ones(2))
