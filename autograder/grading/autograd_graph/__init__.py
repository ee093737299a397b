"""The graders of notebook 03's checks, one module per exercise (see :mod:`autograder.checks.autograd_graph`
for their inputs). Importing this package registers every grader of the notebook."""

from __future__ import annotations

from autograder.grading.autograd_graph import backward_order, sgd_step, two_layer_loss
from autograder.grading.autograd_graph.backward_order import graph_structure, order_problem

__all__ = ["backward_order", "graph_structure", "order_problem", "sgd_step", "two_layer_loss"]
