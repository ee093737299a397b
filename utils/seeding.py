"""Seeding, so that every run of a notebook gives the same numbers."""

from __future__ import annotations

import random

import numpy as np


def seed_everything(seed: int = 0) -> np.random.Generator:
    """Seed Python's, numpy's and PyTorch's global generators; return a fresh numpy Generator.

    Introduced in notebook 01. PyTorch is imported to be seeded (it is a pinned dependency), so that
    a notebook that imports it later still draws the same numbers.
    """
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a pinned dependency
        pass
    else:
        torch.manual_seed(seed)
    return np.random.default_rng(seed)
