"""The graders of notebook 06 (see :mod:`autograder.checks.attention` for their inputs), one module per
exercise; importing this package registers every one of them."""

from autograder.grading.attention import flash, memory, op, plain, saved

__all__ = ["flash", "memory", "op", "plain", "saved"]
