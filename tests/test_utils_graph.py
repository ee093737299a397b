"""utils.draw_graph and its layout: every node once, every edge, rows by shortest distance, clear errors.

Plots run on the Agg backend (MPLBACKEND=Agg, set by conftest.py before anything imports pyplot).
"""

from __future__ import annotations

import warnings

import matplotlib.pyplot as plt
import matplotlib.text
import pytest
import torch

from backprop_utils import draw_graph
from backprop_utils.graph import graph_layout


def _diamond():
    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    a = torch.exp(x)
    return x, (torch.sin(a) * torch.cos(a) + a).sum()


def test_layout_lists_every_node_once_with_its_edges():
    x, out = _diamond()
    layout = graph_layout(out, names={"x": x})
    names = [label.split("\n")[0] for label in layout.labels]
    assert sorted(names) == sorted(
        [
            "SumBackward0",
            "AddBackward0",
            "MulBackward0",
            "ExpBackward0",
            "SinBackward0",
            "CosBackward0",
            "AccumulateGrad",
        ]
    )
    assert len(layout.edges) == 8
    by_name = {n: i for i, n in enumerate(names)}
    expected = {
        ("SumBackward0", "AddBackward0"),
        ("AddBackward0", "MulBackward0"),
        ("AddBackward0", "ExpBackward0"),
        ("MulBackward0", "SinBackward0"),
        ("MulBackward0", "CosBackward0"),
        ("SinBackward0", "ExpBackward0"),
        ("CosBackward0", "ExpBackward0"),
        ("ExpBackward0", "AccumulateGrad"),
    }
    assert {(names[i], names[j]) for i, j in layout.edges} == expected
    assert layout.positions[by_name["SumBackward0"]][1] == 0
    assert layout.positions[by_name["ExpBackward0"]][1] == 2  # shortest path: Sum -> Add -> Exp


def test_upward_edges_are_the_ones_into_a_node_with_a_shorter_path():
    _, out = _diamond()
    layout = graph_layout(out)
    names = [label.split("\n")[0] for label in layout.labels]
    assert {(names[i], names[j]) for i, j in layout.upward_edges} == {
        ("SinBackward0", "ExpBackward0"),
        ("CosBackward0", "ExpBackward0"),
    }


def test_leaf_labels_name_and_shape_and_none_inputs_are_skipped():
    W = torch.ones(3, 2, dtype=torch.float64, requires_grad=True)
    X = torch.ones(4, 2, dtype=torch.float64)  # does not require grad: a None in next_functions
    out = ((X @ W.T) ** 2).sum() + (W**2).sum()
    layout = graph_layout(out, names={"W": W})
    leaves = [label for label in layout.labels if label.startswith("AccumulateGrad")]
    assert leaves == ["AccumulateGrad\nW (3, 2)"]  # W is used twice but has one AccumulateGrad node
    unnamed = graph_layout(out)
    assert "AccumulateGrad\n(3, 2)" in unnamed.labels


def test_draw_graph_draws_a_box_per_node_and_an_arrow_per_edge(capfd):
    x, out = _diamond()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = draw_graph(out, names={"x": x}, title="diamond")
    layout = graph_layout(out, names={"x": x})
    annotations = [t for t in ax.texts if isinstance(t, matplotlib.text.Annotation)]
    boxes = [t for t in ax.texts if not isinstance(t, matplotlib.text.Annotation)]
    assert len(annotations) == len(layout.edges)
    assert sorted(t.get_text() for t in boxes) == sorted(layout.labels)
    assert ax.get_title() == "diamond"
    plt.close("all")
    assert capfd.readouterr().err == ""


def test_draw_graph_on_given_axes_and_without_side_effects():
    x, out = _diamond()
    fig, ax = plt.subplots()
    assert draw_graph(out, ax=ax) is ax
    out.backward()  # drawing did not consume or change the graph
    assert x.grad is not None
    plt.close(fig)


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.ones(3, requires_grad=True),  # a leaf
        lambda: torch.ones(3) * 2,  # nothing requires grad
        lambda: (torch.ones(3, requires_grad=True) * 2).detach(),  # cut off
    ],
)
def test_no_graph_is_a_clear_error(make):
    with pytest.raises(ValueError, match="no grad_fn"):
        draw_graph(make())
