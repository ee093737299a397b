"""Drawing autograd's computational graph with matplotlib (no graphviz needed). Introduced in notebook 03.

The picture places each node on the row of its shortest distance from the output. That is a
drawing convention, not an order backward can run in: a node reached by a short path and by a long
one sits high up, and the arrow from the long path points upward into it. Such arrows are drawn in a
second colour, because they are exactly where "closest to the output first" goes wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

#: Colours of a downward arrow, of an upward one, and of the boxes (operations, leaves).
_DOWN, _UP = "0.35", "C3"
_OP_FACE, _LEAF_FACE = "#dbe9f6", "#e6f2d9"


@dataclass(frozen=True)
class GraphLayout:
    """Nodes (grad_fn objects) with their label and (column, row), and edges as pairs of node indices.

    An edge ``(i, j)`` means node ``j`` is in node ``i``'s ``next_functions``: backward sends
    gradient from ``i`` to ``j``.
    """

    labels: tuple[str, ...]
    positions: tuple[tuple[float, int], ...]
    edges: tuple[tuple[int, int], ...]

    @property
    def upward_edges(self) -> tuple[tuple[int, int], ...]:
        """Edges that do not point to a lower row: the target has a shorter path from the output."""
        return tuple((i, j) for i, j in self.edges if self.positions[j][1] <= self.positions[i][1])


def _leaf_label(node: Any, names: Mapping[int, str]) -> str:
    variable = getattr(node, "variable", None)
    if variable is None:
        return type(node).__name__
    name = names.get(id(variable))
    shape = "(" + ", ".join(str(s) for s in variable.shape) + ("," if variable.dim() == 1 else "") + ")"
    return f"{type(node).__name__}\n{name} {shape}" if name else f"{type(node).__name__}\n{shape}"


def graph_layout(result: Any, names: Mapping[str, Any] | None = None) -> GraphLayout:
    """Lay out the graph behind ``result`` (a tensor with a ``grad_fn``) by breadth-first search.

    ``names`` maps a label to a leaf tensor (e.g. ``{"W1": W1}``) so that its AccumulateGrad box
    says which tensor it writes ``.grad`` into. Raises ``ValueError`` when ``result`` has no graph.
    """
    root = getattr(result, "grad_fn", None)
    if root is None:
        raise ValueError(
            "this tensor has no grad_fn, so there is no graph to draw: it is a leaf, or it was computed "
            "from tensors that do not require grad (or under torch.no_grad(), or after .detach())"
        )
    by_name = {id(t): label for label, t in (names or {}).items()}
    index = {id(root): 0}
    nodes, rows = [root], [0]
    edges: list[tuple[int, int]] = []
    frontier = 0
    while frontier < len(nodes):  # breadth first, so that a node's row is its shortest distance
        node = nodes[frontier]
        for child, _ in node.next_functions:
            if child is None:  # an input that does not require grad: nothing flows there
                continue
            if id(child) not in index:
                index[id(child)] = len(nodes)
                nodes.append(child)
                rows.append(rows[frontier] + 1)
            edges.append((frontier, index[id(child)]))
        frontier += 1
    columns: dict[int, int] = {}
    positions = []
    for row in rows:
        columns[row] = columns.get(row, 0) + 1
    placed: dict[int, int] = {}
    for row in rows:
        # centre each row: its k nodes at -(k-1)/2 .. (k-1)/2
        positions.append((placed.get(row, 0) - (columns[row] - 1) / 2, row))
        placed[row] = placed.get(row, 0) + 1
    labels = tuple(_leaf_label(n, by_name) for n in nodes)
    return GraphLayout(labels, tuple(positions), tuple(edges))


def draw_graph(
    result: Any, names: Mapping[str, Any] | None = None, ax: Axes | None = None, title: str | None = None
) -> Axes:
    """Draw the computational graph behind ``result``: one box per grad_fn, an arrow per gradient edge.

    Introduced in notebook 03. The output's grad_fn is at the top; arrows follow ``next_functions``,
    the way gradient flows during backward. Leaves' AccumulateGrad boxes are green, labelled with
    the name given in ``names`` (``{"W1": W1, ...}``) and the leaf's shape. An arrow drawn in red points
    upward: its target is also reachable by a shorter path (see the module docstring).
    """
    layout = graph_layout(result, names)
    n_rows = max(r for _, r in layout.positions) + 1
    width = max(sum(1 for _, r in layout.positions if r == row) for row in range(n_rows))
    if ax is None:
        _, ax = plt.subplots(figsize=(max(4.0, 2.3 * width), max(2.5, 0.9 * n_rows)))
    upward = set(layout.upward_edges)
    for i, j in layout.edges:
        (x0, y0), (x1, y1) = layout.positions[i], layout.positions[j]
        up = (i, j) in upward
        ax.annotate(
            "",
            xy=(x1, -y1),
            xytext=(x0, -y0),
            arrowprops={
                "arrowstyle": "-|>",
                "color": _UP if up else _DOWN,
                "shrinkA": 14,
                "shrinkB": 14,
                "connectionstyle": "arc3,rad=0.35" if up else "arc3,rad=0.0",
            },
        )
    for label, (x, y) in zip(layout.labels, layout.positions, strict=True):
        leaf = label.startswith("AccumulateGrad")
        ax.text(
            x,
            -y,
            label,
            ha="center",
            va="center",
            fontsize=8,
            bbox={
                "boxstyle": "round,pad=0.3",
                "facecolor": _LEAF_FACE if leaf else _OP_FACE,
                "edgecolor": "0.5",
            },
        )
    half = (width - 1) / 2 + 0.7
    ax.set_xlim(-half, half)
    ax.set_ylim(-(n_rows - 1) - 0.6, 0.6)
    ax.axis("off")
    if title:
        ax.set_title(title)
    return ax
