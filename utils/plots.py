"""Plots the notebooks draw: loss curves, a fitted curve, a decision boundary."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes


def _axes(ax: Axes | None) -> Axes:
    if ax is None:
        _, ax = plt.subplots(figsize=(5, 3.5))
    return ax


def plot_losses(losses: Sequence[float], ax: Axes | None = None, log: bool = True) -> Axes:
    """The loss after each step of training, on a log scale by default. Introduced in notebook 01."""
    ax = _axes(ax)
    ax.plot(np.arange(len(losses)), np.asarray(losses, dtype=float))
    if log and len(losses) and np.all(np.asarray(losses, dtype=float) > 0):
        ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("training loss")
    return ax


def plot_fit(x: np.ndarray, y: np.ndarray, y_fit: np.ndarray, ax: Axes | None = None) -> Axes:
    """The data as points and a model's predictions as a line. Introduced in notebook 01."""
    ax = _axes(ax)
    order = np.argsort(x)
    ax.scatter(x, y, s=6, alpha=0.6, label="data")
    ax.plot(np.asarray(x)[order], np.asarray(y_fit).reshape(-1)[order], color="C3", label="fit")
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

    Introduced in notebook 02. ``predict`` maps an (M, 2) array of points to M integer labels.
    """
    ax = _axes(ax)
    pad = 0.1
    x0 = np.linspace(X[:, 0].min() - pad, X[:, 0].max() + pad, resolution)
    x1 = np.linspace(X[:, 1].min() - pad, X[:, 1].max() + pad, resolution)
    g0, g1 = np.meshgrid(x0, x1)
    labels = np.asarray(predict(np.c_[g0.ravel(), g1.ravel()])).reshape(g0.shape)
    ax.contourf(g0, g1, labels, alpha=0.3, cmap="viridis", levels=np.arange(labels.max() + 2) - 0.5)
    ax.scatter(X[:, 0], X[:, 1], c=y, s=10, cmap="viridis", edgecolors="k", linewidths=0.3)
    ax.set_aspect("equal")
    ax.set_title("decision boundary")
    return ax
