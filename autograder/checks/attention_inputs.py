"""The inputs of notebook 06's checks, and how they measure what autograd saves.

See :mod:`autograder.checks.attention` for the contract the checks hold the learner's code to. Every
size comes from the seed; every saved tensor is measured by a pack hook of
:func:`torch.autograd.graph.saved_tensors_hooks`, with ``nbytes = numel * element_size``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from autograder.checks.core import freeze
from autograder.checks.functions import ctx_tensor_attributes

#: The fixed name of the learner's operator (the notebook registers it; the check takes the object).
OP_NAME = "backprop_course::attention"


def default_device() -> torch.device:
    """Where the checks put their tensors: the CUDA device when there is one, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


# --------------------------------------------------------------------------------------------
# Inputs: fresh sizes from each seed
# --------------------------------------------------------------------------------------------

#: Sizes a case draws from: primes, so that no size is a multiple of a tile of 16, 32 or 64.
SMALL, MID, LARGE = (17, 19, 23), (37, 41, 43), (67, 71)
HEAD_DIMS = (4, 5, 6)
#: Multiplies q in the large-score case: scores of several hundred, whose exp overflows float64.
LARGE_SCORE = 300.0


@dataclass(frozen=True)
class Case:
    """One case's sizes: q (*batch, nq, d), k and v (*batch, nk, d); its dtype and mask."""

    batch: tuple[int, ...]
    nq: int
    nk: int
    d: int
    causal: bool
    dtype: str = "float64"
    score_scale: float = 1.0

    def describe(self) -> str:
        """The case in a few words, for feedback."""
        lead = "".join(f"{b}, " for b in self.batch)
        mask = ", causal" if self.causal else ""
        big = ", scores in the hundreds" if self.score_scale != 1.0 else ""
        return f"q ({lead}{self.nq}, {self.d}), k and v ({lead}{self.nk}, {self.d}), {self.dtype}{mask}{big}"


def pick(rng: np.random.Generator, sizes: tuple[int, ...]) -> int:
    """One of ``sizes``, drawn by ``rng``."""
    return int(sizes[int(rng.integers(len(sizes)))])


def flash_cases(seed: int) -> dict[str, Case]:
    """The cases of :func:`collect_flash_attention`, sized from ``seed`` (the same seed, the same cases).

    Nq < Nk and Nq > Nk, with and without the mask (Nq < Nk with the mask tells a top-left from a
    bottom-right alignment), 0 to 2 batch dimensions, float32, then the cases that tell a pattern: Nq
    = Nk (a prime), Nq = Nk = 64 (a multiple of every common tile) and scores in the hundreds.
    """
    rng = np.random.default_rng(seed)
    s, m, big, d = pick(rng, SMALL), pick(rng, MID), pick(rng, LARGE), pick(rng, HEAD_DIMS)
    return {
        "Nq < Nk": Case((), s, big, d, False),
        "Nq > Nk, causal, one batch dim": Case((2,), big, m, d, True),
        "Nq < Nk, causal, two batch dims": Case((3, 2), s, m, d, True),
        "float32, causal": Case((2,), m, big, d, True, "float32"),
        "Nq = Nk, causal": Case((), m, m, d, True),
        "Nq = Nk = 64": Case((), 64, 64, d, False),
        "large scores": Case((), s, m, d, False, "float64", LARGE_SCORE),
    }


def attention_cases(seed: int) -> dict[str, Case]:
    """The cases of :func:`collect_attention`: 0 to 2 batch dimensions, both masks, Nq != Nk both
    ways (and Nq < Nk causal, which tells the mask's alignment), and scores in the hundreds."""
    rng = np.random.default_rng(seed)
    s, m, d = pick(rng, (2, 3)), pick(rng, (7, 11)), pick(rng, HEAD_DIMS)
    return {
        "Nq < Nk": Case((), s, m, d, False),
        "Nq > Nk, causal, one batch dim": Case((2,), m, s, d, True),
        "Nq < Nk, causal, two batch dims": Case((3, 2), s, m, d, True),
        "large scores": Case((), s, m, d, False, "float64", LARGE_SCORE),
    }


def case_inputs(seed: int, case: Case) -> dict[str, np.ndarray]:
    """q, k, v and an upstream gradient g (the output's shape), in the case's dtype."""
    rng = np.random.default_rng(seed)
    lead = case.batch
    data = {
        "q": rng.standard_normal((*lead, case.nq, case.d)) * case.score_scale,
        "k": rng.standard_normal((*lead, case.nk, case.d)),
        "v": rng.standard_normal((*lead, case.nk, case.d)),
        "g": rng.standard_normal((*lead, case.nq, case.d)),
    }
    return {name: value.astype(case.dtype) for name, value in data.items()}


def leaf(value: np.ndarray, device: torch.device, requires_grad: bool = True) -> torch.Tensor:
    """A fresh tensor on ``device`` holding a copy of ``value`` (its dtype kept)."""
    t = torch.from_numpy(np.array(value, copy=True)).to(device)
    return t.requires_grad_(requires_grad)


# --------------------------------------------------------------------------------------------
# Saved tensors, through the hooks
# --------------------------------------------------------------------------------------------


def nbytes(t: torch.Tensor) -> int:
    """The bytes of a tensor's own elements: ``numel * element_size`` (a view counts its elements only)."""
    return int(t.numel() * t.element_size())


class SavedLog:
    """Pack hooks that record every tensor autograd saves: shape, dtype, bytes and, with ``values``,
    a copy of its values. Use as a context manager around the code to measure."""

    def __init__(self, values: bool = False) -> None:
        self.values = values
        self.entries: list[dict[str, Any]] = []
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda t: t)

    def _pack(self, t: torch.Tensor) -> torch.Tensor:
        entry = {
            "shape": [int(n) for n in t.shape],
            "dtype": str(t.dtype).removeprefix("torch."),
            "nbytes": nbytes(t),
        }
        if self.values:
            entry["value"] = freeze(t)
        self.entries.append(entry)
        return t

    def __enter__(self) -> SavedLog:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._hooks.__exit__(*exc)


def ctx_attribute_tensors(ctx: Any) -> dict[str, list[dict[str, Any]]]:
    """The tensors kept on each ``ctx`` attribute the learner set: shape and bytes of each."""
    found: dict[str, list[dict[str, Any]]] = {}
    for name in ctx_tensor_attributes(ctx):
        value = getattr(ctx, name.removeprefix("ctx."), None)
        items = list(value.values()) if isinstance(value, dict) else value
        items = items if isinstance(items, (list, tuple)) else [items]
        found[name] = [
            {"shape": [int(n) for n in t.shape], "nbytes": nbytes(t)}
            for t in items
            if isinstance(t, torch.Tensor)
        ]
    return found
