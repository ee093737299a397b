"""Checks for notebook 04, custom ``torch.autograd.Function`` subclasses: the collect half.

* ``mul_constant``, ``exp``, ``my_relu``: one check per elementwise Function (1 point each), so that
  each is graded and reported on its own, as the activations of notebook 02 are.
* ``linear_function``: PyTorch's ``LinearFunction``, the centre of the notebook.
* ``backward_by_hand``: what ``out.grad_fn.apply(grad)`` returns.
* ``max_jacobian_error``: analytical against numerical Jacobian, in float64 and in float32.
* ``linear_module``: an ``nn.Module`` built on ``LinearFunction``, initialised like ``nn.Linear``.
* ``train_spiral``: the Part I spiral classifier trained with the learner's ``Linear`` and with
  ``nn.Linear``, which must give the same losses step by step.

Every Function runs through the one harness of :mod:`autograder.checks.functions`, four ways,
because each way hides some mistakes: ``backward`` called directly on the ``grad_fn`` (the only way
to see the exact shape of every returned gradient: the autograd engine silently sum-reduces a
``grad_bias`` of shape (N, out), docs/checks.md item 8), autograd with a random upstream gradient,
``.sum()`` (a stride-0 upstream gradient that exposes in-place writes into ``grad_output``), and the
full float64 Jacobian, gradcheck's view. ``ctx`` itself is inspected too: tensors kept as ``ctx``
attributes instead of going through ``save_for_backward`` pass all four (docs/checks.md item 12).
One module per exercise; the graders are in :mod:`autograder.grading.custom_functions`, module for
module.
"""

from __future__ import annotations

from autograder.checks.custom_functions.backward_by_hand import BACKWARD_BY_HAND, check_backward_by_hand
from autograder.checks.custom_functions.elementwise import (
    EXP,
    MUL_CONSTANT,
    MY_RELU,
    check_exp,
    check_mul_constant,
    check_my_relu,
)
from autograder.checks.custom_functions.linear_function import LINEAR_FUNCTION, MAIN, check_linear_function
from autograder.checks.custom_functions.linear_module import (
    LINEAR_MODULE,
    check_linear_module,
    collect_linear_module,
)
from autograder.checks.custom_functions.max_jacobian_error import MAX_JACOBIAN_ERROR, check_max_jacobian_error
from autograder.checks.custom_functions.train_spiral import (
    TRAIN_SPIRAL,
    check_train_spiral,
    collect_train_spiral,
    spiral_recipe,
)

__all__ = [
    "BACKWARD_BY_HAND",
    "EXP",
    "LINEAR_FUNCTION",
    "LINEAR_MODULE",
    "MAIN",
    "MAX_JACOBIAN_ERROR",
    "MUL_CONSTANT",
    "MY_RELU",
    "TRAIN_SPIRAL",
    "check_backward_by_hand",
    "check_exp",
    "check_linear_function",
    "check_linear_module",
    "check_max_jacobian_error",
    "check_mul_constant",
    "check_my_relu",
    "check_train_spiral",
    "collect_linear_module",
    "collect_train_spiral",
    "spiral_recipe",
]
