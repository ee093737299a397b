"""Checks for notebook 02, a two-layer network by hand (numpy).

* ``relu``, ``sigmoid``, ``tanh``: one check per ``*_forward``/``*_backward`` pair (1 point each),
  so that each activation is graded, and reported in the gradebook, on its own.
* ``softmax_cross_entropy``: the mean loss over the batch and its gradient, stable at |logits| ~ 1000.
* ``two_layer_net``: affine-ReLU-affine-softmax scores, loss with L2 on the weights, every gradient.
* ``train_two_layer_net``: the check trains the learner's function itself and measures the training
  accuracy of the returned parameters with the course's own forward pass.
"""

from __future__ import annotations

import functools
import time
import traceback
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from autograder.calling import Call, call
from autograder.checks.core import (
    Check,
    Evidence,
    NotAnArray,
    freeze,
    register,
    run_check,
    run_forward_backward,
    unpack,
)
from autograder.compare import Verdict, compare
from autograder.grading import reference
from autograder.grading.toolkit import add_notes, inputs_unchanged_item
from autograder.report import Item, Report
from autograder.tolerances import LOSS
from backprop_utils.data import make_spiral

ACTIVATION_POINTS = 1.0
SOFTMAX_POINTS = 3.0
TWO_LAYER_NET_POINTS = 5.0
TRAINING_POINTS = 3.0

#: Training accuracy for full credit and for partial credit. A two-layer ReLU network with ~100 hidden
#: units reaches 97-99% on the spiral within a few hundred full-batch steps; a linear classifier stays
#: near 50%, and a network stopped after a few dozen steps lands in between.
ACCURACY_FULL = 0.95
ACCURACY_PARTIAL = 0.70
#: Training that takes longer than this earns a note: the check runs it twice, the notebook once more.
TRAINING_SLOW_SECONDS = 5.0

#: How a numpy floating-point warning (overflow in exp, log of 0) appears in a call's notes: ``call``
#: makes numpy warn on overflow, division by zero and invalid values, and records the warnings.
FP_WARNING = "RuntimeWarning"


def _case_seed(seed: int, index: int) -> int:
    return 1000 * seed + index


def _fp_warnings(record: dict[str, Any]) -> list[str]:
    return [note for note in record.get("notes", []) if FP_WARNING in note]


def call_naming_stubs(fn: Any, *args: Any, name: str, **kwargs: Any) -> Call:
    """:func:`autograder.calling.call`, except that a ``NotImplementedError`` raised by another function
    that ``fn`` calls is reported as coming from that function.

    ``two_layer_net`` calls the learner's ``relu_forward``, ``softmax_cross_entropy`` and
    ``linear_forward``; when one of those is still a stub, the feedback names it instead of claiming
    that ``two_layer_net`` is not implemented.
    """
    raised_in: list[str] = []

    def run(*a: Any, **k: Any) -> Any:
        try:
            return fn(*a, **k)
        except NotImplementedError as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            if len(frames) > 1:  # frame 0 is this wrapper
                raised_in.append(frames[-1].name)
            raise

    outcome = call(run if callable(fn) else fn, *args, name=name, **kwargs)
    own = getattr(fn, "__name__", name)
    if outcome.error and raised_in and raised_in[0] not in (own, name):
        outcome.error = (
            f"{raised_in[0]} is not implemented yet (it raises NotImplementedError), and {name} calls it"
        )
    return outcome


def _error_or_verdict_item(name: str, verdict: Verdict, error: str | None, weight: float) -> Item:
    """An item from one verdict, reporting the call's error instead of "missing" when it raised."""
    if verdict.problem == "missing" and error:
        return Item(name, False, error, weight)
    return Item.from_verdicts(name, [verdict], weight)


def _case_item(name: str, record: dict[str, Any], verdicts: list[Verdict], weight: float) -> Item:
    if record["error"]:
        return Item(name, False, record["error"], weight)
    return Item.from_verdicts(name, verdicts, weight)


# ---------------------------------------------------------------------------------------------------
# Activations: relu, sigmoid, tanh
# ---------------------------------------------------------------------------------------------------

#: (label, shape) of the two ordinary cases; the special case of each activation comes third.
ACTIVATION_CASES: tuple[tuple[str, tuple[int, int]], ...] = (("N=4, D=5", (4, 5)), ("N=1, D=5", (1, 5)))
SPECIAL_CASE = {"relu": "x with exact zeros", "sigmoid": "large |x|", "tanh": "large |x|"}

#: Logits far outside the range where a naive exp stays finite (exp(710) overflows float64).
LARGE_X = np.array([[-800.0, -50.0, -20.0, -1.5, 0.0], [800.0, 50.0, 20.0, 1.5, -710.0]])


def activation_inputs(kind: str, seed: int) -> dict[str, dict[str, np.ndarray]]:
    """Every case of an activation check: ``{label: {"x": ..., "dout": ...}}``, all float64.

    The ordinary cases draw x from a standard normal (never exactly 0); the special case holds
    exact zeros (ReLU, to test the convention that the gradient at 0 is 0, as in PyTorch) or values
    up to |x| = 800 (sigmoid and tanh, where exp overflows unless the formula is stable).
    """
    cases = {}
    for index, (label, shape) in enumerate(ACTIVATION_CASES):
        rng = np.random.default_rng(_case_seed(seed, index))
        cases[label] = {"x": rng.standard_normal(shape), "dout": rng.standard_normal(shape)}
    rng = np.random.default_rng(_case_seed(seed, len(ACTIVATION_CASES)))
    if kind == "relu":
        x = rng.standard_normal((3, 4))
        x[rng.random((3, 4)) < 0.4] = 0.0
        x[0, 0], x[1, 1], x[2, 2] = 0.0, -0.0, 0.0
        x[0, 1] = 0.5
    else:
        x = LARGE_X.copy()
    cases[SPECIAL_CASE[kind]] = {"x": x, "dout": rng.standard_normal(x.shape)}
    return cases


def collect_activation(kind: str, forward: Any, backward: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``<kind>_forward``/``<kind>_backward`` on every case and record the results."""
    cases = {}
    for label, data in activation_inputs(kind, seed).items():
        cases[label] = run_forward_backward(forward, backward, {"x": data["x"]}, data["dout"], ["dx"])
    return {"check": kind, "seed": seed, "cases": cases}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    z = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))


def _activation_mistakes(kind: str, x: np.ndarray, dout: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Plausible wrong answers for ``out`` and ``dx``, so feedback can name them."""
    ignored = "the upstream gradient dout is ignored (dx is the local derivative alone)"
    with np.errstate(all="ignore"):
        if kind == "relu":
            return {
                "out": {"the negative part is kept instead of the positive one": np.minimum(x, 0.0)},
                "dx": {
                    "the gradient at x == 0 is 1 (a mask from x >= 0); the convention, as in PyTorch, is 0": (
                        dout * (x >= 0)
                    ),
                    "the mask is computed from dout (dout > 0) instead of from x": dout * (dout > 0),
                    "no mask at all: dx = dout (a mask such as out >= 0 is always true)": dout,
                    ignored: (x > 0).astype(np.float64),
                },
            }
        if kind == "sigmoid":
            s = _sigmoid(x)
            return {
                "out": {"sigmoid(-x): the sign inside exp is flipped": 1.0 - s},
                "dx": {
                    "x * (1 - x) where s * (1 - s) belongs: the derivative is in terms of the output "
                    "s = sigmoid(x)": dout * x * (1.0 - x),
                    "dout * s: the factor (1 - s) is missing": dout * s,
                    ignored: s * (1.0 - s),
                },
            }
        t = np.tanh(x)
        return {
            "out": {},
            "dx": {
                "1 - x**2 where 1 - t**2 belongs: the derivative is in terms of the output t = tanh(x)": (
                    dout * (1.0 - x**2)
                ),
                "dout * (1 - t): the square is missing": dout * (1.0 - t),
                ignored: 1.0 - t**2,
            },
        }


def _activation_verdicts(kind: str, record: dict[str, Any], data: dict[str, np.ndarray]) -> list[Verdict]:
    ref = reference.activation(kind, data["x"], data["dout"])
    mistakes = _activation_mistakes(kind, data["x"], data["dout"])
    n = data["x"].shape[0]
    return [
        compare(name, record["outputs"].get(name), ref[name], mistakes=mistakes[name], batch_size=n)
        for name in ("out", "dx")
    ]


STABILITY_HINT = {
    "sigmoid": (
        "exp overflows for large |x|. Compute exp only of -|x| (it is at most 1) and pick "
        "1 / (1 + z) for x >= 0, z / (1 + z) for x < 0; note that np.where evaluates both branches, "
        "so exp(-x) inside np.where still overflows."
    ),
    "tanh": "exp overflows for large |x|: use np.tanh, which is stable.",
}


def _special_item(kind: str, record: dict[str, Any], verdicts: list[Verdict], ordinary_ok: bool) -> Item:
    """The item of the special case; its stability advice is given only when the ordinary cases
    pass, since otherwise the formula itself is wrong and the advice would mislead."""
    if kind == "relu":
        item = _case_item("gradient 0 at x == 0", record, verdicts, 1.0)
        return item if not item.passed else Item(item.name, True, "dx is 0 where x == 0, as in PyTorch")
    name = f"stable at {SPECIAL_CASE[kind]}"
    if record["error"]:
        return Item(name, False, record["error"], 1.0)
    hint = f" {STABILITY_HINT[kind]}" if ordinary_ok else ""
    failures = [v for v in verdicts if not v.ok]
    if failures:
        return Item(name, False, failures[0].message() + hint, 1.0)
    warned = _fp_warnings(record)
    if warned:
        return Item(name, False, f"right values, but {warned[0]}.{hint}", 1.0)
    return Item(name, True, "finite, right values and no overflow warning at |x| up to 800", 1.0)


def grade_activation(evidence: Evidence) -> Report:
    """Grade recorded evidence: out (1), dx (1), N = 1 (0.5), the special case (1), inputs unchanged (0.5)."""
    kind, seed, cases = evidence["check"], evidence["seed"], evidence["cases"]
    report = Report(f"{kind}_forward and {kind}_backward", ACTIVATION_POINTS)
    inputs = activation_inputs(kind, seed)
    verdicts = {label: _activation_verdicts(kind, cases[label], data) for label, data in inputs.items()}
    main, single, special = inputs
    error = cases[main]["error"]
    for verdict, weight in zip(verdicts[main], (1.0, 1.0), strict=True):
        report.add(_error_or_verdict_item(verdict.name, verdict, error, weight))
    report.add(_case_item("N = 1", cases[single], verdicts[single], 0.5))
    ordinary_ok = not cases[main]["error"] and all(v.ok for v in verdicts[main] + verdicts[single])
    report.add(_special_item(kind, cases[special], verdicts[special], ordinary_ok))
    report.add(inputs_unchanged_item(cases, inputs))
    add_notes(report, cases.values())
    return report


def _activation_check(kind: str) -> Check:
    return register(
        Check(
            kind,
            f"{kind}_forward and {kind}_backward",
            ACTIVATION_POINTS,
            functools.partial(collect_activation, kind),
        )
    )


RELU = _activation_check("relu")
SIGMOID = _activation_check("sigmoid")
TANH = _activation_check("tanh")


def check_relu(relu_forward: Any, relu_backward: Any, *, seed: int = 0) -> float:
    """Grade ``relu_forward``/``relu_backward`` against PyTorch (gradient 0 at x == 0); return points."""
    return run_check(RELU, relu_forward, relu_backward, seed=seed)


def check_sigmoid(sigmoid_forward: Any, sigmoid_backward: Any, *, seed: int = 0) -> float:
    """Grade ``sigmoid_forward``/``sigmoid_backward`` against PyTorch, stable at |x| = 800; return points."""
    return run_check(SIGMOID, sigmoid_forward, sigmoid_backward, seed=seed)


def check_tanh(tanh_forward: Any, tanh_backward: Any, *, seed: int = 0) -> float:
    """Grade ``tanh_forward``/``tanh_backward`` against PyTorch, stable at |x| = 800; return points."""
    return run_check(TANH, tanh_forward, tanh_backward, seed=seed)


# ---------------------------------------------------------------------------------------------------
# Softmax cross-entropy
# ---------------------------------------------------------------------------------------------------

SOFTMAX_CASES = ("N=4, C=3", "N=1, C=3", "large logits, N=3, C=4")

#: Row 1 has its true class 1000 below the row's maximum: its probability underflows to 0, so only
#: log-sum-exp gives the right loss (~1000); log(p + eps) gives -log(eps). Row 2 is all large and
#: negative: without subtracting the maximum every exp underflows and the sum is 0.
LARGE_LOGITS = np.array(
    [[1000.0, 999.0, -1000.0, 998.0], [1000.0, 0.0, 500.0, 999.0], [-1000.0, -998.0, -999.0, -1000.5]]
)
LARGE_LABELS = np.array([0, 1, 2], dtype=np.int64)


def softmax_inputs(seed: int) -> dict[str, dict[str, np.ndarray]]:
    """Every case of the softmax check: ``{label: {"scores": (N, C) float64, "y": (N,) int64}}``."""
    cases = {}
    for index, (label, (n, c)) in enumerate(zip(SOFTMAX_CASES[:2], ((4, 3), (1, 3)), strict=True)):
        rng = np.random.default_rng(_case_seed(seed, index))
        # every class appears when N >= C, in a random order
        y = (rng.permutation(np.arange(n) + int(rng.integers(c))) % c).astype(np.int64)
        cases[label] = {"scores": 2.0 * rng.standard_normal((n, c)), "y": y}
    rng = np.random.default_rng(_case_seed(seed, 2))
    scores = LARGE_LOGITS + rng.uniform(-0.5, 0.5, LARGE_LOGITS.shape)
    cases[SOFTMAX_CASES[2]] = {"scores": scores, "y": LARGE_LABELS.copy()}
    return cases


def collect_softmax_cross_entropy(softmax_cross_entropy: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``softmax_cross_entropy`` on every case and record the results."""
    cases = {}
    for label, data in softmax_inputs(seed).items():
        scores, y = data["scores"].copy(), data["y"].copy()
        outcome = call(softmax_cross_entropy, scores, y, name="softmax_cross_entropy")
        values, error = unpack(outcome, ["loss", "dscores"], "softmax_cross_entropy")
        cases[label] = {
            "outputs": {k: freeze(v) for k, v in values.items()},
            "error": error,
            "notes": outcome.notes,
            "inputs_after": {"scores": freeze(scores), "y": freeze(y)},
        }
    return {"check": "softmax_cross_entropy", "seed": seed, "cases": cases}


def _softmax_mistakes(scores: np.ndarray, y: np.ndarray) -> dict[str, dict[str, Any]]:
    n = scores.shape[0]
    rows = np.arange(n)
    onehot = np.zeros_like(scores)
    onehot[rows, y] = 1.0
    with np.errstate(all="ignore"):
        shifted = scores - scores.max(axis=1, keepdims=True)
        p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        p0 = np.exp(scores - scores.max(axis=0)) / np.exp(scores - scores.max(axis=0)).sum(axis=0)
        loss_mistakes: dict[str, Any] = {
            "softmax normalised over the batch (axis 0) instead of over the classes (axis 1)": -np.mean(
                np.log(p0[rows, y])
            ),
        }
        for eps in (1e-7, 1e-8, 1e-9, 1e-10, 1e-12, 1e-15):
            loss_mistakes[
                f"log(p + {eps:g}): the true class's probability underflows to 0, and log(p + eps) "
                "cannot be right; compute log p from log-sum-exp: s_y - max - log(sum(exp(s - max)))"
            ] = -np.mean(np.log(p[rows, y] + eps))
    return {
        "loss": loss_mistakes,
        "dscores": {
            "the one-hot of y is not subtracted (dscores = softmax / N)": p / n,
            "softmax normalised over the batch (axis 0) instead of over the classes (axis 1)": (p0 - onehot)
            / n,
        },
    }


def _softmax_verdicts(record: dict[str, Any], data: dict[str, np.ndarray]) -> list[Verdict]:
    ref = reference.softmax_cross_entropy(data["scores"], data["y"])
    mistakes = _softmax_mistakes(data["scores"], data["y"])
    n = data["scores"].shape[0]
    out = record["outputs"]
    return [
        compare("loss", out.get("loss"), ref["loss"], tol=LOSS, mistakes=mistakes["loss"], batch_size=n),
        compare("dscores", out.get("dscores"), ref["dscores"], mistakes=mistakes["dscores"], batch_size=n),
    ]


def _large_logits_item(record: dict[str, Any], verdicts: list[Verdict], ordinary_ok: bool) -> Item:
    """The large-logits item; its stability advice only when the ordinary cases pass."""
    name = "large logits (|s| ~ 1000)"
    if record["error"]:
        return Item(name, False, record["error"], 1.0)
    failures = [v for v in verdicts if not v.ok]
    hint = (
        " Subtract each row's maximum before exp, and take the log of the probabilities as "
        "s - max - log(sum(exp(s - max))) rather than log(softmax)."
    )
    if failures:
        message = failures[0].message()
        return Item(
            name, False, message + (hint if ordinary_ok and "log-sum-exp" not in message else ""), 1.0
        )
    warned = _fp_warnings(record)
    if warned:
        return Item(name, False, f"right values, but {warned[0]}.{hint}", 1.0)
    return Item(name, True, "finite, right loss and dscores with no floating-point warning", 1.0)


def grade_softmax_cross_entropy(evidence: Evidence) -> Report:
    """Grade evidence: loss (1), dscores (1), N = 1 (0.5), large logits (1), inputs unchanged (0.5)."""
    report = Report("softmax_cross_entropy", SOFTMAX_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    inputs = softmax_inputs(seed)
    verdicts = {label: _softmax_verdicts(cases[label], data) for label, data in inputs.items()}
    main, single, large = SOFTMAX_CASES
    error = cases[main]["error"]
    for verdict in verdicts[main]:
        report.add(_error_or_verdict_item(verdict.name, verdict, error, 1.0))
    report.add(_case_item("N = 1", cases[single], verdicts[single], 0.5))
    ordinary_ok = not cases[main]["error"] and all(v.ok for v in verdicts[main] + verdicts[single])
    report.add(_large_logits_item(cases[large], verdicts[large], ordinary_ok))
    report.add(inputs_unchanged_item(cases, inputs))
    add_notes(report, cases.values())
    return report


SOFTMAX_CROSS_ENTROPY = register(
    Check("softmax_cross_entropy", "softmax_cross_entropy", SOFTMAX_POINTS, collect_softmax_cross_entropy)
)


def check_softmax_cross_entropy(softmax_cross_entropy: Any, *, seed: int = 0) -> float:
    """Grade ``softmax_cross_entropy`` against PyTorch's cross_entropy; print feedback; return points."""
    return run_check(SOFTMAX_CROSS_ENTROPY, softmax_cross_entropy, seed=seed)


# ---------------------------------------------------------------------------------------------------
# The two-layer network
# ---------------------------------------------------------------------------------------------------

PARAM_NAMES = ("W1", "b1", "W2", "b2")

#: (label, N, reg). D, H, C are pairwise distinct and distinct from N in the main case, so a
#: transposed weight gradient or a bias reduced over the wrong axis cannot have the right shape.
NET_CASES: tuple[tuple[str, int, float], ...] = (
    ("N=5, D=4, H=6, C=3", 5, 0.0),
    ("reg=0.1", 5, 0.1),
    ("N=1", 1, 0.0),
)
NET_D, NET_H, NET_C = 4, 6, 3


def net_inputs(seed: int, n: int) -> dict[str, np.ndarray]:
    """Non-trivial parameters and data for one case: X (N, D), y (N,) int64, W1, b1, W2, b2.

    Hidden unit 0 gets a bias of -50, so it is inactive for every sample (its gradients are 0);
    the other units are active for some samples and not for others.
    """
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, NET_D))
    W1 = rng.standard_normal((NET_H, NET_D))
    b1 = 0.5 * rng.standard_normal(NET_H)
    b1[0] = -50.0
    return {
        "X": X,
        "y": rng.integers(0, NET_C, size=n).astype(np.int64),
        "W1": W1,
        "b1": b1,
        "W2": rng.standard_normal((NET_C, NET_H)),
        "b2": rng.standard_normal(NET_C),
    }


def _params_of(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: data[k] for k in PARAM_NAMES}


def _run_net(fn: Any, data: dict[str, np.ndarray], reg: float | None) -> dict[str, Any]:
    """Call ``two_layer_net`` on copies of the data: scores when ``reg`` is None, else (loss, grads)."""
    params = {k: v.copy() for k, v in _params_of(data).items()}
    X, y = data["X"].copy(), data["y"].copy()
    record: dict[str, Any] = {"outputs": {}, "error": None, "notes": []}
    if reg is None:
        outcome = call_naming_stubs(fn, params, X, name="two_layer_net")
        values, error = unpack(outcome, ["scores"], "two_layer_net")
        record["outputs"] = {"scores": freeze(values.get("scores"))} if error is None else {}
    else:
        outcome = call_naming_stubs(fn, params, X, y=y, reg=reg, name="two_layer_net")
        values, error = unpack(outcome, ["loss", "grads"], "two_layer_net (with labels y)")
        if error is None:
            record["outputs"]["loss"] = freeze(values["loss"])
            grads = values["grads"]
            if isinstance(grads, Mapping):
                record["grad_keys"] = sorted(str(k) for k in grads)
                record["outputs"].update({k: freeze(grads[k]) for k in PARAM_NAMES if k in grads})
            else:
                record["grad_keys"] = NotAnArray(type(grads).__name__)
    record["error"] = error
    record["notes"] = outcome.notes
    after = {"X": freeze(X), "y": freeze(y)}
    after.update({k: freeze(params.get(k)) for k in PARAM_NAMES})
    record["inputs_after"] = after
    return record


def collect_two_layer_net(two_layer_net: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``two_layer_net`` on every case, for scores and for (loss, grads)."""
    cases = {}
    for index, (label, n, reg) in enumerate(NET_CASES):
        data = net_inputs(_case_seed(seed, index), n)
        cases[label] = {"loss": _run_net(two_layer_net, data, reg)}
        if reg == 0.0:
            cases[label]["scores"] = _run_net(two_layer_net, data, None)
    return {"check": "two_layer_net", "seed": seed, "cases": cases}


def _net_mistakes(data: dict[str, np.ndarray], reg: float) -> dict[str, dict[str, Any]]:
    """Wrong answers for the loss and each gradient: a missing ReLU mask, and three ways to get L2 wrong."""
    X, y = data["X"], data["y"]
    W1, b1, W2, b2 = (data[k] for k in PARAM_NAMES)
    z = X @ W1.T + b1
    h = np.maximum(z, 0.0)
    scores = h @ W2.T + b2
    ds = reference.softmax_cross_entropy(scores, y)["dscores"]
    dh = ds @ W2
    grads = {
        "W1": (dh * (z > 0)).T @ X,
        "b1": (dh * (z > 0)).sum(axis=0),
        "W2": ds.T @ h,
        "b2": ds.sum(axis=0),
    }
    ce = float(reference.softmax_cross_entropy(scores, y)["loss"])
    l2_w = float((W1**2).sum() + (W2**2).sum())
    l2_b = float((b1**2).sum() + (b2**2).sum())
    mistakes: dict[str, dict[str, Any]] = {
        "scores": {"the ReLU is missing: scores = (X @ W1.T + b1) @ W2.T + b2": z @ W2.T + b2},
        "loss": {},
        "W1": {"the ReLU mask is missing in the backward pass (dz = dh)": dh.T @ X},
        "b1": {"the ReLU mask is missing in the backward pass (dz = dh)": dh.sum(axis=0)},
        "W2": {},
        "b2": {},
    }
    if reg:
        mistakes["loss"] = {
            "the biases are regularised too: L2 belongs on the weights W1, W2 only": ce
            + 0.5 * reg * (l2_w + l2_b),
            "the 0.5 is missing: the penalty is 0.5 * reg * (||W1||^2 + ||W2||^2)": ce + reg * l2_w,
            "the regularisation term is missing from the loss": ce,
        }
        for k, w in (("W1", W1), ("W2", W2)):
            mistakes[k]["the regularisation is in the loss but not in the gradient (add reg * W)"] = grads[k]
            mistakes[k]["2 * reg * W: the derivative of 0.5 * reg * ||W||^2 is reg * W"] = (
                grads[k] + 2 * reg * w
            )
        for k, b in (("b1", b1), ("b2", b2)):
            mistakes[k]["the bias is regularised (reg * b added); L2 belongs on the weights only"] = (
                grads[k] + reg * b
            )
    return mistakes


def _net_verdicts(
    case: dict[str, dict[str, Any]], data: dict[str, np.ndarray], reg: float
) -> dict[str, Verdict]:
    ref = reference.two_layer_net(_params_of(data), data["X"], data["y"], reg)
    mistakes = _net_mistakes(data, reg)
    n = data["X"].shape[0]
    verdicts = {}
    if "scores" in case:
        verdicts["scores"] = compare(
            "scores", case["scores"]["outputs"].get("scores"), ref["scores"], mistakes=mistakes["scores"]
        )
    out = case["loss"]["outputs"]
    verdicts["loss"] = compare(
        "loss", out.get("loss"), ref["loss"], tol=LOSS, mistakes=mistakes["loss"], batch_size=n
    )
    for k in PARAM_NAMES:
        verdicts[k] = compare(f"grads['{k}']", out.get(k), ref[f"d{k}"], mistakes=mistakes[k], batch_size=n)
    return verdicts


def _grad_keys_item(record: dict[str, Any]) -> Item:
    name = "grads keys"
    if record["error"]:
        return Item(name, False, record["error"], 0.5)
    keys = record.get("grad_keys")
    if isinstance(keys, NotAnArray):
        return Item(name, False, f"grads is a {keys.type_name}, expected a dict keyed W1, b1, W2, b2", 0.5)
    if sorted(keys) != sorted(PARAM_NAMES):
        return Item(
            name,
            False,
            f"grads has keys {', '.join(keys) or '(none)'}; key it exactly like params: W1, b1, W2, b2",
            0.5,
        )
    return Item(name, True, "exactly W1, b1, W2, b2", 0.5)


def _missing_grad(k: str, record: dict[str, Any]) -> str:
    keys = record.get("grad_keys")
    if isinstance(keys, NotAnArray):
        return f"grads is a {keys.type_name}, not a dict"
    return f"grads has no key '{k}' (its keys: {', '.join(keys or []) or 'none'})"


def _grad_item(k: str, record: dict[str, Any], verdict: Verdict) -> Item:
    name = f"grads['{k}']"
    if not record["error"] and verdict.problem == "missing":
        return Item(name, False, _missing_grad(k, record), 1.0)
    return _error_or_verdict_item(name, verdict, record["error"], 1.0)


def _whole_case_item(
    name: str, case: dict[str, dict[str, Any]], verdicts: dict[str, Verdict], weight: float
) -> Item:
    for record in case.values():
        if record["error"]:
            return Item(name, False, record["error"], weight)
    for k in PARAM_NAMES:
        if verdicts[k].problem == "missing":
            return Item(name, False, _missing_grad(k, case["loss"]), weight)
    return Item.from_verdicts(name, list(verdicts.values()), weight)


def grade_two_layer_net(evidence: Evidence) -> Report:
    """Grade recorded evidence: scores, loss, each of the four gradients (1 each), grads keys (0.5),
    reg > 0 (1), N = 1 (0.5), inputs and params unchanged (0.5)."""
    report = Report("two_layer_net", TWO_LAYER_NET_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    verdicts, originals, records = {}, {}, {}
    for index, (label, n, reg) in enumerate(NET_CASES):
        data = net_inputs(_case_seed(seed, index), n)
        verdicts[label] = _net_verdicts(cases[label], data, reg)
        for kind, record in cases[label].items():
            records[f"{label} ({kind})"] = record
            originals[f"{label} ({kind})"] = data
    (main, _, _), (reg_label, _, _), (single, _, _) = NET_CASES
    scores_record, loss_record = cases[main]["scores"], cases[main]["loss"]
    report.add(_error_or_verdict_item("scores", verdicts[main]["scores"], scores_record["error"], 1.0))
    report.add(_error_or_verdict_item("loss", verdicts[main]["loss"], loss_record["error"], 1.0))
    for k in PARAM_NAMES:
        report.add(_grad_item(k, loss_record, verdicts[main][k]))
    report.add(_grad_keys_item(loss_record))
    report.add(_whole_case_item("reg > 0", cases[reg_label], verdicts[reg_label], 1.0))
    report.add(_whole_case_item("N = 1", cases[single], verdicts[single], 0.5))
    report.add(inputs_unchanged_item(records, originals))
    add_notes(report, records.values())
    return report


TWO_LAYER_NET = register(Check("two_layer_net", "two_layer_net", TWO_LAYER_NET_POINTS, collect_two_layer_net))


def check_two_layer_net(two_layer_net: Any, *, seed: int = 0) -> float:
    """Grade ``two_layer_net`` (scores, loss, every gradient, L2) against PyTorch; return points."""
    return run_check(TWO_LAYER_NET, two_layer_net, seed=seed)


# ---------------------------------------------------------------------------------------------------
# Training on the spiral
# ---------------------------------------------------------------------------------------------------


def training_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The spiral the check trains on: 3 classes of 100 points, from a seed the notebook does not use."""
    return make_spiral(n_per_class=100, n_classes=3, seed=_case_seed(seed, 1))


def _freeze_losses(losses: Any) -> Any:
    if isinstance(losses, (list, tuple)):
        try:
            return np.array([float(v) for v in losses], dtype=np.float64)
        except (TypeError, ValueError):
            return NotAnArray(type(losses).__name__)
    return freeze(losses)


def collect_train_two_layer_net(train_two_layer_net: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``train_two_layer_net(X, y, seed=seed)`` with its own defaults; record it."""
    X, y = training_data(seed)
    start = time.perf_counter()
    outcome = call_naming_stubs(
        train_two_layer_net, X.copy(), y.copy(), seed=seed, name="train_two_layer_net"
    )
    seconds = time.perf_counter() - start
    values, error = unpack(outcome, ["params", "losses"], "train_two_layer_net")
    params: Any = None
    losses: Any = None
    if error is None:
        raw = values["params"]
        if isinstance(raw, Mapping):
            params = {str(k): freeze(v) for k, v in raw.items()}
        else:
            params = NotAnArray(type(raw).__name__)
        losses = _freeze_losses(values["losses"])
    return {
        "check": "train_two_layer_net",
        "seed": seed,
        "error": error,
        "notes": outcome.notes,
        "params": params,
        "losses": losses,
        "seconds": seconds,
    }


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


def grade_train_two_layer_net(evidence: Evidence) -> Report:
    """Grade recorded evidence: (params, losses) of the right form (1), accuracy >= 70% (1), >= 95% (1).

    The accuracy is computed here from the returned parameters with the reference forward pass, on
    data remade from the seed: nothing the learner's code reports or computes is trusted.
    """
    report = Report("train_two_layer_net", TRAINING_POINTS)
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
            f"{_case_seed(evidence['seed'], 1)}, measured by the course's forward pass on your params)"
        )
        for name, target in ((partial, ACCURACY_PARTIAL), (full, ACCURACY_FULL)):
            if accuracy >= target:
                report.add(Item(name, True, text))
            else:
                report.add(Item(name, False, text + _accuracy_hint(accuracy)))
    if evidence["seconds"] > TRAINING_SLOW_SECONDS:
        report.notes.append(
            f"training took {evidence['seconds']:.1f} s; keep it under a few seconds "
            "(fewer steps or hidden units)"
        )
    report.notes.extend(evidence["notes"])
    return report


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


TRAIN_TWO_LAYER_NET = register(
    Check("train_two_layer_net", "train_two_layer_net", TRAINING_POINTS, collect_train_two_layer_net)
)


def check_train_two_layer_net(train_two_layer_net: Callable[..., Any], *, seed: int = 0) -> float:
    """Train the learner's network on a spiral and grade the accuracy of what it returns; return points."""
    return run_check(TRAIN_TWO_LAYER_NET, train_two_layer_net, seed=seed)
