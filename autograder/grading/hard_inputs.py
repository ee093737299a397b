"""Inputs where a Function's lucky implementations break (docs/checks.md items 6, 23 and 32), and the
mistake each one exposes: ties at a maximum (notebook 05, exercise 4), and the hard cases of a softmax
cross-entropy (exercise 5).

Each case names its mistake only on the evidence that mistake leaves: an infinite loss where the
true one is finite (the log of a probability that underflowed to 0), a NaN loss where a shift by the
global maximum also gives NaN and a shift by each row's maximum does not, an error that names both
the number of classes and the labels' maximum plus one (a one-hot sized from the labels).
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import numpy as np

from autograder.checks.beyond_basics.softmax_cross_entropy import SCE_CASES, SCE_HARD
from autograder.checks.compare import compare
from autograder.checks.report import Item
from autograder.checks.tolerances import LOSS
from autograder.grading.toolkit import Record, step_error

UNDERFLOWED_LOG = (
    "the log of a probability that underflowed to 0 (log(softmax(...)), or -log(p[y]) after the "
    "softmax): with the true class far below the row's largest score its probability is below the "
    "smallest float64; compute log-probabilities directly, shifted - log(sum(exp(shifted)))"
)
GLOBAL_SHIFT = (
    "a shift by the global maximum (scores.max()) instead of each row's own: every score of a row far "
    "below it underflows to 0 and the row's softmax is 0/0; shift each row by scores.max(dim=1, "
    "keepdim=True).values"
)


def global_shift_loss(scores: np.ndarray, y: np.ndarray) -> float:
    """The loss a shift by the global maximum gives, in float64 (NaN where a row underflows)."""
    with np.errstate(all="ignore"):
        e = np.exp(scores - scores.max())
        p = e / e.sum(axis=1, keepdims=True)
        return float(-np.log(p[np.arange(len(y)), y]).mean())


def _one_hot_from_labels(error: str, data: dict[str, Any]) -> bool:
    c, seen = data["scores"].shape[1], int(data["y"].max()) + 1
    sizes = {int(n) for n in re.findall(r"\d+", error)}
    return c in sizes and seen in sizes and "size" in error


def _case_problem(
    kind: str, record: Record, data: dict[str, Any], ref: dict[str, Any], shifted: bool
) -> str | None:
    """The first problem of one hard case; ``shifted`` when the loss was right for scores ~1000 (so
    exp does not overflow: the scores are shifted before it)."""
    error = step_error(record, "forward", "autograd")
    if error:
        if kind == "labels leave a class out" and _one_hot_from_labels(error, data):
            c = data["scores"].shape[1]
            return (
                f"{error}. Likely mistake: a one-hot sized from the labels (F.one_hot(y) without "
                f"num_classes, or y.max() + 1 columns): this batch has no label {c - 1}; size it from "
                f"scores.shape[1] ({c})"
            )
        return error
    loss = record["outputs"].get("loss")
    verdict = compare("loss", loss, ref["loss"], tol=LOSS, batch_size=data["scores"].shape[0])
    if not verdict.ok:
        value = float(np.asarray(loss).reshape(-1)[0]) if isinstance(loss, np.ndarray) and loss.size else None
        if value == np.inf:  # exp overflowing without a shift gives inf too, unless large scores pass
            likely = UNDERFLOWED_LOG if shifted else f"either no shift before exp, or {UNDERFLOWED_LOG}"
            verdict = replace(verdict, likely=likely)
        elif value is not None and np.isnan(value) and np.isnan(global_shift_loss(data["scores"], data["y"])):
            verdict = replace(verdict, likely=GLOBAL_SHIFT)
        return verdict.message()
    grad = record["outputs"].get("autograd", {}).get("dscores")
    verdict = compare("dscores", grad, ref["dscores"], batch_size=data["scores"].shape[0])
    return None if verdict.ok else verdict.message()


def hard_inputs_item(cases: dict[str, Record], datas: dict[str, Any], refs: dict[str, Any]) -> Item:
    """Loss and dscores right on every case of :data:`SCE_HARD` (0.5), failing on the first that is not."""
    name = "rows far apart, true class at the bottom, a class left out"
    large = list(SCE_CASES)[2]
    loss = cases[large]["outputs"].get("loss")
    shifted = compare("loss", loss, refs[large]["loss"], tol=LOSS).ok
    for kind in SCE_HARD:
        problem = _case_problem(kind, cases[kind], datas[kind], refs[kind], shifted)
        if problem:
            return Item(name, False, f"{kind}: {problem}", 0.5)
    return Item(name, True, "right loss and dscores on each", 0.5)


MASK_FROM_VALUES = (
    "the gradient goes to every entry equal to the maximum (a mask scores == values), not only to the "
    "saved index: a tie gets it twice; put it at the saved indices (scatter, or index with them)"
)


def ties_item(record: Record, scores: np.ndarray, upstream: np.ndarray) -> Item:
    """MaxWithIndex on rows with a tie at their maximum (0.5): values are the maxima, each index points
    at one, and the gradient goes to the learner's own index only."""
    name = "MaxWithIndex: ties"
    error = step_error(record, "forward", "ties")
    if error:
        return Item(name, False, error, 0.5)
    got = record["outputs"]["ties"]
    values, indices, grad = got["values"], got["indices"], got["grad"]
    rows = np.arange(scores.shape[0])
    verdict = compare("values with ties", values, scores.max(axis=1))
    if not verdict.ok:
        return Item(name, False, verdict.message(), 0.5)
    if (
        not isinstance(indices, np.ndarray)
        or indices.shape != rows.shape
        or not np.issubdtype(indices.dtype, np.integer)
    ):
        return Item(name, False, f"indices with ties: expected {rows.shape[0]} integer indices", 0.5)
    if not np.all((indices >= 0) & (indices < scores.shape[1])) or not np.array_equal(
        scores[rows, indices], scores.max(axis=1)
    ):
        return Item(name, False, "with a tie, an index does not point at a maximum of its row", 0.5)
    expected = np.zeros_like(scores)
    expected[rows, indices] = upstream
    mask = (scores == scores.max(axis=1, keepdims=True)) * upstream[:, None]
    verdict = compare("grad of scores with ties", grad, expected, mistakes={MASK_FROM_VALUES: mask})
    if not verdict.ok:
        return Item(name, False, verdict.message(), 0.5)
    return Item(name, True, "with a tie, the gradient goes to the returned index only", 0.5)
