"""The grader of notebook 02's two-layer net: loss and every gradient, with the mistakes it recognises."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence, NotAnArray
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import LOSS
from autograder.checks.two_layer_net import (
    EDGE_CASE,
    LARGE_CASE,
    NET_C,
    NET_CASES,
    NET_D,
    NET_H,
    PARAM_NAMES,
    TWO_LAYER_NET,
    net_cases,
    params_of,
)
from autograder.grading import grader, reference, report_for
from autograder.grading.softmax_mistakes import one_hot_from_labels, softmax_loss_mistakes
from autograder.grading.toolkit import (
    add_notes,
    elementwise_for_product,
    explain_errors,
    inputs_unchanged_item,
    product_sizes,
    verdict_or_error,
)
from autograder.grading.two_layer_net.items import SIZE_ONE, first_failure, stability_item
from autograder.grading.two_layer_net.softmax import LOG_SUM_EXP_HINT

#: Inner sizes of a matrix product that show a weight used the wrong way round: D and H (the first
#: layer), H and C (the second), and 1 and C (the second layer with one hidden unit).
WEIGHT_SIZES = ({NET_D, NET_H}, {NET_H, NET_C}, {1, NET_C})


def net_error(error: str) -> str | None:
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
        prefixed = sorted(keys) == sorted(f"d{k}" for k in PARAM_NAMES)
        return Item(
            name,
            False,
            f"grads has keys {', '.join(keys) or '(none)'}"
            + (
                ". Likely mistake: the gradients keyed by their names in the text, dW1 for W1"
                if prefixed
                else ""
            )
            + "; key it exactly like params: W1, b1, W2, b2",
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
            evidence["cases"][label], lambda e, y=data["y"]: net_error(e) or one_hot_from_labels(e, NET_C, y)
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
