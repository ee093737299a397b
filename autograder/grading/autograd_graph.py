"""Graders still defined beside their collect halves, registered here until they move (issue 11)."""

from __future__ import annotations

from autograder.checks import autograd_graph as checks
from autograder.grading import grader

grader(checks.TWO_LAYER_LOSS_TORCH)(checks.grade_two_layer_loss_torch)
grader(checks.BACKWARD_ORDER)(checks.grade_backward_order)
grader(checks.SGD_STEP)(checks.grade_sgd_step)
