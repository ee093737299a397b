"""The grader of notebook 03's SGD step: values, gradients left behind, and how the update was made."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autograder.checks.autograd_graph import SGD_SHAPES, SGD_STEP, sgd_inputs, sgd_loss
from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.toolkit import add_notes


def sgd_gradients(values: list[np.ndarray], coefs: list[np.ndarray]) -> list[np.ndarray]:
    """The gradient of :func:`sgd_loss` at ``values``, by autograd in float64."""
    leaves = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    grads = torch.autograd.grad(sgd_loss(leaves, coefs), leaves)
    return [g.numpy().copy() for g in grads]


def _step_error(steps: list[dict[str, Any]], step: int) -> str | None:
    for i, record in enumerate(steps[: step + 1]):
        if record["error"]:
            return record["error"] + _no_grad_hint(record["error"])
        if record["backward_error"]:
            return (
                f"the check could not compute fresh gradients before step {i + 1}: {record['backward_error']}"
                + (" (after your first sgd_step the parameters no longer require grad?)" if i else "")
            )
    if len(steps) <= step:
        return "not run"
    return None


def _no_grad_hint(error: str) -> str:
    if "in-place operation" in error or "leaf Variable" in error:
        return (
            ". Likely mistake: the update ran outside torch.no_grad(); autograd refuses an in-place change "
            "of a leaf that requires grad while it is recording"
        )
    if "0-dim" in error or "0-d" in error:
        return (
            ". Likely mistake: indexing or slicing a parameter (p[:] or p[0]); a parameter can be a 0-d "
            "scalar tensor, so update the tensor itself: p -= lr * p.grad"
        )
    return ""


def _values(after: list[dict[str, Any]]) -> list[Any]:
    return [a["value"] for a in after]


def _step_verdicts(
    name: str, after: list[Any], start: list[np.ndarray], grads: list[np.ndarray], lr: float, stale: list[Any]
) -> list[Verdict]:
    """Each parameter after a step against ``start - lr * grads``, naming the common wrong updates."""
    verdicts = []
    for i, (value, p, g) in enumerate(zip(after, start, grads, strict=True)):
        mistakes = {
            "unchanged: the tensors you were given did not change. Either the update rebinds a name "
            "(p = p - lr * p.grad makes a new tensor and leaves the caller's one as it was; write "
            "p -= lr * p.grad inside torch.no_grad()), or the grads were cleared before the update": p,
            "p + lr * grad: the sign is flipped, the step climbs the loss": p + lr * g,
            "p - grad: the learning rate is missing": p - g,
        }
        old = stale[i]
        if isinstance(old, np.ndarray) and old.shape == g.shape and np.any(old):
            mistakes[
                "the step used the old gradient plus the new one: .grad was not cleared after the previous "
                "step, so backward added to it (set p.grad = None or call p.grad.zero_())"
            ] = p - lr * (g + old)
        verdicts.append(compare(f"{name} params[{i}]", value, p - lr * g, mistakes=mistakes))
    return verdicts


def _facts_item(
    name: str, steps: list[dict[str, Any]], problem: Callable[[str, dict[str, Any]], str | None], passed: str
) -> Item:
    """An item on what each step left in the caller's tensors: the first ``problem`` found sinks it.

    The facts of every step that ran come first: they say more than a later step's error does.
    """
    error = _step_error(steps, 0)
    if error:
        return Item(name, False, error, 0.5)
    for step, record in enumerate(steps):
        for i, fact in enumerate(record.get("after", [])):
            found = problem(f"after step {step + 1}, params[{i}]", fact)
            if found:
                return Item(name, False, found, 0.5)
    error = _step_error(steps, 1)
    return Item(name, False, error, 0.5) if error else Item(name, True, passed, 0.5)


def _grad_left(where: str, fact: dict[str, Any]) -> str | None:
    grad = fact["grad"]
    if grad is not None and (not isinstance(grad, np.ndarray) or np.any(grad)):
        return (
            f"{where}.grad still holds a gradient: clear it after the update (p.grad = None, or "
            "p.grad.zero_()), or the next backward adds to it"
        )
    return None


def _not_a_leaf(where: str, fact: dict[str, Any]) -> str | None:
    if not fact["requires_grad"]:
        return (
            f"{where} no longer requires grad: the update must leave requires_grad alone "
            "(no requires_grad_(False), no detach_())"
        )
    if fact["grad_fn"] is not None or not fact["is_leaf"]:
        return (
            f"{where} has grad_fn {fact['grad_fn']}: the update was recorded in the graph; run it "
            "inside torch.no_grad()"
        )
    return None


@grader(SGD_STEP)
def grade_sgd_step(evidence: Evidence) -> Report:
    """Grade recorded evidence: the caller's tensors after one step (1) and after a second step with fresh
    gradients (1), grads cleared (0.5), still leaves that require grad (0.5)."""
    report = report_for(SGD_STEP)
    data = sgd_inputs(evidence["seed"])
    steps, lr, coefs = evidence["steps"], data["lr"], data["coefs"]
    error = _step_error(steps, 0)
    if error:
        report.add(Item("one step", False, error))
    else:
        after1 = _values(steps[0]["after"])
        g1 = sgd_gradients(data["params"], coefs)
        report.add(
            Item.from_verdicts(
                "one step",
                _step_verdicts("after one step,", after1, data["params"], g1, lr, [None] * len(SGD_SHAPES)),
            )
        )
    error = _step_error(steps, 1)
    if error:
        report.add(Item("two steps", False, error))
    else:
        after1, after2 = _values(steps[0]["after"]), _values(steps[1]["after"])
        if not all(
            isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == s
            for v, s in zip(after1, SGD_SHAPES, strict=True)
        ):
            report.add(Item("two steps", False, "not checked: the first step did not leave float64 tensors"))
        else:
            g2 = sgd_gradients(after1, coefs)
            stale = [fact["grad"] for fact in steps[0]["after"]]
            verdicts = _step_verdicts("after the second step,", after2, after1, g2, lr, stale)
            report.add(Item.from_verdicts("two steps", verdicts))
    # Clearing grads and keeping leaves earn nothing for a step that did not update: doing nothing keeps both.
    updated = report.items[0].passed or report.items[1].passed
    for name, fault, ok in (
        ("grads cleared", _grad_left, "every .grad is None or zero after each step"),
        ("still leaves", _not_a_leaf, "leaves with requires_grad=True and grad_fn None"),
    ):
        item = _facts_item(name, steps, fault, ok)
        if item.passed and not updated:
            item = Item(name, False, "not checked: the parameters were not updated", item.weight)
        report.add(item)
    if report.items[0].passed:
        bypassed = _bypassed_autograd(steps[0]["after"])
        if bypassed:
            report.notes.append(DATA_NOTE.format(params=", ".join(f"params[{i}]" for i in bypassed)))
    add_notes(report, steps)
    return report


#: A method note, not a penalty: ``p.data -= lr * p.grad`` computes the right values (the exercise grades
#: the effect), but PyTorch documents ``torch.no_grad()`` as the way to change a leaf without recording.
DATA_NOTE = (
    "{params} changed to the right values, but autograd's version counter did not move: the update went "
    "through .data (p.data -= ...), which bypasses autograd's version tracking, so a graph that saved "
    "the old values would silently use the new ones instead of raising. The values are right and the "
    "points stay; the supported way is the in-place update inside `with torch.no_grad():`."
)


def _bypassed_autograd(after: list[dict[str, Any]]) -> list[int]:
    """The parameters whose in-place change after the first step left their version counter at 0: a
    fresh leaf starts at 0 and every in-place operation autograd sees (under no_grad too) adds 1."""
    return [i for i, fact in enumerate(after) if fact.get("version") == 0]
