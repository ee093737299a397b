"""Notebook 04's train_spiral: the spiral classifier trained with the learner's Linear and with
``nn.Linear``, which must give the same losses step by step."""

from __future__ import annotations

import time
from typing import Any, NotRequired, TypedDict

import numpy as np
import torch
from torch import nn

from autograder.checks.calling import call
from autograder.checks.core import Check, Evidence, case_seed, freeze_losses, register, run_check

#: The recipe train_spiral follows (its docstring states it); the check passes these explicitly.
SPIRAL_STEPS, SPIRAL_HIDDEN, SPIRAL_LR = 30, 32, 1.0


#: The ranges a hidden test's steps and hidden units are drawn from (never the visible call's values):
#: losses recorded for another seed's run have another length, so they cannot stand for this one's.
SPIRAL_STEP_RANGE, SPIRAL_HIDDEN_RANGE = range(20, 41), range(16, 49)


def spiral_recipe(seed: int) -> dict[str, Any]:
    """The ``steps``, ``hidden`` and ``lr`` the check passes to train_spiral for ``seed``: the notebook's
    (30, 32, 1.0) for the visible seed 0, and for any other, sizes drawn from it, never those."""
    if seed == 0:
        return {"steps": SPIRAL_STEPS, "hidden": SPIRAL_HIDDEN, "lr": SPIRAL_LR}
    rng = np.random.default_rng(case_seed(seed, 2))
    steps = rng.choice([n for n in SPIRAL_STEP_RANGE if n != SPIRAL_STEPS])
    hidden = rng.choice([n for n in SPIRAL_HIDDEN_RANGE if n != SPIRAL_HIDDEN])
    return {"steps": int(steps), "hidden": int(hidden), "lr": SPIRAL_LR}


def _counting(cls: Any, counts: dict[str, Any], seeded: torch.Tensor) -> Any:
    """A subclass of ``cls`` that counts its constructions and forward calls (``cls`` itself when it
    cannot be subclassed), so that grading can tell whether ``train_spiral`` used the class it was given;
    it also records whether torch's generator was in the state ``torch.manual_seed(seed)`` leaves (``seeded``)
    when the first layer was built and when the first forward pass ran (a seed set after the layers are
    built shows as False, then True)."""
    if not isinstance(cls, type):
        return cls

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if counts["made"] == 0:
            counts["seeded_at_build"] = bool(torch.equal(torch.get_rng_state(), seeded))
        counts["made"] += 1
        cls.__init__(self, *args, **kwargs)

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        if counts["forward"] == 0:
            counts["seeded_at_first_step"] = bool(torch.equal(torch.get_rng_state(), seeded))
        counts["forward"] += 1
        return cls.forward(self, *args, **kwargs)

    try:
        return type(cls.__name__, (cls,), {"__init__": __init__, "forward": forward})
    except TypeError:
        return cls


class SpiralRun(TypedDict):
    """The evidence of one call of ``train_spiral`` (with the learner's Linear, or with nn.Linear): its
    error (None when it returned) and warnings, the losses it returned (None when it raised), how many
    layers it made of the class it was given and how many forward passes it ran through them, and how
    long it took."""

    error: str | None
    notes: list[str]
    losses: Any
    made: int
    forward: int
    seconds: float
    seeded_at_build: NotRequired[bool | None]
    """Whether torch's generator was as ``torch.manual_seed(seed)`` leaves it when the first layer was
    built (None when no layer of the class was built)."""
    seeded_at_first_step: NotRequired[bool | None]
    """The same, when the first forward pass through a layer of the class began."""


def collect_train_spiral(train_spiral: Any, Linear: Any, *, seed: int = 0) -> Evidence:
    """Call ``train_spiral`` with the learner's ``Linear`` and with ``nn.Linear``; record the losses."""
    runs: dict[str, SpiralRun] = {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        seeded = torch.get_rng_state()
    for label, cls in (("your Linear", Linear), ("nn.Linear", nn.Linear)):
        counts: dict[str, Any] = {
            "made": 0,
            "forward": 0,
            "seeded_at_build": None,
            "seeded_at_first_step": None,
        }
        start = time.perf_counter()
        with torch.random.fork_rng(devices=[]):
            outcome = call(
                train_spiral,
                _counting(cls, counts, seeded),
                seed=seed,
                **spiral_recipe(seed),
                name="train_spiral",
            )
        runs[label] = {
            "error": outcome.error,
            "notes": outcome.notes,
            "losses": freeze_losses(outcome.result) if outcome.ok else None,
            "made": counts["made"],
            "forward": counts["forward"],
            "seconds": time.perf_counter() - start,
            "seeded_at_build": counts["seeded_at_build"],
            "seeded_at_first_step": counts["seeded_at_first_step"],
        }
    return {"check": "train_spiral", "seed": seed, "runs": runs}


TRAIN_SPIRAL = register(Check("train_spiral", "train_spiral", 2.0, collect_train_spiral))


def check_train_spiral(train_spiral: Any, Linear: Any, *, seed: int = 0) -> float:
    """Train the spiral classifier with the learner's ``Linear`` and with ``nn.Linear``; compare losses."""
    return run_check(TRAIN_SPIRAL, train_spiral, Linear, seed=seed)
