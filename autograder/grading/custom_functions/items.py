"""The items notebook 04's Function graders share: a backward called directly, through autograd, ctx."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from autograder.checks.compare import Verdict, compare
from autograder.checks.functions import FunctionRecord, Returned
from autograder.checks.report import Item
from autograder.grading.function_contract import ctx_attributes_message
from autograder.grading.toolkit import backward_returns, describe, error_or_verdicts, step_error

#: The message fragment of PyTorch's version-counter error: a tensor saved with save_for_backward
#: was modified in place before backward unpacked it.
INPLACE_ERROR = "modified by an inplace operation"


def reference_jacobians(
    fn: Callable[..., torch.Tensor], inputs: dict[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """The float64 Jacobian of ``fn(*inputs)`` with respect to each input, as (out.numel, in.numel)."""
    tensors = tuple(torch.tensor(v, dtype=torch.float64) for v in inputs.values())
    out = fn(*tensors)
    jac = torch.autograd.functional.jacobian(fn, tensors)
    return {
        k: j.reshape(out.numel(), t.numel()).numpy().copy()
        for k, j, t in zip(inputs, jac, tensors, strict=True)
    }


#: The expected gradients of a Function's runs through autograd, by stage, then by input name:
#: ``{"autograd": {"x": ...}, "sum": {"x": ...}, "jacobian": {"x": ...}}``, the stages judged in that
#: order; each stage's inputs are those the evidence records for it (:mod:`autograder.checks.functions`).
ExpectedGrads = dict[str, dict[str, np.ndarray]]

#: How feedback names each autograd stage whose call failed.
STAGE_CALLS = {"sum": "out.sum().backward()", "autograd": "out.backward(grad_output)"}

#: What a right .grad for a random upstream but a wrong one for .sum() most likely is.
SUM_ONLY_WRONG = (
    "an in-place write into grad_output: out.sum().backward() passes an expanded all-ones tensor whose "
    "elements share one memory location, so writing into it changes every element; compute a new tensor "
    "instead"
)


def grads_item(name: str, record: FunctionRecord, *judged: Any, **options: Any) -> Item:
    """Backward called directly on a Function's case record: the forward and the direct call must have
    run, then :func:`returned_grads_item` judges what backward returned (``judged`` and ``options`` are
    its arguments after the return value: expected, names, label, weight, then the optional ones)."""
    error = step_error(record, "forward", "direct")
    if error:
        weight = judged[3] if len(judged) > 3 else options["weight"]
        return Item(name, False, error, weight)
    return returned_grads_item(name, record["outputs"]["direct"], *judged, **options)


def returned_grads_item(
    name: str,
    returned: Returned,
    expected: Sequence[np.ndarray | None],
    names: Sequence[str],
    label: str,
    weight: float,
    mistakes: dict[str, dict[str, Any]] | None = None,
    only: Sequence[int] | None = None,
    batch_size: int | None = None,
) -> Item:
    """The exact-shape gradient item: one entry per forward input, each the exact shape and value expected.

    ``expected`` has one entry per input of forward, None where the gradient must be None. ``only``
    restricts the item to some entries (the others may be None or anything). The return value is
    read as PyTorch reads it (:func:`backward_returns`): an item fails on a wrong count only when
    the count concerns the entries it judges.
    """
    n = len(expected)
    indices = list(range(n) if only is None else only)
    grads, problem = backward_returns(returned, n, label, list(names))
    given = len(returned["grads"])
    if problem and (only is None or given > n or any(i >= given for i in indices)):
        return Item(name, False, problem, weight)
    for i in indices:
        wrong = _gradient_problem(names[i], grads[i], expected[i], (mistakes or {}).get(names[i]), batch_size)
        if wrong:
            return Item(name, False, wrong, weight)
    shapes = ", ".join(
        f"{names[i]} {tuple(expected[i].shape)}" if expected[i] is not None else f"{names[i]} None"
        for i in indices
    )
    return Item(name, True, f"exact shapes and values: {shapes}", weight)


def _gradient_problem(
    name: str, got: Any, want: np.ndarray | None, mistakes: dict[str, Any] | None, batch_size: int | None
) -> str | None:
    """Why one returned gradient is not the one expected (None where None is expected), or None."""
    if want is None:
        if got is None:
            return None
        return (
            f"{name} should be None (its input has no gradient), but backward returned "
            f"{describe(got)}. Likely mistake: a value returned as {name}, the gradient of an input "
            "that has none: a non-tensor input (a number, a flag) or one that needs no gradient gets None."
        )
    if got is None:
        return f"{name} is None; expected a tensor of shape {want.shape}."
    verdict = compare(name, got, want, mistakes=mistakes, batch_size=batch_size)
    return None if verdict.ok else verdict.message()


def autograd_verdicts(
    record: FunctionRecord,
    expected: ExpectedGrads,
    mistakes: dict | None = None,
    batch_size: int | None = None,
) -> tuple[str | None, list[Verdict]]:
    """Compare ``.grad`` after ``.backward()`` / ``.sum().backward()`` and the Jacobian with the reference,
    for each stage of ``expected`` in order; the first failed call stops it, with its error."""
    forward_error = step_error(record, "forward")
    if forward_error:  # the forward's own failure, never reported as a failure of backward
        return forward_error, []
    verdicts: list[Verdict] = []
    for stage, wanted in expected.items():
        error = step_error(record, stage)
        if error:
            return f"{STAGE_CALLS.get(stage, stage)} failed: {error}", []
        got = record["outputs"][stage]
        if stage == "jacobian":
            verdicts += [
                compare(f"the Jacobian with respect to {k}", j, wanted[k], batch_size=batch_size)
                for k, j in got.items()
            ]
            continue
        earlier_ok = all(v.ok for v in verdicts)
        for k, g in got.items():
            title = f"{k}.grad after out.sum().backward()" if stage == "sum" else f"{k}.grad"
            verdict = compare(title, g, wanted[k], mistakes=(mistakes or {}).get(k), batch_size=batch_size)
            if stage == "sum" and not verdict.ok and earlier_ok:
                # right with a random upstream gradient, wrong with .sum()'s: the difference is
                # that .sum() passes an expanded tensor whose elements share one memory location
                verdict = dataclasses.replace(verdict, likely=SUM_ONLY_WRONG)
            verdicts.append(verdict)
    return None, verdicts


def verdicts_item(name: str, error: str | None, verdicts: list[Verdict], weight: float, ok_text: str) -> Item:
    item = error_or_verdicts(name, error, verdicts, weight)
    return Item(name, True, ok_text, weight) if item.passed else item


def through_autograd_item(
    record: FunctionRecord,
    expected: ExpectedGrads,
    what: str,
    mistakes: dict | None = None,
    batch_size: int | None = None,
) -> Item:
    """The "through autograd" item (1): gradients for a random upstream, for ``.sum()``, and the Jacobian."""
    err, verdicts = autograd_verdicts(record, expected, mistakes, batch_size)
    text = f"{what} after .backward(grad_output) and after .sum().backward(), and the float64 Jacobian"
    return verdicts_item("through autograd", err, verdicts, 1.0, text)


def ctx_item(record: FunctionRecord, label: str, weight: float = 0.5) -> Item:
    name = "tensors via save_for_backward"
    error = step_error(record, "forward", "direct")
    if error:
        return Item(name, False, f"not checked: {error}", weight)
    stashed = record["outputs"].get("ctx_tensors") or []
    if stashed:
        return Item(name, False, ctx_attributes_message(stashed) + ".", weight)
    return Item(name, True, "no tensor is kept as a ctx attribute", weight)
