"""Plots the notebooks draw: loss curves, a fitted curve, a decision boundary."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.colors import BoundaryNorm

from autograder.checks.compare import as_array


def _numpy(values: Any) -> np.ndarray:
    """Plain numpy data from an array, a tensor (even one that requires grad) or a list."""
    arr = as_array(values)
    return np.asarray(values) if arr is None else arr


def _axes(ax: Axes | None) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    return ax


def plot_losses(losses: Sequence[float], ax: Axes | None = None, log: bool = True) -> Axes:
    """The loss after each step of training, on a log scale by default. Introduced in notebook 01."""
    ax = _axes(ax)
    values = np.array([float(_numpy(v)) for v in losses])  # a list of 0-d tensors is common
    ax.plot(np.arange(len(values)), values)
    if log and len(values) and np.all(values > 0):
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("training loss")
    return ax


def plot_fit(x: np.ndarray, y: np.ndarray, y_fit: np.ndarray, ax: Axes | None = None) -> Axes:
    """The data as points and a model's predictions as a line. Introduced in notebook 01."""
    ax = _axes(ax)
    # (n,) or (n, 1), numpy or torch: all become flat arrays, so sorting by x orders the line
    x, y, y_fit = (_numpy(v).reshape(-1) for v in (x, y, y_fit))
    order = np.argsort(x)
    ax.scatter(x, y, s=6, alpha=0.6, label="data")
    ax.plot(x[order], y_fit[order], color="C3", label="fit")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.legend()
    return ax


def plot_decision_boundary(
    predict: Callable[[np.ndarray], np.ndarray],
    X: np.ndarray,
    y: np.ndarray,
    ax: Axes | None = None,
    resolution: int = 200,
) -> Axes:
    """Colour the plane by the class ``predict`` gives each point, with the data on top.

    Introduced in notebook 02. ``predict`` maps an (M, 2) float64 array of points to M integer
    labels (numpy or torch); scores of shape (M, C) are accepted too and turned into labels by argmax.
    Regions and points share one colour per class.
    """
    ax = _axes(ax)
    X, y = _numpy(X), _numpy(y).reshape(-1).astype(np.int64)
    pad = 0.1
    x0 = np.linspace(X[:, 0].min() - pad, X[:, 0].max() + pad, resolution)
    x1 = np.linspace(X[:, 1].min() - pad, X[:, 1].max() + pad, resolution)
    g0, g1 = np.meshgrid(x0, x1)
    predicted = _numpy(predict(np.c_[g0.ravel(), g1.ravel()]))
    if predicted.ndim == 2 and predicted.shape[1] > 1:
        predicted = predicted.argmax(axis=1)
    labels = predicted.reshape(g0.shape).astype(np.int64)
    # One colour per class for both layers: with separate colour scales, a model that never predicts
    # some class would paint its regions in another class's colour.
    n_classes = int(max(labels.max(), y.max())) + 1
    boundaries = np.arange(n_classes + 1) - 0.5
    cmap = plt.get_cmap("viridis", n_classes)
    norm = BoundaryNorm(boundaries, n_classes)
    ax.contourf(g0, g1, labels, alpha=0.3, cmap=cmap, norm=norm, levels=boundaries)
    ax.scatter(X[:, 0], X[:, 1], c=y, s=10, cmap=cmap, norm=norm, edgecolors="k", linewidths=0.3)
    ax.set_aspect("equal")
    ax.set_title("decision boundary")
    return ax
