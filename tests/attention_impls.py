"""Implementations of notebook 06's exercises for the check tests: right ones in several forms, and the
mistakes learners make, each switched on by a keyword.

:func:`flash_function` builds a ``FlashAttention`` whose forward walks key tiles with an online softmax
and whose backward recomputes the probabilities tile by tile from the saved logsumexp L. Each keyword
of :class:`Mistakes` turns one known mistake on; with none the Function is right.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

import torch


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """Plain softmax attention composed of torch operations (right)."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def attention_einsum(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False
) -> torch.Tensor:
    """The same with einsum and an additive mask (right)."""
    scores = torch.einsum("...id,...jd->...ij", q, k) * q.shape[-1] ** -0.5
    if is_causal:
        i = torch.arange(q.shape[-2], device=q.device)[:, None]
        j = torch.arange(k.shape[-2], device=q.device)[None, :]
        scores = scores + torch.where(j > i, float("-inf"), 0.0).to(scores.dtype)
    return torch.einsum("...ij,...jd->...id", scores.softmax(-1), v)


@dataclass(frozen=True)
class Mistakes:
    """The mistakes :func:`flash_function` can make (all off: right)."""

    no_scale: bool = False
    mask_diagonal: int = 0  # 1: one key too many; -1: the diagonal masked too
    bottom_right: bool = False
    acc_not_rescaled: bool = False
    sum_not_rescaled: bool = False
    save_l_as: str = "lse"  # "max", "sum"
    no_d: bool = False
    d_from: str = "o"  # "q": D = rowsum(dO * Q)
    transposed_dq_dk: bool = False
    drop_last_tile: bool = False
    nk_from_q: bool = False
    view_grad: bool = False
    grad_for_causal: bool = False
    save_on_ctx: bool = False
    save_p: bool = False
    call_sdpa: bool = False


def _mask(i0: int, i1: int, j0: int, j1: int, nq: int, nk: int, m: Mistakes, device: Any) -> torch.Tensor:
    """True where query i may see key j, for the block [i0:i1] x [j0:j1]."""
    i = torch.arange(i0, i1, device=device)[:, None]
    j = torch.arange(j0, j1, device=device)[None, :]
    shift = (nk - nq if m.bottom_right else 0) + m.mask_diagonal
    return j <= i + shift


def flash_function(
    bq: int = 16, bk: int = 16, mistakes: Mistakes | None = None, setup_context: bool = False
) -> type:
    """A ``FlashAttention`` with query tiles of ``bq`` rows and key tiles of ``bk`` (see the module)."""
    m = mistakes or Mistakes()

    def forward_impl(
        q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
    ) -> tuple[torch.Tensor, ...]:
        if m.call_sdpa:
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
            return o, torch.logsumexp(s, -1), s
        nq, d = q.shape[-2], q.shape[-1]
        nk = q.shape[-2] if m.nk_from_q else k.shape[-2]
        scale = 1.0 if m.no_scale else 1.0 / math.sqrt(d)
        o = torch.zeros_like(q)
        lse = torch.zeros(q.shape[:-1], dtype=q.dtype, device=q.device)
        last = (nk // bk) * bk if m.drop_last_tile else nk
        for i0 in range(0, nq, bq):
            i1 = min(i0 + bq, nq)
            qi = q[..., i0:i1, :]
            mx = torch.full(qi.shape[:-1], float("-inf"), dtype=q.dtype, device=q.device)
            total = torch.zeros_like(mx)
            acc = torch.zeros_like(qi)
            for j0 in range(0, last, bk):
                j1 = min(j0 + bk, last)
                kj, vj = k[..., j0:j1, :], v[..., j0:j1, :]
                s = qi @ kj.transpose(-2, -1) * scale
                if causal:
                    s = s.masked_fill(~_mask(i0, i1, j0, j1, nq, k.shape[-2], m, q.device), float("-inf"))
                new = torch.maximum(mx, s.amax(-1))
                safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
                p = torch.exp(s - safe[..., None])
                alpha = torch.exp(mx - safe)
                total = (total if m.sum_not_rescaled else alpha * total) + p.sum(-1)
                acc = (acc if m.acc_not_rescaled else alpha[..., None] * acc) + p @ vj
                mx = new
            o[..., i0:i1, :] = acc / total[..., None]
            lse[..., i0:i1] = {"lse": mx + torch.log(total), "max": mx, "sum": total}[m.save_l_as]
        return o, lse, None

    def backward_impl(ctx: Any, do: torch.Tensor) -> tuple[Any, ...]:
        if m.save_on_ctx:
            q, k, v, o, lse = ctx.q, ctx.k, ctx.v, ctx.o, ctx.lse
        else:
            q, k, v, o, lse = ctx.saved_tensors[:5]
        if m.view_grad:  # flattening the batch dimensions with .view: refused for some layouts
            do = do.view(-1, *do.shape[-2:]).view(do.shape)
        causal = ctx.causal
        nq, nk, d = q.shape[-2], k.shape[-2], q.shape[-1]
        scale = 1.0 if m.no_scale else 1.0 / math.sqrt(d)
        dd = (do * (q if m.d_from == "q" else o)).sum(-1)
        dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
        for j0 in range(0, nk, bk):
            j1 = min(j0 + bk, nk)
            kj, vj = k[..., j0:j1, :], v[..., j0:j1, :]
            for i0 in range(0, nq, bq):
                i1 = min(i0 + bq, nq)
                qi, doi = q[..., i0:i1, :], do[..., i0:i1, :]
                s = qi @ kj.transpose(-2, -1) * scale
                if causal:
                    s = s.masked_fill(~_mask(i0, i1, j0, j1, nq, nk, m, q.device), float("-inf"))
                p = torch.exp(s - lse[..., i0:i1, None])
                dv[..., j0:j1, :] += p.transpose(-2, -1) @ doi
                dp = doi @ vj.transpose(-2, -1)
                ds = p * dp if m.no_d else p * (dp - dd[..., i0:i1, None])
                if m.transposed_dq_dk:  # shapes fit only when the tiles are square and full
                    dq[..., i0:i1, :] += (ds.transpose(-2, -1) @ kj) * scale
                    dk[..., j0:j1, :] += (ds @ qi) * scale
                else:
                    dq[..., i0:i1, :] += (ds @ kj) * scale
                    dk[..., j0:j1, :] += (ds.transpose(-2, -1) @ qi) * scale
        need = ctx.needs_input_grad
        grads = (dq if need[0] else None, dk if need[1] else None, dv if need[2] else None)
        return (*grads, torch.ones(()) if m.grad_for_causal else None)

    def save(ctx: Any, q: Any, k: Any, v: Any, causal: bool, o: Any, lse: Any, extra: Any) -> None:
        ctx.causal = causal
        if m.save_on_ctx:
            ctx.q, ctx.k, ctx.v, ctx.o, ctx.lse = q, k, v, o, lse
        elif m.save_p or extra is not None:
            p = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
            ctx.save_for_backward(q, k, v, o, lse, p)
        else:
            ctx.save_for_backward(q, k, v, o, lse)

    if setup_context:

        class FlashAttention(torch.autograd.Function):  # the setup_context form: forward has no ctx
            @staticmethod
            def forward(q: Any, k: Any, v: Any, is_causal: bool = False) -> Any:
                return forward_impl(q, k, v, is_causal)[0]

            @staticmethod
            def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
                q, k, v, *rest = inputs
                causal = bool(rest[0]) if rest else False
                _, lse, _ = forward_impl(q, k, v, causal)
                save(ctx, q, k, v, causal, output, lse, None)

            @staticmethod
            def backward(ctx: Any, do: Any) -> Any:
                return backward_impl(ctx, do)

        return FlashAttention

    class FlashAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, q: Any, k: Any, v: Any, is_causal: bool = False) -> Any:
            o, lse, extra = forward_impl(q, k, v, is_causal)
            save(ctx, q, k, v, is_causal, o, lse, extra)
            return o

        @staticmethod
        def backward(ctx: Any, do: Any) -> Any:
            return backward_impl(ctx, do)

    return FlashAttention


def mistake_names() -> list[str]:
    """Every keyword of :class:`Mistakes`."""
    return [f.name for f in fields(Mistakes)]


def _dense_backward(q: Any, k: Any, v: Any, o: Any, g: Any, causal: bool) -> tuple[Any, Any, Any]:
    """dq, dk, dv of softmax attention for the upstream g, from the formulas (no autograd)."""
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = q @ k.transpose(-2, -1) * scale
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, -1)
    dp = g @ v.transpose(-2, -1)
    ds = p * (dp - (g * o).sum(-1, keepdim=True))
    return ds @ k * scale, ds.transpose(-2, -1) @ q * scale, p.transpose(-2, -1) @ g


def make_op(name: str, fake: str = "right", wrong_dv: bool = False) -> Any:
    """An ``attention_op`` registered as ``backprop_course_tests::<name>``: its kernel is
    :func:`attention`, its backward the formulas; ``fake`` picks its fake kernel ("right", "shape",
    "dtype", "strides"), ``wrong_dv`` doubles dv."""

    @torch.library.custom_op(f"backprop_course_tests::{name}", mutates_args=())
    def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> torch.Tensor:
        return attention(q, k, v, is_causal)

    @attention_op.register_fake
    def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> torch.Tensor:
        if fake == "shape":
            return q.new_empty(q.shape[:-1])
        if fake == "dtype":
            return torch.empty_like(q, dtype=torch.float16)
        if fake == "strides":
            return q.new_empty((*q.shape[:-2], q.shape[-1], q.shape[-2])).transpose(-2, -1)
        return torch.empty_like(q)

    def setup_context(ctx: Any, inputs: Any, output: Any) -> None:
        q, k, v, is_causal = inputs
        ctx.save_for_backward(q, k, v, output)
        ctx.is_causal = is_causal

    def backward(ctx: Any, g: Any) -> Any:
        q, k, v, o = ctx.saved_tensors
        dq, dk, dv = _dense_backward(q, k, v, o, g, ctx.is_causal)
        return dq, dk, 2 * dv if wrong_dv else dv, None

    attention_op.register_autograd(backward, setup_context=setup_context)
    return attention_op


def attention_with_item(q: Any, k: Any, v: Any, is_causal: bool = False) -> Any:
    """A plain function, no operator, that reads a tensor's value into Python: a graph break."""
    if q.abs().max().item() > 1e6:
        raise ValueError("inputs too large")
    return attention(q, k, v, is_causal)
