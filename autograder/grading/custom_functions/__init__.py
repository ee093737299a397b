"""The graders of notebook 04's checks, one module per exercise (see :mod:`autograder.checks.custom_functions`
for their inputs).

The evidence of a Function is the case records of :mod:`autograder.checks.functions`; every item
reads them through :func:`~autograder.grading.toolkit.step_error` (each step blamed for its own
failure) and a backward's return value through
:func:`~autograder.grading.toolkit.backward_returns` (the one rule for what a correct answer is).
Importing this package registers every grader of the notebook.
"""

from __future__ import annotations

from autograder.grading.custom_functions import (
    backward_by_hand,
    elementwise,
    linear_function,
    linear_module,
    max_jacobian_error,
    train_spiral,
)

__all__ = [
    "backward_by_hand",
    "elementwise",
    "max_jacobian_error",
    "linear_function",
    "linear_module",
    "train_spiral",
]
