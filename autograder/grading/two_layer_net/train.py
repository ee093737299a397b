"""The grader of notebook 02's training loop: the learner's run against the course's, step by step."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.core import Evidence, NotAnArray, case_seed
from autograder.checks.report import Item, Report
from autograder.checks.two_layer_net import PARAM_NAMES, TRAIN_TWO_LAYER_NET, training_data
from autograder.grading import grader, reference, report_for
from autograder.grading.training import two_layer_training_hint

#: Training accuracy for full credit and for partial credit. A two-layer ReLU network with ~100 hidden
#: units reaches 97-99% on the spiral within a few hundred full-batch steps; a linear classifier stays
#: near 50%, and a network stopped after a few dozen steps lands in between.
ACCURACY_FULL = 0.95


ACCURACY_PARTIAL = 0.70


#: Training that takes longer than this earns a note: the check runs it twice, the notebook once more.
TRAINING_SLOW_SECONDS = 5.0


def _params_problem(params: Any, d: int, c: int) -> tuple[str | None, bool]:
    """Why ``params`` is not a float64 two-layer network for D inputs and C classes (None when it is),
    and whether its accuracy can be measured anyway (a float32 network can, a wrong shape cannot)."""
    if isinstance(params, NotAnArray) or params is None:
        kind = "None" if params is None else params.type_name
        return f"params is a {kind}, expected a dict with keys W1, b1, W2, b2", False
    if sorted(params) != sorted(PARAM_NAMES):
        return (
            f"params has keys {', '.join(sorted(params)) or '(none)'}; expected exactly W1, b1, W2, b2",
            False,
        )
    arrays = {k: params[k] for k in PARAM_NAMES}
    for k, v in arrays.items():
        if not isinstance(v, np.ndarray) or v.dtype.kind not in "fiu":
            kind = getattr(v, "type_name", None) or f"{type(v).__name__} of {getattr(v, 'dtype', '?')}"
            return f"params['{k}'] is a {kind}, expected a float64 array", False
    h = arrays["W1"].shape[0] if arrays["W1"].ndim == 2 else -1
    expected = {"W1": (h, d), "b1": (h,), "W2": (c, h), "b2": (c,)}
    if h < 1 or any(arrays[k].shape != shape for k, shape in expected.items()):
        got = ", ".join(f"{name} {arrays[name].shape}" for name in PARAM_NAMES)
        return f"params have shapes {got}; expected W1 (H, {d}), b1 (H,), W2 ({c}, H), b2 ({c},)", False
    for k, v in arrays.items():
        if not np.all(np.isfinite(v)):
            return f"params['{k}'] contains NaN or inf: training diverged (learning rate too large?)", False
    for k, v in arrays.items():
        if v.dtype != np.float64:
            return f"params['{k}'] has dtype {v.dtype.name}, expected float64", True
    return None, True


def _losses_problem(losses: Any) -> str | None:
    if not isinstance(losses, np.ndarray):
        kind = "None" if losses is None else getattr(losses, "type_name", type(losses).__name__)
        return f"losses is a {kind}, expected a list or 1-D array of the loss at each step"
    if losses.ndim != 1 or losses.size == 0:
        return f"losses has shape {losses.shape}, expected a non-empty 1-D sequence"
    if not np.all(np.isfinite(losses)):
        return "losses contains NaN or inf: training diverged (learning rate too large?)"
    return None


@grader(TRAIN_TWO_LAYER_NET)
def grade_train_two_layer_net(evidence: Evidence) -> Report:
    """Grade recorded evidence: (params, losses) of the right form (1), accuracy >= 70% (1), >= 95% (1).

    The accuracy is computed here from the returned parameters with the reference forward pass, on
    data remade from the seed: nothing the learner's code reports or computes is trusted.
    """
    report = report_for(TRAIN_TWO_LAYER_NET)
    X, y = training_data(evidence["seed"])
    n_classes = int(y.max()) + 1
    full, partial = f"accuracy >= {ACCURACY_FULL:.0%}", f"accuracy >= {ACCURACY_PARTIAL:.0%}"
    if evidence["error"]:
        for name in ("params and losses", partial, full):
            report.add(Item(name, False, evidence["error"]))
        report.notes.extend(evidence["notes"])
        return report

    params = evidence["params"]
    problem, measurable = _params_problem(params, X.shape[1], n_classes)
    losses_problem = _losses_problem(evidence["losses"])
    if problem or losses_problem:
        report.add(Item("params and losses", False, problem or losses_problem or ""))
    else:
        hidden = params["W1"].shape[0]
        report.add(
            Item("params and losses", True, f"W1 ({hidden}, 2), b1, W2 (3, {hidden}), b2; losses finite")
        )

    if not measurable:
        for name in (partial, full):
            report.add(Item(name, False, f"not measured: {problem}"))
    else:
        scores = reference.two_layer_net({k: params[k].astype(np.float64) for k in PARAM_NAMES}, X)["scores"]
        correct = int(np.sum(scores.argmax(axis=1) == y))
        accuracy = correct / y.size
        text = (
            f"training accuracy {accuracy:.1%} ({correct} of {y.size} points of a spiral drawn with seed "
            f"{case_seed(evidence['seed'], 1)}, measured by the course's forward pass on your params)"
        )
        hint = None
        if accuracy < ACCURACY_FULL:
            hint = _start_hint(params, evidence["losses"], n_classes, accuracy)
            hint = hint or two_layer_training_hint(
                params["W1"].shape[0], evidence["losses"], X, y, evidence["seed"]
            )
            hint = hint or _accuracy_hint(accuracy)
        for name, target in ((partial, ACCURACY_PARTIAL), (full, ACCURACY_FULL)):
            report.add(Item(name, accuracy >= target, text if accuracy >= target else text + (hint or "")))
    if evidence["seconds"] > TRAINING_SLOW_SECONDS:
        report.notes.append(
            f"training took {evidence['seconds']:.1f} s; keep it under a few seconds "
            "(fewer steps or hidden units)"
        )
    report.notes.extend(evidence["notes"])
    return report


#: A first loss this close to log C is that of scores that are all about 0: weights that start tiny.
TINY_START_LOSS = 1e-3


def _start_hint(params: dict[str, np.ndarray], losses: Any, n_classes: int, accuracy: float) -> str | None:
    """What the returned network and the first recorded loss tell about where training started, when
    they tell something: every hidden unit alike (symmetry never broken), or, for a network that did
    learn the spiral's shape (at least the partial-credit accuracy), scores that all began near 0
    (initial weights far too small; a linear model started small has that first loss too, and its
    own hint). None when they tell nothing."""
    W1 = params["W1"].astype(np.float64)
    if W1.shape[0] > 1 and np.allclose(W1, W1[:1], rtol=1e-9, atol=1e-12):
        return (
            f". Every row of the returned W1 is the same. Likely mistake: W1 started with every row equal "
            f"(zeros, or one constant): all {W1.shape[0]} hidden units had the same weights, so they "
            "computed the same output, received the same gradient and stayed equal (the symmetry was never "
            "broken); the network works as if it had one hidden unit. Start "
            'W1 at random ("Not all equal" in the notebook).'
        )
    first = float(losses[0]) if isinstance(losses, np.ndarray) and losses.ndim == 1 and losses.size else None
    if (
        accuracy >= ACCURACY_PARTIAL
        and first is not None
        and abs(first - np.log(n_classes)) < TINY_START_LOSS
    ):
        return (
            f". Your first loss is {first:.4f}, log {n_classes} to {TINY_START_LOSS:g}: the loss of scores "
            "that are all about 0, so the network started with weights so small that the signal and its "
            "gradients shrink through each layer, and it learns slowly. Scale the initial weights as "
            '"The right size" in the notebook says (more steps would hide it, not fix it).'
        )
    return None


def _accuracy_hint(accuracy: float) -> str:
    if accuracy < 0.4:
        return (
            ". About chance level (33%): is the update a descent, params -= lr * grads, and are "
            "the gradients right (see two_layer_net's check)?"
        )
    if accuracy < ACCURACY_PARTIAL:
        return (
            ". About what a linear classifier reaches on the spiral: is the hidden layer trained, "
            "with a ReLU?"
        )
    return ". Train for more steps, or with a larger learning rate or more hidden units."
