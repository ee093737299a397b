"""One harness that runs a learner's ``torch.autograd.Function``: the collect side of notebooks 04 and 05.

A :class:`FunctionRun` runs one case of a check as a sequence of named steps (apply, backward
through autograd, backward called directly with the output's ``ctx``, ...) and records, for each
step, what it produced and its own error, as plain data. Each step is blamed for its own failure
only:

* ``apply`` is a step of its own, and its result is checked there: a forward that returns None (or
  the wrong number of outputs) is a forward error, never a crash in a later backward;
* the forward's values are recorded when ``apply`` succeeds, so a typo in ``backward`` cannot mark
  them as failing;
* a step whose prerequisite failed is not run; it is recorded in ``blocked`` with the name of that
  prerequisite, and grading reports the prerequisite's error for it
  (:func:`autograder.grading.toolkit.step_error`). A step that was never asked for has no entry:
  grading that reads it is a bug of the check, and says so.

The record of a case::

    {"outputs": {key: value}, "errors": {step: message or None}, "blocked": {step: prerequisite},
     "notes": [...], "inputs_after": {"<step>: <tensor>": array}}

``inputs_after`` holds each watched tensor (the leaves and the upstream gradients) as it was right
after the step that used it, so that grading can say which step changed which argument in place.
Nothing here computes an expected value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypedDict

import numpy as np
import torch

from autograder.checks.calling import Call, call, name_of
from autograder.checks.core import NotAnArray, freeze

#: One argument of ``apply``: (name, value, requires_grad). A numpy value becomes a fresh float64
#: tensor (int64 for integer arrays); anything else (a Python number, None) is passed as it is.
Arg = tuple[str, Any, bool]


def _not_a_tensor(label: str, value: Any) -> str:
    """Why ``label.apply`` returning ``value`` (not a tensor) is wrong; None is named as a forward that
    returns nothing (a missing ``return``, or the value of a call that returns None)."""
    what = f"{label}.apply returned a {type(value).__name__}, expected a tensor"
    if value is None:
        return (
            f"{what}. Likely mistake: forward does not return its result (no return statement, or the "
            "return of a call that gives None, such as ctx.save_for_backward(...)): end forward with "
            "return output."
        )
    return f"{what}: does forward return its result?"


class _Failed:
    """The result of a step that raised or did not run (distinct from a step that returned None)."""

    def __repr__(self) -> str:
        return "FAILED"


FAILED: Any = _Failed()


def tensor(value: Any, requires_grad: bool = False) -> torch.Tensor:
    """A fresh tensor holding a copy of ``value`` (float64 stays float64, int64 stays int64)."""
    t = torch.from_numpy(np.array(value, copy=True))
    return t.requires_grad_(True) if requires_grad else t


def make_args(spec: Sequence[Arg]) -> tuple[list[Any], dict[str, torch.Tensor]]:
    """The arguments of ``apply`` for ``spec``, and the tensors among them by name."""
    args: list[Any] = []
    leaves: dict[str, torch.Tensor] = {}
    for name, value, requires_grad in spec:
        if isinstance(value, np.ndarray):
            kind = np.int64 if np.issubdtype(value.dtype, np.integer) else np.float64
            leaves[name] = tensor(value.astype(kind), requires_grad)
            args.append(leaves[name])
        else:
            args.append(value)
    return args, leaves


#: ``ctx`` attributes PyTorch itself sets (``mark_dirty``, ``mark_non_differentiable``,
#: ``save_for_backward`` before it is read): tensors there are the learner's right use of ``ctx``.
FRAMEWORK_ATTRIBUTES = frozenset({"dirty_tensors", "non_differentiable", "to_save", "saved_for_forward"})


def ctx_tensor_attributes(ctx: Any) -> list[str]:
    """Names of ``ctx`` attributes the learner set that hold tensors (directly or in a list, tuple or
    dict).

    ``ctx`` is the ``grad_fn`` of the Function's output; its ``__dict__`` holds what forward assigned
    as ``ctx.name = value``, and what PyTorch's own ``mark_*`` methods set there
    (:data:`FRAMEWORK_ATTRIBUTES`, left out). Tensors belong in ``save_for_backward`` instead.
    """
    found = []
    for name, value in vars(ctx).items():
        if name in FRAMEWORK_ATTRIBUTES:
            continue
        items = list(value.values()) if isinstance(value, dict) else value
        if not isinstance(items, (list, tuple)):
            items = [items]
        if any(isinstance(v, torch.Tensor) for v in items):
            found.append(f"ctx.{name}")
    return sorted(found)


class Returned(TypedDict):
    """What a ``backward`` returned, as :func:`returned` records it: ``kind``, the name of its type
    (``"tuple"``, ``"list"``, ``"Tensor"``...), and ``grads``, one frozen value per entry."""

    kind: str
    grads: list[Any]


def returned(result: Any) -> Returned:
    """What a ``backward`` returned, as plain data: its type and one frozen value per entry.

    A bare tensor is recorded as one entry: PyTorch reads it as a tuple of one.
    """
    values = result if isinstance(result, (tuple, list)) else [result]
    return {"kind": type(result).__name__, "grads": [freeze(v) for v in values]}


def label_of(fn_cls: Any, default: str, attribute: str = "__name__") -> str:
    """The name feedback uses for a learner's Function: its class name (or ``attribute``), else
    ``default``, bounded (:func:`~autograder.checks.calling.name_of`)."""
    return name_of(fn_cls, default, attribute)


class FunctionRecord(TypedDict):
    """The evidence of one case of a Function, as :class:`FunctionRun` writes it (see the module's
    docstring): what each step produced, by name; each step's error (None when it ran); the steps not
    run, each with the prerequisite that failed; the distinct warnings; and each watched tensor as it
    was right after the step that used it, keyed ``"<step>: <tensor>"``."""

    outputs: dict[str, Any]
    errors: dict[str, str | None]
    blocked: dict[str, str]
    notes: list[str]
    inputs_after: dict[str, Any]


def new_record() -> FunctionRecord:
    """An empty case record (see the module's docstring)."""
    return {"outputs": {}, "errors": {}, "blocked": {}, "notes": [], "inputs_after": {}}


class FunctionRun:
    """Run a learner's Function step by step on one case and record each step with its own error."""

    def __init__(self, fn_cls: Any, label: str) -> None:
        self.fn_cls = fn_cls
        self.label = label
        self.record = new_record()

    # -- steps ---------------------------------------------------------------------------------------

    def failed(self, step: str) -> bool:
        """True when ``step`` raised or did not run (a step never asked for counts as failed)."""
        return step in self.record["blocked"] or self.record["errors"].get(step, "not run") is not None

    def blocked(self, step: str, after: Sequence[str]) -> bool:
        """True (and ``step`` recorded as blocked by it) when a step of ``after`` failed."""
        for prior in after:
            if self.failed(prior):
                self.record["blocked"][step] = prior
                return True
        return False

    def run(
        self, step: str, fn: Callable[[], Any], *, after: Sequence[str] = (), name: str | None = None
    ) -> Any:
        """Run ``fn()`` as ``step`` unless a step of ``after`` failed; its result, or :data:`FAILED`."""
        if self.blocked(step, after):
            return FAILED
        outcome = call(fn, name=name or self.label)
        self._merge(outcome)
        self.record["errors"][step] = outcome.error
        return outcome.result if outcome.ok else FAILED

    def collect(
        self,
        step: str,
        fn: Callable[[], dict[str, Any]],
        *,
        after: Sequence[str] = (),
        name: str | None = None,
    ) -> Any:
        """Run ``fn()`` as ``step`` (see :meth:`run`); the plain-data dict it returns joins the outputs."""
        result = self.run(step, fn, after=after, name=name)
        if result is not FAILED:
            if not isinstance(result, dict):  # the harness's own steps return dicts: a bug in the check
                raise TypeError(f"step {step} returned a {type(result).__name__}, expected a dict")
            self.record["outputs"].update(result)
        return result

    def fail(self, step: str, message: str) -> Any:
        """Record that ``step`` failed with ``message`` (a check the harness makes itself)."""
        self.record["errors"][step] = message
        return FAILED

    def _merge(self, outcome: Call) -> None:
        self.record["notes"] += [n for n in outcome.notes if n not in self.record["notes"]]

    def apply(
        self,
        step: str,
        args: Sequence[Any],
        *,
        outputs: Sequence[str] = ("out",),
        after: Sequence[str] = (),
        record: bool = True,
    ) -> Any:
        """``fn_cls.apply(*args)`` as ``step``; the output (a tuple when ``outputs`` names several).

        The result must be a tensor, or a tuple of ``len(outputs)`` tensors: anything else is this
        step's error. With ``record``, each output is recorded under its name.
        """
        apply = getattr(self.fn_cls, "apply", None)
        result = self.run(step, lambda: apply(*args), after=after, name=f"{self.label}.apply")
        if result is FAILED:
            return FAILED
        many = len(outputs) > 1
        values = list(result) if many and isinstance(result, (tuple, list)) else [result]
        if many and len(values) != len(outputs):
            got = f"a {type(result).__name__}" + (
                f" of length {len(values)}" if isinstance(result, (tuple, list)) else ""
            )
            return self.fail(
                step, f"{self.label}.apply should return ({', '.join(outputs)}), but returned {got}"
            )
        for value in values:
            if not isinstance(value, torch.Tensor):
                return self.fail(step, _not_a_tensor(self.label, value))
            # autograd can refuse an output only when its graph is read (a returned view of an input
            # that forward changed in place): that is the forward's error, not a later step's
            graph = call(lambda value=value: value.grad_fn, name=f"the output of {self.label}.apply")
            if not graph.ok:
                return self.fail(step, graph.error or "")
        if record:
            self.record["outputs"].update({k: freeze(v) for k, v in zip(outputs, values, strict=True)})
        return tuple(values) if many else values[0]

    def needs_graph(self, step: str, out: Any) -> bool:
        """False (and ``step`` failed) when ``out`` has no ``grad_fn`` although it should."""
        graph = call(lambda: out.grad_fn, name=f"the output of {self.label}.apply")
        if not graph.ok:
            self.fail(step, graph.error or "")
            return False
        if graph.result is None:
            self.fail(
                step,
                f"the output of {self.label}.apply has no grad_fn although an input requires grad: "
                "is forward returning a tensor detached from its inputs' graph?",
            )
            return False
        return True

    def grads(
        self,
        step: str,
        out: Any,
        leaves: Mapping[str, torch.Tensor],
        grad_output: Any,
        *,
        after: Sequence[str] = (),
        key: str | None = None,
        create_graph: bool = False,
    ) -> Any:
        """The gradients of ``out`` for ``grad_output`` with respect to ``leaves``, by autograd, as
        ``step``; recorded as ``outputs[key or step] = {name: grad}`` (None for an unused leaf).

        ``grad_output=None`` differentiates ``out.sum()``, whose upstream gradient is an expanded
        stride-0 tensor of ones (the case that exposes an in-place write into ``grad_output``).
        """
        if self.blocked(step, after):
            return FAILED
        if isinstance(out, torch.Tensor) and not self.needs_graph(step, out):
            return FAILED
        wanted = {k: t for k, t in leaves.items() if t.requires_grad}

        def backward() -> tuple[Any, ...]:
            if grad_output is None:
                return torch.autograd.grad(
                    out.sum(), list(wanted.values()), allow_unused=True, create_graph=create_graph
                )
            return torch.autograd.grad(
                out, list(wanted.values()), grad_output, allow_unused=True, create_graph=create_graph
            )

        result = self.run(step, backward, name=f"{self.label}.backward (through autograd)")
        if result is FAILED:
            return FAILED
        self.record["outputs"][key or step] = {k: freeze(g) for k, g in zip(wanted, result, strict=True)}
        return dict(zip(wanted, result, strict=True))

    def direct(
        self,
        step: str,
        out: Any,
        *grad_outputs: Any,
        after: Sequence[str] = (),
        inspect: bool = True,
        name: str | None = None,
    ) -> Any:
        """``fn_cls.backward(out.grad_fn, *grad_outputs)`` called directly, as ``step``.

        Records what it returned (``outputs[step]``, see :func:`returned`): called this way no
        gradient of a wrong shape is repaired by the engine (docs/checks.md item 8). With ``inspect``,
        also what ``ctx.saved_tensors`` holds (``outputs["saved"]``) and which ``ctx`` attributes
        hold tensors (``outputs["ctx_tensors"]``, docs/checks.md item 12).
        """
        if self.blocked(step, after):
            return FAILED
        if not self.needs_graph(step, out):
            return FAILED
        ctx = out.grad_fn
        if inspect:
            saved = call(lambda: list(ctx.saved_tensors), name="reading ctx.saved_tensors")
            self.record["outputs"]["saved"] = (
                [freeze(t) for t in saved.result] if saved.ok else NotAnArray("error")
            )
            self.record["outputs"]["ctx_tensors"] = ctx_tensor_attributes(ctx)
        backward = getattr(self.fn_cls, "backward", None)

        def run_backward() -> Any:
            with torch.no_grad():
                return backward(ctx, *grad_outputs)

        result = self.run(step, run_backward, name=name or f"{self.label}.backward")
        if result is FAILED:
            return FAILED
        self.record["outputs"][step] = returned(result)
        return result

    def jacobian(
        self, step: str, out: Any, leaves: Mapping[str, torch.Tensor], *, after: Sequence[str] = ()
    ) -> Any:
        """The full float64 Jacobian of ``out`` with respect to each leaf that requires grad, one
        ``torch.autograd.grad`` per output element (gradcheck's view); ``outputs[step]``."""
        wanted = {k: t for k, t in leaves.items() if t.requires_grad}

        def rows() -> dict[str, np.ndarray]:
            found: dict[str, list[np.ndarray]] = {k: [] for k in wanted}
            for i in range(out.numel()):
                unit = torch.zeros(out.numel(), dtype=out.dtype)
                unit[i] = 1.0
                grads = torch.autograd.grad(
                    out, list(wanted.values()), unit.view_as(out), retain_graph=True, allow_unused=True
                )
                for (k, t), g in zip(wanted.items(), grads, strict=True):
                    found[k].append(
                        np.zeros(t.numel()) if g is None else g.detach().reshape(-1).numpy().copy()
                    )
            return {k: np.stack(v) for k, v in found.items()}

        if self.blocked(step, after):
            return FAILED
        if not self.needs_graph(step, out):
            return FAILED
        result = self.run(step, rows, name=f"{self.label}.backward (through autograd)")
        if result is not FAILED:
            self.record["outputs"][step] = result
        return result

    # -- arguments -----------------------------------------------------------------------------------

    def forward_and_autograd(self, x_values: Any, g_values: Any) -> tuple[torch.Tensor, Any]:
        """The usual first two steps for a Function of one input ``x``: ``forward`` (its output ``y``,
        ``x`` snapshotted) and ``autograd`` (``dx`` through autograd for the upstream gradient
        ``g_values``, which is snapshotted). Returns the leaf ``x`` and the output."""
        x = tensor(x_values, True)
        y = self.apply("forward", [x], outputs=("y",))
        self.snapshot("forward", {"x": x})
        g = tensor(g_values)
        self.grads("autograd", y, {"dx": x}, g, after=("forward",))
        self.snapshot("autograd", {"grad_output": g})
        return x, y

    def snapshot(self, step: str, tensors: Mapping[str, Any]) -> None:
        """Record ``tensors`` as they are now, after ``step``, so that grading can tell which step
        changed which argument in place."""
        for name, t in tensors.items():
            if isinstance(t, torch.Tensor):
                self.record["inputs_after"][f"{step}: {name}"] = freeze(t)


def run_function(
    fn_cls: Any,
    spec: Sequence[Arg],
    grad_output: np.ndarray,
    label: str,
    stages: Sequence[str] = ("direct", "autograd"),
    then: Callable[[FunctionRun], None] | None = None,
) -> FunctionRecord:
    """Run a learner's Function on the arguments ``spec`` in the given stages; return the record.

    Steps: ``forward`` (apply; ``outputs["out"]``), then per stage, each on fresh leaf tensors so
    that one cannot disturb another:

    * ``direct``: ``fn_cls.backward(out.grad_fn, grad_output)`` called directly on the forward's
      output (``outputs["direct"]``, ``outputs["saved"]``, ``outputs["ctx_tensors"]``);
    * ``autograd``: gradients for ``grad_output`` (``outputs["autograd"]``, by leaf name);
    * ``sum``: gradients of ``out.sum()``, a stride-0 upstream gradient (``outputs["sum"]``);
    * ``jacobian``: the full float64 Jacobian (``outputs["jacobian"]``);
    * ``inplace``: the output doubled in place after forward, then differentiated (its error is the
      evidence: backward must refuse to read a saved output that changed).

    ``then(run)``, when given, runs last (the Function contract's steps:
    :func:`autograder.checks.function_contract.collect_contract`).
    """
    run = FunctionRun(fn_cls, label)
    args, leaves = make_args(spec)
    out = run.apply("forward", args)
    run.snapshot("forward", leaves)
    if "direct" in stages:
        g = tensor(grad_output)
        run.direct("direct", out, g, after=("forward",))
        run.snapshot("direct", {**leaves, "grad_output": g})
    for stage in ("autograd", "sum", "inplace", "jacobian"):
        if stage not in stages:
            continue
        fresh_args, fresh = make_args(spec)
        o = run.apply(f"{stage}: apply", fresh_args, after=("forward",), record=False)
        g = None if stage == "sum" else tensor(grad_output)
        if stage == "inplace" and o is not FAILED:
            run.run("inplace: edit", lambda o=o: o.detach().mul_(2.0), name="editing the output in place")
        if stage == "jacobian":
            run.jacobian(stage, o, fresh, after=(f"{stage}: apply",))
        else:
            edited = ("inplace: edit",) if stage == "inplace" else ()
            run.grads(stage, o, fresh, g, after=(f"{stage}: apply", *edited))
        if stage != "inplace":  # the check edits that output itself: the inputs are not judged there
            run.snapshot(stage, {**fresh, **({"grad_output": g} if g is not None else {})})
    if then is not None:
        then(run)
    return run.record


def observed(fn_cls: Any, seen: dict[str, Any]) -> Any:
    """A subclass of the learner's Function that records what ``ctx`` was told and what backward received.

    After the learner's forward (or ``setup_context``) ran, ``seen["non_differentiable"]`` holds, per
    output, whether forward marked it with ``ctx.mark_non_differentiable``; at each call of backward,
    ``seen["grads_none"]`` holds, per output, whether its gradient arrived as None (it does for an
    unused output only when forward called ``ctx.set_materialize_grads(False)``). Behaviour is the
    learner's own: every call is passed on unchanged. A ``fn_cls`` that is not a class is returned as
    it is (its errors are then the learner's).
    """
    if not isinstance(fn_cls, type) or not issubclass(fn_cls, torch.autograd.Function):
        return fn_cls

    def marked(ctx: Any, output: Any) -> None:
        flagged = getattr(ctx, "non_differentiable", None) or ()
        outputs = output if isinstance(output, (tuple, list)) else (output,)
        seen["non_differentiable"] = [any(o is t for t in flagged) for o in outputs]

    namespace: dict[str, Any] = {}
    if fn_cls.setup_context is torch.autograd.Function.setup_context:

        def forward(ctx: Any, *args: Any) -> Any:
            output = fn_cls.forward(ctx, *args)
            marked(ctx, output)
            return output

        namespace["forward"] = staticmethod(forward)
    else:

        def setup_context(ctx: Any, inputs: Any, output: Any) -> Any:
            result = fn_cls.setup_context(ctx, inputs, output)
            marked(ctx, output)
            return result

        namespace["setup_context"] = staticmethod(setup_context)

    def backward(ctx: Any, *grads: Any) -> Any:
        seen["grads_none"] = [g is None for g in grads]
        return fn_cls.backward(ctx, *grads)

    namespace["backward"] = staticmethod(backward)
    try:
        return type(fn_cls.__name__, (fn_cls,), namespace)
    except TypeError:
        return fn_cls
