"""The graders of notebook 05's checks, one module per exercise (see :mod:`autograder.checks.beyond_basics`
for their inputs).

Importing this package registers every grader of the notebook. The items judge each recorded step on
its own (:func:`~autograder.grading.toolkit.step_error`: the forward's values on the forward alone)
and read what a backward returned by the one rule for a correct answer
(:func:`~autograder.grading.toolkit.backward_returns`).
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
