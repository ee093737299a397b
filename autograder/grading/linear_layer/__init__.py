"""The graders of notebook 01's checks, one module per exercise (see :mod:`autograder.checks.linear_layer`
for their inputs). Importing this package registers every grader of the notebook."""

from __future__ import annotations

from autograder.grading.linear_layer import fit_cubic, linear, mse_loss, numerical_gradient
from autograder.grading.linear_layer.linear import grade_linear_layer
from autograder.grading.linear_layer.mse_loss import grade_mse_loss
from autograder.grading.linear_layer.numerical_gradient import forward_difference

__all__ = [
    "fit_cubic",
    "forward_difference",
    "grade_linear_layer",
    "grade_mse_loss",
    "linear",
    "mse_loss",
    "numerical_gradient",
]
