"""What a training check can tell from a learner's run beyond "not converged": the first step where
the learner's loss curve parts from the reference loop's, and a cause only where the evidence fits it
(docs/checks.md items 21 and 28).

* :func:`first_difference` and :func:`loop_difference`: step-by-step comparison of two loss curves,
  naming the first step that differs; a curve that is the reference's shifted by one step is a loss
  recorded after the update, and a replayed mistake whose curve is exactly the learner's is named.
* :func:`fitted_the_notebooks_x`: a fit of notebook 01 that is right for the notebook's evenly spaced
  x and wrong for the x it was given ignored its argument.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.checks.linear_layer import cubic_features
from autograder.checks.tolerances import FLOAT64, TRAINING
from autograder.grading import reference

IGNORED_X = (
    "Likely mistake: fit_cubic ignores its x argument. The W and b you returned fit y against the "
    "notebook's evenly spaced points np.linspace(-1, 1, N) as well as a converged fit can, and fit the "
    "x the check passed (other points) badly: build the features from the x you are "
    "given, cubic_features(x)."
)


def fitted_the_notebooks_x(W: Any, b: Any, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether W and b are a converged fit of y at ``np.linspace(-1, 1, N)`` although x is other points."""
    demo = np.linspace(-1.0, 1.0, x.size)
    if np.allclose(np.sort(x), demo) or not isinstance(W, np.ndarray) or not isinstance(b, np.ndarray):
        return False
    if W.size != 3 or b.size != 1 or W.dtype.kind not in "fiu" or b.dtype.kind not in "fiu":
        return False
    with np.errstate(all="ignore"):
        pred = cubic_features(demo) @ W.reshape(3).astype(np.float64) + float(b.reshape(1)[0])
        loss = float(np.mean((pred - y) ** 2))
    optimum = float(reference.least_squares(cubic_features(demo), y)["loss"])
    return bool(np.isfinite(loss) and loss <= optimum * (1 + TRAINING.rtol) + TRAINING.atol)


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.isclose(a, b, rtol=FLOAT64.rtol, atol=FLOAT64.atol)


def first_difference(mine: np.ndarray, ref: np.ndarray) -> int | None:
    """The first step where two loss curves of one length differ, or None when none does."""
    close = _close(mine, ref)
    return None if close.all() else int(np.argmin(close))


def loop_difference(
    mine: np.ndarray,
    ref: np.ndarray,
    replays: dict[str, Callable[[], np.ndarray]],
    at_step_zero: str,
) -> str:
    """A sentence naming the first step where ``mine`` parts from ``ref`` (same length; "" if none does)
    and, when one fits, the cause: ``replays`` maps a mistake to a function replaying the reference loop
    with that mistake, named only when its curve is the learner's at every step; a curve shifted by one
    is a loss recorded after the update; ``at_step_zero`` lists the candidates when step 0 differs."""
    step = first_difference(mine, ref)
    if step is None:
        return ""
    text = (
        f"Step by step, your losses part from the reference loop's at step {step} (yours {mine[step]:.6g}, "
        f"the reference's {ref[step]:.6g})"
        + (f", after {step} equal step{'s' if step > 1 else ''}." if step else ", the first.")
    )
    if mine.size > 1 and _close(mine[:-1], ref[1:]).all():
        return text + (
            " Likely mistake: the loss recorded after the update: each of your losses is the reference's "
            "of the next step. Record the loss computed before the step updates the parameters."
        )
    for mistake, replay in replays.items():
        replayed = replay()
        if replayed.shape == mine.shape and _close(mine, replayed).all():
            return f"{text} Likely mistake: {mistake}."
    return f"{text} {at_step_zero}" if step == 0 else text


#: The loop ``train_two_layer_net``'s docstring and notebook 02 describe: its start and its defaults.
NET_LR, NET_REG = 1.0, 1e-3


def replay_two_layer_net(
    X: np.ndarray, y: np.ndarray, seed: int, hidden: int, steps: int, lr: float
) -> np.ndarray:
    """The losses of notebook 02's loop: weights drawn from ``default_rng(seed)`` at the notebook's scale,
    zero biases, ``steps`` full-batch updates ``p -= lr * grad`` of the loss with reg = 1e-3."""
    rng = np.random.default_rng(seed)
    d, c = X.shape[1], int(y.max()) + 1
    params = {
        "W1": rng.standard_normal((hidden, d)) * np.sqrt(2.0 / d),
        "b1": np.zeros(hidden),
        "W2": rng.standard_normal((c, hidden)) * np.sqrt(1.0 / hidden),
        "b2": np.zeros(c),
    }
    losses = []
    for _ in range(steps):
        out = reference.two_layer_net(params, X, y, reg=NET_REG)
        losses.append(float(out["loss"]))
        params = {k: v - lr * out[f"d{k}"] for k, v in params.items()}
    return np.array(losses)


def two_layer_training_hint(hidden: int, losses: Any, X: np.ndarray, y: np.ndarray, seed: int) -> str | None:
    """What the learner's loss curve says, step by step against notebook 02's loop from the notebook's
    own start, about a network that did not learn the spiral; None where it started elsewhere (another
    initialisation is the learner's right: then the curves say nothing step by step)."""
    if not (isinstance(losses, np.ndarray) and losses.ndim == 1 and 0 < losses.size <= 5000):
        return None
    ref = replay_two_layer_net(X, y, seed, hidden, losses.size, NET_LR)
    if not _close(losses[:1], ref[:1]).all():
        return None
    if _close(losses, ref).all():
        return (
            f". Likely mistake: too few steps. Your {losses.size} losses are exactly those of the "
            f"notebook's loop (lr = {NET_LR:g}, reg = {NET_REG:g}, {hidden} hidden units), step by step: it "
            "is right, and needs more steps (the docstring's 500) to learn the spiral."
        )
    ascent = {
        "gradient ascent, p += lr * grad: the update climbs the loss; make it a descent, p -= lr * grad": (
            lambda: replay_two_layer_net(X, y, seed, hidden, losses.size, -NET_LR)
        )
    }
    return ". " + loop_difference(losses, ref, ascent, "")


def _steps_matching(params: np.ndarray, path: np.ndarray) -> np.ndarray:
    """The steps of ``path`` (one row of parameters per step) whose parameters are ``params``."""
    with np.errstate(all="ignore"):
        close = np.isclose(path, params, rtol=1e-6, atol=1e-9).all(axis=1)
    return np.flatnonzero(close)


def replayed_fit_mistake(params: np.ndarray, replays: dict[str, np.ndarray], steps: int) -> str | None:
    """The mistake whose replayed loop ends exactly at ``params``, or None. ``replays`` maps a sentence
    about a replayed loop (with ``{k}`` for the steps it ran) to its path of parameters, one row per
    step; a path the parameters meet at its last step names that loop, one they meet earlier names that
    loop stopped after ``k`` steps (only when one step, or two neighbours, match: a path whose steps have
    become too small to tell apart names nothing). The first replay that matches is named."""
    for sentence, path in replays.items():
        matched = _steps_matching(params, path)
        if matched.size and matched.max() - matched.min() <= 1 and 0 < matched.max() <= steps:
            k = int(matched.max())
            return sentence.format(k=k, early="" if k == steps else f", stopped after {k} steps")
    return None
