"""The grader of notebook 03's two-layer loss in PyTorch: the loss, its graph and every gradient."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder.checks.autograd_graph import LOSS_CASES, TWO_LAYER_LOSS_TORCH, loss_cases
from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import LOSS
from autograder.checks.two_layer_net import EDGE_CASE, LARGE_CASE, NET_C, PARAM_NAMES
from autograder.grading import grader, reference, report_for
from autograder.grading.softmax_mistakes import one_hot_from_labels
from autograder.grading.toolkit import (
    add_notes,
    error_or_verdicts,
    explain_errors,
    inputs_unchanged_item,
    product_sizes,
)
from autograder.grading.two_layer_net.items import SIZE_ONE, first_failure, stability_item
from autograder.grading.two_layer_net.net import WEIGHT_SIZES, net_mistakes

_CUT_GRAPH = (
    "the loss is not connected to {k}: .detach(), .data, .item(), .numpy() or torch.tensor(...) on the "
    "way cut the graph, or {k} is not used"
)


#: Notebook 02's words for a mistake that, in notebook 03, has another cause: there the learner writes
#: every gradient by hand; here autograd computes them, and a term missing from them was cut from the graph.
NOTEBOOK_03_WORDS = {
    "the regularisation is in the loss but not in the gradient (add reg * W)": (
        "the penalty is in the loss's value but no gradient flows through it: .item(), float(), "
        ".detach() or torch.tensor(...) of the penalty cut it from the graph; keep it a tensor computed "
        "from W1 and W2 by torch operations, and backward adds its gradient to their .grad"
    ),
}


def _loss_verdicts(record: dict[str, Any], data: dict[str, np.ndarray], reg: float) -> dict[str, Verdict]:
    ref = reference.two_layer_net({k: data[k] for k in PARAM_NAMES}, data["X"], data["y"], reg)
    mistakes = net_mistakes(data, reg)
    n = data["X"].shape[0]
    verdicts = {
        "loss": compare(
            "loss", record.get("loss"), ref["loss"], tol=LOSS, mistakes=mistakes["loss"], batch_size=n
        )
    }
    grads = record.get("grads") or {}
    for k in PARAM_NAMES:
        wrong = {NOTEBOOK_03_WORDS.get(name, name): value for name, value in mistakes[k].items()}
        wrong[
            "exactly twice the gradient: backward ran twice (once inside your function?), and gradients "
            "accumulate in .grad"
        ] = 2 * ref[f"d{k}"]
        verdicts[k] = compare(f"{k}.grad", grads.get(k), ref[f"d{k}"], mistakes=wrong, batch_size=n)
    return verdicts


def _graph_problem(record: dict[str, Any]) -> str | None:
    """Why the returned loss is not a tensor attached to the graph, or None when it is."""
    if record["error"]:
        return record["error"]
    returned = record["returned"]
    if returned in ("float", "int"):
        return (
            f"the function returned a Python {returned}. Likely mistake: the loss converted to a number "
            "(.item(), float()) before it is returned: return the 0-d tensor itself; .item() and float() "
            "leave the graph behind, so nothing can call backward on it"
        )
    if returned != "Tensor":
        hint = (
            " (computed in numpy: the graph only records torch operations)" if returned == "ndarray" else ""
        )
        return f"the function returned a {returned}, expected a 0-d torch tensor{hint}"
    if record["grad_fn"] is None:
        return (
            "the loss has grad_fn None: it was computed from tensors that do not require grad (.detach(), "
            ".data, torch.tensor(...) of a result) or under torch.no_grad(), so backward cannot reach "
            "the parameters"
        )
    return None


def _grad_problem(k: str, record: dict[str, Any]) -> str | None:
    """Why ``{k}.grad`` cannot be compared (the function raised, backward failed, grad is None)."""
    problem = _graph_problem(record)
    if problem:
        return problem
    if record["grads_before"].get(k) is not None:
        return (
            f"{k}.grad was already set before the check called loss.backward(). Likely mistake: your "
            "function calls backward itself. Return the loss and let the caller call backward (a second "
            "call adds a second copy of every gradient, or fails because the graph was freed)"
        )
    if record["backward_error"]:
        return record["backward_error"]
    if record["grads"].get(k) is None:
        return f"{k}.grad is None after loss.backward(): " + _CUT_GRAPH.format(k=k)
    return None


#: How to be stable in torch, said where the large-scores item fails and no mistake was named.
TORCH_STABILITY_HINT = (
    " F.cross_entropy(scores, y) is stable at any scale; -log(softmax(scores)) is not (torch.log_softmax "
    "and torch.logsumexp are)."
)


def _loss_error(error: str) -> str | None:
    """The likely mistake behind an error of the loss, from torch's shapes: a weight used as (in, out)."""
    sizes = product_sizes(error)
    if sizes and set(sizes) in WEIGHT_SIZES:
        return (
            "a weight used as (in, out)? Here a weight is (out, in), as in nn.Linear: W1 is (H, D) and W2 "
            "is (C, H), so a layer computes X @ W.T + b (or F.linear(X, W, b))"
        )
    return None


def _case_failure(record: dict[str, Any], verdicts: dict[str, Verdict]) -> str | None:
    """Why a case fails: the function raised, the graph or a .grad is missing, or the first wrong value."""
    problem = next(filter(None, (_grad_problem(k, record) for k in PARAM_NAMES)), None)
    return problem or first_failure(list(verdicts.values()))


def _loss_cases_item(
    name: str, records: dict[str, dict[str, Any]], verdicts: dict[str, dict[str, Verdict]], weight: float
) -> Item:
    """An item over whole cases, each failure prefixed with its case's label when it covers several."""
    for label, record in records.items():
        failure = _case_failure(record, verdicts[label])
        if failure:
            return Item(name, False, (f"{label}: " if len(records) > 1 else "") + failure, weight)
    return Item.from_verdicts(name, [v for label in records for v in verdicts[label].values()], weight)


@grader(TWO_LAYER_LOSS_TORCH)
def grade_two_layer_loss_torch(evidence: Evidence) -> Report:
    """Grade recorded evidence: loss (1), a 0-d tensor in the graph (0.5), each .grad (0.5 each),
    reg > 0 (1), the size-1 edges N = 1 and D = H = 1 (0.5), large scores (0.5), inputs unchanged (0.5)."""
    report = report_for(TWO_LAYER_LOSS_TORCH)
    inputs = loss_cases(evidence["seed"])
    cases = {
        label: explain_errors(
            {label: evidence["cases"][label]},
            lambda e, y=data["y"]: _loss_error(e) or one_hot_from_labels(e, NET_C, y),
        )[label]
        for label, (data, _) in inputs.items()
    }
    verdicts, originals = {}, {}
    for label, (data, reg) in inputs.items():
        originals[label] = {k: data[k] for k in ("X", "y", *PARAM_NAMES)}
        verdicts[label] = _loss_verdicts(cases[label], data, reg)
    (main, _, _), (reg_label, _, _), (single, _, _) = LOSS_CASES
    record = cases[main]
    report.add(error_or_verdicts("loss", record["error"], [verdicts[main]["loss"]], 1.0))
    problem = _graph_problem(record)
    if problem is None:
        report.add(Item("loss in the graph", True, f"a 0-d tensor with grad_fn {record['grad_fn']}", 0.5))
    else:
        report.add(Item("loss in the graph", False, problem, 0.5))
    for k in PARAM_NAMES:
        report.add(error_or_verdicts(f"{k}.grad", _grad_problem(k, record), [verdicts[main][k]], 0.5))
    report.add(_loss_cases_item("reg > 0", {reg_label: cases[reg_label]}, verdicts, 1.0))
    edges = {label: cases[label] for label in (single, EDGE_CASE)}
    report.add(_loss_cases_item(SIZE_ONE["net"], edges, verdicts, 0.5))
    ordinary_ok = _case_failure(record, verdicts[main]) is None
    report.add(
        stability_item(
            LARGE_CASE,
            [cases[LARGE_CASE]],
            _case_failure(cases[LARGE_CASE], verdicts[LARGE_CASE]),
            TORCH_STABILITY_HINT if ordinary_ok else "",
            "finite, right loss and .grad at scores of ~1000",
            weight=0.5,
        )
    )
    report.add(_loss_inputs_item(cases, originals))
    add_notes(report, cases.values())
    return report


X_REQUIRES_GRAD = (
    "in case {label}, your code turned on requires_grad of the caller's X. Likely mistake: "
    "X.requires_grad_(), which changes the tensor it is given, not a copy, so every later use of that X "
    "builds a graph. X is data, not a parameter: leave it as it is (X.detach().requires_grad_() makes a "
    "copy when you want its gradient)"
)


def _loss_inputs_item(cases: dict[str, Any], originals: dict[str, dict[str, np.ndarray]]) -> Item:
    """Inputs unchanged in value, and X still not requiring grad."""
    unchanged = inputs_unchanged_item(cases, originals)
    flagged = [label for label, record in cases.items() if record.get("X_requires_grad")]
    if not unchanged.passed or not flagged:
        return unchanged
    return Item(unchanged.name, False, X_REQUIRES_GRAD.format(label=flagged[0]), unchanged.weight)
