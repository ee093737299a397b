"""Checks for notebook 05, beyond the basics of custom autograd Functions: the collect half.

``LinearFunctionFunc`` (forward without ctx plus ``setup_context``: torch.func.vmap and grad),
``LinearFunction`` for any number of leading batch dimensions, double backward (``Cube`` built from
torch operations, ``NumpyCube`` marked ``once_differentiable``), the ctx features
(``MaxWithIndex``, ``InplaceReLU``, ``SquareAndCube``), a fused ``SoftmaxCrossEntropy`` and
PyTorch's ``LegendrePolynomial3`` with the curve fit of "Learning PyTorch with Examples".

Every Function runs through the one harness of :mod:`autograder.checks.functions`, step by step
(apply, backward through autograd, backward called directly, second derivatives), each step with
its own error. The evidence is raw numbers and raw observations (whether an output requires grad,
whether the output is the input object, what ``ctx`` was told, what backward received, the type and
message of an exception). One module per exercise (the two linear Functions share one);
the graders are in :mod:`autograder.grading.beyond_basics`, module for module.
"""

from __future__ import annotations

from autograder.checks.beyond_basics.ctx_features import CTX_FEATURES, check_ctx_features
from autograder.checks.beyond_basics.double_backward import DOUBLE_BACKWARD, check_double_backward
from autograder.checks.beyond_basics.legendre import (
    FIT_INIT,
    FIT_LEGENDRE,
    FIT_LR,
    LEGENDRE,
    check_fit_legendre,
    check_legendre,
    fit_legendre_data,
)
from autograder.checks.beyond_basics.linear import (
    BATCHED_LINEAR,
    LINEAR_FUNCTION_FUNC,
    check_batched_linear,
    check_linear_function_func,
)
from autograder.checks.beyond_basics.softmax_cross_entropy import (
    SOFTMAX_CROSS_ENTROPY_FUNCTION,
    check_softmax_cross_entropy_function,
)

__all__ = [
    "BATCHED_LINEAR",
    "CTX_FEATURES",
    "DOUBLE_BACKWARD",
    "FIT_INIT",
    "FIT_LEGENDRE",
    "FIT_LR",
    "LEGENDRE",
    "LINEAR_FUNCTION_FUNC",
    "SOFTMAX_CROSS_ENTROPY_FUNCTION",
    "check_batched_linear",
    "check_ctx_features",
    "check_double_backward",
    "check_fit_legendre",
    "check_legendre",
    "check_linear_function_func",
    "check_softmax_cross_entropy_function",
    "fit_legendre_data",
]
