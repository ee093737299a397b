"""Notebook 05's exercise 5: SoftmaxCrossEntropy, fused and stable."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from autograder.checks.core import Check, Evidence, case_seed, register, run_check
from autograder.checks.function_contract import collect_contract
from autograder.checks.functions import FunctionRun, label_of, tensor

SCE_CASES: dict[str, tuple[int, int, float]] = {
    "N=5, C=3": (5, 3, 1.0),
    "N=1, C=3": (1, 3, 1.0),
    "logits ~1000, N=4, C=6": (4, 6, 1000.0),
}


def sce_inputs(seed: int, n: int, c: int, scale: float) -> dict[str, Any]:
    """Scores (n, c) times ``scale``, integer targets (n,), and a random upstream scalar in [0.5, 2]."""
    rng = np.random.default_rng(seed)
    return {
        "scores": rng.standard_normal((n, c)) * scale,
        "y": rng.integers(0, c, n).astype(np.int64),
        "u": float(rng.uniform(0.5, 2.0)) * float(rng.choice([-1.0, 1.0])),
    }


#: Inputs where the lucky implementations break (docs/checks.md items 6, 23 and 32): score rows
#: hundreds apart (a shift by the global maximum leaves a row of zeros, 0/0), the true class at the
#: bottom of a row of large scores (log(softmax) takes the log of an underflowed 0), and labels that
#: leave the last class out (a one-hot sized from the labels has too few columns).
SCE_OPT_OUT = {"layouts": "the loss is a scalar: its upstream gradient has one layout only"}


SCE_HARD = ("rows hundreds apart", "true class at the bottom", "labels leave a class out")


def sce_hard_inputs(seed: int, kind: str) -> dict[str, Any]:
    """One of :data:`SCE_HARD`'s cases, drawn from ``seed``: scores (N, C), labels (N,), upstream u."""
    rng = np.random.default_rng(seed)
    n, c = 4, 5
    scores = rng.standard_normal((n, c))
    y = rng.integers(0, c, n)
    if kind == "rows hundreds apart":
        scores = scores + 450.0 * np.array([1.0, -1.0, 0.5, -0.5])[:, None]
    elif kind == "true class at the bottom":
        scores = scores * 600.0
        y = scores.argmin(axis=1)
    else:
        y = rng.permutation(np.arange(c - 1).repeat(2))[:n]
        y[0] = c - 2  # the largest label present is C - 2: class C - 1 is left out
    return {"scores": scores, "y": y.astype(np.int64), "u": float(rng.uniform(0.5, 2.0))}


def all_sce_inputs(seed: int) -> dict[str, dict[str, Any]]:
    """Every case of the check, by label: :data:`SCE_CASES`, then :data:`SCE_HARD`."""
    cases = {lab: sce_inputs(case_seed(seed, i), *dims) for i, (lab, dims) in enumerate(SCE_CASES.items())}
    for i, kind in enumerate(SCE_HARD, start=len(SCE_CASES)):
        cases[kind] = sce_hard_inputs(case_seed(seed, i), kind)
    return cases


def collect_softmax_cross_entropy_function(fn_cls: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``SoftmaxCrossEntropy`` on each case: loss, gradient, a direct backward call."""
    label = label_of(fn_cls, "SoftmaxCrossEntropy")
    cases = {}
    for index, (case, data) in enumerate(all_sce_inputs(seed).items()):
        run = FunctionRun(fn_cls, label)
        scores, y = tensor(data["scores"], True), tensor(data["y"])
        upstream = torch.tensor(data["u"], dtype=torch.float64)
        loss = run.apply("forward", [scores, y], outputs=("loss",))
        run.snapshot("forward", {"scores": scores, "y": y})
        run.grads("autograd", loss, {"dscores": scores}, upstream, after=("forward",))
        run.snapshot("autograd", {"grad_output": upstream})
        out = run.apply("direct: apply", [scores, y], after=("forward",), record=False)
        run.direct("direct", out, upstream, after=("direct: apply",), inspect=False)
        run.snapshot("backward", {"scores": scores, "y": y})
        if index == 0:
            spec = [("scores", data["scores"], True), ("y", data["y"], False)]
            collect_contract(run, spec, np.array(data["u"]), opt_out=SCE_OPT_OUT)
        cases[case] = run.record
    return {"check": "softmax_cross_entropy_function", "seed": seed, "cases": cases}


SOFTMAX_CROSS_ENTROPY_FUNCTION = register(
    Check(
        "softmax_cross_entropy_function",
        "SoftmaxCrossEntropy",
        3.0,
        collect_softmax_cross_entropy_function,
    )
)


def check_softmax_cross_entropy_function(fn_cls: Any, *, seed: int = 0) -> float:
    """Grade ``SoftmaxCrossEntropy`` against ``F.cross_entropy`` in float64; return points."""
    return run_check(SOFTMAX_CROSS_ENTROPY_FUNCTION, fn_cls, seed=seed)
