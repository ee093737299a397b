"""Item builders every grader shares: an error that sinks an item, unchanged inputs, notes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from autograder.checks.compare import Verdict
from autograder.checks.core import Check
from autograder.checks.report import Item, Report
from autograder.grading import report_for

Record = dict[str, Any]

Run = TypeVar("Run")

#: One entry of a grader's declared list: what it judges of the grader's run (its evidence, inputs and
#: references, read once), as one item or, for a family of items judged alike, several.
ItemOf = Callable[[Run], Item | Sequence[Item]]


def judge(check: Check, items: Sequence[ItemOf[Run]], run: Run, records: Iterable[Record]) -> Report:
    """The check's report: each declared item judged on ``run``, in the order declared, then the distinct
    notes of ``records``. A grader is this call on its list of items: the list is what is checked."""
    report = report_for(check)
    for item_of in items:
        judged = item_of(run)
        for item in [judged] if isinstance(judged, Item) else judged:
            report.add(item)
    add_notes(report, records)
    return report


def error_or_verdicts(name: str, error: str | None, verdicts: list[Verdict], weight: float = 1.0) -> Item:
    """The item fails with ``error`` when the learner's code raised, else it is judged on the verdicts."""
    if error:
        return Item(name, False, error, weight)
    return Item.from_verdicts(name, verdicts, weight)


def inputs_unchanged_item(
    cases: dict[str, Record], originals: dict[str, dict[str, np.ndarray]], weight: float = 0.5
) -> Item:
    """An item that passes when no case's learner code modified the arrays it was given.

    It cannot pass while any case failed to run: a function that raises changes nothing, and
    must not earn points for it.
    """
    for label, record in cases.items():
        if record.get("error"):
            return Item(
                "inputs unchanged", False, f"not checked: case {label} did not run: {record['error']}", weight
            )
    for label, record in cases.items():
        for key, before in originals[label].items():
            after = record.get("inputs_after", {}).get(key)
            if isinstance(after, np.ndarray) and not np.array_equal(after, before, equal_nan=True):
                return Item(
                    "inputs unchanged",
                    False,
                    f"in case {label}, your code changed its argument {key} in place; {copy_advice(key)}",
                    weight,
                )
    return Item("inputs unchanged", True, "no argument was modified", weight)


def copy_advice(argument: str) -> str:
    """How to avoid changing ``argument`` in place, naming that argument (not another one)."""
    return (
        f"work on a copy ({argument} = {argument}.copy() before changing it, or build a new array) "
        "so the caller's data stays intact."
    )


def add_notes(report: Report, records: Iterable[Record]) -> None:
    """Copy each distinct warning or stderr note from the records into the report, in order."""
    for record in records:
        for note in record.get("notes", []):
            if note not in report.notes:
                report.notes.append(note)


# ---------------------------------------------------------------------------------------------------
# Custom autograd Functions (notebooks 04 and 05): the evidence of autograder.checks.functions
# ---------------------------------------------------------------------------------------------------


def step_error(record: Record, *steps: str) -> str | None:
    """The error that stops the first failing of ``steps`` in a Function's case record, or None.

    Each step is blamed for its own failure only: a step that did not run because a prerequisite
    failed (``record["blocked"]``) reports that prerequisite's error; a step that was never
    recorded at all is a bug of the check, reported as such rather than blamed on the learner.
    """
    for step in steps:
        prior = record.get("blocked", {}).get(step)
        if prior is not None:
            return step_error(record, prior) or f"not checked: {prior} did not run"
        if step not in record["errors"]:
            return f"not checked: the check recorded no step {step!r} (a bug in the course, not in your code)"
        if record["errors"][step]:
            return record["errors"][step]
    return None


ACCEPTED_ANSWERS = """What the checks accept as a correct answer (docs/checks.md item 24).

One rule, applied by every item of every check: an answer PyTorch accepts and documents is correct.
For a custom Function's ``backward`` that means, as PyTorch's engine reads its return value:

* a lone tensor is a tuple of one (a Function of one input may return its gradient bare); only a
  tuple holds several gradients: a list is one value, which autograd refuses ("expected Variable or
  None (got list)"), so a list is not accepted either;
* trailing ``None`` entries beyond the forward's inputs are ignored (PyTorch's ``LinearFunction``
  example returns three gradients for ``apply(x, W)`` and relies on it);
* any spelling of the same values is alike (``grad_output.t().mm(input)``, ``grad_output.T @ input``,
  ``grad_output.sum(0)`` or ``.sum(dim=0)``): values are compared, never source.

Where the course is stricter than PyTorch, the notebook says why and the feedback says so:

* a gradient must have its input's exact shape when ``backward`` is called directly: the engine
  silently sum-reduces a broadcastable wrong shape (docs/checks.md item 8), which hides a real bug;
* a gradient that is not needed (``ctx.needs_input_grad`` False) must be None, not computed and
  discarded (the needs_input_grad items);
* tensors go through ``save_for_backward``, not ``ctx`` attributes (docs/checks.md item 12).

:func:`backward_returns` applies the rule; no item counts a backward's values another way.
"""


#: The named mistake of the bias gradient in older PyTorch docs (docs/checks.md item 22).
SQUEEZED_BIAS = (
    "grad_output.sum(0).squeeze(0): with one output feature the sum has shape (1,) and .squeeze(0) makes "
    "it a 0-d tensor, which autograd refuses as the gradient of a bias of shape (1,); grad_output.sum(0) "
    "alone is right for every size"
)


#: A linear Function that saves its output where its input belongs: grad_weight = grad_output.T @ output,
#: (out, out) where the weight is (out, in).
SAVED_OUTPUT = (
    "the output saved where the input belongs (save_for_backward(output, ...) instead of the input), so "
    "grad_weight = grad_output.t().mm(output) is (out, out); save the input, which grad_weight needs"
)


def backward_returns(
    returned: Record, n_inputs: int, label: str, names: list[str]
) -> tuple[list[Any], str | None]:
    """The gradients a recorded ``backward`` return value gives, read as PyTorch reads it.

    ``returned`` is :func:`autograder.checks.functions.returned`'s record. Returns one entry per
    forward input (None where none was returned) and, when PyTorch would refuse the return value, a
    message saying why: a list, more non-None values than the forward has inputs, or fewer values
    (the entries that were returned are still given, so that their values can be judged).
    See :data:`ACCEPTED_ANSWERS`.
    """
    inputs = f"{n_inputs} input{'' if n_inputs == 1 else 's'}"
    grads = list(returned["grads"])
    if returned["kind"] == "list":
        return (grads + [None] * n_inputs)[:n_inputs], (
            f"{label}.backward returned a list. Likely mistake: the gradients returned as a list, which "
            "PyTorch reads as one value (autograd raises 'expected Variable or None (got list)'); only a "
            "tuple is one gradient per input: return a tuple."
        )
    while len(grads) > n_inputs and grads[-1] is None:
        grads.pop()
    if len(grads) > n_inputs:
        return grads[:n_inputs], (
            f"{label}.backward returned {len(returned['grads'])} value(s) for the {inputs} of "
            f"forward ({', '.join(names[:n_inputs])}). Likely mistake: a value that is not None beyond "
            "the last input (PyTorch refuses it: 'returned an incorrect number of gradients'); return one "
            "gradient per input, in order; only extra trailing Nones are ignored."
        )
    if len(grads) < n_inputs:
        missing = ", ".join(names[len(grads) : n_inputs])
        return grads + [None] * (n_inputs - len(grads)), (
            f"{label}.backward returned {len(grads)} value(s) for the {inputs} of forward, so "
            f"{missing} is missing. Likely mistake: backward returns values only for some inputs; return "
            "one gradient per input, in order, None for an input that has none (a number, a flag, a "
            "tensor that needs no gradient)."
        )
    return grads, None


def describe(value: Any) -> str:
    """A value from the evidence in a few words: ``an array of shape (3,)``, ``a NoneType``..."""
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    type_name = getattr(value, "type_name", None)
    return f"a {type_name or type(value).__name__}"


def tensors_unchanged_item(
    records: dict[str, Record], originals: dict[str, dict[str, np.ndarray]], weight: float = 0.5
) -> Item:
    """Passes when no step of any case changed a tensor it was given (an input or an upstream gradient).

    The feedback names the argument that changed and the step that changed it, with the advice for
    that argument: forward writing into its input, backward writing into ``grad_output``, or
    backward writing into a saved tensor (which is the caller's input, not a copy). It cannot pass
    while a case's forward failed: code that raises changes nothing and earns nothing for it.
    """
    name = "inputs unchanged"
    for label, record in records.items():
        error = step_error(record, "forward")
        if error:
            return Item(name, False, f"not checked: case {label} did not run: {error}", weight)
    for label, record in records.items():
        for key, after in record.get("inputs_after", {}).items():
            step, _, argument = key.partition(": ")
            before = originals[label].get(argument)
            if before is None or not isinstance(after, np.ndarray):
                continue
            if after.shape == before.shape and np.array_equal(after, before, equal_nan=True):
                continue
            if argument == "grad_output":
                hint = (
                    "backward wrote into grad_output (e.g. grad_output[mask] = 0 or grad_output.mul_): "
                    "it is the caller's gradient, shared with the rest of the graph; compute a new tensor"
                )
            elif step == "forward":
                hint = (
                    f"forward wrote into its input {argument} (add_, clamp_, t_(), an indexed assignment): "
                    "compute a new tensor instead"
                )
            else:
                hint = (
                    f"backward wrote into the saved {argument}: ctx.saved_tensors gives back the caller's "
                    f"own {argument}, not a copy; compute a new tensor (out-of-place operations, or "
                    f"{argument}.clone() first)"
                )
            where = "" if step == "forward" else f" ({step})"
            return Item(
                name,
                False,
                f"in case {label}{where}, your code changed its argument {argument} in place: {hint}.",
                weight,
            )
    return Item(name, True, "no input and no upstream gradient was modified", weight)


def verdict_or_error(name: str, verdict: Verdict, error: str | None, weight: float = 1.0) -> Item:
    """The item of one value, judged on its verdict; the call's error stands in only when the value is
    missing, so that a forward whose output was recorded is not failed by its backward's error."""
    if verdict.problem == "missing" and error:
        return Item(name, False, error, weight)
    return Item.from_verdicts(name, [verdict], weight)


def cases_item(
    name: str, records: dict[str, Record], verdicts: dict[str, list[Verdict]], weight: float = 1.0
) -> Item:
    """An item over several cases, sunk by the first case that raised or failed, named by its label."""
    for label, record in records.items():
        if record.get("error"):
            return Item(name, False, f"{label}: {record['error']}", weight)
    for label in records:
        failures = [v for v in verdicts[label] if not v.ok]
        if failures:
            return Item(name, False, f"{label}: {failures[0].message()}", weight)
    return Item.from_verdicts(name, [v for label in records for v in verdicts[label]], weight)


# Error messages of a product whose operands do not line up: numpy's @ and np.dot, torch's @.
_MATMUL_SIZES = (
    re.compile(r"mismatch in its core dimension \d+.*\(size (\d+) is different from (\d+)\)"),
    re.compile(r"not aligned: (\d+) \(dim \d+\) != (\d+) \(dim \d+\)"),
    re.compile(r"shapes cannot be multiplied \(\d+x(\d+) and (\d+)x\d+\)"),
)
#: The learner's line that raised, as :func:`autograder.checks.calling.describe_exception` quotes it.
_QUOTED_LINE = re.compile(r"\(in [^,]+, line \d+: (.*)\)\s*$")
_BROADCAST_SHAPES = re.compile(r"could not be broadcast together with shapes ((?:\([\d,]*\) ?){2,})")


def product_sizes(error: str | None) -> tuple[int, int] | None:
    """The two inner sizes that did not match in a failed matrix product, read from its error."""
    for pattern in _MATMUL_SIZES:
        match = pattern.search(error or "")
        if match:
            return int(match.group(1)), int(match.group(2))
    return None


def broadcast_shapes(error: str | None) -> list[tuple[int, ...]]:
    """The shapes of a failed elementwise operation (numpy's broadcasting error), else []."""
    match = _BROADCAST_SHAPES.search(error or "")
    if not match:
        return []
    shapes = re.findall(r"\(([\d,]*)\)", match.group(1))
    return [tuple(int(s) for s in shape.split(",") if s) for shape in shapes]


def elementwise_for_product(error: str | None) -> str | None:
    """ "An elementwise product where a matrix product belongs", when a failed elementwise operation had
    two matrices that a matrix product (with or without a transpose) could combine, and the line that
    raised, when the error quotes it, multiplies (a sum or difference of such matrices is another
    mistake, and is left unnamed)."""
    shapes = broadcast_shapes(error)
    if len(shapes) != 2 or any(len(shape) != 2 for shape in shapes):
        return None
    quoted = _QUOTED_LINE.search(error or "")
    if quoted and not re.search(r"(?<!\*)\*(?!\*)", quoted.group(1)):
        return None
    (a0, a1), (b0, b1) = shapes
    if a1 == b0 or a1 == b1 or a0 == b0:
        return (
            f"an elementwise product (*) of a ({a0}, {a1}) and a ({b0}, {b1}) array where a matrix "
            "product (@) belongs?"
        )
    return None


def explain_errors(records: dict[str, Record], explain: Callable[[str], str | None]) -> dict[str, Record]:
    """Copies of ``records`` whose errors end with the likely mistake ``explain`` finds in them, if any.

    The evidence itself is left as it was: a grader may be run twice on the same evidence.
    """
    explained = {}
    for label, record in records.items():
        error = record.get("error")
        likely = explain(error) if error else None
        explained[label] = {**record, "error": f"{error}. Likely mistake: {likely}"} if likely else record
    return explained


_PRODUCT_SHAPES = re.compile(r"shapes cannot be multiplied \((\d+)x(\d+) and (\d+)x(\d+)\)")


def linear_forward_mistake(error: str, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> str | None:
    """The mistake of a linear Function's forward that raised ``error`` on an input of ``x_shape`` and a
    weight of ``w_shape`` (out, in), when the error shows it, else None: the input (its leading axes
    folded, as torch.matmul folds them) multiplied by the weight itself, untransposed; or a matrix-only
    product (``.mm``, ``torch.addmm``) on an input that is not a matrix, on the line that raised."""
    match = _PRODUCT_SHAPES.search(error)
    if match and len(x_shape) >= 2:
        rows, cols, w_rows, w_cols = (int(g) for g in match.groups())
        if (rows, cols, (w_rows, w_cols)) == (int(np.prod(x_shape[:-1])), x_shape[-1], tuple(w_shape)):
            return (
                "the input multiplied by the weight itself: the weight is stored (out_features, "
                "in_features), so forward needs its transpose, input.mm(weight.t()) (or input @ weight.t())"
            )
    quoted = _QUOTED_LINE.search(error)
    if "must be a matrix" in error and len(x_shape) != 2 and quoted and "mm(" in quoted.group(1):
        return (
            f".mm (or torch.addmm) on a {len(x_shape)}-D input: they take matrices only, so forward is right "
            "only for 2-D input; input @ weight.t() (torch.matmul) multiplies over the last axis, whatever "
            "the leading axes"
        )
    return None


def explain_linear_forward_errors(
    records: dict[str, Record], inputs: dict[str, dict[str, Any]]
) -> dict[str, Record]:
    """Copies of a linear Function's case ``records`` whose forward error ends with the mistake
    :func:`linear_forward_mistake` finds in it on that case's ``inputs`` (``x`` and ``W``), if any; the
    evidence itself is left as it was (a grader may be run twice on the same evidence)."""
    explained = {}
    for label, record in records.items():
        error, data = (record.get("errors") or {}).get("forward"), inputs.get(label)
        likely = linear_forward_mistake(error, data["x"].shape, data["W"].shape) if error and data else None
        if likely:
            record = {
                **record,
                "errors": {**record["errors"], "forward": f"{error}. Likely mistake: {likely}."},
            }
        explained[label] = record
    return explained
