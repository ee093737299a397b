"""Graders still defined beside their collect halves, registered here until they move (issue 11)."""

from __future__ import annotations

from autograder.checks import beyond_basics as checks
from autograder.grading import grader

grader(checks.LINEAR_FUNCTION_FUNC)(checks.grade_linear_function_func)
grader(checks.BATCHED_LINEAR)(checks.grade_batched_linear)
grader(checks.DOUBLE_BACKWARD)(checks.grade_double_backward)
grader(checks.CTX_FEATURES)(checks.grade_ctx_features)
grader(checks.SOFTMAX_CROSS_ENTROPY_FUNCTION)(checks.grade_softmax_cross_entropy_function)
grader(checks.LEGENDRE)(checks.grade_legendre)
grader(checks.FIT_LEGENDRE)(checks.grade_fit_legendre)
