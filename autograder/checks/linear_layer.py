"""Checks for notebook 01, one linear layer by hand: ``linear_forward`` and ``linear_backward``."""

from __future__ import annotations

from typing import Any

import numpy as np

from autograder import reference
from autograder.checks.core import (
    Check,
    Evidence,
    collect_notes,
    inputs_unchanged_item,
    register,
    run_check,
    run_forward_backward,
)
from autograder.compare import Verdict, compare
from autograder.report import Item, Report

# Pairwise-distinct sizes, so that a transposed weight gradient or a bias summed over the wrong axis
# cannot have the right shape; N = 1 hides batch-scaling bugs, so it is a case of its own.
LINEAR_CASES: dict[str, tuple[int, int, int]] = {"N=4, D=3, M=5": (4, 3, 5), "N=1, D=3, M=5": (1, 3, 5)}


LINEAR_LAYER_POINTS = 4.0


def linear_inputs(seed: int, n: int, d: int, m: int) -> dict[str, np.ndarray]:
    """Inputs for one case: non-trivial x (N, D), W (M, D), b (M,), and a random upstream dout (N, M)."""
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((n, d)),
        "W": rng.standard_normal((m, d)) + 0.5,
        "b": rng.standard_normal(m),
        "dout": rng.standard_normal((n, m)),
    }


def _case_seed(seed: int, index: int) -> int:
    return 1000 * seed + index


def collect_linear_layer(linear_forward: Any, linear_backward: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``linear_forward``/``linear_backward`` on every case and record the results."""
    cases = {}
    for index, (label, dims) in enumerate(LINEAR_CASES.items()):
        data = linear_inputs(_case_seed(seed, index), *dims)
        inputs = {k: data[k] for k in ("x", "W", "b")}
        cases[label] = run_forward_backward(
            linear_forward, linear_backward, inputs, data["dout"], ["dx", "dW", "db"]
        )
    return {"check": "linear_layer", "seed": seed, "cases": cases}


def _linear_verdicts(record: dict[str, Any], data: dict[str, np.ndarray]) -> dict[str, Verdict]:
    ref = reference.linear(data["x"], data["W"], data["b"], data["dout"])
    out, n = record["outputs"], data["x"].shape[0]
    ones = np.ones_like(data["dout"])
    mistakes = {
        "out": {"the bias is missing": data["x"] @ data["W"].T},
        "dx": {
            "the upstream gradient dout is ignored (dx computed as if dout were all ones)": ones @ data["W"]
        },
        "dW": {
            "the upstream gradient dout is ignored (dW computed as if dout were all ones)": ones.T @ data["x"]
        },
        "db": {
            "summed over axis 1 instead of the batch axis 0": data["dout"].sum(axis=1),
            "dout was not summed over the batch axis 0": data["dout"],
        },
    }
    return {
        name: compare(name, out.get(name), ref[name], mistakes=mistakes[name], batch_size=n)
        for name in ("out", "dx", "dW", "db")
    }


def grade_linear_layer(evidence: Evidence) -> Report:
    """Grade recorded evidence: out (2), dx, dW, db (1 each), the N = 1 case (1), inputs unchanged (0.5)."""
    report = Report("linear_forward and linear_backward", LINEAR_LAYER_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    originals = {}
    verdicts: dict[str, dict[str, Verdict]] = {}
    for index, (label, dims) in enumerate(LINEAR_CASES.items()):
        data = linear_inputs(_case_seed(seed, index), *dims)
        originals[label] = data
        verdicts[label] = _linear_verdicts(cases[label], data)

    main, single = LINEAR_CASES
    error = cases[main]["error"]
    for name, weight in (("out", 2.0), ("dx", 1.0), ("dW", 1.0), ("db", 1.0)):
        verdict = verdicts[main][name]
        if verdict.problem == "missing" and error:
            report.add(Item(name, False, error, weight))
        else:
            report.add(Item.from_verdicts(name, [verdict], weight))

    if cases[single]["error"]:
        report.add(Item("N = 1", False, cases[single]["error"]))
    else:
        report.add(Item.from_verdicts("N = 1", list(verdicts[single].values())))
    report.add(inputs_unchanged_item(cases, originals))
    collect_notes(report, cases)
    return report


LINEAR_LAYER = register(
    Check(
        "linear_layer",
        "linear_forward and linear_backward",
        LINEAR_LAYER_POINTS,
        collect_linear_layer,
        grade_linear_layer,
    )
)


def check_linear_layer(linear_forward: Any, linear_backward: Any, *, seed: int = 0) -> float:
    """Grade ``linear_forward`` and ``linear_backward`` against PyTorch; print feedback; return points."""
    return run_check(LINEAR_LAYER, linear_forward, linear_backward, seed=seed)
