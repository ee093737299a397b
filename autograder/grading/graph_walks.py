"""Two wrong walks of an autograd graph that give a valid backward order on some graphs, replayed here
so that ``backward_order``'s feedback names the one a learner wrote only when its output is exactly
what the learner returned (docs/checks.md item 28).

* Counting parents per link but releasing them per distinct child (Kahn's algorithm with a ``set`` of
  children on one side only): a node used twice by one parent (``a * a``) never reaches zero, and it
  and everything below it are missing from the list. Any queue order gives the same set of nodes, so
  this one is recognised by the names listed, not by their order.
* A depth-first stack that marks a node visited when it is pushed: a node pushed by one parent and
  reached again from another is not pushed again, so the second parent can finish before it. Its
  order depends on the order the children are pushed in; both orders are replayed.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

KAHN_PER_DISTINCT_CHILD = (
    "a node used twice by one parent (as in a * a, whose node has the same child twice in "
    "next_functions) never became ready: its parents are counted once per link but released once per "
    "distinct child. Count and release the same way, both per entry of next_functions"
)
MARKED_WHEN_PUSHED = (
    "a node is marked visited when it is pushed on the stack, so a parent that reaches it again later "
    "finishes before it. Mark a node when it is expanded (popped the first time), or use the recursive "
    "walk, whose visited set is filled on entry"
)


def _children(node: Any) -> list[Any]:
    return [child for child, _ in node.next_functions if child is not None]


def kahn_per_distinct_child(result: torch.Tensor) -> list[str]:
    """The names a Kahn walk lists when it counts parents per link and releases per distinct child."""
    root, waiting, stack, seen = result.grad_fn, Counter(), [result.grad_fn], {result.grad_fn}
    while stack:
        for child in _children(stack.pop()):
            waiting[child] += 1
            if child not in seen:
                seen.add(child)
                stack.append(child)
    listed, ready = [], [root]
    while ready:
        node = ready.pop()
        listed.append(type(node).__name__)
        for child in dict.fromkeys(_children(node)):
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    return listed


def marked_when_pushed(result: torch.Tensor, reverse: bool) -> list[str]:
    """The names a depth-first post-order lists, reversed, when its stack marks nodes when pushed."""
    stack, seen, finished = [(result.grad_fn, False)], {result.grad_fn}, []
    while stack:
        node, expanded = stack.pop()
        if expanded:
            finished.append(node)
            continue
        stack.append((node, True))
        children = _children(node)
        for child in reversed(children) if reverse else children:
            if child not in seen:
                seen.add(child)
                stack.append((child, False))
    return [type(n).__name__ for n in reversed(finished)]


def recognised_walk(listed: list[str], result: torch.Tensor) -> str | None:
    """The mistake whose replay on ``result`` returns exactly ``listed``, or None.

    Called only for a list that is no valid order, so a replay that happens to be valid on this graph
    cannot be blamed for it.
    """
    walks = [marked_when_pushed(result, reverse) for reverse in (False, True)]
    if listed in walks:
        return MARKED_WHEN_PUSHED
    kahn = kahn_per_distinct_child(result)
    # on a graph without a repeated link this walk lists every node: then it explains no mistake
    if len(kahn) < len(walks[0]) and Counter(kahn) == Counter(listed):
        return KAHN_PER_DISTINCT_CHILD
    return None
