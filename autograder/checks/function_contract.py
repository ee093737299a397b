"""The contract every learner's ``torch.autograd.Function`` is held to, collected the same way in every
notebook (docs/checks.md items 10, 11, 12, 30, 31 and 32).

:func:`collect_contract` adds these steps to a :class:`~autograder.checks.functions.FunctionRun`:

* ``contract: <layout> upstream`` for a non-contiguous and an expanded (stride-0) upstream gradient:
  the gradients autograd gives for it, and for a contiguous copy of the same values (the learner's own
  answer, so that this item judges the layout only), and the upstream gradient after backward;
* ``contract: only <name>`` for each differentiable argument, alone requiring grad: what ``backward``
  returned when called directly, so that grading sees which entries it computed;
* ``contract: ctx``: the ``ctx`` attributes of the output's ``grad_fn`` that hold tensors;
* ``contract: vmap <name>`` for each argument the exercise stacks: ``torch.func.vmap`` over it, and the
  learner's own apply on each slice of the stack.

Every judgement compares the learner's Function with itself (same values, another layout, another
requires_grad, a loop instead of vmap), so nothing here needs or computes an expected value: the
values themselves are judged by the check's own items. An exercise leaves an item out only with a
reason, passed as ``opt_out`` and recorded in the evidence (``outputs["contract"]["opt_out"]``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from autograder.checks.core import freeze
from autograder.checks.functions import FAILED, Arg, FunctionRun, ctx_tensor_attributes, make_args, tensor

#: The contract's items, by the name an exercise uses to opt out of one.
ITEMS = ("layouts", "needs_input_grad", "ctx", "vmap")


def upstream_layouts(g: np.ndarray) -> dict[str, torch.Tensor]:
    """A non-contiguous upstream gradient with ``g``'s values, and an expanded (stride-0) one holding
    ``g``'s first entry along dimension 0 repeated, each a layout only autograd's callers send."""
    base = torch.from_numpy(np.array(g, dtype=np.float64, copy=True))
    wide = torch.zeros(*base.shape[:-1], 2 * base.shape[-1], dtype=base.dtype)
    wide[..., ::2] = base
    return {"non-contiguous": wide[..., ::2], "expanded": base[:1].expand(base.shape)}


def _layout_step(run: FunctionRun, spec: Sequence[Arg], layout: str, g: torch.Tensor) -> None:
    step = f"contract: {layout} upstream"
    args, leaves = make_args(spec)
    out = run.apply(f"{step}: apply", args, after=("forward",), record=False)
    before = freeze(g)
    got = run.grads(step, out, leaves, g, after=(f"{step}: apply",), key=step)
    args, leaves = make_args(spec)
    out = run.apply(f"{step}: same values", args, after=("forward",), record=False)
    run.grads(f"{step}: contiguous", out, leaves, g.clone(), after=(f"{step}: same values",))
    if got is not FAILED:
        run.record["outputs"][f"{step}: upstream"] = {"before": before, "after": freeze(g)}


def _only_step(run: FunctionRun, spec: Sequence[Arg], name: str, g: np.ndarray) -> None:
    step = f"contract: only {name}"
    alone = [(n, v, n == name) for n, v, _ in spec]
    args, _ = make_args(alone)
    out = run.apply(f"{step}: apply", args, after=("forward",), record=False)
    run.direct(step, out, tensor(g), after=(f"{step}: apply",), inspect=False)


def _vmap_step(run: FunctionRun, spec: Sequence[Arg], name: str, stack: np.ndarray) -> None:
    step = f"contract: vmap {name}"
    index = [n for n, _, _ in spec].index(name)
    args, _ = make_args([(n, v, False) for n, v, _ in spec])
    apply = getattr(run.fn_cls, "apply", None)

    def mapped() -> dict[str, Any]:
        def one(value: torch.Tensor) -> Any:
            return apply(*args[:index], value, *args[index + 1 :])

        out = torch.func.vmap(one)(tensor(stack))
        looped = torch.stack([one(tensor(s)) for s in stack])
        return {step: {"vmap": freeze(out), "loop": freeze(looped)}}

    run.collect(step, mapped, after=("forward",), name=f"torch.func.vmap of {run.label} over {name}")


def collect_contract(
    run: FunctionRun,
    spec: Sequence[Arg],
    grad_output: np.ndarray,
    *,
    vmap: Mapping[str, np.ndarray] | None = None,
    opt_out: Mapping[str, str] | None = None,
) -> None:
    """Run the contract's steps on the arguments ``spec`` (see the module's docstring).

    ``forward`` must have run first. ``vmap`` maps an argument's name to a stack of its values (the
    exercises that teach vmap); ``opt_out`` maps an item of :data:`ITEMS` to the reason it does not
    apply. The record's ``outputs["contract"]`` says what was run and what was left out, and why, and
    holds the inputs it ran on: grading judges the contract only on the inputs its seed gives.
    """
    opt_out = dict(opt_out or {})
    unknown = set(opt_out) - set(ITEMS)
    if unknown:  # a typo would silently drop an item: a bug of the check
        raise ValueError(f"unknown contract items {sorted(unknown)}; known: {ITEMS}")
    differentiable = [n for n, v, rg in spec if rg and isinstance(v, np.ndarray)]
    if "vmap" not in opt_out and not vmap:
        opt_out["vmap"] = "the notebook does not teach vmap for this exercise"
    if "needs_input_grad" not in opt_out and len(differentiable) < 2:
        opt_out["needs_input_grad"] = "only one argument can require grad"
    arrays = {n: freeze(v) for n, v, _ in spec if isinstance(v, np.ndarray)}
    run.record["outputs"]["contract"] = {
        "inputs": {**arrays, "grad_output": freeze(np.asarray(grad_output))},
        "names": [n for n, _, _ in spec],
        "differentiable": differentiable,
        "opt_out": opt_out,
    }
    if "layouts" not in opt_out:
        for layout, g in upstream_layouts(grad_output).items():
            _layout_step(run, spec, layout, g)
    if "needs_input_grad" not in opt_out:
        for name in differentiable:
            _only_step(run, spec, name, grad_output)
    if "ctx" not in opt_out:
        args, _ = make_args(spec)
        out = run.apply("contract: ctx apply", args, after=("forward",), record=False)
        if out is not FAILED and run.needs_graph("contract: ctx", out):
            run.record["errors"]["contract: ctx"] = None
            run.record["outputs"]["contract: ctx"] = ctx_tensor_attributes(out.grad_fn)
    for name, stack in (vmap or {}).items():
        _vmap_step(run, spec, name, stack)


__all__ = ["ITEMS", "collect_contract", "ctx_tensor_attributes", "upstream_layouts"]
