"""The graded checks, one module per notebook; test cells import the ``check_*`` functions from here."""

from autograder.checks.core import CHECKS
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
    "check_fit_cubic",
    "check_linear_layer",
    "check_mse_loss",
    "check_numerical_gradient",
    "check_relu",
    "check_sigmoid",
    "check_softmax_cross_entropy",
    "check_tanh",
    "check_train_two_layer_net",
    "check_two_layer_net",
]
