"""Checks for notebook 03, autograd and the computational graph.

* ``two_layer_loss_torch``: notebook 02's network loss written with torch tensors; the check calls
  ``loss.backward()`` itself and compares the loss and every ``.grad`` with the reference.
* ``backward_order``: the learner lists the grad_fn class names of a graph in an order backward can
  run them. Any valid order is accepted: grading rebuilds the same graph from the seed and searches
  for an assignment of the listed names to the graph's nodes that is a topological order.
* ``sgd_step``: an in-place update of leaf tensors under ``torch.no_grad()`` that clears the grads,
  graded on its effect over two steps with fresh gradients in between.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from autograder.calling import call
from autograder.checks.core import (
    Check,
    Evidence,
    freeze,
    register,
    run_check,
)
from autograder.checks.two_layer_net import PARAM_NAMES, _net_mistakes, call_naming_stubs, net_inputs
from autograder.compare import Verdict, compare
from autograder.grading import reference
from autograder.grading.toolkit import add_notes, inputs_unchanged_item
from autograder.report import Item, Report
from autograder.tolerances import LOSS

LOSS_TORCH_POINTS = 4.0
BACKWARD_ORDER_POINTS = 3.0
SGD_STEP_POINTS = 3.0


def _case_seed(seed: int, index: int) -> int:
    # offset from notebook 02's case seeds, so that the two notebooks' checks use different data
    return 1000 * seed + 300 + index


def _grad(t: Any) -> Any:
    """``t.grad`` without the UserWarning torch writes to stderr when t is not a leaf."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return getattr(t, "grad", None)


def _node_name(node: Any) -> str | None:
    return None if node is None else type(node).__name__


# ---------------------------------------------------------------------------------------------------
# two_layer_loss_torch
# ---------------------------------------------------------------------------------------------------

#: (label, N, reg): D=4, H=6, C=3 are those of notebook 02's check, pairwise distinct and distinct from N.
LOSS_CASES: tuple[tuple[str, int, float], ...] = (
    ("N=5, D=4, H=6, C=3", 5, 0.0),
    ("reg=0.1", 5, 0.1),
    ("N=1", 1, 0.0),
)

_CUT_GRAPH = (
    "the loss is not connected to {k}: .detach(), .data, .item(), .numpy() or torch.tensor(...) on the "
    "way cut the graph, or {k} is not used"
)


def _run_loss(fn: Any, data: dict[str, np.ndarray], reg: float) -> dict[str, Any]:
    """Call ``two_layer_loss_torch`` on fresh leaf tensors, then call ``backward`` on its result."""
    params = {k: torch.tensor(data[k], dtype=torch.float64, requires_grad=True) for k in PARAM_NAMES}
    X = torch.tensor(data["X"], dtype=torch.float64)
    y = torch.tensor(data["y"], dtype=torch.int64)
    arg = dict(params)
    outcome = call_naming_stubs(fn, arg, X, y, reg=reg, name="two_layer_loss_torch")
    record: dict[str, Any] = {"error": outcome.error, "notes": list(outcome.notes), "backward_error": None}
    result = outcome.result
    if outcome.ok:
        record["returned"] = type(result).__name__
        record["loss"] = freeze(result)
        is_tensor = isinstance(result, torch.Tensor)
        record["grad_fn"] = _node_name(result.grad_fn) if is_tensor else None
        record["grads_before"] = {k: freeze(_grad(p)) for k, p in params.items()}
        if is_tensor:
            bwd = call(result.backward, name="loss.backward()")
            record["backward_error"] = bwd.error
            record["notes"] += bwd.notes
        record["grads"] = {k: freeze(_grad(p)) for k, p in params.items()}
    record["inputs_after"] = {"X": freeze(X), "y": freeze(y), **{k: freeze(p) for k, p in params.items()}}
    return record


def collect_two_layer_loss_torch(two_layer_loss_torch: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``two_layer_loss_torch`` on every case; the check calls backward itself."""
    cases = {}
    for index, (label, n, reg) in enumerate(LOSS_CASES):
        cases[label] = _run_loss(two_layer_loss_torch, net_inputs(_case_seed(seed, index), n), reg)
    return {"check": "two_layer_loss_torch", "seed": seed, "cases": cases}


def _loss_verdicts(record: dict[str, Any], data: dict[str, np.ndarray], reg: float) -> dict[str, Verdict]:
    ref = reference.two_layer_net({k: data[k] for k in PARAM_NAMES}, data["X"], data["y"], reg)
    mistakes = _net_mistakes(data, reg)
    n = data["X"].shape[0]
    verdicts = {
        "loss": compare(
            "loss", record.get("loss"), ref["loss"], tol=LOSS, mistakes=mistakes["loss"], batch_size=n
        )
    }
    grads = record.get("grads") or {}
    for k in PARAM_NAMES:
        wrong = dict(mistakes[k])
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


def _loss_grad_item(name: str, k: str, record: dict[str, Any], verdict: Verdict, weight: float) -> Item:
    problem = _grad_problem(k, record)
    if problem:
        return Item(name, False, problem, weight)
    return Item.from_verdicts(name, [verdict], weight)


def _loss_case_item(name: str, record: dict[str, Any], verdicts: dict[str, Verdict], weight: float) -> Item:
    for k in PARAM_NAMES:
        problem = _grad_problem(k, record)
        if problem:
            return Item(name, False, problem, weight)
    return Item.from_verdicts(name, list(verdicts.values()), weight)


def grade_two_layer_loss_torch(evidence: Evidence) -> Report:
    """Grade recorded evidence: loss (1), a 0-d tensor in the graph (0.5), each .grad (0.5 each),
    reg > 0 (1), N = 1 (0.5), inputs unchanged (0.5)."""
    report = Report("two_layer_loss_torch", LOSS_TORCH_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    verdicts, originals = {}, {}
    for index, (label, n, reg) in enumerate(LOSS_CASES):
        data = net_inputs(_case_seed(seed, index), n)
        originals[label] = {k: data[k] for k in ("X", "y", *PARAM_NAMES)}
        verdicts[label] = _loss_verdicts(cases[label], data, reg)
    (main, _, _), (reg_label, _, _), (single, _, _) = LOSS_CASES
    record = cases[main]
    if record["error"]:
        report.add(Item("loss", False, record["error"], 1.0))
    else:
        report.add(Item.from_verdicts("loss", [verdicts[main]["loss"]], 1.0))
    problem = _graph_problem(record)
    if problem is None:
        report.add(Item("loss in the graph", True, f"a 0-d tensor with grad_fn {record['grad_fn']}", 0.5))
    else:
        report.add(Item("loss in the graph", False, problem, 0.5))
    for k in PARAM_NAMES:
        report.add(_loss_grad_item(f"{k}.grad", k, record, verdicts[main][k], 0.5))
    report.add(_loss_case_item("reg > 0", cases[reg_label], verdicts[reg_label], 1.0))
    report.add(_loss_case_item("N = 1", cases[single], verdicts[single], 0.5))
    report.add(inputs_unchanged_item(cases, originals))
    add_notes(report, cases.values())
    return report


TWO_LAYER_LOSS_TORCH = register(
    Check("two_layer_loss_torch", "two_layer_loss_torch", LOSS_TORCH_POINTS, collect_two_layer_loss_torch)
)


def check_two_layer_loss_torch(two_layer_loss_torch: Any, *, seed: int = 0) -> float:
    """Grade ``two_layer_loss_torch`` (loss and every .grad after backward) against PyTorch; return points."""
    return run_check(TWO_LAYER_LOSS_TORCH, two_layer_loss_torch, seed=seed)


# ---------------------------------------------------------------------------------------------------
# backward_order
# ---------------------------------------------------------------------------------------------------

#: Unary operations a seed chooses from, so that each seed builds a differently named chain.
UNARY_OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "exp": torch.exp,
    "sin": torch.sin,
    "cos": torch.cos,
    "relu": torch.relu,
}

GRAPH_CASES = ("chain", "diamond", "two-layer net")


def _ops(seed: int, index: int, k: int) -> list[Callable[[torch.Tensor], torch.Tensor]]:
    rng = np.random.default_rng(_case_seed(seed, index))
    names = rng.choice(sorted(UNARY_OPS), size=k, replace=False)
    return [UNARY_OPS[str(name)] for name in names]


def build_graph(kind: str, seed: int) -> torch.Tensor:
    """The output of one graph of the check, built fresh: the same structure every time for a seed.

    * chain: ``op3(op2(op1(0.5 * x))).sum()``, a single path from the output to one leaf;
    * diamond: ``a = op1(x @ w)`` feeds three nodes, ``(op2(a) * op3(a) + a).sum()``, so a's node must
      wait for gradient from all three, and op2/op3 may run in either order;
    * two-layer net: notebook 02's loss with L2 (``reg = 0.1``): W1 and W2 are used twice (in the
      affine layers and in the penalty), X and y do not require grad.
    """
    index = GRAPH_CASES.index(kind)
    rng = np.random.default_rng(_case_seed(seed, 10 + index))
    if kind == "chain":
        x = torch.tensor(rng.standard_normal((4, 3)), requires_grad=True)
        op1, op2, op3 = _ops(seed, 10 + index, 3)
        return op3(op2(op1(0.5 * x))).sum()
    if kind == "diamond":
        x = torch.tensor(rng.standard_normal((4, 3)))
        w = torch.tensor(rng.standard_normal((3, 5)), requires_grad=True)
        op1, op2, op3 = _ops(seed, 10 + index, 3)
        a = op1(x @ w)
        return (op2(a) * op3(a) + a).sum()
    data = net_inputs(_case_seed(seed, 10 + index), 5)
    p = {k: torch.tensor(data[k], requires_grad=True) for k in PARAM_NAMES}
    X, y = torch.tensor(data["X"]), torch.tensor(data["y"])
    scores = F.linear(torch.relu(F.linear(X, p["W1"], p["b1"])), p["W2"], p["b2"])
    return F.cross_entropy(scores, y) + 0.5 * 0.1 * ((p["W1"] ** 2).sum() + (p["W2"] ** 2).sum())


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


def collect_backward_order(backward_order: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``backward_order`` on each graph and record the list of names it returns."""
    cases = {}
    for kind in GRAPH_CASES:
        outcome = call(backward_order, build_graph(kind, seed), name="backward_order")
        record: dict[str, Any] = {"error": outcome.error, "notes": outcome.notes, "names": None}
        result = outcome.result
        if outcome.ok:
            if isinstance(result, (list, tuple)) and all(isinstance(s, str) for s in result):
                record["names"] = [str(s) for s in result]
            elif isinstance(result, (list, tuple)):
                odd = next(s for s in result if not isinstance(s, str))
                record["returned"] = f"a {type(result).__name__} holding a {type(odd).__name__}"
            else:
                record["returned"] = f"a {type(result).__name__}"
        cases[kind] = record
    return {"check": "backward_order", "seed": seed, "cases": cases}


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


def grade_backward_order(evidence: Evidence) -> Report:
    """Grade recorded evidence: one item per graph (chain, diamond, two-layer net), 1 each. The graphs are
    rebuilt here from the seed; any valid order of the right nodes passes."""
    report = Report("backward_order", BACKWARD_ORDER_POINTS)
    for kind in GRAPH_CASES:
        record = evidence["cases"][kind]
        names, parents = graph_structure(build_graph(kind, evidence["seed"]))
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
        if problem:
            report.add(Item(kind, False, problem))
        else:
            report.add(Item(kind, True, f"a valid order of all {len(names)} nodes"))
    add_notes(report, evidence["cases"].values())
    return report


BACKWARD_ORDER = register(
    Check("backward_order", "backward_order", BACKWARD_ORDER_POINTS, collect_backward_order)
)


def check_backward_order(backward_order: Any, *, seed: int = 0) -> float:
    """Grade ``backward_order`` on three graphs built from the seed; any valid order passes; return points."""
    return run_check(BACKWARD_ORDER, backward_order, seed=seed)


# ---------------------------------------------------------------------------------------------------
# sgd_step
# ---------------------------------------------------------------------------------------------------

#: Parameter shapes, pairwise distinct, one of them (1, D).
SGD_SHAPES: tuple[tuple[int, ...], ...] = ((4, 3), (4,), (1, 5))


def sgd_inputs(seed: int) -> dict[str, Any]:
    """Starting values of the parameters, the coefficients of the loss, and the learning rate."""
    rng = np.random.default_rng(_case_seed(seed, 20))
    return {
        "params": [rng.standard_normal(s) for s in SGD_SHAPES],
        "coefs": [rng.standard_normal(s) for s in SGD_SHAPES],
        "lr": float(rng.uniform(0.2, 0.4)),
    }


def sgd_loss(params: list[torch.Tensor], coefs: list[np.ndarray]) -> torch.Tensor:
    """A loss whose gradient changes with the parameters: sum of c * sin(p), plus 0.5 * ||p_0||^2."""
    total = 0.5 * (params[0] ** 2).sum()
    for p, c in zip(params, coefs, strict=True):
        total = total + (torch.tensor(c) * torch.sin(p)).sum()
    return total


def sgd_gradients(values: list[np.ndarray], coefs: list[np.ndarray]) -> list[np.ndarray]:
    """The gradient of :func:`sgd_loss` at ``values``, by autograd in float64."""
    leaves = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    grads = torch.autograd.grad(sgd_loss(leaves, coefs), leaves)
    return [g.numpy().copy() for g in grads]


def _leaf_facts(tensors: list[torch.Tensor]) -> list[dict[str, Any]]:
    return [
        {
            "is_leaf": bool(t.is_leaf),
            "requires_grad": bool(t.requires_grad),
            "grad_fn": _node_name(t.grad_fn),
            "grad": freeze(_grad(t)),
            "value": freeze(t),
        }
        for t in tensors
    ]


def collect_sgd_step(sgd_step: Any, *, seed: int = 0) -> Evidence:
    """Two steps: backward, the learner's ``sgd_step(params, lr)``, a fresh backward, ``sgd_step`` again.

    The check keeps its own references to the tensors, so what it records is what happened to the
    caller's tensors (a rebinding ``p = p - lr * p.grad`` leaves them as they were).
    """
    data = sgd_inputs(seed)
    ours = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in data["params"]]
    steps: list[dict[str, Any]] = []
    for _ in range(2):
        record: dict[str, Any] = {"error": None, "notes": [], "backward_error": None}
        bwd = call(lambda: sgd_loss(ours, data["coefs"]).backward(), name="loss.backward()")
        if not bwd.ok:
            record["backward_error"] = bwd.error
            steps.append(record)
            break
        outcome = call(sgd_step, list(ours), data["lr"], name="sgd_step")
        record["error"], record["notes"] = outcome.error, outcome.notes
        record["after"] = _leaf_facts(ours)
        steps.append(record)
        if not outcome.ok:
            break
    return {"check": "sgd_step", "seed": seed, "steps": steps}


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


def _grads_cleared_item(steps: list[dict[str, Any]]) -> Item:
    name = "grads cleared"
    if _step_error(steps, 0):
        return Item(name, False, _step_error(steps, 0) or "", 0.5)
    # the facts of every step that ran come first: they say more than a later error does
    for step, record in enumerate(steps):
        for i, fact in enumerate(record.get("after", [])):
            grad = fact["grad"]
            if grad is None:
                continue
            if not isinstance(grad, np.ndarray) or np.any(grad):
                return Item(
                    name,
                    False,
                    f"after step {step + 1}, params[{i}].grad still holds a gradient: clear it after the "
                    "update (p.grad = None, or p.grad.zero_()), or the next backward adds to it",
                    0.5,
                )
    error = _step_error(steps, 1)
    if error:
        return Item(name, False, error, 0.5)
    return Item(name, True, "every .grad is None or zero after each step", 0.5)


def _leaves_item(steps: list[dict[str, Any]]) -> Item:
    name = "still leaves"
    if _step_error(steps, 0):
        return Item(name, False, _step_error(steps, 0) or "", 0.5)
    # the facts of every step that ran come first: they say more than a later error does
    for step, record in enumerate(steps):
        for i, fact in enumerate(record.get("after", [])):
            where = f"after step {step + 1}, params[{i}]"
            if not fact["requires_grad"]:
                return Item(
                    name,
                    False,
                    f"{where} no longer requires grad: the update must leave requires_grad alone "
                    "(no requires_grad_(False), no detach_())",
                    0.5,
                )
            if fact["grad_fn"] is not None or not fact["is_leaf"]:
                return Item(
                    name,
                    False,
                    f"{where} has grad_fn {fact['grad_fn']}: the update was recorded in the graph; run it "
                    "inside torch.no_grad()",
                    0.5,
                )
    error = _step_error(steps, 1)
    if error:
        return Item(name, False, error, 0.5)
    return Item(name, True, "leaves with requires_grad=True and grad_fn None", 0.5)


def grade_sgd_step(evidence: Evidence) -> Report:
    """Grade recorded evidence: the caller's tensors after one step (1) and after a second step with fresh
    gradients (1), grads cleared (0.5), still leaves that require grad (0.5)."""
    report = Report("sgd_step", SGD_STEP_POINTS)
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
                "one step", _step_verdicts("after one step,", after1, data["params"], g1, lr, [None] * 3)
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
    report.add(_grads_cleared_item(steps))
    report.add(_leaves_item(steps))
    add_notes(report, steps)
    return report


SGD_STEP = register(Check("sgd_step", "sgd_step", SGD_STEP_POINTS, collect_sgd_step))


def check_sgd_step(sgd_step: Any, *, seed: int = 0) -> float:
    """Grade ``sgd_step`` by its effect on the caller's tensors over two steps; return points."""
    return run_check(SGD_STEP, sgd_step, seed=seed)
