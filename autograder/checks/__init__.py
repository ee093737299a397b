"""The graded checks, one module per notebook; test cells import the ``check_*`` functions from here."""

from autograder.checks.core import CHECKS
from autograder.checks.linear_layer import check_linear_layer

__all__ = ["CHECKS", "check_linear_layer"]
