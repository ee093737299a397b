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

from autograder.checks.beyond_basics.ctx_features import CTX_FEATURES as CTX_FEATURES
from autograder.checks.beyond_basics.ctx_features import check_ctx_features as check_ctx_features
from autograder.checks.beyond_basics.double_backward import DOUBLE_BACKWARD as DOUBLE_BACKWARD
from autograder.checks.beyond_basics.double_backward import check_double_backward as check_double_backward
from autograder.checks.beyond_basics.legendre import FIT_INIT as FIT_INIT
from autograder.checks.beyond_basics.legendre import FIT_LEGENDRE as FIT_LEGENDRE
from autograder.checks.beyond_basics.legendre import FIT_LR as FIT_LR
from autograder.checks.beyond_basics.legendre import LEGENDRE as LEGENDRE
from autograder.checks.beyond_basics.legendre import check_fit_legendre as check_fit_legendre
from autograder.checks.beyond_basics.legendre import check_legendre as check_legendre
from autograder.checks.beyond_basics.legendre import fit_legendre_data as fit_legendre_data
from autograder.checks.beyond_basics.linear import BATCHED_LINEAR as BATCHED_LINEAR
from autograder.checks.beyond_basics.linear import LINEAR_FUNCTION_FUNC as LINEAR_FUNCTION_FUNC
from autograder.checks.beyond_basics.linear import check_batched_linear as check_batched_linear
from autograder.checks.beyond_basics.linear import check_linear_function_func as check_linear_function_func
from autograder.checks.beyond_basics.softmax_cross_entropy import (
    SOFTMAX_CROSS_ENTROPY_FUNCTION as SOFTMAX_CROSS_ENTROPY_FUNCTION,
)
from autograder.checks.beyond_basics.softmax_cross_entropy import (
    check_softmax_cross_entropy_function as check_softmax_cross_entropy_function,
)
