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

from autograder.checks.custom_functions.backward_by_hand import BACKWARD_BY_HAND as BACKWARD_BY_HAND
from autograder.checks.custom_functions.backward_by_hand import (
    check_backward_by_hand as check_backward_by_hand,
)
from autograder.checks.custom_functions.elementwise import EXP as EXP
from autograder.checks.custom_functions.elementwise import MUL_CONSTANT as MUL_CONSTANT
from autograder.checks.custom_functions.elementwise import MY_RELU as MY_RELU
from autograder.checks.custom_functions.elementwise import check_exp as check_exp
from autograder.checks.custom_functions.elementwise import check_mul_constant as check_mul_constant
from autograder.checks.custom_functions.elementwise import check_my_relu as check_my_relu
from autograder.checks.custom_functions.linear_function import LINEAR_FUNCTION as LINEAR_FUNCTION
from autograder.checks.custom_functions.linear_function import MAIN as MAIN
from autograder.checks.custom_functions.linear_function import check_linear_function as check_linear_function
from autograder.checks.custom_functions.linear_module import LINEAR_MODULE as LINEAR_MODULE
from autograder.checks.custom_functions.linear_module import check_linear_module as check_linear_module
from autograder.checks.custom_functions.linear_module import collect_linear_module as collect_linear_module
from autograder.checks.custom_functions.max_jacobian_error import MAX_JACOBIAN_ERROR as MAX_JACOBIAN_ERROR
from autograder.checks.custom_functions.max_jacobian_error import (
    check_max_jacobian_error as check_max_jacobian_error,
)
from autograder.checks.custom_functions.train_spiral import TRAIN_SPIRAL as TRAIN_SPIRAL
from autograder.checks.custom_functions.train_spiral import check_train_spiral as check_train_spiral
from autograder.checks.custom_functions.train_spiral import collect_train_spiral as collect_train_spiral
from autograder.checks.custom_functions.train_spiral import spiral_recipe as spiral_recipe
