"""The grader of notebook 02's activations: ReLU, sigmoid and tanh, forward and backward."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Check, Evidence
from autograder.checks.report import Item, Report
from autograder.checks.two_layer_net import RELU, SIGMOID, SPECIAL_CASE, TANH, activation_inputs
from autograder.grading import grader, reference, report_for
from autograder.grading.toolkit import (
    add_notes,
    cases_item,
    error_or_verdicts,
    explain_errors,
    inputs_unchanged_item,
    product_sizes,
    verdict_or_error,
)
from autograder.grading.two_layer_net.items import SIZE_ONE, first_failure, stability_item

#: ``out`` equal to x: the forward returns its input unchanged, most often as ``return cache, out``.
RETURNED_X = (
    "out is x itself: are the return values swapped? The forward returns (out, cache), in that order "
    "(or the activation is not applied at all)"
)


def _activation_mistakes(kind: str, x: np.ndarray, dout: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """Plausible wrong answers for ``out`` and ``dx``, so feedback can name them."""
    ignored = "the upstream gradient dout is ignored (dx is the local derivative alone)"
    with np.errstate(all="ignore"):
        if kind == "relu":
            return {
                "out": {
                    "the negative part is kept instead of the positive one": np.minimum(x, 0.0),
                    RETURNED_X: x,
                },
                "dx": {
                    "the gradient at x == 0 is 1 (a mask from x >= 0); the convention, as in PyTorch, is 0": (
                        dout * (x >= 0)
                    ),
                    "the mask is computed from dout (dout > 0) instead of from x": dout * (dout > 0),
                    "no mask at all: dx = dout (a mask such as out >= 0 is always true)": dout,
                    ignored: (x > 0).astype(np.float64),
                },
            }
        if kind == "sigmoid":
            s = reference.activation("sigmoid", x, dout)["out"]
            return {
                "out": {"sigmoid(-x): the sign inside exp is flipped": 1.0 - s, RETURNED_X: x},
                "dx": {
                    "x * (1 - x) where s * (1 - s) belongs: the derivative is in terms of the output "
                    "s = sigmoid(x)": dout * x * (1.0 - x),
                    "dout * s: the factor (1 - s) is missing": dout * s,
                    ignored: s * (1.0 - s),
                },
            }
        t = np.tanh(x)
        return {
            "out": {RETURNED_X: x},
            "dx": {
                "1 - x**2 where 1 - t**2 belongs: the derivative is in terms of the output t = tanh(x)": (
                    dout * (1.0 - x**2)
                ),
                "(1 - t)**2 where 1 - t**2 belongs: square t, then subtract it from 1": dout * (1.0 - t) ** 2,
                "1 - tanh(t)**2: the cache already holds t = tanh(x), so tanh is applied twice": (
                    dout * (1.0 - np.tanh(t) ** 2)
                ),
                "dout * (1 - t): the square is missing": dout * (1.0 - t),
                ignored: 1.0 - t**2,
            },
        }


def activation_error(error: str) -> str | None:
    """The likely mistake behind an activation's error: a matrix product, where all is elementwise."""
    if product_sizes(error):
        return (
            "a matrix product (@ or np.dot) where the elementwise product (*) belongs: an activation "
            "acts element by element, and its gradient is dout * f'(x), element by element"
        )
    return None


def _activation_verdicts(kind: str, record: dict[str, Any], data: dict[str, np.ndarray]) -> list[Verdict]:
    ref = reference.activation(kind, data["x"], data["dout"])
    mistakes = _activation_mistakes(kind, data["x"], data["dout"])
    n = data["x"].shape[0]
    return [
        compare(name, record["outputs"].get(name), ref[name], mistakes=mistakes[name], batch_size=n)
        for name in ("out", "dx")
    ]


STABILITY_HINT = {
    "sigmoid": (
        "exp overflows for large |x|. Compute exp only of -|x| (it is at most 1) and pick "
        "1 / (1 + z) for x >= 0, z / (1 + z) for x < 0; note that np.where evaluates both branches, "
        "so exp(-x) inside np.where still overflows."
    ),
    "tanh": "exp overflows for large |x|: use np.tanh, which is stable.",
}


def _special_item(kind: str, record: dict[str, Any], verdicts: list[Verdict], ordinary_ok: bool) -> Item:
    """The item of the special case; its stability advice is given only when the ordinary cases
    pass, since otherwise the formula itself is wrong and the advice would mislead."""
    if kind == "relu":
        item = error_or_verdicts("gradient 0 at x == 0", record["error"], verdicts, 1.0)
        return item if not item.passed else Item(item.name, True, "dx is 0 where x == 0, as in PyTorch")
    return stability_item(
        f"stable at {SPECIAL_CASE[kind]}",
        [record],
        first_failure(verdicts),
        f" {STABILITY_HINT[kind]}" if ordinary_ok else "",
        "finite, right values and no overflow warning at |x| up to 800",
        overflow=OVERFLOWED_EXP,
    )


#: What numpy's overflow warning from exp says an activation did, when its values came out right.
OVERFLOWED_EXP = (
    " Likely mistake: exp evaluated at large positive arguments (exp(-x) at very negative x, or exp(x) at "
    "large x; np.where evaluates both of its branches, so a stable branch beside it does not prevent it)."
)


def grade_activation(check: Check, evidence: Evidence) -> Report:
    """Grade recorded evidence: out (1), dx (1), the size-1 edges N = 1 and D = 1 (0.5), the special
    case (1), inputs unchanged (0.5)."""
    kind, seed = check.name, evidence["seed"]
    cases = explain_errors(evidence["cases"], activation_error)
    report = report_for(check)
    inputs = activation_inputs(kind, seed)
    verdicts = {label: _activation_verdicts(kind, cases[label], data) for label, data in inputs.items()}
    main, single, special, column = inputs
    error = cases[main]["error"]
    for verdict, weight in zip(verdicts[main], (1.0, 1.0), strict=True):
        report.add(verdict_or_error(verdict.name, verdict, error, weight))
    edges = {label: cases[label] for label in (single, column)}
    report.add(cases_item(SIZE_ONE["activation"], edges, verdicts, 0.5))
    ordinary_ok = not cases[main]["error"] and all(v.ok for v in verdicts[main] + verdicts[single])
    report.add(_special_item(kind, cases[special], verdicts[special], ordinary_ok))
    report.add(inputs_unchanged_item(cases, inputs))
    add_notes(report, cases.values())
    return report


for _check in (RELU, SIGMOID, TANH):
    grader(_check)(functools.partial(grade_activation, _check))
