"""The graded checks, one module per notebook; test cells import the ``check_*`` functions from here."""

from autograder.checks.autograd_graph import check_backward_order, check_sgd_step, check_two_layer_loss_torch
from autograder.checks.beyond_basics import (
    check_batched_linear,
    check_ctx_features,
    check_double_backward,
    check_fit_legendre,
    check_legendre,
    check_linear_function_func,
    check_softmax_cross_entropy_function,
)
from autograder.checks.core import CHECKS
from autograder.checks.custom_functions import (
    check_backward_by_hand,
    check_exp,
    check_linear_function,
    check_linear_module,
    check_max_jacobian_error,
    check_mul_constant,
    check_my_relu,
    check_train_spiral,
)
from autograder.checks.linear_layer import (
    check_fit_cubic,
    check_linear_layer,
    check_mse_loss,
    check_numerical_gradient,
)
from autograder.checks.two_layer_net import (
    check_relu,
    check_sigmoid,
    check_softmax_cross_entropy,
    check_tanh,
    check_train_two_layer_net,
    check_two_layer_net,
)

__all__ = [
    "CHECKS",
    "check_batched_linear",
    "check_ctx_features",
    "check_double_backward",
    "check_fit_legendre",
    "check_legendre",
    "check_linear_function_func",
    "check_softmax_cross_entropy_function",
    "check_backward_order",
    "check_fit_cubic",
    "check_linear_layer",
    "check_mse_loss",
    "check_numerical_gradient",
    "check_relu",
    "check_sgd_step",
    "check_sigmoid",
    "check_softmax_cross_entropy",
    "check_tanh",
    "check_train_two_layer_net",
    "check_two_layer_net",
    "check_two_layer_loss_torch",
    "check_backward_by_hand",
    "check_exp",
    "check_linear_function",
    "check_linear_module",
    "check_max_jacobian_error",
    "check_mul_constant",
    "check_my_relu",
    "check_train_spiral",
]
