"""Small seeded data sets, generated locally (nothing is downloaded)."""

from __future__ import annotations

import numpy as np


def make_sine_regression(n: int = 256, noise: float = 0.05, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A noisy sine curve to fit with a cubic polynomial: ``y = sin(pi * x) + noise``.

    Introduced in notebook 01. ``x`` is ``n`` evenly spaced points in [-1, 1] (rescaled from
    [-pi, pi] so that x, x**2 and x**3 have similar magnitudes and gradient descent converges
    quickly); both arrays are float64 of shape (n,).
    """
    rng = np.random.default_rng(seed)
    x = np.linspace(-1.0, 1.0, n)
    y = np.sin(np.pi * x) + noise * rng.standard_normal(n)
    return x, y


def make_spiral(
    n_per_class: int = 100, n_classes: int = 3, noise: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """Interleaved spiral arms, one per class: a set no linear classifier separates.

    Introduced in notebook 02. Returns ``X`` float64 of shape (n_per_class * n_classes, 2), with
    points inside the unit disc, and integer labels ``y`` (int64) of shape (n_per_class * n_classes,).
    """
    rng = np.random.default_rng(seed)
    X = np.empty((n_per_class * n_classes, 2))
    y = np.empty(n_per_class * n_classes, dtype=np.int64)
    for k in range(n_classes):
        rows = slice(n_per_class * k, n_per_class * (k + 1))
        radius = np.linspace(0.0, 1.0, n_per_class)
        angle = np.linspace(k * 4.0, (k + 1) * 4.0, n_per_class) + noise * rng.standard_normal(n_per_class)
        X[rows] = np.c_[radius * np.sin(angle), radius * np.cos(angle)]
        y[rows] = k
    return X, y
