"""The items notebook 05's graders share: a recorded value, a verdict's item, exact gradient shapes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from autograder.checks.compare import Verdict, compare
from autograder.checks.report import Item
from autograder.grading.toolkit import backward_returns, describe, error_or_verdicts, step_error

Record = dict[str, Any]


def recorded(record: Record, step: str, name: str) -> Any:
    """The value ``name`` that ``step`` recorded (None when the step recorded nothing)."""
    return record["outputs"].get(step, {}).get(name)


def verdict_item(
    name: str, record: Record, steps: tuple[str, ...], verdicts: Callable[[], list[Verdict]], weight: float
) -> Item:
    """An item that fails with a step's own error when one of ``steps`` failed, else passes when every
    verdict is ok (the verdicts are computed only when every step ran)."""
    error = step_error(record, *steps)
    return error_or_verdicts(name, error, [] if error else verdicts(), weight)


def shape_mistake(got: tuple[int, ...], shape: tuple[int, ...]) -> str:
    """Why a gradient of shape ``got`` is wrong for an input of ``shape``: autograd sums it down
    silently only when ``shape`` broadcasts to ``got`` (docs/checks.md item 8), and refuses it
    otherwise; the mistake is named only when the extra axes lead and the rest is the input's shape."""
    lead, rest = got[: len(got) - len(shape)], got[len(got) - len(shape) :]
    if len(got) < len(shape):
        return " Autograd refuses a gradient with fewer axes than its input."
    if rest != shape:
        broadcast = all(s in (1, g) for s, g in zip(shape, rest, strict=True))
        if broadcast:
            return " Autograd silently sums such a gradient down to the input's shape; reduce it yourself."
        return " Autograd refuses it: the shapes do not broadcast."
    if all(n == 1 for n in lead):
        return (
            f" Likely mistake: an extra leading size-1 axis (keepdim=True, or unsqueeze): autograd silently "
            f"removes it, so .backward() and gradcheck pass; return shape {shape}."
        )
    return (
        f" Likely mistake: not summed over the leading axes {lead} (the batch): autograd silently sums "
        f"such a gradient, so .backward() and gradcheck pass; sum over every leading axis yourself."
    )


def exact_shapes_item(
    name: str,
    record: Record,
    expected: dict[str, tuple[int, ...] | None],
    weight: float,
    mistakes: dict[str, dict[str, Any]] | None = None,
) -> Item:
    """Backward called directly returns, for every input of forward, a gradient of exactly its
    input's shape (or None), read as PyTorch reads a return value (trailing Nones accepted)."""
    error = step_error(record, "forward", "direct")
    if error:
        return Item(name, False, error, weight)
    names = list(expected)
    grads, problem = backward_returns(record["outputs"]["direct"], len(names), "backward", names)
    if problem:
        return Item(name, False, problem, weight)
    for (grad_name, shape), value in zip(expected.items(), grads, strict=True):
        if shape is None:
            if value is not None:
                return Item(
                    name,
                    False,
                    f"backward returned a tensor for {grad_name}; it must be None. Likely mistake: a value "
                    f"returned as {grad_name}, the gradient of an input that has none (integer labels, a "
                    "number, a flag): return None in its place.",
                    weight,
                )
            continue
        if not isinstance(value, np.ndarray):
            got = "None" if value is None else describe(value)
            return Item(name, False, f"backward returned {got} for {grad_name}, expected a tensor.", weight)
        if tuple(value.shape) != shape:
            known = (mistakes or {}).get(grad_name, {})
            likely = compare(grad_name, value, np.zeros(shape), mistakes=known).likely
            why = (
                f" Likely mistake: {likely}." if likely in known else shape_mistake(tuple(value.shape), shape)
            )
            return Item(
                name,
                False,
                f"backward returned {grad_name} of shape {tuple(value.shape)}, but its input has shape "
                f"{shape}.{why}",
                weight,
            )
        if value.dtype != np.float64:
            return Item(
                name, False, f"backward returned {grad_name} as {value.dtype}, expected float64.", weight
            )
    shapes = ", ".join(f"{k} {v}" if v is not None else f"{k} None" for k, v in expected.items())
    return Item(name, True, f"exact shapes: {shapes}", weight)
