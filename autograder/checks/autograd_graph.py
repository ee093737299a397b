"""Checks for notebook 03, autograd and the computational graph.

* ``two_layer_loss_torch``: notebook 02's network loss written with torch tensors; the check calls
  ``loss.backward()`` itself and compares the loss and every ``.grad`` with the reference.
* ``backward_order``: the learner lists the grad_fn class names of a graph in an order backward can
  run them. Any valid order is accepted: grading rebuilds the same graph from the seed and searches
  for an assignment of the listed names to the graph's nodes that is a topological order.
* ``sgd_step``: an in-place update of leaf tensors under ``torch.no_grad()`` that clears the grads,
  graded on its effect over two steps with fresh gradients in between.

The graders, with the mistakes each check recognises, are in :mod:`autograder.grading.autograd_graph`.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from autograder.checks.calling import call
from autograder.checks.core import Check, Evidence, case_seed, freeze, register, run_check
from autograder.checks.two_layer_net import (
    EDGE_CASE,
    EDGE_N,
    LARGE_CASE,
    PARAM_NAMES,
    call_naming_stubs,
    large_score_inputs,
    leave_out_last_class,
    net_inputs,
)

#: Added to the case index, so that notebook 03's checks draw other data than notebook 02's.
CASE_OFFSET = 300


def notebook_case_seed(seed: int, index: int) -> int:
    """The seed of this notebook's ``index``-th case: :func:`case_seed`, offset from notebook 02's."""
    return case_seed(seed, CASE_OFFSET + index)


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


def loss_cases(seed: int) -> dict[str, tuple[dict[str, np.ndarray], float]]:
    """Every case of the loss check, by label: its inputs and its ``reg``. After the cases above come
    notebook 02's size-1 edge (D = H = 1) and its scores of ~1000, where -log(softmax) is inf; the labels
    of the reg case leave out the last class, as in notebook 02."""
    cases = {
        label: (net_inputs(notebook_case_seed(seed, i), n), reg)
        for i, (label, n, reg) in enumerate(LOSS_CASES)
    }
    leave_out_last_class(cases[LOSS_CASES[1][0]][0], seed)
    cases[EDGE_CASE] = (net_inputs(notebook_case_seed(seed, len(LOSS_CASES)), EDGE_N, d=1, h=1), 0.0)
    cases[LARGE_CASE] = (large_score_inputs(notebook_case_seed(seed, len(LOSS_CASES) + 1)), 0.0)
    return cases


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
    # X.requires_grad_() changes the caller's tensor without changing a value (docs/checks.md item 10)
    record["X_requires_grad"] = bool(X.requires_grad)
    return record


def collect_two_layer_loss_torch(two_layer_loss_torch: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``two_layer_loss_torch`` on every case; the check calls backward itself."""
    cases = {
        label: _run_loss(two_layer_loss_torch, data, reg) for label, (data, reg) in loss_cases(seed).items()
    }
    return {"check": "two_layer_loss_torch", "seed": seed, "cases": cases}


TWO_LAYER_LOSS_TORCH = register(
    Check("two_layer_loss_torch", "two_layer_loss_torch", 4.0, collect_two_layer_loss_torch)
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
#: A hidden test's fourth graph (docs/checks.md item 32): one tensor used twice by one node (``a * a``)
#: and a sum whose first operand is the shared tensor (``b + op2(b) * op3(b)``). A walk that counts
#: parents per link but releases them per distinct child, or a stack that marks a node visited when it
#: is pushed, gives a valid order on the other three graphs and not on this one.
REPEATED_CASE = "a tensor used twice"


def graph_cases(seed: int) -> tuple[str, ...]:
    """The graphs of a run: the visible call's three, and for any other seed the repeated-use graph too."""
    return GRAPH_CASES if seed == 0 else (*GRAPH_CASES, REPEATED_CASE)


#: The hidden activations of a hidden test's two-layer net (the visible call's is ReLU).
HIDDEN_ACTIVATIONS = ("tanh", "sigmoid")


def _ops(seed: int, index: int, k: int) -> list[Callable[[torch.Tensor], torch.Tensor]]:
    rng = np.random.default_rng(notebook_case_seed(seed, index))
    names = rng.choice(sorted(UNARY_OPS), size=k, replace=False)
    return [UNARY_OPS[str(name)] for name in names]


def build_graph(kind: str, seed: int) -> torch.Tensor:
    """The output of one graph of the check, built fresh: the same structure every time for a seed.

    * chain: ``op3(op2(op1(0.5 * x))).sum()``, a single path from the output to one leaf;
    * diamond: ``a = op1(x @ w)`` feeds three nodes, ``(op2(a) * op3(a) + a).sum()``, so a's node must
      wait for gradient from all three, and op2/op3 may run in either order;
    * a tensor used twice (hidden seeds only): ``a = op1(x @ w)``, ``b = a * a``,
      ``(b + op2(b) * op3(b)).sum()``;
    * two-layer net: notebook 02's loss with L2 (``reg = 0.1``): W1 and W2 are used twice (in the
      affine layers and in the penalty), X and y do not require grad. Its hidden activation is ReLU for
      the visible seed 0 and one of :data:`HIDDEN_ACTIVATIONS`, drawn, for any other: an order
      recorded for another seed's graph names nodes this one does not have.
    """
    index = (*GRAPH_CASES, REPEATED_CASE).index(kind)
    rng = np.random.default_rng(notebook_case_seed(seed, 10 + index))
    if kind == "chain":
        x = torch.tensor(rng.standard_normal((4, 3)), requires_grad=True)
        op1, op2, op3 = _ops(seed, 10 + index, 3)
        return op3(op2(op1(0.5 * x))).sum()
    if kind in ("diamond", REPEATED_CASE):
        x = torch.tensor(rng.standard_normal((4, 3)))
        w = torch.tensor(rng.standard_normal((3, 5)), requires_grad=True)
        op1, op2, op3 = _ops(seed, 10 + index, 3)
        a = op1(x @ w)
        if kind == "diamond":
            return (op2(a) * op3(a) + a).sum()
        b = a * a
        return (b + op2(b) * op3(b)).sum()
    data = net_inputs(notebook_case_seed(seed, 10 + index), 5)
    p = {k: torch.tensor(data[k], requires_grad=True) for k in PARAM_NAMES}
    X, y = torch.tensor(data["X"]), torch.tensor(data["y"])
    activation = torch.relu if seed == 0 else UNARY_OPS[str(rng.choice(HIDDEN_ACTIVATIONS))]
    scores = F.linear(activation(F.linear(X, p["W1"], p["b1"])), p["W2"], p["b2"])
    return F.cross_entropy(scores, y) + 0.5 * 0.1 * ((p["W1"] ** 2).sum() + (p["W2"] ** 2).sum())


def collect_backward_order(backward_order: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``backward_order`` on each graph and record the list of names it returns."""
    cases = {}
    for kind in graph_cases(seed):
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


BACKWARD_ORDER = register(Check("backward_order", "backward_order", 3.0, collect_backward_order))


def check_backward_order(backward_order: Any, *, seed: int = 0) -> float:
    """Grade ``backward_order`` on three graphs (four in a hidden test) built from the seed; any valid order
    passes; return points."""
    return run_check(BACKWARD_ORDER, backward_order, seed=seed)


# ---------------------------------------------------------------------------------------------------
# sgd_step
# ---------------------------------------------------------------------------------------------------

#: Parameter shapes, pairwise distinct, one of them (1, D), one a 0-d scalar (a slice p[:] fails there).
SGD_SHAPES: tuple[tuple[int, ...], ...] = ((4, 3), (4,), (1, 5), ())


def sgd_inputs(seed: int) -> dict[str, Any]:
    """Starting values of the parameters, the coefficients of the loss, and the learning rate."""
    rng = np.random.default_rng(notebook_case_seed(seed, 20))
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


def _leaf_facts(tensors: list[torch.Tensor]) -> list[dict[str, Any]]:
    return [
        {
            "is_leaf": bool(t.is_leaf),
            "requires_grad": bool(t.requires_grad),
            "grad_fn": _node_name(t.grad_fn),
            "grad": freeze(_grad(t)),
            "value": freeze(t),
            "version": int(t._version),  # in-place changes autograd saw: .data bypasses the counter
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


SGD_STEP = register(Check("sgd_step", "sgd_step", 3.0, collect_sgd_step))


def check_sgd_step(sgd_step: Any, *, seed: int = 0) -> float:
    """Grade ``sgd_step`` by its effect on the caller's tensors over two steps; return points."""
    return run_check(SGD_STEP, sgd_step, seed=seed)
