"""The grader of notebook 03's backward order: the learner's order of the graph's nodes, checked
against the graph itself."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import torch

from autograder.checks.autograd_graph import BACKWARD_ORDER, build_graph, graph_cases
from autograder.checks.core import Evidence
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.graph_walks import recognised_walk
from autograder.grading.toolkit import add_notes


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
            "this is the order reversed. Likely mistake: the nodes listed leaves first, in an order the "
            "forward pass could run (a post-order walk not reversed, say): backward starts at the output's "
            "grad_fn and ends at the leaves' AccumulateGrad nodes."
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
            report.add(Item(kind, False, _not_names(record.get("returned", "something else"))))
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


#: A returned list whose odd element is a node of the graph itself.
_HOLDS_A_NODE = re.compile(r"holding a \w*(Backward\d*|AccumulateGrad)$")


def _not_names(returned: str) -> str:
    """Why a returned value that is not a list of names is wrong; a list of the nodes themselves is named."""
    text = (
        f"backward_order returned {returned}; return a list of strings, the class names type(node).__name__ "
        "such as 'AddmmBackward0'"
    )
    if _HOLDS_A_NODE.search(returned):
        text += ". Likely mistake: the nodes themselves listed, not their names: append type(node).__name__"
    return text
