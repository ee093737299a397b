"""The wrong softmax cross-entropies a check names, wherever a softmax appears (notebook 02's
``softmax_cross_entropy`` and network, notebook 03's network in torch): unstable formulas only where
they do blow up, and those that blow up alike named together as candidates; log(p + eps); the wrong
axis; and a one-hot sized from the labels, recognised from the broadcasting error it raises
(docs/checks.md items 23, 28 and 32)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from autograder.checks.values import Overflow
from autograder.grading.toolkit import broadcast_shapes

UNDERFLOW = Overflow(
    "-log(p) of a probability that underflows to 0 (exp(-1000) is 0 in float64), so the loss is inf; "
    "compute log p by log-sum-exp instead: s_y - max - log(sum(exp(s - max)))"
)
OVERFLOW = Overflow(
    "exp of the raw scores overflows (or every exp of a row underflows to 0): subtract each row's "
    "maximum before exp, then compute log p by log-sum-exp"
)


GLOBAL_MAX = Overflow(
    "the scores are shifted by the batch's one maximum, not by each row's own: a row whose scores are "
    "all far below it gets exp(...) = 0 everywhere, and 0 / 0; subtract each row's maximum, "
    "scores.max(axis=1, keepdims=True)"
)
ONE_HOT_FROM_LABELS = (
    "a one-hot sized from the labels (y.max() + 1 columns, or np.eye(y.max() + 1)): in a batch where the "
    "last class does not appear it has too few columns. Size it from the scores, scores.shape[1]"
)
_TORCH_SIZES = re.compile(r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\)")


def one_hot_from_labels(error: str, n_classes: int, y: np.ndarray) -> str | None:
    """:data:`ONE_HOT_FROM_LABELS` when ``error`` is a broadcast between C = ``n_classes`` columns and
    exactly the y.max() + 1 < C columns of a one-hot sized from these labels; otherwise None."""
    from_labels = int(np.max(y)) + 1
    widths = {shape[-1] for shape in broadcast_shapes(error) if len(shape) == 2}
    torch_sizes = _TORCH_SIZES.search(error)
    if torch_sizes:
        widths = {int(torch_sizes[1]), int(torch_sizes[2])}
    return ONE_HOT_FROM_LABELS if from_labels < n_classes and widths == {n_classes, from_labels} else None


GLOBAL_MAX_LOG = Overflow(
    "the log-sum-exp is shifted by the batch's one maximum, not by each row's own: in a row whose scores "
    "are all far below it every exp(...) is 0, and log 0 is -inf; subtract each row's maximum, "
    "scores.max(axis=1, keepdims=True)"
)


def merge_alike(mistakes: dict[str, Any]) -> dict[str, Any]:
    """``mistakes`` with the :class:`Overflow` ones that blow up in exactly the same way here named
    together, as candidates: the evidence fits each of them, so naming one would be a guess
    (docs/checks.md item 28)."""
    merged: dict[str, Any] = {}
    for description, value in mistakes.items():
        twin = next(
            (
                k
                for k, v in merged.items()
                if isinstance(k, Overflow)
                and isinstance(description, Overflow)
                and not np.all(np.isfinite(value))
                and np.array_equal(np.asarray(v), np.asarray(value), equal_nan=True)
            ),
            None,
        )
        if twin is None:
            merged[description] = value
        else:
            both = Overflow(f"one of these, which these scores cannot tell apart: {twin}; or {description}")
            merged = {both if k == twin else k: v for k, v in merged.items()}
    return merged


def wrong_softmaxes(scores: np.ndarray) -> dict[str, np.ndarray]:
    """The probabilities each softmax mistake computes from ``scores`` (N, C), beside the right ones:
    ``naive`` (no shift: overflows), ``right`` (shifted by each row's maximum), ``batch_axis`` (over
    axis 0), ``global_max`` (shifted by the maximum of every score: underflows), and ``every`` (the
    scores shifted by that global maximum). Computed with numpy's floating-point errors silenced."""
    with np.errstate(all="ignore"):
        shifted = scores - scores.max(axis=1, keepdims=True)
        every = scores - scores.max()
        by_column = scores - scores.max(axis=0)
        return {
            "naive": np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True),
            "right": np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True),
            "batch_axis": np.exp(by_column) / np.exp(by_column).sum(axis=0),
            "global_max": np.exp(every) / np.exp(every).sum(axis=1, keepdims=True),
            "every": every,
        }


def softmax_loss_mistakes(scores: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """Wrong mean cross-entropies of ``scores``, most specific first: the unstable formulas (only where
    they do blow up), log(p + eps), and softmax over the batch axis (only where it is finite, so that
    an overflow is never called an axis mistake)."""
    rows = np.arange(scores.shape[0])
    wrong = wrong_softmaxes(scores)
    naive, p, p0, p_global, every = (
        wrong[k] for k in ("naive", "right", "batch_axis", "global_max", "every")
    )
    with np.errstate(all="ignore"):
        lse_global = every - np.log(np.exp(every).sum(axis=1, keepdims=True))
        unstable = merge_alike(
            {
                OVERFLOW: -np.mean(np.log(naive[rows, y])),
                UNDERFLOW: -np.mean(np.log(p[rows, y])),
                GLOBAL_MAX: -np.mean(np.log(p_global[rows, y])),
                GLOBAL_MAX_LOG: -np.mean(lse_global[rows, y]),
            }
        )
        mistakes: dict[str, Any] = {k: v for k, v in unstable.items() if not np.isfinite(v)}
        for eps in (1e-7, 1e-8, 1e-9, 1e-10, 1e-12, 1e-15):
            mistakes[
                f"log(p + {eps:g}): eps shifts the log of every small probability, and where p "
                "underflows to 0 it caps the loss at -log(eps); compute log p from log-sum-exp: "
                "s_y - max - log(sum(exp(s - max)))"
            ] = -np.mean(np.log(p[rows, y] + eps))
        axis0 = -np.mean(np.log(p0[rows, y]))
    if np.isfinite(axis0):
        mistakes["softmax normalised over the batch (axis 0) instead of over the classes (axis 1)"] = axis0
    return mistakes
