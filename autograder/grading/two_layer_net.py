"""The graders of notebook 02's checks (see :mod:`autograder.checks.two_layer_net` for their inputs)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Check, Evidence, NotAnArray, case_seed
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import LOSS
from autograder.checks.two_layer_net import (
    APART_CASE,
    EDGE_CASE,
    LARGE_CASE,
    MISSING_CLASS_CASE,
    NET_C,
    NET_CASES,
    NET_D,
    NET_H,
    PARAM_NAMES,
    RELU,
    SIGMOID,
    SOFTMAX_CASES,
    SOFTMAX_CROSS_ENTROPY,
    SPECIAL_CASE,
    TANH,
    TRAIN_TWO_LAYER_NET,
    TWO_LAYER_NET,
    activation_inputs,
    net_cases,
    params_of,
    softmax_inputs,
    training_data,
)
from autograder.grading import grader, reference, report_for
from autograder.grading.softmax_mistakes import (
    GLOBAL_MAX,
    OVERFLOW,
    merge_alike,
    one_hot_from_labels,
    softmax_loss_mistakes,
)
from autograder.grading.toolkit import (
    add_notes,
    cases_item,
    elementwise_for_product,
    error_or_verdicts,
    explain_errors,
    inputs_unchanged_item,
    product_sizes,
    verdict_or_error,
)
from autograder.grading.training import two_layer_training_hint

#: Training accuracy for full credit and for partial credit. A two-layer ReLU network with ~100 hidden
#: units reaches 97-99% on the spiral within a few hundred full-batch steps; a linear classifier stays
#: near 50%, and a network stopped after a few dozen steps lands in between.
ACCURACY_FULL = 0.95
ACCURACY_PARTIAL = 0.70
#: Training that takes longer than this earns a note: the check runs it twice, the notebook once more.
TRAINING_SLOW_SECONDS = 5.0

#: The name of the item of the size-1 edges, per check.
SIZE_ONE = {
    "activation": "size 1 (N = 1, D = 1)",
    "net": "size 1 (N = 1; D = H = 1)",
}

#: How a numpy floating-point warning (overflow in exp, log of 0) appears in a call's notes: ``call``
#: makes numpy warn on overflow, division by zero and invalid values, and records the warnings.
FP_WARNING = "RuntimeWarning"


def _fp_warnings(record: dict[str, Any]) -> list[str]:
    return [note for note in record.get("notes", []) if FP_WARNING in note]


#: ``out`` equal to x: the forward returns its input unchanged, most often as ``return cache, out``.
RETURNED_X = (
    "out is x itself: are the return values swapped? The forward returns (out, cache), in that order "
    "(or the activation is not applied at all)"
)


def _activation_mistakes(kind: str, x: np.ndarray, dout: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Plausible wrong answers for ``out`` and ``dx``, so feedback can name them."""
    ignored = "the upstream gradient dout is ignored (dx is the local derivative alone)"
    with np.errstate(all="ignore"):
        if kind == "relu":
            return {
                "out": {
                    "the negative part is kept instead of the positive one": np.minimum(x, 0.0),
                    RETURNED_X: x,
                },
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
            s = reference.activation("sigmoid", x, dout)["out"]
            return {
                "out": {"sigmoid(-x): the sign inside exp is flipped": 1.0 - s, RETURNED_X: x},
                "dx": {
                    "x * (1 - x) where s * (1 - s) belongs: the derivative is in terms of the output "
                    "s = sigmoid(x)": dout * x * (1.0 - x),
                    "dout * s: the factor (1 - s) is missing": dout * s,
                    ignored: s * (1.0 - s),
                },
            }
        t = np.tanh(x)
        return {
            "out": {RETURNED_X: x},
            "dx": {
                "1 - x**2 where 1 - t**2 belongs: the derivative is in terms of the output t = tanh(x)": (
                    dout * (1.0 - x**2)
                ),
                "(1 - t)**2 where 1 - t**2 belongs: square t, then subtract it from 1": dout * (1.0 - t) ** 2,
                "1 - tanh(t)**2: the cache already holds t = tanh(x), so tanh is applied twice": (
                    dout * (1.0 - np.tanh(t) ** 2)
                ),
                "dout * (1 - t): the square is missing": dout * (1.0 - t),
                ignored: 1.0 - t**2,
            },
        }


def _activation_error(error: str) -> str | None:
    """The likely mistake behind an activation's error: a matrix product, where all is elementwise."""
    if product_sizes(error):
        return (
            "a matrix product (@ or np.dot) where the elementwise product (*) belongs: an activation "
            "acts element by element, and its gradient is dout * f'(x), element by element"
        )
    return None


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
        item = error_or_verdicts("gradient 0 at x == 0", record["error"], verdicts, 1.0)
        return item if not item.passed else Item(item.name, True, "dx is 0 where x == 0, as in PyTorch")
    return stability_item(
        f"stable at {SPECIAL_CASE[kind]}",
        [record],
        first_failure(verdicts),
        f" {STABILITY_HINT[kind]}" if ordinary_ok else "",
        "finite, right values and no overflow warning at |x| up to 800",
    )


def grade_activation(check: Check, evidence: Evidence) -> Report:
    """Grade recorded evidence: out (1), dx (1), the size-1 edges N = 1 and D = 1 (0.5), the special
    case (1), inputs unchanged (0.5)."""
    kind, seed = check.name, evidence["seed"]
    cases = explain_errors(evidence["cases"], _activation_error)
    report = report_for(check)
    inputs = activation_inputs(kind, seed)
    verdicts = {label: _activation_verdicts(kind, cases[label], data) for label, data in inputs.items()}
    main, single, special, column = inputs
    error = cases[main]["error"]
    for verdict, weight in zip(verdicts[main], (1.0, 1.0), strict=True):
        report.add(verdict_or_error(verdict.name, verdict, error, weight))
    edges = {label: cases[label] for label in (single, column)}
    report.add(cases_item(SIZE_ONE["activation"], edges, verdicts, 0.5))
    ordinary_ok = not cases[main]["error"] and all(v.ok for v in verdicts[main] + verdicts[single])
    report.add(_special_item(kind, cases[special], verdicts[special], ordinary_ok))
    report.add(inputs_unchanged_item(cases, inputs))
    add_notes(report, cases.values())
    return report


for _check in (RELU, SIGMOID, TANH):
    grader(_check)(functools.partial(grade_activation, _check))


#: What a stable softmax does, said where a large-scores item fails and no mistake was named.
LOG_SUM_EXP_HINT = (
    " Subtract each row's maximum before exp, and take the log of the probabilities as "
    "s - max - log(sum(exp(s - max))) rather than log(softmax)."
)


def _softmax_mistakes(
    scores: np.ndarray, y: np.ndarray, ref: dict[str, np.ndarray]
) -> dict[str, dict[str, Any]]:
    n = scores.shape[0]
    rows = np.arange(n)
    onehot = np.zeros_like(scores)
    onehot[rows, y] = 1.0
    with np.errstate(all="ignore"):
        naive = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
        shifted = scores - scores.max(axis=1, keepdims=True)
        p = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
        p0 = np.exp(scores - scores.max(axis=0)) / np.exp(scores - scores.max(axis=0)).sum(axis=0)
        every = scores - scores.max()
        p_global = np.exp(every) / np.exp(every).sum(axis=1, keepdims=True)
    dscores: dict[str, Any] = {
        k: v
        for k, v in merge_alike({OVERFLOW: (naive - onehot) / n, GLOBAL_MAX: (p_global - onehot) / n}).items()
        if not np.all(np.isfinite(v))
    }
    dscores["the one-hot of y is not subtracted (dscores = softmax / N)"] = p / n
    if np.all(np.isfinite(p0)):
        dscores["softmax normalised over the batch (axis 0) instead of over the classes (axis 1)"] = (
            p0 - onehot
        ) / n
    swapped = "the return values are swapped: this is {}; return (loss, dscores), in that order"
    dscores[swapped.format("the loss")] = ref["loss"]
    loss = softmax_loss_mistakes(scores, y)
    loss[swapped.format("dscores")] = ref["dscores"]
    return {"loss": loss, "dscores": dscores}


def _softmax_verdicts(record: dict[str, Any], data: dict[str, np.ndarray]) -> list[Verdict]:
    ref = reference.softmax_cross_entropy(data["scores"], data["y"])
    mistakes = _softmax_mistakes(data["scores"], data["y"], ref)
    n = data["scores"].shape[0]
    out = record["outputs"]
    return [
        compare("loss", out.get("loss"), ref["loss"], tol=LOSS, mistakes=mistakes["loss"], batch_size=n),
        compare("dscores", out.get("dscores"), ref["dscores"], mistakes=mistakes["dscores"], batch_size=n),
    ]


def stability_item(
    name: str, records: list[dict[str, Any]], failure: str | None, hint: str, passed: str, weight: float = 1.0
) -> Item:
    """The item of a case that only a stable formula gets right: sunk by an error, a wrong value
    (``failure``, its message) or a floating-point warning. ``hint`` says how to be stable; it is
    empty when the ordinary cases fail (the formula itself is wrong, and the advice would mislead),
    and it is not repeated when the failure already names a stability mistake."""
    for record in records:
        if record["error"]:
            return Item(name, False, record["error"], weight)
    if failure:
        named = any(marker in failure for marker in ("log-sum-exp", "row's maximum"))
        return Item(name, False, failure + ("" if named else hint), weight)
    warned = [note for record in records for note in _fp_warnings(record)]
    if warned:
        return Item(name, False, f"right values, but {warned[0]}.{hint}", weight)
    return Item(name, True, passed, weight)


def first_failure(verdicts: list[Verdict]) -> str | None:
    """The message of the first verdict that failed, or None when all passed."""
    return next((v.message() for v in verdicts if not v.ok), None)


@grader(SOFTMAX_CROSS_ENTROPY)
def grade_softmax_cross_entropy(evidence: Evidence) -> Report:
    """Grade evidence: loss (1), dscores (1), N = 1 (0.5), a class absent from y (0.5), large logits and rows
    hundreds apart (1), inputs unchanged (0.5)."""
    report = report_for(SOFTMAX_CROSS_ENTROPY)
    inputs = softmax_inputs(evidence["seed"])
    cases = {
        label: explain_errors(
            {label: evidence["cases"][label]},
            lambda e, d=data: one_hot_from_labels(e, d["scores"].shape[1], d["y"]),
        )[label]
        for label, data in inputs.items()
    }
    verdicts = {label: _softmax_verdicts(cases[label], data) for label, data in inputs.items()}
    main, single, large = SOFTMAX_CASES
    error = cases[main]["error"]
    for verdict in verdicts[main]:
        report.add(verdict_or_error(verdict.name, verdict, error, 1.0))
    report.add(error_or_verdicts("N = 1", cases[single]["error"], verdicts[single], 0.5))
    absent = cases[MISSING_CLASS_CASE]["error"]
    report.add(error_or_verdicts("a class absent from y", absent, verdicts[MISSING_CLASS_CASE], 0.5))
    ordinary_ok = not cases[main]["error"] and all(v.ok for v in verdicts[main] + verdicts[single])
    report.add(
        stability_item(
            "large logits (|s| ~ 1000)",
            [cases[APART_CASE], cases[large]],
            first_failure(verdicts[APART_CASE] + verdicts[large]),
            LOG_SUM_EXP_HINT if ordinary_ok else "",
            "finite, right loss and dscores with no floating-point warning",
        )
    )
    report.add(inputs_unchanged_item(cases, inputs))
    add_notes(report, cases.values())
    return report


#: Inner sizes of a matrix product that show a weight used the wrong way round: D and H (the first
#: layer), H and C (the second), and 1 and C (the second layer with one hidden unit).
WEIGHT_SIZES = ({NET_D, NET_H}, {NET_H, NET_C}, {1, NET_C})


def _net_error(error: str) -> str | None:
    """The likely mistake behind an error of the network (or of its softmax) from numpy's shapes."""
    sizes = product_sizes(error)
    if sizes and set(sizes) in WEIGHT_SIZES:
        return (
            f"a weight used as (in, out)? Here a weight is (out, in), as in nn.Linear: W1 is (H, D) = "
            f"({NET_H}, {NET_D}) and W2 is (C, H) = ({NET_C}, {NET_H}), so a layer computes "
            "x @ W.T + b, and its backward dx = dout @ W, dW = dout.T @ x"
        )
    return elementwise_for_product(error)


def net_mistakes(data: dict[str, np.ndarray], reg: float) -> dict[str, dict[str, Any]]:
    """Wrong answers for the scores, the loss and each gradient: a missing or misplaced ReLU mask, an
    unstable softmax, and three ways to get L2 wrong."""
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
    no_mask = "the ReLU mask is missing in the backward pass (dz = dh)"
    upstream_mask = "the ReLU mask is taken from the upstream gradient (dh > 0) instead of from z (z > 0)"
    mistakes: dict[str, dict[str, Any]] = {
        "scores": {"the ReLU is missing: scores = (X @ W1.T + b1) @ W2.T + b2": z @ W2.T + b2},
        "loss": softmax_loss_mistakes(scores, y),
        "W1": {no_mask: dh.T @ X, upstream_mask: (dh * (dh > 0)).T @ X},
        "b1": {no_mask: dh.sum(axis=0), upstream_mask: (dh * (dh > 0)).sum(axis=0)},
        "W2": {"dW2 is computed from z, before the ReLU; it needs h = relu(z), the layer's input": ds.T @ z},
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
    ref = reference.two_layer_net(params_of(data), data["X"], data["y"], reg)
    mistakes = net_mistakes(data, reg)
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


SWAPPED_NET = "the return values are swapped: with labels, two_layer_net returns (loss, grads), in that order"


def _swapped(record: dict[str, Any]) -> bool:
    """Whether ``two_layer_net`` returned (grads, loss): a dict for the loss, a number for grads."""
    loss, keys = record["outputs"].get("loss"), record.get("grad_keys")
    return (
        isinstance(loss, NotAnArray)
        and loss.type_name in ("dict", "OrderedDict")
        and isinstance(keys, NotAnArray)
        and keys.type_name in ("float", "float64", "ndarray", "int")
    )


def _grad_keys_item(record: dict[str, Any]) -> Item:
    name = "grads keys"
    if record["error"]:
        return Item(name, False, record["error"], 0.5)
    keys = record.get("grad_keys")
    if isinstance(keys, NotAnArray):
        return Item(name, False, _missing_grad("W1", record), 0.5)
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
        text = f"grads is a {keys.type_name}, expected a dict keyed W1, b1, W2, b2"
        return text + (f". Likely mistake: {SWAPPED_NET}" if _swapped(record) else "")
    return f"grads has no key '{k}' (its keys: {', '.join(keys or []) or 'none'})"


def _grad_item(k: str, record: dict[str, Any], verdict: Verdict) -> Item:
    name = f"grads['{k}']"
    if not record["error"] and verdict.problem == "missing":
        return Item(name, False, _missing_grad(k, record), 1.0)
    return verdict_or_error(name, verdict, record["error"], 1.0)


def _loss_item(record: dict[str, Any], verdict: Verdict) -> Item:
    if _swapped(record):
        return Item("loss", False, f"{verdict.detail} Likely mistake: {SWAPPED_NET}.", 1.0)
    return verdict_or_error("loss", verdict, record["error"], 1.0)


def _case_problem(case: dict[str, dict[str, Any]], verdicts: dict[str, Verdict]) -> str | None:
    """Why a case cannot be judged on its values: an error, or a gradient that was not returned."""
    for record in case.values():
        if record["error"]:
            return record["error"]
    for k in PARAM_NAMES:
        if verdicts[k].problem == "missing":
            return _missing_grad(k, case["loss"])
    return None


def _whole_case_item(
    name: str,
    cases: dict[str, dict[str, dict[str, Any]]],
    verdicts: dict[str, dict[str, Verdict]],
    weight: float,
) -> Item:
    """An item over whole cases (scores, loss and gradients), each failure prefixed with its case's
    label when the item covers several."""
    for label, case in cases.items():
        prefix = f"{label}: " if len(cases) > 1 else ""
        problem = _case_problem(case, verdicts[label])
        failure = problem or first_failure(list(verdicts[label].values()))
        if failure:
            return Item(name, False, prefix + failure, weight)
    return Item.from_verdicts(name, [v for label in cases for v in verdicts[label].values()], weight)


@grader(TWO_LAYER_NET)
def grade_two_layer_net(evidence: Evidence) -> Report:
    """Grade recorded evidence: scores, loss, each of the four gradients (1 each), grads keys (0.5),
    reg > 0 (1), the size-1 edges N = 1 and D = H = 1 (0.5), large scores (1), inputs and params
    unchanged (0.5)."""
    report = report_for(TWO_LAYER_NET)
    inputs = net_cases(evidence["seed"])
    cases = {
        label: explain_errors(
            evidence["cases"][label], lambda e, y=data["y"]: _net_error(e) or one_hot_from_labels(e, NET_C, y)
        )
        for label, (data, _) in inputs.items()
    }
    verdicts, originals, records = {}, {}, {}
    for label, (data, reg) in inputs.items():
        verdicts[label] = _net_verdicts(cases[label], data, reg)
        for kind, record in cases[label].items():
            records[f"{label} ({kind})"] = record
            originals[f"{label} ({kind})"] = data
    (main, _, _), (reg_label, _, _), (single, _, _) = NET_CASES
    scores_record, loss_record = cases[main]["scores"], cases[main]["loss"]
    report.add(verdict_or_error("scores", verdicts[main]["scores"], scores_record["error"], 1.0))
    report.add(_loss_item(loss_record, verdicts[main]["loss"]))
    for k in PARAM_NAMES:
        report.add(_grad_item(k, loss_record, verdicts[main][k]))
    report.add(_grad_keys_item(loss_record))
    report.add(_whole_case_item("reg > 0", {reg_label: cases[reg_label]}, verdicts, 1.0))
    edges = {label: cases[label] for label in (single, EDGE_CASE)}
    report.add(_whole_case_item(SIZE_ONE["net"], edges, verdicts, 0.5))
    ordinary_ok = _case_problem(cases[main], verdicts[main]) is None and all(
        v.ok for v in verdicts[main].values()
    )
    large = cases[LARGE_CASE]
    report.add(
        stability_item(
            LARGE_CASE,
            list(large.values()),
            _case_problem(large, verdicts[LARGE_CASE]) or first_failure(list(verdicts[LARGE_CASE].values())),
            LOG_SUM_EXP_HINT if ordinary_ok else "",
            "finite, right loss and gradients with no floating-point warning",
        )
    )
    report.add(inputs_unchanged_item(records, originals))
    add_notes(report, records.values())
    return report


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
            f". Every row of the returned W1 is the same: all {W1.shape[0]} hidden units have the same "
            "weights, so they computed the same output, received the same gradient and stayed equal "
            "(the symmetry was never broken); the network works as if it had one hidden unit. Start "
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
