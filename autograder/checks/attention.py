"""Checks for notebook 06, memory-efficient attention: the collect half.

Five exercises: plain softmax ``attention`` composed of torch operations, ``saved_tensors`` (what autograd
packs for backward, measured with :func:`torch.autograd.graph.saved_tensors_hooks`), ``FlashAttention``
(an ``autograd.Function`` that walks key tiles with an online softmax and saves q, k, v, o and the
logsumexp L only), the memory it saves, and ``attention_op`` (the same computation as a
``torch.library.custom_op`` with ``register_fake`` and ``register_autograd``).

The contract every check holds the learner's code to: q has shape (..., Nq, d), k and v (..., Nk, d),
with 0 to 2 leading batch dimensions; the scores are scaled by 1/sqrt(d); ``is_causal`` applies the mask
of ``F.scaled_dot_product_attention(..., is_causal=True)``, aligned top-left: query i sees keys 0..i
(``torch.ones(Nq, Nk).tril()``). Sizes are primes (17, 37, 67...) on fresh seeds, so that no case is a
multiple of a common tile size, and Nq differs from Nk except in the cases that say so.

What is saved is measured, never read from the source (docs/checks.md item 33): every tensor autograd
packs while the learner's code runs goes through a pack hook, which records its shape, dtype and
``nbytes = numel * element_size`` (the bytes of the tensor's own elements, not of its storage, which
a view shares with its base). Tensors kept on ``ctx`` attributes are not packed; they are found on the
output's ``grad_fn`` and named.

The checks run on CUDA when a device is present (``device=`` overrides it); the evidence is plain numpy
either way. The graders are in :mod:`autograder.grading.attention`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from autograder.checks.attention_inputs import (
    HEAD_DIMS,
    MID,
    SMALL,
    Case,
    SavedLog,
    attention_cases,
    case_inputs,
    ctx_attribute_tensors,
    default_device,
    flash_cases,
    leaf,
    pick,
)
from autograder.checks.core import Check, Evidence, case_seed, freeze, register, run_check
from autograder.checks.function_contract import collect_contract
from autograder.checks.functions import FAILED, FunctionRun, label_of


def _run(check: Check, learner: Any, seed: int, device: Any) -> float:
    """:func:`run_check`, with the tensors on ``device`` when one is given (else the default device)."""
    if device is not None:
        check = dataclasses.replace(check, collect=functools.partial(check.collect, device=device))
    return run_check(check, learner, seed=seed)


# --------------------------------------------------------------------------------------------
# Exercise 1: plain softmax attention, differentiated by autograd
# --------------------------------------------------------------------------------------------

ATTENTION_POINTS = 2.0


def _run_case(
    run: FunctionRun, apply: Callable[..., Any], case: Case, data: dict[str, np.ndarray], device: torch.device
) -> dict[str, torch.Tensor]:
    """``forward`` (the learner's call, its output recorded as ``out``) and ``autograd`` (dq, dk, dv for
    the upstream g); the inputs and g are snapshot after each."""
    leaves = {name: leaf(data[name], device) for name in ("q", "k", "v")}
    out = run.run("forward", lambda: apply(*leaves.values(), case.causal))
    if out is not FAILED and not isinstance(out, torch.Tensor):
        run.fail("forward", f"{run.label} returned a {type(out).__name__}, expected a tensor")
        out = FAILED
    if out is not FAILED:
        run.record["outputs"]["out"] = freeze(out)
    run.snapshot("forward", leaves)
    g = leaf(data["g"], device, False)
    run.grads("autograd", out, {f"d{k}": t for k, t in leaves.items()}, g, after=("forward",))
    run.snapshot("autograd", {**leaves, "grad_output": g})
    return leaves


def collect_attention(attention: Any, *, seed: int = 0, device: Any = None) -> Evidence:
    """Run the learner's ``attention(q, k, v, is_causal)`` on each case; record o and dq, dk, dv."""
    where = default_device() if device is None else torch.device(device)
    label = getattr(attention, "__name__", "attention")
    cases = {}
    for index, (name, case) in enumerate(attention_cases(seed).items()):
        run = FunctionRun(attention, label)
        _run_case(run, attention, case, case_inputs(case_seed(seed, index), case), where)
        cases[name] = run.record
    return {"check": "attention", "seed": seed, "device": where.type, "cases": cases}


ATTENTION = register(
    Check("attention", "Softmax attention with autograd", ATTENTION_POINTS, collect_attention)
)


def check_attention(attention: Any, *, seed: int = 0, device: Any = None) -> float:
    """Grade ``attention(q, k, v, is_causal=False)``: its output and autograd's gradients; return points."""
    return _run(ATTENTION, attention, seed, device)


# --------------------------------------------------------------------------------------------
# Exercise 2: what autograd saves
# --------------------------------------------------------------------------------------------

SAVED_POINTS = 2.0


def _scores_softmax_values(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return torch.softmax(a @ b.transpose(-2, -1) / 2.0, dim=-1) @ c


def _exp_then_gradient(x: torch.Tensor) -> torch.Tensor:
    """exp(x), then, under the same hooks, the gradient of its sum: backward unpacks what exp saved."""
    (gradient,) = torch.autograd.grad(torch.exp(x).sum(), x)
    return gradient


#: The case whose function runs backward inside ``saved_tensors``: what it returns is recorded (the
#: gradient, exp(x), as right as the unpack hook's tensor lets it be).
SAVED_BACKWARD = "exp(x), then its gradient under the hooks"

#: The functions ``saved_tensors`` is called on, with the shapes of their arguments; the last entry
#: says whether the arguments require grad (with none requiring it, autograd saves nothing).
SAVED_FUNCTIONS: dict[str, tuple[Callable[..., torch.Tensor], tuple[tuple[int, ...], ...], str, bool]] = {
    "x * y": (torch.mul, ((3, 4), (3, 4)), "float64", True),
    "x * x (one tensor twice)": (lambda x: x * x, ((5,),), "float32", True),
    "exp(x)": (torch.exp, ((2, 3, 4),), "float32", True),
    "a @ b": (torch.matmul, ((5, 3), (3, 7)), "float64", True),
    "softmax(a @ b.T / 2) @ c": (_scores_softmax_values, ((6, 4), (9, 4), (9, 4)), "float32", True),
    "x * y, nothing requires grad": (torch.mul, ((3, 4), (3, 4)), "float64", False),
    SAVED_BACKWARD: (_exp_then_gradient, ((4, 3),), "float64", True),
}


#: Every size of a function's arguments grows by the same number drawn from the seed (below this), so
#: that the shapes saved differ from one grading run to the next and a matrix product still fits.
SAVED_GROWTH = 9


def saved_inputs(seed: int, name: str) -> list[np.ndarray]:
    """The arguments of the function ``name`` of :data:`SAVED_FUNCTIONS` for ``seed``: its declared
    shapes, each size grown by one number drawn from ``seed``."""
    _, shapes, dtype, _ = SAVED_FUNCTIONS[name]
    rng = np.random.default_rng(seed)
    grow = int(rng.integers(0, SAVED_GROWTH))
    return [rng.standard_normal([s + grow for s in shape]).astype(dtype) for shape in shapes]


def saved_arguments(seed: int, name: str, device: torch.device) -> list[torch.Tensor]:
    """The tensors ``fn(*args)`` is called with (``x * x`` gets one tensor, used twice)."""
    requires_grad = SAVED_FUNCTIONS[name][3]
    return [leaf(a, device, requires_grad) for a in saved_inputs(seed, name)]


def _plain(value: Any) -> Any:
    """A learner's list of (shape, nbytes) pairs as plain data: lists of ints, or a description."""
    if not isinstance(value, (list, tuple)):
        return {"type": type(value).__name__}
    pairs = []
    for item in value:
        if not isinstance(item, (list, tuple)) or len(item) != 2:
            return {
                "type": f"{type(value).__name__} holding a {type(item).__name__}",
                "item": repr(item)[:80],
            }
        shape, size = item
        try:
            pairs.append([[int(n) for n in shape], int(size)])
        except (TypeError, ValueError):
            return {"type": f"{type(value).__name__} holding ({type(shape).__name__}, {type(size).__name__})"}
    return pairs


def collect_saved_tensors(saved_tensors: Any, *, seed: int = 0, device: Any = None) -> Evidence:
    """Call the learner's ``saved_tensors(fn, *args)`` on each function of :data:`SAVED_FUNCTIONS`."""
    where = default_device() if device is None else torch.device(device)
    label = getattr(saved_tensors, "__name__", "saved_tensors")
    cases = {}
    for index, name in enumerate(SAVED_FUNCTIONS):
        fn, returned = SAVED_FUNCTIONS[name][0], []
        args = saved_arguments(case_seed(seed, index), name, where)
        if name.startswith("x * x"):
            args = args[:1]

        def called(*given: Any, fn: Callable[..., torch.Tensor] = fn, returned: list[Any] = returned) -> Any:
            returned.append(fn(*given))
            return returned[-1]

        run = FunctionRun(saved_tensors, label)
        result = run.run("call", lambda args=args, called=called: saved_tensors(called, *args))
        if result is not FAILED:
            run.record["outputs"]["saved"] = _plain(result)
            if name == SAVED_BACKWARD and returned:
                run.record["outputs"]["gradient"] = freeze(returned[-1])
        run.snapshot("call", {f"argument {i}": a for i, a in enumerate(args)})
        cases[name] = run.record
    return {"check": "saved_tensors", "seed": seed, "device": where.type, "cases": cases}


SAVED_TENSORS = register(Check("saved_tensors", "What autograd saves", SAVED_POINTS, collect_saved_tensors))


def check_saved_tensors(saved_tensors: Any, *, seed: int = 0, device: Any = None) -> float:
    """Grade ``saved_tensors(fn, *args)``: one (shape, nbytes) per tensor autograd saves; return points."""
    return _run(SAVED_TENSORS, saved_tensors, seed, device)


# --------------------------------------------------------------------------------------------
# Exercises 3 and 4: FlashAttention, forward and backward, and what it saves
# --------------------------------------------------------------------------------------------

FLASH_POINTS = 6.0
#: The names of apply's arguments, in order.
FLASH_ARGS = ["q", "k", "v", "is_causal"]
#: The case that also calls backward directly and runs the Function contract: two batch dimensions, so
#: that an expanded upstream gradient cannot be flattened with ``.view``.
CONTRACT_CASE = 2


def _flash_case(
    run: FunctionRun, fn_cls: Any, case: Case, data: dict[str, np.ndarray], device: torch.device
) -> None:
    """``forward`` under the pack hooks (``outputs["hooks"]``: each saved tensor with its values), then
    ``autograd``; the first case also calls backward directly (``direct``: the four values it returns)."""
    apply = getattr(fn_cls, "apply", None)
    log = SavedLog(values=True)
    with log:
        _run_case(run, lambda *a: apply(*a), case, data, device)
    run.record["outputs"]["hooks"] = log.entries


def collect_flash_attention(fn_cls: Any, *, seed: int = 0, device: Any = None) -> Evidence:
    """Run the learner's ``FlashAttention`` on each case of :func:`flash_cases`: o, the tensors it saves
    (L among them), dq, dk, dv; on the first case also a direct backward call and the Function contract
    (upstream gradients of every layout, needs_input_grad, tensors on ctx attributes)."""
    where = default_device() if device is None else torch.device(device)
    label = label_of(fn_cls, "FlashAttention")
    cases = {}
    for index, (name, case) in enumerate(flash_cases(seed).items()):
        data = case_inputs(case_seed(seed, index), case)
        run = FunctionRun(fn_cls, label)
        _flash_case(run, fn_cls, case, data, where)
        if index == CONTRACT_CASE:
            leaves = [leaf(data[k], where) for k in ("q", "k", "v")]
            out = run.apply("direct: apply", [*leaves, case.causal], after=("forward",), record=False)
            g = leaf(data["g"], where, False)
            run.direct("direct", out, g, after=("direct: apply",))
            run.snapshot("direct", {"grad_output": g})
            spec = [("q", data["q"], True), ("k", data["k"], True), ("v", data["v"], True)]
            collect_contract(run, [*spec, ("is_causal", case.causal, False)], data["g"])
        cases[name] = run.record
    return {"check": "flash_attention", "seed": seed, "device": where.type, "cases": cases}


FLASH_ATTENTION = register(
    Check("flash_attention", "FlashAttention: forward and backward", FLASH_POINTS, collect_flash_attention)
)


def check_flash_attention(fn_cls: Any, *, seed: int = 0, device: Any = None) -> float:
    """Grade ``FlashAttention``: o, L, dq, dk, dv on fresh shapes, and the Function contract."""
    return _run(FLASH_ATTENTION, fn_cls, seed, device)


MEMORY_POINTS = 2.0
#: The sequence lengths of the memory check (Nq = Nk = N) before the seed's growth, and its head size.
MEMORY_LENGTHS = (64, 128, 256, 512)
MEMORY_D = 4


def memory_lengths(seed: int) -> tuple[int, ...]:
    """The memory check's lengths for ``seed``: each of :data:`MEMORY_LENGTHS` grown by up to a quarter,
    drawn from the seed, so that the shapes saved differ from one grading run to the next."""
    rng = np.random.default_rng([seed, len(MEMORY_LENGTHS)])
    return tuple(n + int(rng.integers(0, n // 4)) for n in MEMORY_LENGTHS)


def memory_inputs(seed: int, n: int) -> dict[str, np.ndarray]:
    """q, k, v of shape (n, MEMORY_D) in float32."""
    case = Case((), n, n, MEMORY_D, False, "float32")
    return case_inputs(seed, case)


def collect_flash_memory(fn_cls: Any, *, seed: int = 0, device: Any = None) -> Evidence:
    """Run the learner's ``FlashAttention`` forward for each N of :func:`memory_lengths` under the pack
    hooks: the shape and bytes of every saved tensor, and the tensors kept on ``ctx`` attributes."""
    where = default_device() if device is None else torch.device(device)
    label = label_of(fn_cls, "FlashAttention")
    apply = getattr(fn_cls, "apply", None)
    cases = {}
    for index, n in enumerate(memory_lengths(seed)):
        data = memory_inputs(case_seed(seed, index), n)
        run = FunctionRun(fn_cls, label)
        leaves = [leaf(data[k], where) for k in ("q", "k", "v")]
        log = SavedLog()
        with log:
            out = run.run("forward", lambda leaves=leaves: apply(*leaves, False), name=f"{label}.apply")
        if out is not FAILED and isinstance(out, torch.Tensor) and out.grad_fn is not None:
            run.record["outputs"]["ctx"] = ctx_attribute_tensors(out.grad_fn)
        elif out is not FAILED:
            run.fail(
                "forward", f"{label}.apply returned no tensor with a grad_fn although q, k and v require grad"
            )
        run.record["outputs"]["hooks"] = log.entries
        cases[f"N = {n}"] = run.record
    return {"check": "flash_memory", "seed": seed, "device": where.type, "cases": cases}


FLASH_MEMORY = register(
    Check(
        "flash_memory", "FlashAttention saves less than autograd would", MEMORY_POINTS, collect_flash_memory
    )
)


def check_flash_memory(fn_cls: Any, *, seed: int = 0, device: Any = None) -> float:
    """Grade what ``FlashAttention`` saves for backward, for N from about 64 to 640; return points."""
    return _run(FLASH_MEMORY, fn_cls, seed, device)


def scale_of(d: int) -> float:
    """The contract's scale of the scores, 1/sqrt(d)."""
    return 1.0 / math.sqrt(d)


# --------------------------------------------------------------------------------------------
# Exercise 5: attention as a custom operator
# --------------------------------------------------------------------------------------------

OP_POINTS = 3.0
#: The backend of the ``torch.compile`` step: ``aot_eager`` traces the forward and the backward through
#: AOTAutograd, as the default backend does, without generating C++ (the grading jail has no compiler).
COMPILE_BACKEND = "aot_eager"


def op_cases(seed: int) -> dict[str, Case]:
    """Two cases: Nq < Nk with one batch dimension, and Nq > Nk with the mask."""
    rng = np.random.default_rng(seed)
    s, m, d = pick(rng, SMALL), pick(rng, MID), pick(rng, HEAD_DIMS)
    return {"Nq < Nk, one batch dim": Case((2,), s, m, d, False), "Nq > Nk, causal": Case((), m, s, d, True)}


def _layout(t: torch.Tensor) -> dict[str, Any]:
    return {
        "shape": [int(n) for n in t.shape],
        "dtype": str(t.dtype).removeprefix("torch."),
        "stride": list(t.stride()),
    }


def _opcheck(op: Any, args: list[Any]) -> dict[str, Any]:
    """``torch.library.opcheck``'s verdict per test utility: None for success, else the error's text."""
    results = torch.library.opcheck(op, tuple(args), raise_exception=False)
    return {
        "opcheck": {
            util: None if r == "SUCCESS" else f"{type(r).__name__}: {r}"[:800] for util, r in results.items()
        }
    }


def _fake(op: Any, args: list[Any]) -> dict[str, Any]:
    """The output layout of the real kernel, and of the fake kernel on meta tensors of the same inputs."""
    real = op(*args)
    meta = op(*(a.detach().to("meta") if isinstance(a, torch.Tensor) else a for a in args))
    return {"fake": {"real": _layout(real), "fake": _layout(meta)}}


class _Tiny(torch.nn.Module):
    """A module that calls the operator between two ordinary operations."""

    def __init__(self, op: Any, causal: bool) -> None:
        super().__init__()
        self.op, self.causal = op, causal

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return self.op(q * 1.0, k, v, self.causal) * 2.0


def _compiled(op: Any, case: Case, data: dict[str, np.ndarray], device: torch.device) -> dict[str, Any]:
    """``torch.compile(fullgraph=True)`` of :class:`_Tiny`: its output and gradients (its error is the
    step's, a graph break's cause included)."""
    import torch._dynamo

    torch._dynamo.reset()
    leaves = [leaf(data[k], device) for k in ("q", "k", "v")]
    module = torch.compile(_Tiny(op, case.causal), fullgraph=True, backend=COMPILE_BACKEND)
    out = module(*leaves)
    grads = torch.autograd.grad(out, leaves, leaf(data["g"], device, False))
    return {
        "compiled": {"out": freeze(out), **{f"d{k}": freeze(g) for k, g in zip("qkv", grads, strict=True)}}
    }


def collect_attention_op(op: Any, *, seed: int = 0, device: Any = None) -> Evidence:
    """Run the learner's ``attention_op(q, k, v, is_causal)``: values and gradients on each case; on the
    first, ``torch.library.opcheck``, the fake kernel's output layout, and ``torch.compile``."""
    where = default_device() if device is None else torch.device(device)
    label = label_of(op, label_of(op, "attention_op"), "_qualname")
    cases = {}
    for index, (name, case) in enumerate(op_cases(seed).items()):
        data = case_inputs(case_seed(seed, index), case)
        run = FunctionRun(op, label)
        _run_case(run, op, case, data, where)
        if index == 0:
            args = [*(leaf(data[k], where) for k in ("q", "k", "v")), case.causal]
            run.collect(
                "opcheck", lambda args=args: _opcheck(op, args), name=f"torch.library.opcheck({label})"
            )
            run.collect("fake", lambda args=args: _fake(op, args), name=f"{label} on meta tensors")
            run.collect(
                "compile",
                lambda case=case, data=data: _compiled(op, case, data, where),
                name=f"torch.compile(fullgraph=True) of a module calling {label}",
            )
        cases[name] = run.record
    # what torch.library.custom_op returns (a CustomOpDef), as opposed to a plain function
    custom = type(op).__name__ == "CustomOpDef" and hasattr(op, "register_fake")
    return {
        "check": "attention_op",
        "seed": seed,
        "device": where.type,
        "op": label,
        "custom_op": custom,
        "kind": label_of(type(op), "object"),
        "cases": cases,
    }


ATTENTION_OP = register(
    Check("attention_op", "Attention as a custom operator", OP_POINTS, collect_attention_op)
)


def check_attention_op(op: Any, *, seed: int = 0, device: Any = None) -> float:
    """Grade ``attention_op``: values and gradients, opcheck, its fake kernel, torch.compile."""
    return _run(ATTENTION_OP, op, seed, device)
