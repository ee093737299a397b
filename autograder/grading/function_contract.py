"""The grading half of the one Function contract (:mod:`autograder.checks.function_contract`).

Every check of a learner's ``torch.autograd.Function`` adds :func:`contract_items` to its report, so
that one mistake costs the same wherever a Function is written (docs/checks.md item 30). Each item
compares the learner's Function with itself (see the collect side), and names a mistake only when
that mistake explains the evidence (docs/checks.md item 28); otherwise it states what it saw.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import permutations
from typing import Any, Protocol

import numpy as np

from autograder.checks.compare import compare
from autograder.checks.functions import FunctionRecord
from autograder.checks.report import Item
from autograder.grading.toolkit import ItemOf, Record, backward_returns, step_error, tensors_unchanged_item

#: Errors of a backward on an upstream gradient of an unusual layout, and the mistake each names.
LAYOUT_MISTAKES = (
    (
        "view size is not compatible",
        ".view on grad_output (or on a tensor computed from it): a non-contiguous gradient cannot be "
        "viewed; use .reshape",
    ),
    (
        "refers to a single memory location",
        "backward writes into grad_output in place (grad_output.mul_, grad_output[...] = ...): an expanded "
        "gradient shares one memory location between its entries; compute a new tensor",
    ),
)
_VMAP_INPLACE_MISTAKE = (
    "an in-place operation on a tensor computed inside forward (e.g. output += bias): under vmap the "
    "right-hand side carries a batch dimension the left one lacks; write output = output + bias"
)
#: The errors of ``torch.func.vmap`` over an in-place operation whose right side carries the batch
#: (the first under a vmap rule PyTorch generates, the second under a batching rule of its own).
VMAP_INPLACE = (
    ("inplace arithmetic", _VMAP_INPLACE_MISTAKE),
    ("doesn't match the broadcast shape", _VMAP_INPLACE_MISTAKE),
)
#: PyTorch's own errors of ``torch.func`` over a Function that is not written for it, each one cause.
FUNC_TRANSFORMS = (
    (
        "it must override the setup_context staticmethod",
        "forward written the old way, forward(ctx, ...): torch.func transforms need forward without ctx "
        "and a setup_context(ctx, inputs, output) staticmethod that saves what backward needs",
    ),
    (
        "does not have vmap support",
        "generate_vmap_rule = True is missing from the class (or a vmap staticmethod): with forward and "
        "setup_context split, PyTorch generates the vmap rule itself when that attribute is set",
    ),
)


def _explained(error: str, known: Sequence[tuple[str, str]]) -> str:
    for marker, mistake in known:
        if marker in error:
            return f"{error}. Likely mistake: {mistake}"
    return error


def _layouts_problem(record: FunctionRecord) -> str | None:
    """The first difference a layout makes: an error, a changed upstream gradient, other values. It
    cannot pass unless backward ran on the same values in a contiguous tensor: then nothing was
    compared (and the feedback says so, without naming a layout mistake)."""
    outputs = record["outputs"]
    for layout in ("non-contiguous", "expanded"):
        step = f"contract: {layout} upstream"
        error = step_error(record, f"{step}: same values", f"{step}: contiguous")
        if error:
            return f"not checked: backward raised for a contiguous upstream gradient already: {error}"
        error = step_error(record, f"{step}: apply", step)
        if error:
            return f"with a {layout} upstream gradient: {_explained(error, LAYOUT_MISTAKES)}"
        upstream = outputs.get(f"{step}: upstream", {})
        if not np.array_equal(upstream.get("before"), upstream.get("after")):
            return (
                f"with a {layout} upstream gradient, backward changed its argument grad_output in place: "
                "it is the caller's gradient, shared with the rest of the graph; compute a new tensor"
            )
        same = outputs[f"{step}: contiguous"]
        for name, grad in outputs[step].items():
            if same[name] is None or grad is None:
                if (same[name] is None) != (grad is None):
                    return f"the gradient of {name} is None for one layout of the same upstream values only"
                continue
            verdict = compare(f"{name} for a {layout} upstream gradient", grad, same[name])
            if not verdict.ok:
                return (
                    f"{verdict.message()} (compared with your own result for the same values, contiguous): "
                    "does backward read grad_output's memory directly (.data_ptr, .storage, .numpy())?"
                )
    return None


def _only_grads(
    record: FunctionRecord, name: str, label: str, names: list[str], order: list[int] | None
) -> Any:
    returned = record["outputs"][f"contract: only {name}"]
    grads, _ = backward_returns(returned, len(names), label, names)
    if order is not None:  # judged as the learner meant them: the order has its own diagnosis
        grads = [grads[i] for i in order]
    return grads


def _needs_problem(record: FunctionRecord, label: str, order: list[int] | None) -> str | None:
    contract = record["outputs"]["contract"]
    names, alone = contract["names"], contract["differentiable"]
    computed: dict[str, set[str]] = {}  # argument alone requiring grad -> gradients returned
    for name in alone:
        error = step_error(record, f"contract: only {name}: apply", f"contract: only {name}")
        if error:
            return f"with only {name} requiring grad: {error}"
        grads = _only_grads(record, name, label, names, order)
        computed[name] = {names[j] for j, g in enumerate(grads) if g is not None}
    return needs_input_grad_diagnosis(computed, names)


def needs_input_grad_diagnosis(computed: dict[str, set[str]], names: Sequence[str]) -> str | None:
    """What backward does wrong with ``ctx.needs_input_grad``, from ``computed``: for each argument that
    alone required grad, the arguments whose gradient backward returned. None when each gradient is
    returned exactly when its own argument requires grad.

    The mistake is named only where the pattern fixes it: a gradient returned in every case (its entry
    never consulted), or returned exactly when another single argument requires grad (gated on that
    argument's entry); otherwise the feedback says what happened, without a cause.
    """
    for other in names:
        when = {n for n, c in computed.items() if other in c}
        if other in computed and when == {other}:
            continue
        if other not in computed and not when:
            continue  # never alone requiring grad (a non-tensor argument), and never returned
        j = names.index(other)
        if when and when == set(computed):
            likely = f"ctx.needs_input_grad[{j}] is never consulted for {other}"
        elif len(when) == 1 and other not in when:
            (gate,) = when
            entry = f"ctx.needs_input_grad[{names.index(gate)}]"
            likely = f"{other}'s gradient is gated on {entry}, the entry of {gate}"
        else:
            likely = None
        if other in computed and other not in when:
            seen = (
                f"with only {other} requiring grad, backward returned None for it although "
                f"ctx.needs_input_grad[{j}] is True"
            )
        else:
            extra = sorted(when - {other})
            seen = (
                f"with only {extra[0]} requiring grad, backward computed the gradient of {other} although "
                f"ctx.needs_input_grad[{j}] is False"
            )
        advice = "compute each gradient only when its own entry is True, else return None"
        return f"{seen}. Likely mistake: {likely}; {advice}" if likely else f"{seen}: {advice}"
    return None


def _vmap_problem(record: FunctionRecord) -> str | None:
    for name in record["outputs"]["contract"]["names"]:
        step = f"contract: vmap {name}"
        if step not in record["errors"] and step not in record.get("blocked", {}):
            continue
        error = step_error(record, step)
        if error:
            return f"torch.func.vmap over {name}: {_explained(error, VMAP_INPLACE + FUNC_TRANSFORMS)}"
        got = record["outputs"][step]
        verdict = compare(f"vmap over {name}", got["vmap"], got["loop"])
        if not verdict.ok:
            return f"{verdict.message()} (compared with your apply on each slice, stacked)"
    return None


def contract_items(
    records: dict[str, Record],
    label: str,
    inputs: dict[str, dict[str, Any]],
    *,
    order: list[int] | None = None,
    weight: float = 0.5,
) -> list[Item]:
    """The contract's items over the cases of ``inputs`` (case -> the arrays the contract ran on, by
    argument name, and ``grad_output``, as the grader remakes them from its seed), each failing on
    the first case with a problem; an item opted out of is left out (its reason is in the evidence).

    Every item compares the learner's Function with itself, so it holds for any inputs: it is judged
    only when the contract ran on this seed's inputs, or evidence of another run would earn it.
    ``order`` is the permutation :func:`wrong_order` found, so that a backward returning its
    gradients in the wrong order is not also blamed for needs_input_grad.
    """
    judged = {k: records[k] for k in inputs if "contract" in records[k]["outputs"]}
    stale = next((k for k in judged if not _same_inputs(judged[k], inputs[k])), None)
    items = []
    for name, item, problem in (
        ("upstream gradient layouts", "layouts", _layouts_problem),
        (
            "needs_input_grad respected",
            "needs_input_grad",
            lambda r: _needs_problem(r, label, order),
        ),
        ("tensors saved with save_for_backward", "ctx", _ctx_problem),
        ("vmap over every argument", "vmap", _vmap_problem),
    ):
        cases = {k: r for k, r in judged.items() if item not in r["outputs"]["contract"]["opt_out"]}
        if not cases:
            continue
        found = next(((k, p) for k, r in cases.items() if (p := _forward_or(r, problem))), None)
        if stale is not None:
            found = (stale, "not checked: the evidence was recorded on other inputs than this grading's")
        if found:
            items.append(Item(name, False, f"in case {found[0]}, {found[1]}", weight))
        else:
            items.append(Item(name, True, _PASSED[item], weight))
    return items


_PASSED = {
    "layouts": "the same gradients for a non-contiguous and an expanded upstream gradient, left unchanged",
    "needs_input_grad": "each gradient computed only when its ctx.needs_input_grad entry is True",
    "ctx": "no tensor kept on a ctx attribute",
    "vmap": "vmap over each argument gives your own result slice by slice",
}


def _same_inputs(record: FunctionRecord, expected: dict[str, Any]) -> bool:
    ran = record["outputs"]["contract"].get("inputs", {})
    return set(ran) == set(expected) and all(
        np.array_equal(np.asarray(ran[k]), np.asarray(v)) for k, v in expected.items()
    )


def _forward_or(record: FunctionRecord, problem: Any) -> str | None:
    error = step_error(record, "forward")
    return f"not checked: {error}" if error else problem(record)


def _ctx_problem(record: FunctionRecord) -> str | None:
    error = step_error(record, "contract: ctx apply", "contract: ctx")
    if error:
        return error
    stashed = record["outputs"]["contract: ctx"]
    return ctx_attributes_message(stashed) if stashed else None


def ctx_attributes_message(stashed: Sequence[str]) -> str:
    """What tensors kept on ``ctx`` attributes mean, in every check of a Function (docs/checks.md item 12)."""
    return (
        f"forward kept tensors on {', '.join(stashed)}. Likely mistake: tensors stored as ctx attributes "
        "instead of ctx.save_for_backward(...) (only non-tensors, such as a Python number, go on ctx "
        "directly): autograd cannot then tell when they were changed in place before backward, so the "
        "gradient can be silently wrong although gradcheck passes, and they keep the graph alive"
    )


def wrong_order(grads: Sequence[Any], expected: Sequence[Any], names: Sequence[str]) -> list[int] | None:
    """The permutation ``p`` with ``grads[p[i]]`` equal to ``expected[i]`` for every gradient, when the
    returned gradients are all there and right but not in ``names``' order; else None."""
    present = [i for i, e in enumerate(expected) if e is not None]
    if len(grads) < len(expected) or len(present) < 2:
        return None
    for order in permutations(range(len(expected))):
        if list(order) == list(range(len(expected))):
            continue
        if any((expected[i] is None) != (grads[order[i]] is None) for i in range(len(expected))):
            continue
        if all(compare(names[i], grads[order[i]], expected[i]).ok for i in present):
            return list(order)
    return None


def wrong_order_message(order: list[int], names: Sequence[str], label: str) -> str:
    """The diagnosis of gradients returned in the wrong order."""
    returned = ", ".join(f"grad_{names[i]}" for i in sorted(range(len(order)), key=lambda i: order[i]))
    wanted = ", ".join(f"grad_{n}" for n in names)
    return (
        f"Likely mistake: {label}.backward returns the gradients in the wrong order ({returned}); "
        f"return them in the order of forward's inputs: {wanted}"
    )


class FunctionCases(Protocol):
    """What :func:`unchanged_item` and :func:`contract_of` read of a Function grader's run."""

    @property
    def cases(self) -> dict[str, FunctionRecord]:
        """The recorded cases, by label."""
        ...

    @property
    def originals(self) -> dict[str, dict[str, Any]]:
        """Each case's tensors as they were given (the upstream gradient as ``grad_output``), by label."""
        ...


def unchanged_item(run: FunctionCases) -> Item:
    """No input and no upstream gradient changed in place, in any case (0.5)."""
    return tensors_unchanged_item(run.cases, run.originals)


def contract_of(function: str, *labels: str) -> ItemOf[FunctionCases]:
    """The Function contract's items, on the cases ``labels`` (every case when none is named)."""

    def items(run: FunctionCases) -> list[Item]:
        ran = {label: run.originals[label] for label in labels or run.cases}
        return contract_items(run.cases, function, ran)

    return items
