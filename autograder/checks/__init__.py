"""The collect half of the graded checks, one module per notebook; test cells import ``check_*`` here.

Importing this package imports nothing else: ``from autograder.checks import check_linear_layer``
loads only the module of notebook 01, which imports numpy and no PyTorch, so the numpy notebooks
work in a graded kernel that has no PyTorch at all.
"""

from __future__ import annotations

import importlib
from typing import Any

from autograder.checks.core import CHECKS, Check, Evidence, all_checks, run_check

#: The module that defines each ``check_*`` function a test cell may call.
ENTRY_POINTS = {
    "linear_layer": (
        "check_fit_cubic",
        "check_linear_layer",
        "check_mse_loss",
        "check_numerical_gradient",
    ),
    "two_layer_net": (
        "check_relu",
        "check_sigmoid",
        "check_softmax_cross_entropy",
        "check_tanh",
        "check_train_two_layer_net",
        "check_two_layer_net",
    ),
    "autograd_graph": ("check_backward_order", "check_sgd_step", "check_two_layer_loss_torch"),
    "custom_functions": (
        "check_backward_by_hand",
        "check_exp",
        "check_linear_function",
        "check_linear_module",
        "check_max_jacobian_error",
        "check_mul_constant",
        "check_my_relu",
        "check_train_spiral",
    ),
    "beyond_basics": (
        "check_batched_linear",
        "check_ctx_features",
        "check_double_backward",
        "check_fit_legendre",
        "check_legendre",
        "check_linear_function_func",
        "check_softmax_cross_entropy_function",
    ),
    "attention": (
        "check_attention",
        "check_attention_op",
        "check_flash_attention",
        "check_flash_memory",
        "check_saved_tensors",
    ),
}
_MODULE_OF = {name: module for module, names in ENTRY_POINTS.items() for name in names}


def check_name(function: str) -> str | None:
    """The name of the check that the ``check_*`` function ``function`` runs, or None when there is no such
    function; without importing any check (``test_declarations`` holds :data:`ENTRY_POINTS` to them)."""
    return function.removeprefix("check_") if function in _MODULE_OF else None


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'autograder.checks' has no attribute {name!r}")
    return getattr(importlib.import_module(f"autograder.checks.{module}"), name)


__all__ = ["CHECKS", "Check", "Evidence", "all_checks", "check_name", "run_check", *sorted(_MODULE_OF)]
