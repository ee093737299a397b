"""Checks for notebook 04, custom ``torch.autograd.Function`` subclasses.

* ``mul_constant``, ``exp``, ``my_relu``: one check per elementwise Function (1 point each), so that
  each is graded and reported on its own, as the activations of notebook 02 are.
* ``linear_function``: PyTorch's ``LinearFunction``, the centre of the notebook.
* ``backward_by_hand``: what ``out.grad_fn.apply(grad)`` returns.
* ``max_jacobian_error``: analytical against numerical Jacobian, in float64 and in float32.
* ``linear_module``: an ``nn.Module`` built on ``LinearFunction``, initialised like ``nn.Linear``.
* ``train_spiral``: the Part I spiral classifier trained with the learner's ``Linear`` and with
  ``nn.Linear``, which must give the same losses step by step.

Every Function is exercised four ways, because each way hides some mistakes: ``backward`` called
directly on the ``grad_fn`` (the only way to see the exact shape of every returned gradient: the
autograd engine silently sum-reduces a ``grad_bias`` of shape (N, out), CHECKS.md item 8),
``.backward()`` with a random upstream gradient, ``.sum().backward()`` (a stride-0 upstream gradient
that exposes in-place writes into ``grad_output``), and the full float64 Jacobian, gradcheck's view.
``ctx`` itself is inspected too: tensors kept as ``ctx`` attributes instead of going through
``save_for_backward`` pass all four (CHECKS.md item 12), so the evidence records which ``ctx``
attributes hold tensors and what ``saved_tensors`` holds.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from autograder.calling import call
from autograder.checks.core import Check, Evidence, NotAnArray, freeze, register, run_check
from autograder.compare import Verdict, compare
from autograder.grading import reference
from autograder.report import Item, Report
from autograder.tolerances import FLOAT64, JACOBIAN_FLOAT32, JACOBIAN_FLOAT64
from backprop_utils.data import make_spiral

ELEMENTWISE_POINTS = 1.0
LINEAR_FUNCTION_POINTS = 6.0
BACKWARD_BY_HAND_POINTS = 2.0
JACOBIAN_POINTS = 2.0
LINEAR_MODULE_POINTS = 2.0
TRAIN_SPIRAL_POINTS = 2.0

#: The message fragment of PyTorch's version-counter error: a tensor saved with save_for_backward
#: was modified in place before backward unpacked it.
INPLACE_ERROR = "modified by an inplace operation"


def _case_seed(seed: int, index: int) -> int:
    return 1000 * seed + index


def _first_error(record: dict[str, Any], *stages: str) -> str | None:
    """The forward's error, else the first error among ``stages``."""
    errors = record["errors"]
    for stage in ("forward", *stages):
        if errors.get(stage):
            return errors[stage]
    return None


# ---------------------------------------------------------------------------------------------------
# Running a learner's Function: apply, backward called directly, .backward(), .sum(), the Jacobian
# ---------------------------------------------------------------------------------------------------

#: One argument of ``apply``: (name, value, requires_grad). A numpy value becomes a float64 tensor;
#: anything else (a Python number, None) is passed as it is.
Arg = tuple[str, Any, bool]


def _make_args(spec: Sequence[Arg]) -> tuple[list[Any], dict[str, torch.Tensor]]:
    args: list[Any] = []
    leaves: dict[str, torch.Tensor] = {}
    for name, value, requires_grad in spec:
        if isinstance(value, np.ndarray):
            leaves[name] = torch.tensor(value, dtype=torch.float64, requires_grad=requires_grad)
            args.append(leaves[name])
        else:
            args.append(value)
    return args, leaves


def ctx_tensor_attributes(ctx: Any) -> list[str]:
    """Names of ``ctx`` attributes that hold tensors (directly or in a list, tuple or dict).

    ``ctx`` is the ``grad_fn`` of the Function's output; its ``__dict__`` holds exactly what forward
    assigned as ``ctx.name = value``. Tensors belong in ``save_for_backward`` instead.
    """
    found = []
    for name, value in vars(ctx).items():
        items = list(value.values()) if isinstance(value, dict) else value
        if not isinstance(items, (list, tuple)):
            items = [items]
        if any(isinstance(v, torch.Tensor) for v in items):
            found.append(f"ctx.{name}")
    return sorted(found)


def _returned(result: Any) -> dict[str, Any]:
    """What ``backward`` returned, as plain data: its type and one frozen value per entry."""
    if isinstance(result, (tuple, list)):
        return {"kind": type(result).__name__, "grads": [freeze(v) for v in result]}
    # a bare tensor is how a Function of one input may return its one gradient
    return {"kind": type(result).__name__, "grads": [freeze(result)]}


def _apply(fn_cls: Any, args: list[Any], label: str) -> tuple[Any, str | None, list[str]]:
    apply = getattr(fn_cls, "apply", None)
    outcome = call(apply, *args, name=f"{label}.apply")
    if not outcome.ok:
        return None, outcome.error, outcome.notes
    out = outcome.result
    if not isinstance(out, torch.Tensor):
        return None, f"{label}.apply returned a {type(out).__name__}, expected a tensor", outcome.notes
    return out, None, outcome.notes


def run_function(
    fn_cls: Any,
    spec: Sequence[Arg],
    grad_output: np.ndarray,
    label: str,
    stages: Sequence[str] = ("direct", "autograd"),
) -> dict[str, Any]:
    """Run a learner's Function on the arguments ``spec`` and record everything as plain data.

    Stages (each on fresh leaf tensors, so that one cannot disturb another):

    * ``direct``: ``fn_cls.backward(out.grad_fn, grad_output)`` called directly; also what
      ``saved_tensors`` holds and which ``ctx`` attributes hold tensors.
    * ``autograd``: ``out.backward(grad_output)``; the ``.grad`` of every leaf.
    * ``sum``: ``out.sum().backward()``, whose upstream gradient is an expanded stride-0 tensor.
    * ``jacobian``: the full Jacobian, one ``torch.autograd.grad`` per output element.
    * ``inplace``: the output multiplied by 2 in place after forward, then ``out.backward``.

    Returns ``{"out", "errors": {stage: message}, "notes", "direct", "saved", "ctx_tensors",
    "autograd", "sum", "jacobian", "inplace", "inputs_after"}``.
    """
    record: dict[str, Any] = {"out": None, "errors": {}, "notes": [], "inputs_after": {}}
    args, leaves = _make_args(spec)
    out, error, notes = _apply(fn_cls, args, label)
    record["notes"] += notes
    record["errors"]["forward"] = error
    record["out"] = freeze(out) if out is not None else None
    touched: list[tuple[str, torch.Tensor]] = [(f"forward: {k}", t) for k, t in leaves.items()]

    def fresh() -> tuple[Any, dict[str, torch.Tensor], str | None]:
        a, lv = _make_args(spec)
        o, err, n = _apply(fn_cls, a, label)
        record["notes"].extend(x for x in n if x not in record["notes"])
        return o, lv, err

    def no_grad_fn(o: torch.Tensor) -> str | None:
        if o.grad_fn is None:
            return (
                f"the output of {label}.apply has no grad_fn although an input requires grad: "
                "is forward returning a tensor detached from its inputs' graph?"
            )
        return None

    if error is None and "direct" in stages:
        g = torch.tensor(grad_output, dtype=torch.float64)
        touched.append(("backward called directly: grad_output", g))
        problem = no_grad_fn(out)
        if problem:
            record["errors"]["direct"] = problem
        else:
            saved = call(lambda: list(out.grad_fn.saved_tensors), name="reading ctx.saved_tensors")
            record["saved"] = [freeze(t) for t in saved.result] if saved.ok else NotAnArray("error")
            record["ctx_tensors"] = ctx_tensor_attributes(out.grad_fn)
            outcome = call(getattr(fn_cls, "backward", None), out.grad_fn, g, name=f"{label}.backward")
            record["notes"] += outcome.notes
            record["errors"]["direct"] = outcome.error
            record["direct"] = _returned(outcome.result) if outcome.ok else None

    for stage in ("autograd", "sum", "inplace"):
        if error is not None or stage not in stages:
            continue
        o, lv, err = fresh()
        touched += [(f"{stage}: {k}", t) for k, t in lv.items()]
        if err is None:
            err = no_grad_fn(o)
        if err is None:
            g = torch.tensor(grad_output, dtype=torch.float64)
            touched.append((f"{stage}: grad_output", g))
            if stage == "inplace":
                edited = call(lambda o=o: o.detach().mul_(2.0), name="editing the output in place")
                err = edited.error
            if err is None:
                run = (lambda o=o: o.sum().backward()) if stage == "sum" else (lambda o=o, g=g: o.backward(g))
                outcome = call(run, name=f"{label}.backward (through autograd)")
                record["notes"].extend(x for x in outcome.notes if x not in record["notes"])
                err = outcome.error
        record["errors"][stage] = err
        record[stage] = {k: freeze(t.grad) for k, t in lv.items() if t.requires_grad}

    if error is None and "jacobian" in stages:
        record["jacobian"], record["errors"]["jacobian"] = _jacobian(fresh, label)
    record["inputs_after"] = {k: freeze(t) for k, t in touched}
    return record


def _jacobian(fresh: Callable[[], Any], label: str) -> tuple[dict[str, Any] | None, str | None]:
    o, leaves, err = fresh()
    if err is not None:
        return None, err
    wanted = [t for t in leaves.values() if t.requires_grad]
    names = [k for k, t in leaves.items() if t.requires_grad]
    rows: dict[str, list[np.ndarray]] = {k: [] for k in names}
    for i in range(o.numel()):
        unit = torch.zeros(o.numel(), dtype=torch.float64)
        unit[i] = 1.0
        outcome = call(
            torch.autograd.grad,
            o,
            wanted,
            unit.view_as(o),
            retain_graph=True,
            allow_unused=True,
            name=f"{label}.backward (through autograd)",
        )
        if not outcome.ok:
            return None, outcome.error
        for k, t, g in zip(names, wanted, outcome.result, strict=True):
            rows[k].append(np.zeros(t.numel()) if g is None else g.detach().reshape(-1).numpy().copy())
    return {k: np.stack(v) for k, v in rows.items()}, None


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


def _inputs_unchanged(
    records: dict[str, dict[str, Any]], originals: dict[str, dict[str, np.ndarray]]
) -> Item:
    """Passes when no recorded tensor (inputs and upstream gradients) was modified in any case."""
    name, weight = "inputs unchanged", 0.5
    for label, record in records.items():
        if record["errors"].get("forward"):
            return Item(name, False, f"not checked: case {label} did not run", weight)
    for label, record in records.items():
        for key, after in record["inputs_after"].items():
            stage, _, tensor = key.partition(": ")
            if stage == "inplace":
                continue  # the check edits that output itself, and the inputs stay unchecked there
            before = originals[label].get(tensor)
            if before is None or not isinstance(after, np.ndarray):
                continue
            if after.shape != before.shape or not np.array_equal(after, before, equal_nan=True):
                hint = (
                    "an in-place operation on grad_output (e.g. grad_output[mask] = 0 or mul_) changes "
                    "the caller's gradient: compute a new tensor instead"
                    if tensor == "grad_output"
                    else "an in-place operation in forward or backward (add_, clamp_, t_()) changes the "
                    "caller's tensor: compute a new one instead"
                )
                return Item(
                    name, False, f"in case {label} ({stage}), {tensor} was changed in place: {hint}.", weight
                )
    return Item(name, True, "no input and no upstream gradient was modified", weight)


def _notes(report: Report, records: dict[str, dict[str, Any]]) -> None:
    for record in records.values():
        for note in record.get("notes", []):
            if note not in report.notes:
                report.notes.append(note)


def _grads_item(
    name: str,
    record: dict[str, Any],
    expected: Sequence[np.ndarray | None],
    names: Sequence[str],
    label: str,
    weight: float,
    mistakes: dict[str, dict[str, Any]] | None = None,
    only: Sequence[int] | None = None,
    accept_lengths: Sequence[int] = (),
) -> Item:
    """Backward called directly: one entry per forward input, each the exact shape and value expected.

    ``expected[i]`` is None where the gradient must be None. ``only`` restricts the value comparison
    to some entries (the others may be None or anything). ``accept_lengths`` lists other lengths of
    the returned tuple that are acceptable (trailing entries then count as None).
    """
    error = _first_error(record, "direct")
    if error:
        return Item(name, False, error, weight)
    returned = record["direct"]
    grads = list(returned["grads"])
    n = len(expected)
    if len(grads) != n and len(grads) not in accept_lengths:
        inputs = ", ".join(names)
        return Item(
            name,
            False,
            f"{label}.backward returned {len(grads)} value(s) for the {n} inputs of forward ({inputs}): "
            f"return exactly one gradient per input, in order, None where there is none.",
            weight,
        )
    returned_count = len(grads)
    grads = (grads + [None] * n)[:n]
    indices = range(n) if only is None else only
    for i in indices:
        want, got = expected[i], grads[i]
        if want is None:
            if got is not None:
                return Item(
                    name,
                    False,
                    f"{names[i]} should be None (its input has no gradient), but backward returned "
                    f"{_describe(got)}: a non-tensor input or one that needs no gradient gets None.",
                    weight,
                )
            continue
        if got is None and i >= returned_count:
            return Item(
                name,
                False,
                f"{label}.backward returned {returned_count} value(s) for the {n} inputs of forward, so "
                f"{names[i]} is missing: return one gradient per input, in order.",
                weight,
            )
        if got is None:
            return Item(name, False, f"{names[i]} is None; expected a tensor of shape {want.shape}.", weight)
        verdict = compare(names[i], got, want, mistakes=(mistakes or {}).get(names[i]))
        if not verdict.ok:
            return Item(name, False, verdict.message(), weight)
    shapes = ", ".join(
        f"{names[i]} {tuple(expected[i].shape)}" if expected[i] is not None else f"{names[i]} None"
        for i in indices
    )
    return Item(name, True, f"exact shapes and values: {shapes}", weight)


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    if isinstance(value, NotAnArray):
        return f"a {value.type_name}"
    return f"a {type(value).__name__}"


def _autograd_verdicts(
    record: dict[str, Any],
    expected: dict[str, np.ndarray],
    stages: Sequence[str],
    mistakes: dict | None = None,
) -> tuple[str | None, list[Verdict]]:
    """Compare ``.grad`` after ``.backward()`` / ``.sum().backward()`` and the Jacobian with the reference."""
    verdicts = []
    for stage in stages:
        error = _first_error(record, stage)
        if error:
            what = {"sum": "out.sum().backward()", "autograd": "out.backward(grad_output)"}.get(stage, stage)
            return f"{what} failed: {error}", []
        if stage == "jacobian":
            for k, j in record["jacobian"].items():
                verdicts.append(compare(f"the Jacobian with respect to {k}", j, expected[f"jacobian:{k}"]))
        else:
            earlier_ok = all(v.ok for v in verdicts)
            for k, g in record[stage].items():
                title = f"{k}.grad after out.sum().backward()" if stage == "sum" else f"{k}.grad"
                verdict = compare(title, g, expected[f"{stage}:{k}"], mistakes=(mistakes or {}).get(k))
                if stage == "sum" and not verdict.ok and earlier_ok:
                    # right with a random upstream gradient, wrong with .sum()'s: the difference is
                    # that .sum() passes an expanded tensor whose elements share one memory location
                    verdict = dataclasses.replace(
                        verdict,
                        likely="an in-place write into grad_output: out.sum().backward() passes an "
                        "expanded all-ones tensor whose elements share one memory location, so writing "
                        "into it changes every element; compute a new tensor instead",
                    )
                verdicts.append(verdict)
    return None, verdicts


def _verdicts_item(
    name: str, error: str | None, verdicts: list[Verdict], weight: float, ok_text: str
) -> Item:
    if error:
        return Item(name, False, error, weight)
    item = Item.from_verdicts(name, verdicts, weight)
    return Item(name, True, ok_text, weight) if item.passed else item


# ---------------------------------------------------------------------------------------------------
# MulConstant, Exp, MyReLU
# ---------------------------------------------------------------------------------------------------

#: For each elementwise Function: its class name, its cases as (label, x shape, constant), and the
#: label of its special case (the third).
ELEMENTWISE: dict[str, dict[str, Any]] = {
    "mul_constant": {
        "label": "MulConstant",
        "cases": (
            ("x (3, 4), constant 2.5", (3, 4), 2.5),
            ("N=1", (1, 4), -1.5),
            ("int constant -3, 3-D x", (2, 3, 2), -3),
        ),
    },
    "exp": {
        "label": "Exp",
        "cases": (
            ("x (3, 4)", (3, 4), None),
            ("N=1", (1, 4), None),
            ("in-place edit of the output", (3, 4), None),
        ),
    },
    "my_relu": {
        "label": "MyReLU",
        "cases": (("x (3, 4)", (3, 4), None), ("N=1", (1, 4), None), ("x with exact zeros", (3, 4), None)),
    },
}


def elementwise_inputs(kind: str, seed: int) -> dict[str, dict[str, Any]]:
    """Every case of an elementwise check: ``{label: {"x", "grad_output", "constant"}}``; x never 0
    except in MyReLU's special case, where it has exact zeros (the gradient there is 0, as in torch)."""
    cases = {}
    for index, (label, shape, constant) in enumerate(ELEMENTWISE[kind]["cases"]):
        rng = np.random.default_rng(_case_seed(seed, index))
        x = rng.standard_normal(shape)
        if kind == "exp":
            x = 0.7 * x
        if kind == "my_relu" and index == 2:
            x[rng.random(shape) < 0.4] = 0.0
            x[0, 0], x[1, 1], x[2, 2], x[0, 1] = 0.0, -0.0, 0.0, 0.5
        cases[label] = {"x": x, "grad_output": rng.standard_normal(shape), "constant": constant}
    return cases


def _elementwise_spec(kind: str, data: dict[str, Any]) -> list[Arg]:
    spec: list[Arg] = [("x", data["x"], True)]
    if kind == "mul_constant":
        spec.append(("constant", data["constant"], False))
    return spec


def collect_elementwise(kind: str, fn_cls: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's Function on every case of ``kind`` and record the results."""
    label = ELEMENTWISE[kind]["label"]
    cases = {}
    for index, (case, data) in enumerate(elementwise_inputs(kind, seed).items()):
        stages = ("direct", "autograd", "sum", "jacobian") if index == 0 else ("direct", "autograd")
        if kind == "exp" and index == 2:
            stages = ("direct", "inplace")
        cases[case] = run_function(fn_cls, _elementwise_spec(kind, data), data["grad_output"], label, stages)
    return {"check": kind, "seed": seed, "cases": cases}


def _elementwise_reference(kind: str, data: dict[str, Any]) -> dict[str, np.ndarray]:
    """out, the gradient of x for grad_output, and the local derivative, by torch autograd in float64."""
    c = data["constant"]
    fn = {"mul_constant": lambda t: t * c, "exp": torch.exp, "my_relu": torch.relu}[kind]
    x = torch.tensor(data["x"], dtype=torch.float64, requires_grad=True)
    out = fn(x)
    (grad,) = torch.autograd.grad(out, x, torch.tensor(data["grad_output"]))
    (local,) = torch.autograd.grad(fn(x).sum(), x)
    return {"out": out.detach().numpy(), "grad": grad.numpy(), "local": local.numpy()}


def _elementwise_mistakes(kind: str, data: dict[str, Any], ref: dict[str, np.ndarray]) -> dict[str, Any]:
    x, g = data["x"], data["grad_output"]
    ignored = "grad_output is ignored (the local derivative alone is returned)"
    if kind == "mul_constant":
        return {
            "out": {},
            "grad_x": {ignored: np.full_like(x, data["constant"]), "grad_output returned unscaled": g},
        }
    if kind == "exp":
        return {
            "out": {},
            "grad_x": {
                ignored: np.exp(x),
                "grad_output * x: the saved input used where the output belongs": g * x,
            },
        }
    return {
        "out": {"the negative part is kept instead of the positive one": np.minimum(x, 0.0)},
        "grad_x": {
            "gradient 1 at x == 0 (a mask from x >= 0); torch.relu's gradient at 0 is 0": g * (x >= 0),
            "no mask at all: grad_output returned as it is": g,
            ignored: (x > 0).astype(np.float64),
        },
    }


def _ctx_item(record: dict[str, Any], label: str, weight: float = 0.5) -> Item:
    name = "tensors via save_for_backward"
    error = _first_error(record, "direct")
    if error:
        return Item(name, False, f"not checked: {error}", weight)
    stashed = record.get("ctx_tensors") or []
    if stashed:
        return Item(
            name,
            False,
            f"{', '.join(stashed)} hold(s) tensors: save tensors with ctx.save_for_backward(...) and read "
            "them back with ctx.saved_tensors (only non-tensors, such as a Python number, go on ctx "
            "directly). A tensor kept on ctx escapes autograd's checks: an in-place change to it goes "
            "unnoticed and the gradient is silently wrong, although gradcheck passes.",
            weight,
        )
    return Item(name, True, "no tensor is kept as a ctx attribute", weight)


def _exp_saved_item(record: dict[str, Any], data: dict[str, Any]) -> Item:
    """Exp must save its output (one tensor, equal to exp(x)) with save_for_backward, and use it."""
    name, weight = "saves its output", 1.0
    error = _first_error(record, "direct")
    if error:
        return Item(name, False, error, weight)
    stashed = record.get("ctx_tensors") or []
    saved = record.get("saved")
    out = np.exp(data["x"])
    if isinstance(saved, NotAnArray):
        return Item(name, False, "reading ctx.saved_tensors raised an error.", weight)
    if stashed:
        return Item(name, False, _ctx_item(record, "Exp", weight).message, weight)
    arrays = [s for s in saved if isinstance(s, np.ndarray)]
    if len(saved) != 1 or len(arrays) != 1:
        return Item(
            name,
            False,
            f"ctx.saved_tensors holds {len(saved)} tensor(s); Exp should save exactly one, its output "
            "(ctx.save_for_backward(result)).",
            weight,
        )
    if compare("saved", arrays[0], data["x"]).ok:
        return Item(
            name,
            False,
            "Exp saved its input x and recomputes exp in backward: save the output instead, "
            "ctx.save_for_backward(result); the derivative of exp is exp itself, so the output is "
            "all backward needs and nothing is computed twice.",
            weight,
        )
    if not compare("saved", arrays[0], out).ok:
        return Item(name, False, "the saved tensor is neither the output nor the input of forward.", weight)
    inplace_error = record["errors"].get("inplace")
    if not inplace_error or INPLACE_ERROR not in inplace_error:
        return Item(
            name,
            False,
            "after the output was doubled in place, backward still ran without PyTorch's "
            "'modified by an inplace operation' error: backward must read the output from "
            "ctx.saved_tensors (which checks that it is unchanged), not from anywhere else.",
            weight,
        )
    return Item(
        name,
        True,
        "saved_tensors holds the output; editing it in place makes backward refuse to run, as it should",
        weight,
    )


def grade_elementwise(evidence: Evidence) -> Report:
    """Grade recorded evidence: forward (1), backward called directly (1), through autograd (1), the
    special case (Exp: saves its output 1; MyReLU: gradient 0 at 0, 1; MulConstant: int constant 0.5),
    N = 1 (0.5), tensors via save_for_backward (0.5, not Exp: its special case covers it), inputs
    unchanged (0.5)."""
    kind, seed, cases = evidence["check"], evidence["seed"], evidence["cases"]
    label = ELEMENTWISE[kind]["label"]
    report = Report(label, ELEMENTWISE_POINTS)
    inputs = elementwise_inputs(kind, seed)
    main, single, special = inputs
    names = ["grad_x", "grad_constant"] if kind == "mul_constant" else ["grad_x"]

    def expected_direct(data: dict[str, Any], ref: dict[str, np.ndarray]) -> list[np.ndarray | None]:
        return [ref["grad"], None] if kind == "mul_constant" else [ref["grad"]]

    refs = {case: _elementwise_reference(kind, data) for case, data in inputs.items()}
    record, data, ref = cases[main], inputs[main], refs[main]
    mistakes = _elementwise_mistakes(kind, data, ref)

    error = _first_error(record)
    if error:
        report.add(Item("forward", False, error, 1.0))
    else:
        report.add(
            Item.from_verdicts(
                "forward", [compare("out", record["out"], ref["out"], mistakes=mistakes["out"])]
            )
        )
    report.add(
        _grads_item(
            "backward called directly",
            record,
            expected_direct(data, ref),
            names,
            label,
            1.0,
            {"grad_x": mistakes["grad_x"]},
        )
    )
    expected = {
        "autograd:x": ref["grad"],
        "sum:x": ref["local"],
        "jacobian:x": np.diag(ref["local"].reshape(-1)),
    }
    err, verdicts = _autograd_verdicts(
        record, expected, ("autograd", "sum", "jacobian"), {"x": mistakes["grad_x"]}
    )
    report.add(
        _verdicts_item(
            "through autograd",
            err,
            verdicts,
            1.0,
            "x.grad after .backward(grad_output) and after .sum().backward(), and the float64 Jacobian",
        )
    )

    srecord, sdata, sref = cases[special], inputs[special], refs[special]
    if kind == "exp":
        report.add(_exp_saved_item(srecord, sdata))
    elif kind == "my_relu":
        smistakes = {"grad_x": _elementwise_mistakes(kind, sdata, sref)["grad_x"]}
        item = _grads_item("gradient 0 at x == 0", srecord, [sref["grad"]], names, label, 1.0, smistakes)
        if item.passed:
            err, verdicts = _autograd_verdicts(
                srecord, {"autograd:x": sref["grad"]}, ("autograd",), {"x": smistakes["grad_x"]}
            )
            item = _verdicts_item(
                item.name, err, verdicts, 1.0, "the gradient is 0 where x == 0, as torch.relu's"
            )
        report.add(item)
    else:
        item = _grads_item(special, srecord, expected_direct(sdata, sref), names, label, 0.5)
        if item.passed:
            err, verdicts = _autograd_verdicts(srecord, {"autograd:x": sref["grad"]}, ("autograd",))
            item = _verdicts_item(item.name, err, verdicts, 0.5, "right values and shapes")
        report.add(item)

    item = _grads_item(
        "N = 1", cases[single], expected_direct(inputs[single], refs[single]), names, label, 0.5
    )
    if item.passed:
        item = Item.from_verdicts("N = 1", [compare("out", cases[single]["out"], refs[single]["out"])], 0.5)
    report.add(item)
    if kind != "exp":
        report.add(_ctx_item(record, label))
    report.add(
        _inputs_unchanged(
            cases, {case: {"x": d["x"], "grad_output": d["grad_output"]} for case, d in inputs.items()}
        )
    )
    _notes(report, cases)
    return report


def _elementwise_check(kind: str) -> Check:
    label = ELEMENTWISE[kind]["label"]

    def collect(fn_cls: Any, *, seed: int = 0) -> Evidence:
        return collect_elementwise(kind, fn_cls, seed=seed)

    collect.__doc__ = f"Run the learner's {label} on every case and record the results."
    return register(Check(kind, label, ELEMENTWISE_POINTS, collect))


MUL_CONSTANT = _elementwise_check("mul_constant")
EXP = _elementwise_check("exp")
MY_RELU = _elementwise_check("my_relu")


def check_mul_constant(MulConstant: Any, *, seed: int = 0) -> float:
    """Grade ``MulConstant`` (a tensor times a Python number); print feedback; return points."""
    return run_check(MUL_CONSTANT, MulConstant, seed=seed)


def check_exp(Exp: Any, *, seed: int = 0) -> float:
    """Grade ``Exp``, which must save its output for backward; print feedback; return points."""
    return run_check(EXP, Exp, seed=seed)


def check_my_relu(MyReLU: Any, *, seed: int = 0) -> float:
    """Grade ``MyReLU`` (gradient 0 at exactly 0, like torch.relu); print feedback; return points."""
    return run_check(MY_RELU, MyReLU, seed=seed)


# ---------------------------------------------------------------------------------------------------
# LinearFunction
# ---------------------------------------------------------------------------------------------------

GRAD_NAMES = ("grad_input", "grad_weight", "grad_bias")
INPUT_NAMES = ("input", "weight", "bias")

#: (label, N, in, out, which of input/weight/bias require grad, how the bias is passed). Sizes are
#: pairwise distinct, so a transposed weight gradient or a bias summed over the wrong axis has the
#: wrong shape; N = 1 hides batch-scaling bugs.
LINEAR_CASES: tuple[tuple[str, int, int, int, tuple[bool, bool, bool], str], ...] = (
    ("N=4, in=3, out=5", 4, 3, 5, (True, True, True), "bias"),
    ("N=1", 1, 3, 5, (True, True, True), "bias"),
    ("apply(x, W)", 4, 3, 5, (True, True, False), "omitted"),
    ("apply(x, W, None)", 4, 3, 5, (True, True, False), "None"),
    ("only weight requires grad", 4, 3, 5, (False, True, False), "bias"),
    ("only input requires grad", 4, 3, 5, (True, False, False), "bias"),
    ("only bias requires grad", 4, 3, 5, (False, False, True), "bias"),
    ("input does not require grad", 4, 3, 5, (False, True, True), "bias"),
)
MAIN, SINGLE, OMITTED, NONE_BIAS = (c[0] for c in LINEAR_CASES[:4])
MIXED = tuple(c[0] for c in LINEAR_CASES[4:])


def linear_function_inputs(seed: int) -> dict[str, dict[str, Any]]:
    """Every case: non-trivial x (N, in), W (out, in), b (out,), a random grad_output (N, out)."""
    cases = {}
    for index, (label, n, d, m, requires, bias) in enumerate(LINEAR_CASES):
        rng = np.random.default_rng(_case_seed(seed, index))
        cases[label] = {
            "x": rng.standard_normal((n, d)),
            "W": rng.standard_normal((m, d)) + 0.5,
            "b": rng.standard_normal(m),
            "grad_output": rng.standard_normal((n, m)),
            "requires": requires,
            "bias": bias,
        }
    return cases


def _linear_spec(data: dict[str, Any]) -> list[Arg]:
    rx, rw, rb = data["requires"]
    spec: list[Arg] = [("x", data["x"], rx), ("W", data["W"], rw)]
    if data["bias"] == "bias":
        spec.append(("b", data["b"], rb))
    elif data["bias"] == "None":
        spec.append(("b", None, False))
    return spec


def collect_linear_function(LinearFunction: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``LinearFunction`` on every case and record the results."""
    cases = {}
    for label, data in linear_function_inputs(seed).items():
        stages = ("direct", "autograd", "sum", "jacobian") if label == MAIN else ("direct", "autograd")
        cases[label] = run_function(
            LinearFunction, _linear_spec(data), data["grad_output"], "LinearFunction", stages
        )
    return {"check": "linear_function", "seed": seed, "cases": cases}


def _linear_reference(data: dict[str, Any]) -> dict[str, np.ndarray]:
    b = data["b"] if data["bias"] == "bias" else np.zeros(data["W"].shape[0])
    ref = reference.linear(data["x"], data["W"], b, data["grad_output"])
    ones = reference.linear(data["x"], data["W"], b, np.ones_like(data["grad_output"]))
    ref.update({f"sum_{k}": ones[k] for k in ("dx", "dW", "db")})
    return ref


def _linear_mistakes(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    x, W, g = data["x"], data["W"], data["grad_output"]
    ones = np.ones_like(g)
    return {
        "out": {"the bias is missing": x @ W.T},
        "grad_input": {"grad_output is ignored (computed as if it were all ones)": ones @ W},
        "grad_weight": {
            "grad_output is ignored (computed as if it were all ones)": ones.T @ x,
            "transposed: input.t().mm(grad_output) is (in, out); the weight is (out, in), so "
            "grad_output.t().mm(input)": x.T @ g,
        },
        "grad_bias": {
            "grad_output returned without .sum(0): autograd would silently sum it for you, so .backward() "
            "and gradcheck pass, but backward must return a gradient of the bias's shape (out,)": g,
            "summed with keepdim: shape (1, out), where the bias is (out,)": g.sum(0, keepdims=True),
            "summed over axis 1 instead of the batch axis 0": g.sum(1),
        },
    }


def _expected_direct(data: dict[str, Any], ref: dict[str, np.ndarray]) -> list[np.ndarray | None]:
    rx, rw, rb = data["requires"]
    has_bias = data["bias"] == "bias"
    return [ref["dx"] if rx else None, ref["dW"] if rw else None, ref["db"] if (has_bias and rb) else None]


def _mixed_values_item(cases: dict[str, Any], inputs: dict[str, Any], refs: dict[str, Any]) -> Item:
    """The needed gradients are right in every mixed requires_grad case (unneeded ones not looked at)."""
    name, weight = "mixed requires_grad", 1.0
    for label in MIXED:
        data, ref, record = inputs[label], refs[label], cases[label]
        expected = _expected_direct(data, ref)
        needed = [i for i, e in enumerate(expected) if e is not None]
        item = _grads_item(
            name, record, expected, GRAD_NAMES, "LinearFunction", weight, _linear_mistakes(data), only=needed
        )
        if not item.passed:
            return Item(name, False, f"when {label}: {item.message}", weight)
        wanted = {f"autograd:{k}": ref[d] for k, d in (("x", "dx"), ("W", "dW"), ("b", "db"))}
        err, verdicts = _autograd_verdicts(record, wanted, ("autograd",))
        if err or not all(v.ok for v in verdicts):
            text = err or next(v.message() for v in verdicts if not v.ok)
            return Item(name, False, f"when {label}: {text}", weight)
    return Item(name, True, "right gradients when only some inputs require grad", weight)


def _needs_input_grad_item(cases: dict[str, Any], inputs: dict[str, Any]) -> Item:
    """backward returns None for every input whose ctx.needs_input_grad entry is False."""
    name, weight = "needs_input_grad", 0.5
    for label in MIXED:
        record = cases[label]
        error = _first_error(record, "direct")
        if error:
            return Item(name, False, f"not checked: when {label}: {error}", weight)
        grads = list(record["direct"]["grads"]) + [None] * 3
        requires = inputs[label]["requires"]
        for i, needed in enumerate(requires):
            if not needed and grads[i] is not None:
                return Item(
                    name,
                    False,
                    f"when {label}, backward computed {GRAD_NAMES[i]} although ctx.needs_input_grad[{i}] is "
                    f"False: compute each gradient only when it is asked for (if ctx.needs_input_grad[{i}]: "
                    "...), else return None; it is wasted work, a whole matrix product for a frozen weight.",
                    weight,
                )
    return Item(name, True, "None exactly for the inputs that need no gradient", weight)


def _no_bias_item(cases: dict[str, Any], inputs: dict[str, Any], refs: dict[str, Any]) -> Item:
    name, weight = "no bias", 1.0
    for label in (OMITTED, NONE_BIAS):
        data, ref, record = inputs[label], refs[label], cases[label]
        error = _first_error(record)
        if error:
            return Item(name, False, f"{label}: {error}", weight)
        verdict = compare("out", record["out"], data["x"] @ data["W"].T)
        if not verdict.ok:
            return Item(name, False, f"{label}: {verdict.message()}", weight)
        # apply(x, W) has two inputs: a third gradient (None) may be returned or not
        accept = (2,) if label == OMITTED else ()
        item = _grads_item(
            name,
            record,
            [ref["dx"], ref["dW"], None],
            GRAD_NAMES,
            "LinearFunction",
            weight,
            _linear_mistakes(data),
            accept_lengths=accept,
        )
        if not item.passed:
            return Item(name, False, f"{label}: {item.message}", weight)
        err, verdicts = _autograd_verdicts(
            record, {"autograd:x": ref["dx"], "autograd:W": ref["dW"]}, ("autograd",)
        )
        if err or not all(v.ok for v in verdicts):
            text = err or next(v.message() for v in verdicts if not v.ok)
            return Item(name, False, f"{label}: {text}", weight)
    return Item(name, True, "apply(x, W) and apply(x, W, None) both work, with grad_bias None", weight)


def _linear_ctx_item(record: dict[str, Any]) -> Item:
    item = _ctx_item(record, "LinearFunction")
    if not item.passed:
        return item
    saved = record.get("saved")
    if isinstance(saved, NotAnArray) or not any(isinstance(s, np.ndarray) for s in saved or []):
        return Item(
            item.name,
            False,
            "ctx.saved_tensors is empty: save input and weight (and bias) with ctx.save_for_backward.",
            item.weight,
        )
    return item


def grade_linear_function(evidence: Evidence) -> Report:
    """Grade recorded evidence: forward (1); grad_input, grad_weight, grad_bias from backward called
    directly (1 each, exact shapes); through autograd, .sum() and float64 Jacobian (1); no bias both
    ways (1); N = 1 (0.5); mixed requires_grad (1); needs_input_grad (0.5); save_for_backward (0.5);
    inputs unchanged (0.5)."""
    report = Report("LinearFunction", LINEAR_FUNCTION_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    inputs = linear_function_inputs(seed)
    refs = {label: _linear_reference(data) for label, data in inputs.items()}
    record, data, ref = cases[MAIN], inputs[MAIN], refs[MAIN]
    mistakes = _linear_mistakes(data)

    error = _first_error(record)
    if error:
        report.add(Item("forward", False, error, 1.0))
    else:
        verdict = compare("out", record["out"], ref["out"], mistakes=mistakes["out"])
        if verdict.problem == "shape" and verdict.likely is None:
            verdict = Verdict(
                verdict.name,
                False,
                "shape",
                verdict.detail,
                "input.mm(weight.t()) is (N, out): is the .t() missing?",
            )
        report.add(Item.from_verdicts("forward", [verdict]))

    expected = _expected_direct(data, ref)
    for i, grad in enumerate(GRAD_NAMES):
        item = _grads_item(
            grad,
            record,
            expected,
            GRAD_NAMES,
            "LinearFunction",
            1.0,
            mistakes,
            only=[i],
            accept_lengths=(1, 2, 4),
        )
        if item.passed:
            item = Item(
                grad,
                True,
                f"{grad}: exact shape {tuple(expected[i].shape)} and values, from backward called directly",
            )
        report.add(item)

    wanted = {
        "autograd:x": ref["dx"],
        "autograd:W": ref["dW"],
        "autograd:b": ref["db"],
        "sum:x": ref["sum_dx"],
        "sum:W": ref["sum_dW"],
        "sum:b": ref["sum_db"],
    }
    jac = reference_jacobians(F.linear, {"x": data["x"], "W": data["W"], "b": data["b"]})
    wanted.update({f"jacobian:{k}": v for k, v in jac.items()})
    err, verdicts = _autograd_verdicts(record, wanted, ("autograd", "sum", "jacobian"))
    report.add(
        _verdicts_item(
            "through autograd",
            err,
            verdicts,
            1.0,
            "every .grad after .backward(grad_output) and after .sum().backward(), and the float64 Jacobian",
        )
    )
    report.add(_no_bias_item(cases, inputs, refs))

    single = cases[SINGLE]
    item = _grads_item(
        "N = 1",
        single,
        _expected_direct(inputs[SINGLE], refs[SINGLE]),
        GRAD_NAMES,
        "LinearFunction",
        0.5,
        _linear_mistakes(inputs[SINGLE]),
    )
    if item.passed:
        item = Item.from_verdicts("N = 1", [compare("out", single["out"], refs[SINGLE]["out"])], 0.5)
    report.add(item)
    report.add(_mixed_values_item(cases, inputs, refs))
    report.add(_needs_input_grad_item(cases, inputs))
    report.add(_linear_ctx_item(record))
    originals = {
        label: {"x": d["x"], "W": d["W"], "b": d["b"], "grad_output": d["grad_output"]}
        for label, d in inputs.items()
    }
    report.add(_inputs_unchanged(cases, originals))
    _notes(report, cases)
    return report


LINEAR_FUNCTION = register(
    Check("linear_function", "LinearFunction", LINEAR_FUNCTION_POINTS, collect_linear_function)
)


def check_linear_function(LinearFunction: Any, *, seed: int = 0) -> float:
    """Grade ``LinearFunction`` (forward, every gradient's exact shape and value, needs_input_grad,
    the bias omitted both ways, save_for_backward); print feedback; return points."""
    return run_check(LINEAR_FUNCTION, LinearFunction, seed=seed)


# ---------------------------------------------------------------------------------------------------
# backward_by_hand: what out.grad_fn.apply(grad) returns
# ---------------------------------------------------------------------------------------------------


class RawLinear(torch.autograd.Function):
    """``x @ W.T + b`` whose backward hands back ``grad_output`` itself as the bias gradient, unsummed.

    Returning an (N, out) bias gradient is the mistake of CHECKS.md item 8, used here on purpose:
    ``.backward()`` sum-reduces it to (out,), while ``grad_fn.apply`` shows exactly what backward
    returned, so the two ways of running backward give visibly different answers.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        """Save the inputs and return ``x @ W.T (+ b)``."""
        ctx.save_for_backward(x, W, b)
        out = x.mm(W.t())
        return out if b is None else out + b

    @staticmethod
    def backward(ctx: Any, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """The gradients asked for by ``ctx.needs_input_grad``, the bias one of shape (N, out)."""
        x, W, b = ctx.saved_tensors
        gx = grad_output.mm(W) if ctx.needs_input_grad[0] else None
        gW = grad_output.t().mm(x) if ctx.needs_input_grad[1] else None
        gb = grad_output.clone() if b is not None and ctx.needs_input_grad[2] else None
        return gx, gW, gb


#: (label, which of x/W/b require grad, whether b is passed at all)
BY_HAND_CASES = (
    ("x, W and b require grad", (True, True, True), True),
    ("b is None", (True, True, False), False),
    ("W does not require grad", (True, False, True), True),
)


def by_hand_inputs(seed: int) -> dict[str, dict[str, Any]]:
    """Every case: x (4, 3), W (5, 3), b (5,) or None, grad (4, 5), and which require grad."""
    cases = {}
    for index, (label, requires, has_bias) in enumerate(BY_HAND_CASES):
        rng = np.random.default_rng(_case_seed(seed, index))
        cases[label] = {
            "x": rng.standard_normal((4, 3)),
            "W": rng.standard_normal((5, 3)) + 0.5,
            "b": rng.standard_normal(5) if has_bias else None,
            "grad": rng.standard_normal((4, 5)),
            "requires": requires,
        }
    return cases


def collect_backward_by_hand(backward_by_hand: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``backward_by_hand(RawLinear, x, W, b, grad)`` twice per case; record both
    results and every ``.grad`` afterwards."""
    cases = {}
    for label, data in by_hand_inputs(seed).items():
        rx, rw, rb = data["requires"]
        x = torch.tensor(data["x"], requires_grad=rx)
        W = torch.tensor(data["W"], requires_grad=rw)
        b = None if data["b"] is None else torch.tensor(data["b"], requires_grad=rb)
        g = torch.tensor(data["grad"])
        record: dict[str, Any] = {"error": None, "notes": [], "results": []}
        for _ in range(2):
            outcome = call(backward_by_hand, RawLinear, x, W, b, g, name="backward_by_hand")
            record["notes"] += [n for n in outcome.notes if n not in record["notes"]]
            if not outcome.ok:
                record["error"] = outcome.error
                break
            record["results"].append(_returned(outcome.result))
        tensors = {"x": x, "W": W, "grad": g} | ({} if b is None else {"b": b})
        record["grads_after"] = {k: freeze(t.grad) for k, t in tensors.items()}
        record["inputs_after"] = {k: freeze(t) for k, t in tensors.items()}
        cases[label] = record
    return {"check": "backward_by_hand", "seed": seed, "cases": cases}


def _raw_expected(data: dict[str, Any]) -> list[np.ndarray | None]:
    x, W, g = data["x"], data["W"], data["grad"]
    rx, rw, rb = data["requires"]
    return [
        g @ W if rx else None,
        g.T @ x if rw else None,
        g.copy() if data["b"] is not None and rb else None,
    ]


def grade_backward_by_hand(evidence: Evidence) -> Report:
    """Grade recorded evidence: a tuple with one entry per forward input (0.5); exactly what RawLinear's
    backward returns, unsummed bias gradient and Nones included, in every case (1); no side effects:
    no ``.grad`` filled in, the same answer twice, inputs unchanged (0.5)."""
    report = Report("backward_by_hand", BACKWARD_BY_HAND_POINTS)
    cases = evidence["cases"]
    inputs = by_hand_inputs(evidence["seed"])
    names = ["grad_input", "grad_weight", "grad_bias"]
    first = cases[BY_HAND_CASES[0][0]]
    if first["error"]:
        for name, weight in (
            ("one entry per input", 0.5),
            ("what grad_fn.apply returns", 1.0),
            ("no side effects", 0.5),
        ):
            report.add(Item(name, False, first["error"], weight))
        report.notes += first["notes"]
        return report
    returned = first["results"][0]
    n = len(returned["grads"])
    if returned["kind"] not in ("tuple", "list") or n != 3:
        report.add(
            Item(
                "one entry per input",
                False,
                f"backward_by_hand returned a {returned['kind']} of {n} value(s); out.grad_fn.apply(grad) "
                "returns a tuple with one entry per input of forward (x, W, b): return it as it is.",
                0.5,
            )
        )
    else:
        report.add(Item("one entry per input", True, "a tuple (grad_input, grad_weight, grad_bias)", 0.5))

    item = Item(
        "what grad_fn.apply returns",
        True,
        "exactly what backward returned, bias gradient (4, 5) unsummed",
        1.0,
    )
    for label, data in inputs.items():
        record = cases[label]
        if record["error"]:
            item = Item(item.name, False, f"when {label}: {record['error']}", 1.0)
            break
        fake = {"direct": record["results"][0], "errors": {}}
        mistakes = {
            "grad_bias": {
                "summed over the batch: that is what .backward() leaves in b.grad (the engine sum-reduces "
                "a gradient to its input's shape); grad_fn.apply runs backward alone and returns its "
                "(N, out) result untouched": data["grad"].sum(0)
            }
        }
        expected = _raw_expected(data)
        checked = _grads_item(
            item.name, fake, expected, names, "RawLinear", 1.0, mistakes, accept_lengths=(1, 2, 4)
        )
        if not checked.passed:
            item = Item(item.name, False, f"when {label}: {checked.message}", 1.0)
            break
    report.add(item)

    item = Item("no side effects", True, "no .grad filled in, the same result twice, inputs unchanged", 0.5)
    for label, data in inputs.items():
        record = cases[label]
        if record["error"]:
            item = Item(item.name, False, f"not checked: when {label}: {record['error']}", 0.5)
            break
        filled = [k for k, v in record["grads_after"].items() if v is not None]
        if filled:
            item = Item(
                item.name,
                False,
                f"when {label}, {', '.join(k + '.grad' for k in filled)} was filled in: grad_fn.apply runs "
                "backward without the engine, which is what fills .grad; do not call .backward() here.",
                0.5,
            )
            break
        r1, r2 = record["results"]
        same = len(r1["grads"]) == len(r2["grads"]) and all(
            (a is None and b is None)
            or (
                isinstance(a, np.ndarray)
                and isinstance(b, np.ndarray)
                and a.shape == b.shape
                and np.array_equal(a, b)
            )
            for a, b in zip(r1["grads"], r2["grads"], strict=True)
        )
        if not same:
            item = Item(
                item.name, False, f"when {label}, a second call returned something else than the first.", 0.5
            )
            break
        for k in ("x", "W", "b", "grad"):
            before, after = data.get(k), record["inputs_after"].get(k)
            if isinstance(before, np.ndarray) and not (
                isinstance(after, np.ndarray) and np.array_equal(before, after)
            ):
                item = Item(item.name, False, f"when {label}, {k} was changed in place.", 0.5)
                break
        if not item.passed:
            break
    report.add(item)
    for record in cases.values():
        report.notes += [n for n in record["notes"] if n not in report.notes]
    return report


BACKWARD_BY_HAND = register(
    Check("backward_by_hand", "backward_by_hand", BACKWARD_BY_HAND_POINTS, collect_backward_by_hand)
)


def check_backward_by_hand(backward_by_hand: Any, *, seed: int = 0) -> float:
    """Grade ``backward_by_hand`` on a Function whose backward returns an unsummed bias gradient."""
    return run_check(BACKWARD_BY_HAND, backward_by_hand, seed=seed)


# ---------------------------------------------------------------------------------------------------
# max_jacobian_error: analytical against numerical Jacobian, float64 and float32
# ---------------------------------------------------------------------------------------------------

JACOBIAN_EPS = 1e-6
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def tanh_linear(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``tanh(x @ W.T + b)``: the smooth layer whose Jacobians the check compares."""
    return torch.tanh(F.linear(x, W, b))


def jacobian_inputs(seed: int) -> dict[str, np.ndarray]:
    """x (3, 2), W (4, 2), b (4,), standard normal."""
    rng = np.random.default_rng(_case_seed(seed, 0))
    return {"x": rng.standard_normal((3, 2)), "W": rng.standard_normal((4, 2)), "b": rng.standard_normal(4)}


def jacobian_error(
    fn: Callable[..., torch.Tensor],
    arrays: Sequence[np.ndarray],
    dtype: torch.dtype,
    eps: float = JACOBIAN_EPS,
) -> float:
    """The course's own max |analytical - numerical| over every Jacobian entry, computed in ``dtype``
    with centred differences of step ``eps`` (what gradcheck compares)."""
    tensors = [torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays]
    out = fn(*tensors)
    m = out.numel()
    worst = 0.0
    for k, t in enumerate(tensors):
        analytical = np.zeros((m, t.numel()))
        for i in range(m):
            unit = torch.zeros(m, dtype=dtype)
            unit[i] = 1.0
            (g,) = torch.autograd.grad(out, t, unit.view_as(out), retain_graph=True)
            analytical[i] = g.reshape(-1).double().numpy()
        numerical = np.zeros_like(analytical)
        with torch.no_grad():
            values = [s.detach().clone() for s in tensors]
            flat = values[k].view(-1)
            for j in range(t.numel()):
                old = flat[j].item()
                flat[j] = old + eps
                plus = fn(*values).reshape(-1).double()
                flat[j] = old - eps
                minus = fn(*values).reshape(-1).double()
                flat[j] = old
                numerical[:, j] = ((plus - minus) / (2 * eps)).numpy()
        worst = max(worst, float(np.max(np.abs(analytical - numerical))))
    return worst


def collect_max_jacobian_error(max_jacobian_error: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``max_jacobian_error(tanh_linear, inputs)`` with float64 and float32 inputs."""
    arrays = jacobian_inputs(seed)
    cases = {}
    for label, dtype in DTYPES.items():
        tensors = tuple(torch.tensor(a, dtype=dtype, requires_grad=True) for a in arrays.values())
        outcome = call(max_jacobian_error, tanh_linear, tensors, name="max_jacobian_error")
        cases[label] = {
            "error": outcome.error,
            "notes": outcome.notes,
            "value": freeze(outcome.result) if outcome.ok else None,
        }
    return {"check": "max_jacobian_error", "seed": seed, "cases": cases}


def _jacobian_value(record: dict[str, Any]) -> tuple[float | None, str | None]:
    if record["error"]:
        return None, record["error"]
    value = record["value"]
    if not isinstance(value, np.ndarray) or value.size != 1 or value.dtype.kind not in "fiu":
        return None, f"max_jacobian_error returned {_describe(value)}; expected one number (a Python float)."
    number = float(value.reshape(()))
    if not math.isfinite(number) or number < 0:
        return (
            None,
            f"max_jacobian_error returned {number}: a maximum absolute difference is finite and >= 0.",
        )
    return number, None


def grade_max_jacobian_error(evidence: Evidence) -> Report:
    """Grade recorded evidence: the float64 error is at most 1e-8 (1), the float32 one is large, within a
    factor 10 of the course's own float32 error (1). Both references are recomputed here."""
    report = Report("max_jacobian_error", JACOBIAN_POINTS)
    arrays = list(jacobian_inputs(evidence["seed"]).values())
    cases = evidence["cases"]
    ref64 = jacobian_error(tanh_linear, arrays, torch.float64)
    value, problem = _jacobian_value(cases["float64"])
    name = "float64: small"
    if problem:
        report.add(Item(name, False, problem))
    elif value > JACOBIAN_FLOAT64.atol:
        hint = (
            " Likely mistake: forward differences (f(x + eps) - f(x)) / eps, whose error is ~eps * f''; "
            "centred differences (f(x + eps) - f(x - eps)) / (2 eps) are accurate to ~eps**2."
            if value < 1e-4
            else " Likely mistake: the analytical and numerical Jacobians are not laid out alike "
            "(transposed?), or a gradient is wrong."
        )
        report.add(
            Item(
                name,
                False,
                f"your float64 error is {value:.3g}, the course's {ref64:.3g}; it should be below "
                f"{JACOBIAN_FLOAT64.atol:g}.{hint}",
            )
        )
    else:
        report.add(Item(name, True, f"{value:.3g} (the course's own: {ref64:.3g})"))

    ref32 = jacobian_error(tanh_linear, arrays, torch.float32)
    value, problem = _jacobian_value(cases["float32"])
    name = "float32: large"
    low, high = max(JACOBIAN_FLOAT32.atol, ref32 / JACOBIAN_FLOAT32.rtol), ref32 * JACOBIAN_FLOAT32.rtol
    if problem:
        report.add(Item(name, False, problem))
    elif not low <= value <= high:
        hint = (
            " Likely mistake: the computation is not done in the inputs' dtype (converted to float64?): "
            "keep every tensor in the dtype it arrives in, so that float32 rounding shows."
            if value < low
            else " Likely mistake: a gradient or the finite-difference formula is wrong."
        )
        report.add(
            Item(
                name,
                False,
                f"your float32 error is {value:.3g}; expected between {low:.3g} and {high:.3g} "
                f"(the course's: {ref32:.3g}).{hint}",
            )
        )
    else:
        report.add(
            Item(name, True, f"{value:.3g} (the course's own: {ref32:.3g}), far above gradcheck's atol 1e-5")
        )
    for record in cases.values():
        report.notes += [n for n in record["notes"] if n not in report.notes]
    return report


MAX_JACOBIAN_ERROR = register(
    Check("max_jacobian_error", "max_jacobian_error", JACOBIAN_POINTS, collect_max_jacobian_error)
)


def check_max_jacobian_error(max_jacobian_error: Any, *, seed: int = 0) -> float:
    """Grade ``max_jacobian_error`` in float64 and float32 against the course's own errors."""
    return run_check(MAX_JACOBIAN_ERROR, max_jacobian_error, seed=seed)


# ---------------------------------------------------------------------------------------------------
# Linear(nn.Module) on LinearFunction, and training the spiral classifier with it
# ---------------------------------------------------------------------------------------------------

#: (label, in_features, out_features, bias)
MODULE_CASES = (
    ("Linear(3, 5)", 3, 5, True),
    ("Linear(7, 2)", 7, 2, True),
    ("Linear(3, 5, bias=False)", 3, 5, False),
)


def module_inputs(seed: int) -> dict[str, dict[str, Any]]:
    """Every case: the torch seed the module is made under, x (4, in) and grad_output (4, out)."""
    cases = {}
    for index, (label, d, m, bias) in enumerate(MODULE_CASES):
        rng = np.random.default_rng(_case_seed(seed, index))
        cases[label] = {
            "torch_seed": _case_seed(seed, index),
            "in": d,
            "out": m,
            "bias": bias,
            "x": rng.standard_normal((4, d)),
            "grad_output": rng.standard_normal((4, m)),
        }
    return cases


def _exercise_module(module: Any, x: np.ndarray, grad_output: np.ndarray) -> dict[str, Any]:
    """Convert the module to float64, run forward and backward, and record everything as plain data."""
    record: dict[str, Any] = {"names": [n for n, _ in module.named_parameters()]}
    record["params"] = {n: freeze(p) for n, p in module.named_parameters()}
    module.double()
    xt = torch.tensor(x, requires_grad=True)
    out = module(xt)
    record["out"] = freeze(out)
    record["grad_fn"] = (
        type(out.grad_fn).__name__ if isinstance(out, torch.Tensor) and out.grad_fn else "None"
    )
    out.backward(torch.tensor(grad_output))
    record["params64"] = {n: freeze(p) for n, p in module.named_parameters()}
    record["grads"] = {"x": freeze(xt.grad)} | {n: freeze(p.grad) for n, p in module.named_parameters()}
    return record


def collect_linear_module(Linear: Any, *, seed: int = 0) -> Evidence:
    """Make the learner's ``Linear`` under fixed torch seeds and run forward and backward in float64."""
    cases = {}
    for label, data in module_inputs(seed).items():
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(data["torch_seed"])
            if data["bias"]:
                made = call(Linear, data["in"], data["out"], name="Linear")
            else:
                made = call(Linear, data["in"], data["out"], bias=False, name="Linear")
        record: dict[str, Any] = {"error": made.error, "notes": list(made.notes)}
        if made.ok:
            ran = call(_exercise_module, made.result, data["x"], data["grad_output"], name="Linear")
            record["error"] = ran.error
            record["notes"] += ran.notes
            if ran.ok:
                record.update(ran.result)
        cases[label] = record
    return {"check": "linear_module", "seed": seed, "cases": cases}


def _nn_linear_params(data: dict[str, Any]) -> dict[str, np.ndarray]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(data["torch_seed"])
        ref = nn.Linear(data["in"], data["out"], bias=data["bias"])
    return {n: p.detach().numpy().copy() for n, p in ref.named_parameters()}


def _bias_first_params(data: dict[str, Any]) -> dict[str, np.ndarray]:
    """nn.Linear's initialisation with the two draws in the wrong order: a mistake feedback can name."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(data["torch_seed"])
        params = {}
        if data["bias"]:
            bound = 1 / math.sqrt(data["in"])
            params["bias"] = torch.empty(data["out"]).uniform_(-bound, bound).numpy()
        weight = torch.empty(data["out"], data["in"])
        nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
        params["weight"] = weight.numpy()
    return params


def grade_linear_module(evidence: Evidence) -> Report:
    """Grade recorded evidence: parameters registered (0.5), initialised exactly like nn.Linear (1),
    forward and backward match F.linear in float64 (1), bias=False (0.5), uses LinearFunction (0.5)."""
    report = Report("Linear", LINEAR_MODULE_POINTS)
    cases = evidence["cases"]
    inputs = module_inputs(evidence["seed"])
    with_bias = [label for label, d in inputs.items() if d["bias"]]
    no_bias = [label for label, d in inputs.items() if not d["bias"]][0]
    errors = {label: cases[label]["error"] for label in inputs}

    def failing(name: str, labels: Sequence[str], weight: float) -> Item | None:
        for label in labels:
            if errors[label]:
                return Item(name, False, f"{label}: {errors[label]}", weight)
        return None

    item = failing("parameters registered", list(inputs), 0.5)
    if item is None:
        item = Item(
            "parameters registered", True, "named_parameters() gives weight (out, in) and bias (out,)", 0.5
        )
        for label, data in inputs.items():
            names = cases[label]["names"]
            wanted = ["weight", "bias"] if data["bias"] else ["weight"]
            if sorted(names) != sorted(wanted):
                item = Item(
                    item.name,
                    False,
                    f"{label}: named_parameters() gives {names or 'nothing'}, expected {wanted}: wrap each "
                    "tensor in nn.Parameter and assign it as self.weight / self.bias (with bias=False, "
                    "self.register_parameter('bias', None)).",
                    0.5,
                )
                break
    report.add(item)

    init = failing("initialised like nn.Linear", list(inputs), 1.0)
    if init is None:
        init = Item(
            "initialised like nn.Linear",
            True,
            "the same weight and bias as nn.Linear from the same torch.manual_seed",
            1.0,
        )
        for label, data in inputs.items():
            ref = _nn_linear_params(data)
            got = cases[label]["params"]
            swapped = _bias_first_params(data)
            for n, want in ref.items():
                mistakes = {
                    "the bias drawn before the weight: nn.Linear initialises the weight first, so the "
                    "same seed gives other numbers": swapped[n]
                }
                verdict = compare(f"{n} of {label}", got.get(n), want, dtype=np.float32, mistakes=mistakes)
                if not verdict.ok:
                    hint = (
                        " Likely mistake: a different initialisation or order of draws: nn.Linear makes "
                        "torch.empty(out, in) and torch.empty(out), then calls kaiming_uniform_(weight, "
                        "a=math.sqrt(5)) and, for the bias, uniform_(-1/sqrt(in), 1/sqrt(in)), in that order."
                        if verdict.problem == "values" and not verdict.likely
                        else ""
                    )
                    init = Item(init.name, False, verdict.message() + hint, 1.0)
                    break
            if not init.passed:
                break
    report.add(init)

    def forward_item(name: str, labels: Sequence[str], weight: float) -> Item:
        item = failing(name, labels, weight)
        if item is not None:
            return item
        for label in labels:
            data, record = inputs[label], cases[label]
            params = record["params64"]
            W = params.get("weight")
            if not isinstance(W, np.ndarray) or W.shape != (data["out"], data["in"]):
                return Item(
                    name, False, f"{label}: not checked, weight is not an (out, in) parameter.", weight
                )
            b = params.get("bias") if data["bias"] else np.zeros(data["out"])
            if not isinstance(b, np.ndarray) or b.shape != (data["out"],):
                return Item(name, False, f"{label}: not checked, bias is not an (out,) parameter.", weight)
            ref = reference.linear(data["x"], W, b, data["grad_output"])
            verdicts = [
                compare("out", record["out"], ref["out"]),
                compare("x.grad", record["grads"].get("x"), ref["dx"]),
                compare("weight.grad", record["grads"].get("weight"), ref["dW"]),
            ]
            if data["bias"]:
                verdicts.append(compare("bias.grad", record["grads"].get("bias"), ref["db"]))
            bad = [v for v in verdicts if not v.ok]
            if bad:
                return Item(name, False, f"{label}: {bad[0].message()}", weight)
        return Item(name, True, "out and every gradient match F.linear in float64", weight)

    report.add(forward_item("forward and backward", with_bias, 1.0))
    report.add(forward_item("bias=False", [no_bias], 0.5))

    item = failing("uses LinearFunction", with_bias, 0.5)
    if item is None:
        name = cases[with_bias[0]]["grad_fn"]
        if name == "LinearFunctionBackward":
            item = Item("uses LinearFunction", True, "the output's grad_fn is LinearFunctionBackward", 0.5)
        else:
            item = Item(
                "uses LinearFunction",
                False,
                f"the output's grad_fn is {name}: forward should return "
                "LinearFunction.apply(x, self.weight, self.bias).",
                0.5,
            )
    report.add(item)
    for record in cases.values():
        report.notes += [n for n in record["notes"] if n not in report.notes]
    return report


LINEAR_MODULE = register(Check("linear_module", "Linear", LINEAR_MODULE_POINTS, collect_linear_module))


def check_linear_module(Linear: Any, *, seed: int = 0) -> float:
    """Grade the learner's ``Linear`` module against ``nn.Linear`` and ``F.linear``; return points."""
    return run_check(LINEAR_MODULE, Linear, seed=seed)


#: The recipe train_spiral follows (its docstring states it); the check passes these explicitly.
SPIRAL_STEPS, SPIRAL_HIDDEN, SPIRAL_LR = 30, 32, 1.0


def reference_train_spiral(
    seed: int, steps: int = SPIRAL_STEPS, hidden: int = SPIRAL_HIDDEN, lr: float = SPIRAL_LR
) -> list[float]:
    """The course's own run of the recipe with ``nn.Linear``: the loss before each SGD step."""
    X, y = make_spiral(seed=seed)
    Xt, yt = torch.tensor(X), torch.tensor(y)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = nn.Sequential(nn.Linear(2, hidden), nn.ReLU(), nn.Linear(hidden, 3)).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(Xt), yt)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def _counting(cls: Any, counts: dict[str, int]) -> Any:
    """A subclass of ``cls`` that counts its constructions and forward calls (``cls`` itself when it
    cannot be subclassed), so that grading can tell whether ``train_spiral`` used the class it was given."""
    if not isinstance(cls, type):
        return cls

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        counts["made"] += 1
        cls.__init__(self, *args, **kwargs)

    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        counts["forward"] += 1
        return cls.forward(self, *args, **kwargs)

    try:
        return type(cls.__name__, (cls,), {"__init__": __init__, "forward": forward})
    except TypeError:
        return cls


def _losses(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        try:
            return np.array([float(v) for v in value], dtype=np.float64)
        except (TypeError, ValueError):
            return NotAnArray(type(value).__name__)
    return freeze(value)


def collect_train_spiral(train_spiral: Any, Linear: Any, *, seed: int = 0) -> Evidence:
    """Call ``train_spiral`` with the learner's ``Linear`` and with ``nn.Linear``; record the losses."""
    runs = {}
    for label, cls in (("your Linear", Linear), ("nn.Linear", nn.Linear)):
        counts = {"made": 0, "forward": 0}
        start = time.perf_counter()
        with torch.random.fork_rng(devices=[]):
            outcome = call(
                train_spiral,
                _counting(cls, counts),
                seed=seed,
                steps=SPIRAL_STEPS,
                hidden=SPIRAL_HIDDEN,
                lr=SPIRAL_LR,
                name="train_spiral",
            )
        runs[label] = {
            "error": outcome.error,
            "notes": outcome.notes,
            "losses": _losses(outcome.result) if outcome.ok else None,
            "made": counts["made"],
            "forward": counts["forward"],
            "seconds": time.perf_counter() - start,
        }
    return {"check": "train_spiral", "seed": seed, "runs": runs}


def _losses_problem(run: dict[str, Any], label: str) -> str | None:
    if run["error"]:
        return f"with {label}: {run['error']}"
    losses = run["losses"]
    if not isinstance(losses, np.ndarray) or losses.ndim != 1:
        return f"with {label}: train_spiral returned {_describe(losses)}; expected a list of floats."
    if losses.size != SPIRAL_STEPS:
        return f"with {label}: {losses.size} losses for steps={SPIRAL_STEPS}; record one loss per step."
    if not np.all(np.isfinite(losses)):
        return f"with {label}: the losses contain NaN or inf: training diverged."
    return None


def grade_train_spiral(evidence: Evidence) -> Report:
    """Grade recorded evidence: one finite loss per step (0.5); the learner's Linear, actually used, gives
    the same losses as nn.Linear step by step (1); the nn.Linear run follows the recipe, i.e. matches
    the course's own run (0.5)."""
    report = Report("train_spiral", TRAIN_SPIRAL_POINTS)
    runs = evidence["runs"]
    mine, theirs = runs["your Linear"], runs["nn.Linear"]
    problem = _losses_problem(mine, "your Linear") or _losses_problem(theirs, "nn.Linear")
    if mine["error"] and not theirs["error"] and "is not implemented yet" in mine["error"]:
        # the stub that raised is Linear's, since the same train_spiral runs with nn.Linear
        problem = (
            "your Linear is not implemented yet (it raises NotImplementedError); "
            "train_spiral runs with nn.Linear"
        )
    report.add(Item("losses", problem is None, problem or f"{SPIRAL_STEPS} finite losses per run", 0.5))

    name = "same as nn.Linear"
    if problem:
        report.add(Item(name, False, f"not checked: {problem}"))
    elif min(mine["made"], theirs["made"]) < 2 or min(mine["forward"], theirs["forward"]) < SPIRAL_STEPS:
        report.add(
            Item(
                name,
                False,
                "train_spiral must build both layers from the class it is given (linear_cls(2, hidden) and "
                f"linear_cls(hidden, 3)) and call them at every step; it made {mine['made']} and ran "
                f"{mine['forward']} forward passes of your Linear.",
            )
        )
    else:
        verdict = compare("losses with your Linear", mine["losses"], theirs["losses"])
        if verdict.ok:
            report.add(
                Item(
                    name,
                    True,
                    f"the same loss at every one of {SPIRAL_STEPS} steps "
                    f"(max abs error {verdict.max_abs_err:.1e})",
                )
            )
        else:
            close = np.isclose(mine["losses"], theirs["losses"], rtol=FLOAT64.rtol, atol=FLOAT64.atol)
            step = int(np.argmin(close))
            report.add(
                Item(
                    name,
                    False,
                    f"{verdict.message()} The runs part at step {step}: if step 0 already differs, the "
                    "initial parameters differ (check Linear's initialisation); otherwise a gradient does.",
                )
            )

    reference_losses = reference_train_spiral(evidence["seed"])
    name = "follows the recipe"
    if _losses_problem(theirs, "nn.Linear"):
        report.add(Item(name, False, f"not checked: {_losses_problem(theirs, 'nn.Linear')}", 0.5))
    else:
        verdict = compare("losses with nn.Linear", theirs["losses"], np.array(reference_losses))
        text = (
            "the nn.Linear run matches the course's own"
            if verdict.ok
            else verdict.message()
            + " Follow the docstring exactly: torch.manual_seed(seed), the two layers in order, .double(), "
            "full-batch SGD, and the loss recorded before each step."
        )
        report.add(Item(name, verdict.ok, text, 0.5))
    for run in runs.values():
        report.notes += [n for n in run["notes"] if n not in report.notes]
    return report


TRAIN_SPIRAL = register(Check("train_spiral", "train_spiral", TRAIN_SPIRAL_POINTS, collect_train_spiral))


def check_train_spiral(train_spiral: Any, Linear: Any, *, seed: int = 0) -> float:
    """Train the spiral classifier with the learner's ``Linear`` and with ``nn.Linear``; compare losses."""
    return run_check(TRAIN_SPIRAL, train_spiral, Linear, seed=seed)
