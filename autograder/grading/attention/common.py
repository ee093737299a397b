"""What the graders of notebook 06 share: the values of one case against the float64 reference, with the
mistakes each value is known for, and the diagnoses that read a pattern over several cases."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from autograder.checks.attention_inputs import Case
from autograder.checks.compare import Verdict, compare
from autograder.checks.report import Item
from autograder.checks.tolerances import ATTENTION_FLOAT32, FLOAT64
from autograder.grading.attention.reference import attention_reference, backward_mistakes, tiled_mistake
from autograder.grading.toolkit import Record, step_error

GRADS = ("dq", "dk", "dv")
#: The start of compare's generic hint for NaN or inf values, replaced where a named mistake explains them.
GENERIC_OVERFLOW = "an overflow, e.g."


def inherit(verdict: Verdict, likely: str | None, source: str) -> Verdict:
    """``verdict`` with the mistake named for ``source`` (a value it is computed from) as its likely
    mistake, where it names none of its own or only the generic overflow hint."""
    if verdict.ok or likely is None or (verdict.likely and not verdict.likely.startswith(GENERIC_OVERFLOW)):
        return verdict
    return dataclasses.replace(verdict, likely=f"{likely} (named for {source}; this value follows from it)")


def tolerance(case: Case) -> Any:
    """The closeness rule of a case: float64's, or float32's for a float32 tiled computation."""
    return ATTENTION_FLOAT32 if case.dtype == "float32" else FLOAT64


def forward_mistakes(data: dict[str, np.ndarray], case: Case) -> dict[str, dict[str, np.ndarray]]:
    """The wrong forwards of a case, by value name: {"out": {mistake: o}, "dq": {...}, ...}."""
    variants: dict[str, dict[str, Any]] = {"the scale 1/sqrt(d) is missing": {"scale": 1.0}}
    if case.causal:
        variants.update(
            {
                "the causal mask is aligned bottom-right (key j hidden when j > i + Nk - Nq); "
                "is_causal aligns it top-left: query i sees keys 0..i": {"mask": "bottom-right"},
                "the causal mask is off by one: it lets query i see key i + 1": {"mask": "one key too many"},
                "the causal mask is off by one: it hides the diagonal (key i from query i)": {
                    "mask": "diagonal masked"
                },
            }
        )
        variants["is_causal is ignored: no mask is applied"] = {"causal": False}
    found: dict[str, dict[str, np.ndarray]] = {"out": {}, **{g: {} for g in GRADS}}
    for mistake, knobs in variants.items():
        causal = knobs.pop("causal", case.causal)
        with np.errstate(all="ignore"):
            ref = attention_reference(data, causal, **knobs)
        if (
            case.causal
            and "mask" in knobs
            and np.array_equal(ref["out"], attention_reference(data, True)["out"])
        ):
            continue  # a shift that changes nothing here (bottom-right when Nq = Nk) is no mistake here
        for name in found:
            found[name][mistake] = ref[name]
    return found


def value_verdict(
    name: str,
    got: Any,
    expected: np.ndarray,
    case: Case,
    mistakes: Mapping[str, Any],
    data: dict[str, np.ndarray] | None = None,
) -> Verdict:
    """``got`` against ``expected`` in the case's dtype and tolerance, naming a known mistake; for the
    output, with ``data``, also the online-softmax mistakes of every key tile size."""
    tol = tolerance(case)
    verdict = compare(name, got, expected, tol=tol, dtype=np.dtype(case.dtype), mistakes=mistakes)
    if verdict.ok or verdict.problem != "values" or data is None or name != "o":
        return verdict
    known = mistakes and verdict.likely in mistakes
    if not known:

        def close(a: np.ndarray, b: np.ndarray) -> bool:
            return a.shape == b.shape and bool(np.all(np.isclose(a, b, rtol=tol.rtol, atol=tol.atol)))

        tiled = tiled_mistake(np.asarray(got, np.float64), data, case.causal, close)
        if tiled:
            return dataclasses.replace(verdict, likely=tiled)
    return verdict


def case_verdicts(
    record: Record, case: Case, data: dict[str, np.ndarray], ref: dict[str, np.ndarray], flash: bool = False
) -> dict[str, list[Verdict]]:
    """The verdicts of one case: ``"o"`` (the output) and ``"grads"`` (dq, dk, dv through autograd).

    The known mistakes of the forward are named for every value; with ``flash``, those of a tiled
    forward (the online softmax) and of FlashAttention's backward too."""
    mistakes = forward_mistakes(data, case)
    if flash:
        for name, found in backward_mistakes(data, case.causal).items():
            mistakes[name].update(found)
    outputs = record["outputs"]
    result: dict[str, list[Verdict]] = {"o": [], "grads": []}
    if "out" in outputs:
        result["o"].append(
            value_verdict("o", outputs["out"], ref["out"], case, mistakes["out"], data if flash else None)
        )
    named = next((v.likely for v in result["o"] if v.likely in mistakes["out"]), None)
    grads = outputs.get("autograd", {})
    for name in GRADS:
        if name in grads:
            verdict = value_verdict(name, grads[name], ref[name], case, mistakes[name])
            result["grads"].append(inherit(verdict, named, "o"))
    return result


def values_item(
    name: str, record: Record, verdicts: list[Verdict], steps: tuple[str, ...], weight: float
) -> Item:
    """An item judged on ``verdicts``; a step's own error when a value is missing because it failed."""
    error = step_error(record, *steps)
    if error and not verdicts:
        return Item(name, False, error, weight)
    if error:
        return Item(name, False, error, weight)
    return Item.from_verdicts(name, verdicts, weight)


def pattern_diagnosis(passed: dict[str, bool], cases: dict[str, Case]) -> str | None:
    """A mistake read from which cases passed: right only where Nq = Nk, or only where N is a multiple
    of every common tile size (16, 32, 64). None when the pattern is not that clear."""
    square = [k for k, c in cases.items() if c.nq == c.nk]
    other = [k for k in cases if k not in square]
    if not other or not square:
        return None
    aligned = [k for k in square if cases[k].nq % 64 == 0]
    ragged_square = [k for k in square if k not in aligned]
    if all(passed[k] for k in square) and not any(passed[k] for k in other):
        return (
            "right only when Nq = Nk: does a loop, a slice or the mask use q's length (Nq) where k's (Nk) "
            "belongs?"
        )
    if aligned and all(passed[k] for k in aligned) and not any(passed[k] for k in ragged_square + other):
        return (
            "right only when the sequence length is a multiple of the tile size: the last, partial tile is "
            "dropped or read past its end (use min(start + B, N) for the end of a tile)"
        )
    return None
