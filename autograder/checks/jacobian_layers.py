"""The layers of notebook 04's ``max_jacobian_error`` check (collect side): :func:`tanh_linear`, its inputs
for a seed, and the same layer with an error planted in its analytical Jacobian at an entry and of a size
drawn from the seed, so that the right answer is the seed's own (docs/checks.md 32). Kept apart from
:mod:`autograder.checks.custom_functions`, which re-exports them, to keep each module small.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from autograder.checks.core import case_seed

JACOBIAN_EPS = 1e-6
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def tanh_linear(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``tanh(x @ W.T + b)``: the smooth layer whose Jacobians the check compares."""
    return torch.tanh(F.linear(x, W, b))


def jacobian_inputs(seed: int) -> dict[str, np.ndarray]:
    """x (3, 2), W (4, 2), b (4,), standard normal."""
    rng = np.random.default_rng(case_seed(seed, 0))
    return {"x": rng.standard_normal((3, 2)), "W": rng.standard_normal((4, 2)), "b": rng.standard_normal(4)}


#: The case of each dtype with a planted error (see :func:`planted_layer`), by the plain case's label.
PLANTED = {label: f"{label}, planted error" for label in DTYPES}
#: The planted error's size in each dtype: far above the dtype's own finite-difference error, so that
#: the maximum is the planted entry's, and drawn from a wide range, so that one seed's answer is not
#: another's (float64 answers agree to 1e-8, float32 ones to about 0.5).
PLANTED_SIZES = {"float64": (1e-2, 1.0), "float32": (10.0, 100.0)}


def planted_error(seed: int) -> dict[str, Any]:
    """Where the planted error of this seed sits (input ``k``, its flat element ``j``, the output's flat
    element ``i``) and its size in each dtype, log-uniform in :data:`PLANTED_SIZES`."""
    rng = np.random.default_rng(case_seed(seed, 1))
    shapes = [a.shape for a in jacobian_inputs(seed).values()]
    k = int(rng.integers(len(shapes)))
    where = {"k": k, "j": int(rng.integers(int(np.prod(shapes[k])))), "i": int(rng.integers(3 * 4))}
    sizes = {label: float(10 ** rng.uniform(*np.log10(bounds))) for label, bounds in PLANTED_SIZES.items()}
    return {**where, "sizes": sizes}


def planted_layer(seed: int, label: str) -> Callable[..., torch.Tensor]:
    """:func:`tanh_linear` whose analytical Jacobian has one entry off by the seed's planted error: the
    forward adds ``size * (t_j - t_j.detach())`` (exactly 0) to output element i, so autograd's
    d out_i / d t_j grows by ``size`` and finite differences see nothing. ``max_jacobian_error`` of it
    is the planted size, give or take the dtype's own error: the answer depends on the seed."""
    plant = planted_error(seed)
    size = plant["sizes"][label]

    def tanh_linear_planted(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        out = tanh_linear(x, W, b)
        element = (x, W, b)[plant["k"]].reshape(-1)[plant["j"]]
        bump = torch.zeros(out.numel(), dtype=out.dtype)
        bump[plant["i"]] = size
        return out + (bump * (element - element.detach())).view_as(out)

    return tanh_linear_planted
