"""The graders of notebook 05's checks, one module per exercise (see :mod:`autograder.checks.beyond_basics`
for their inputs).

Each item reads the case records of :mod:`autograder.checks.functions` through
:func:`~autograder.grading.toolkit.step_error` (each step blamed for its own failure: the forward's
values are judged on the forward alone) and a backward's return value through
:func:`~autograder.grading.toolkit.backward_returns` (the one rule for what a correct answer is).
Importing this package registers every grader of the notebook.
"""

from __future__ import annotations

from autograder.grading.beyond_basics import (
    ctx_features,
    double_backward,
    legendre,
    linear,
    softmax_cross_entropy,
)

__all__ = ["ctx_features", "double_backward", "legendre", "linear", "softmax_cross_entropy"]
