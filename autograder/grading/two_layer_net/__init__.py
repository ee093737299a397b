"""The graders of notebook 02's checks, one module per exercise (see :mod:`autograder.checks.two_layer_net`
for their inputs). Importing this package registers every grader of the notebook."""

from __future__ import annotations

from autograder.grading.two_layer_net import activations, net, softmax, train

__all__ = ["activations", "net", "softmax", "train"]
