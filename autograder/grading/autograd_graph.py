"""The graders of notebook 03's checks (see :mod:`autograder.checks.autograd_graph` for their inputs)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autograder.checks.autograd_graph import (
    BACKWARD_ORDER,
    LOSS_CASES,
    SGD_SHAPES,
    SGD_STEP,
    TWO_LAYER_LOSS_TORCH,
    build_graph,
    graph_cases,
    loss_cases,
    sgd_inputs,
    sgd_loss,
)
from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import LOSS
from autograder.checks.two_layer_net import EDGE_CASE, LARGE_CASE, NET_C, PARAM_NAMES
from autograder.grading import grader, reference, report_for
from autograder.grading.graph_walks import recognised_walk
from autograder.grading.softmax_mistakes import one_hot_from_labels
from autograder.grading.toolkit import (
    add_notes,
    error_or_verdicts,
    explain_errors,
    inputs_unchanged_item,
    product_sizes,
)
from autograder.grading.two_layer_net import (
    SIZE_ONE,
    WEIGHT_SIZES,
    first_failure,
    net_mistakes,
    stability_item,
)

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
            f"the function returned a Python {returned}: return the 0-d tensor itself; .item() and float() "
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
            f"{k}.grad was already set before the check called loss.backward(): your function calls "
            "backward itself. Return the loss and let the caller call backward (a second call adds a "
            "second copy of every gradient, or fails because the graph was freed)"
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


def graph_structure(result: torch.Tensor) -> tuple[list[str], list[set[int]]]:
    """The nodes reachable from ``result.grad_fn`` (by identity): their class names, and for each node the
    indices of its parents (the nodes that have it in their ``next_functions``)."""
    root = result.grad_fn
    index = {id(root): 0}
    nodes = [root]
    parents: list[set[int]] = [set()]
    i = 0
    while i < len(nodes):
        for child, _ in nodes[i].next_functions:
            if child is None:
                continue
            if id(child) not in index:
                index[id(child)] = len(nodes)
                nodes.append(child)
                parents.append(set())
            parents[index[id(child)]].add(i)
        i += 1
    return [type(n).__name__ for n in nodes], parents


def _multiset_problem(listed: list[str], names: list[str]) -> str | None:
    want, got = Counter(names), Counter(listed)
    if want == got:
        return None
    missing, extra = want - got, got - want
    parts = []
    if missing:
        parts.append("missing " + ", ".join(f"{n} x{c}" if c > 1 else n for n, c in sorted(missing.items())))
    if extra:
        parts.append("too many " + ", ".join(f"{n} x{c}" if c > 1 else n for n, c in sorted(extra.items())))
    text = f"the graph has {len(names)} nodes and you listed {len(listed)}: " + "; ".join(parts) + "."
    if "AccumulateGrad" in missing and "AccumulateGrad" not in got:
        hint = "include the AccumulateGrad nodes, the ones that write .grad of the leaves"
    elif extra and not missing:
        hint = (
            "list each node once, even when several nodes point to it: remember visited nodes by identity "
            "(the node object itself in a set), not by name"
        )
    elif missing and not extra and len(set(listed)) == len(listed):
        hint = (
            "nodes that share a class name are different nodes: remember visited nodes by identity, "
            "not by name, and follow every entry of next_functions"
        )
    else:
        hint = "follow every entry of next_functions (skipping None), and list each node exactly once"
    return f"{text} Likely mistake: {hint}."


def _assignable(listed: list[str], names: list[str], parents: list[set[int]]) -> tuple[bool, int, frozenset]:
    """Whether the listed names can be matched to the nodes in a topological order.

    Names are not unique (a network has two AddmmBackward0), so this searches the matchings,
    remembering dead ends. Returns (found, deepest position reached, nodes listed at that point).
    """
    n = len(names)
    dead: set[frozenset] = set()
    deepest: list[Any] = [0, frozenset()]

    def search(done: frozenset) -> bool:
        pos = len(done)
        if pos > deepest[0]:
            deepest[0], deepest[1] = pos, done
        if pos == n:
            return True
        if done in dead:
            return False
        for i in range(n):
            if i not in done and names[i] == listed[pos] and parents[i] <= done and search(done | {i}):
                return True
        dead.add(done)
        return False

    found = search(frozenset())
    return found, deepest[0], deepest[1]


def order_problem(listed: list[str], names: list[str], parents: list[set[int]]) -> str | None:
    """Why ``listed`` is not an order backward can run the graph in, or None when it is one."""
    problem = _multiset_problem(listed, names)
    if problem:
        return problem
    found, pos, done = _assignable(listed, names, parents)
    if found:
        return None
    if _assignable(listed[::-1], names, parents)[0]:
        return (
            "this is the order reversed: backward starts at the output's grad_fn and ends at the leaves' "
            "AccumulateGrad nodes (the forward pass runs the other way)."
        )
    name = listed[pos]
    waiting = sorted(
        {
            names[p]
            for i, own in enumerate(names)
            if own == name and i not in done
            for p in parents[i]
            if p not in done
        }
    )
    return (
        f"position {pos} ({name}) comes too early: no {name} node has received gradient from all of its "
        f"parents yet (still waiting for {', '.join(waiting)}). A node may only be listed after every node "
        "that has it in its next_functions. Likely mistake: a node listed when first reached (depth-first "
        "or breadth-first); list it after all its parents instead (reverse the depth-first post-order, or "
        "count each node's parents and list it when the count reaches zero)."
    )


@grader(BACKWARD_ORDER)
def grade_backward_order(evidence: Evidence) -> Report:
    """Grade recorded evidence: one item per graph (chain, diamond, two-layer net, and a tensor used twice
    in a hidden test), 1 each. The graphs are
    rebuilt here from the seed; any valid order of the right nodes passes."""
    report = report_for(BACKWARD_ORDER)
    for kind in graph_cases(evidence["seed"]):
        record = evidence["cases"].get(kind)
        if record is None:  # evidence collected for the visible seed, which builds no such graph
            report.add(Item(kind, False, "not run: the evidence holds no result for this graph"))
            continue
        graph = build_graph(kind, evidence["seed"])
        names, parents = graph_structure(graph)
        if record["error"]:
            report.add(Item(kind, False, record["error"]))
            continue
        listed = record["names"]
        if listed is None:
            report.add(
                Item(
                    kind,
                    False,
                    f"backward_order returned {record.get('returned', 'something else')}; return a list of "
                    "strings, the class names type(node).__name__ such as 'AddmmBackward0'",
                )
            )
            continue
        problem = order_problem(listed, names, parents)
        walk = recognised_walk(listed, graph) if problem else None
        if problem and walk:
            problem = f"{problem.split(' Likely mistake:')[0]} Likely mistake: {walk}."
        if problem:
            report.add(Item(kind, False, problem))
        else:
            report.add(Item(kind, True, f"a valid order of all {len(names)} nodes"))
    add_notes(report, evidence["cases"].values())
    return report


def sgd_gradients(values: list[np.ndarray], coefs: list[np.ndarray]) -> list[np.ndarray]:
    """The gradient of :func:`sgd_loss` at ``values``, by autograd in float64."""
    leaves = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    grads = torch.autograd.grad(sgd_loss(leaves, coefs), leaves)
    return [g.numpy().copy() for g in grads]


def _step_error(steps: list[dict[str, Any]], step: int) -> str | None:
    for i, record in enumerate(steps[: step + 1]):
        if record["error"]:
            return record["error"] + _no_grad_hint(record["error"])
        if record["backward_error"]:
            return (
                f"the check could not compute fresh gradients before step {i + 1}: {record['backward_error']}"
                + (" (after your first sgd_step the parameters no longer require grad?)" if i else "")
            )
    if len(steps) <= step:
        return "not run"
    return None


def _no_grad_hint(error: str) -> str:
    if "in-place operation" in error or "leaf Variable" in error:
        return (
            ". Likely mistake: the update ran outside torch.no_grad(); autograd refuses an in-place change "
            "of a leaf that requires grad while it is recording"
        )
    if "0-dim" in error or "0-d" in error:
        return (
            ". Likely mistake: indexing or slicing a parameter (p[:] or p[0]); a parameter can be a 0-d "
            "scalar tensor, so update the tensor itself: p -= lr * p.grad"
        )
    return ""


def _values(after: list[dict[str, Any]]) -> list[Any]:
    return [a["value"] for a in after]


def _step_verdicts(
    name: str, after: list[Any], start: list[np.ndarray], grads: list[np.ndarray], lr: float, stale: list[Any]
) -> list[Verdict]:
    """Each parameter after a step against ``start - lr * grads``, naming the common wrong updates."""
    verdicts = []
    for i, (value, p, g) in enumerate(zip(after, start, grads, strict=True)):
        mistakes = {
            "unchanged: the tensors you were given did not change. Either the update rebinds a name "
            "(p = p - lr * p.grad makes a new tensor and leaves the caller's one as it was; write "
            "p -= lr * p.grad inside torch.no_grad()), or the grads were cleared before the update": p,
            "p + lr * grad: the sign is flipped, the step climbs the loss": p + lr * g,
            "p - grad: the learning rate is missing": p - g,
        }
        old = stale[i]
        if isinstance(old, np.ndarray) and old.shape == g.shape and np.any(old):
            mistakes[
                "the step used the old gradient plus the new one: .grad was not cleared after the previous "
                "step, so backward added to it (set p.grad = None or call p.grad.zero_())"
            ] = p - lr * (g + old)
        verdicts.append(compare(f"{name} params[{i}]", value, p - lr * g, mistakes=mistakes))
    return verdicts


def _facts_item(
    name: str, steps: list[dict[str, Any]], problem: Callable[[str, dict[str, Any]], str | None], passed: str
) -> Item:
    """An item on what each step left in the caller's tensors: the first ``problem`` found sinks it.

    The facts of every step that ran come first: they say more than a later step's error does.
    """
    error = _step_error(steps, 0)
    if error:
        return Item(name, False, error, 0.5)
    for step, record in enumerate(steps):
        for i, fact in enumerate(record.get("after", [])):
            found = problem(f"after step {step + 1}, params[{i}]", fact)
            if found:
                return Item(name, False, found, 0.5)
    error = _step_error(steps, 1)
    return Item(name, False, error, 0.5) if error else Item(name, True, passed, 0.5)


def _grad_left(where: str, fact: dict[str, Any]) -> str | None:
    grad = fact["grad"]
    if grad is not None and (not isinstance(grad, np.ndarray) or np.any(grad)):
        return (
            f"{where}.grad still holds a gradient: clear it after the update (p.grad = None, or "
            "p.grad.zero_()), or the next backward adds to it"
        )
    return None


def _not_a_leaf(where: str, fact: dict[str, Any]) -> str | None:
    if not fact["requires_grad"]:
        return (
            f"{where} no longer requires grad: the update must leave requires_grad alone "
            "(no requires_grad_(False), no detach_())"
        )
    if fact["grad_fn"] is not None or not fact["is_leaf"]:
        return (
            f"{where} has grad_fn {fact['grad_fn']}: the update was recorded in the graph; run it "
            "inside torch.no_grad()"
        )
    return None


@grader(SGD_STEP)
def grade_sgd_step(evidence: Evidence) -> Report:
    """Grade recorded evidence: the caller's tensors after one step (1) and after a second step with fresh
    gradients (1), grads cleared (0.5), still leaves that require grad (0.5)."""
    report = report_for(SGD_STEP)
    data = sgd_inputs(evidence["seed"])
    steps, lr, coefs = evidence["steps"], data["lr"], data["coefs"]
    error = _step_error(steps, 0)
    if error:
        report.add(Item("one step", False, error))
    else:
        after1 = _values(steps[0]["after"])
        g1 = sgd_gradients(data["params"], coefs)
        report.add(
            Item.from_verdicts(
                "one step",
                _step_verdicts("after one step,", after1, data["params"], g1, lr, [None] * len(SGD_SHAPES)),
            )
        )
    error = _step_error(steps, 1)
    if error:
        report.add(Item("two steps", False, error))
    else:
        after1, after2 = _values(steps[0]["after"]), _values(steps[1]["after"])
        if not all(
            isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == s
            for v, s in zip(after1, SGD_SHAPES, strict=True)
        ):
            report.add(Item("two steps", False, "not checked: the first step did not leave float64 tensors"))
        else:
            g2 = sgd_gradients(after1, coefs)
            stale = [fact["grad"] for fact in steps[0]["after"]]
            verdicts = _step_verdicts("after the second step,", after2, after1, g2, lr, stale)
            report.add(Item.from_verdicts("two steps", verdicts))
    # Clearing grads and keeping leaves earn nothing for a step that did not update: doing nothing keeps both.
    updated = report.items[0].passed or report.items[1].passed
    for name, fault, ok in (
        ("grads cleared", _grad_left, "every .grad is None or zero after each step"),
        ("still leaves", _not_a_leaf, "leaves with requires_grad=True and grad_fn None"),
    ):
        item = _facts_item(name, steps, fault, ok)
        if item.passed and not updated:
            item = Item(name, False, "not checked: the parameters were not updated", item.weight)
        report.add(item)
    if report.items[0].passed:
        bypassed = _bypassed_autograd(steps[0]["after"])
        if bypassed:
            report.notes.append(DATA_NOTE.format(params=", ".join(f"params[{i}]" for i in bypassed)))
    add_notes(report, steps)
    return report


#: A method note, not a penalty: ``p.data -= lr * p.grad`` computes the right values (the exercise grades
#: the effect), but PyTorch documents ``torch.no_grad()`` as the way to change a leaf without recording.
DATA_NOTE = (
    "{params} changed to the right values, but autograd's version counter did not move: the update went "
    "through .data (p.data -= ...), which bypasses autograd's version tracking, so a graph that saved "
    "the old values would silently use the new ones instead of raising. The values are right and the "
    "points stay; the supported way is the in-place update inside `with torch.no_grad():`."
)


def _bypassed_autograd(after: list[dict[str, Any]]) -> list[int]:
    """The parameters whose in-place change after the first step left their version counter at 0: a
    fresh leaf starts at 0 and every in-place operation autograd sees (under no_grad too) adds 1."""
    return [i for i, fact in enumerate(after) if fact.get("version") == 0]
