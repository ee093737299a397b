"""References of notebook 06, in float64, and the wrong answers its diagnoses name.

:func:`attention_reference` is softmax attention differentiated by PyTorch autograd, with knobs for the
mistakes of the forward (no scale, a mask shifted or aligned bottom-right); :func:`flash_backward` is
the backward FlashAttention computes (D = rowsum(dO * O), dS = P * (dP - D)), with knobs for the
mistakes of the backward; :func:`online_softmax` replays a tiled forward with a given key tile, with
knobs for the mistakes of the online softmax (their values depend on the tile, so a diagnosis searches
every tile size).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

#: The mask alignments and shifts a learner can write, by the diagonal of ``tril`` each keeps.
MASKS = ("top-left", "bottom-right", "one key too many", "diagonal masked")


def _t(value: np.ndarray, requires_grad: bool = False) -> torch.Tensor:
    return torch.from_numpy(np.asarray(value, dtype=np.float64).copy()).requires_grad_(requires_grad)


def allowed(nq: int, nk: int, mask: str = "top-left") -> np.ndarray:
    """True where query i may see key j: ``tril`` of ones (nq, nk), shifted as ``mask`` says."""
    diagonal = {"top-left": 0, "bottom-right": nk - nq, "one key too many": 1, "diagonal masked": -1}[mask]
    return np.tril(np.ones((nq, nk), dtype=bool), k=diagonal)


def scores(q: np.ndarray, k: np.ndarray, causal: bool, scale: float, mask: str = "top-left") -> np.ndarray:
    """The scaled scores q k^T * scale in float64, -inf where the mask hides a key."""
    s = np.einsum("...id,...jd->...ij", np.asarray(q, np.float64), np.asarray(k, np.float64)) * scale
    if causal:
        s = np.where(allowed(s.shape[-2], s.shape[-1], mask), s, -np.inf)
    return s


def attention_reference(
    data: dict[str, np.ndarray], causal: bool, *, scale: float | None = None, mask: str = "top-left"
) -> dict[str, np.ndarray]:
    """o, L (the logsumexp of each row of scores), dq, dk, dv for the upstream ``data["g"]``, by autograd
    in float64. ``scale`` (1/sqrt(d) unless given) and ``mask`` make the wrong answers."""
    q, k, v = (_t(data[n], True) for n in ("q", "k", "v"))
    d = q.shape[-1]
    s = torch.einsum("...id,...jd->...ij", q, k) * (1.0 / math.sqrt(d) if scale is None else scale)
    if causal:
        s = s.masked_fill(~torch.from_numpy(allowed(s.shape[-2], s.shape[-1], mask)), float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    lse = torch.logsumexp(s, dim=-1)
    with np.errstate(all="ignore"):
        grads = torch.autograd.grad(o, (q, k, v), _t(data["g"]), allow_unused=True)
    out = {"out": o.detach().numpy(), "L": lse.detach().numpy()}
    out.update({f"d{n}": g.numpy() for n, g in zip("qkv", grads, strict=True)})
    return out


def _softmax_parts(s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    with np.errstate(all="ignore"):
        m = s.max(-1)
        total = np.exp(s - m[..., None]).sum(-1)
    return m, total


def l_mistakes(data: dict[str, np.ndarray], causal: bool) -> dict[str, np.ndarray]:
    """What a learner saves in place of L = m + log(l): the running maximum, the running sum, log(l)."""
    d = data["q"].shape[-1]
    m, total = _softmax_parts(scores(data["q"], data["k"], causal, 1.0 / math.sqrt(d)))
    return {
        "L saved as the running maximum m (L = m + log(l))": m,
        "L saved as the running sum l (L = m + log(l))": total,
        "L saved as log(l), without the maximum m (L = m + log(l))": np.log(total),
    }


def flash_backward(
    data: dict[str, np.ndarray], causal: bool, *, dterm: str = "o", transposed: bool = False
) -> dict[str, np.ndarray]:
    """dq, dk, dv by FlashAttention's backward in float64: P = exp(S - L), dV = P^T dO, dP = dO V^T,
    dS = P * (dP - D), dQ = dS K * scale, dK = dS^T Q * scale. ``dterm`` picks D: ``"o"`` is rowsum(dO *
    O) (right), ``"none"`` leaves D out, ``"q"`` takes rowsum(dO * Q); ``transposed`` swaps the
    transposes of dq and dk (shapes fit only when Nq = Nk)."""
    q, k, v, g = (np.asarray(data[n], np.float64) for n in ("q", "k", "v", "g"))
    scale = 1.0 / math.sqrt(q.shape[-1])
    s = scores(q, k, causal, scale)
    m, total = _softmax_parts(s)
    p = np.exp(s - (m + np.log(total))[..., None])
    o = p @ v
    dp = g @ np.swapaxes(v, -1, -2)
    dd = {"o": (g * o).sum(-1), "q": (g * q).sum(-1), "none": np.zeros(q.shape[:-1])}[dterm]
    ds = p * (dp - dd[..., None])
    if transposed:
        dq, dk = np.swapaxes(ds, -1, -2) @ k * scale, ds @ q * scale
    else:
        dq, dk = ds @ k * scale, np.swapaxes(ds, -1, -2) @ q * scale
    return {"dq": dq, "dk": dk, "dv": np.swapaxes(p, -1, -2) @ g}


def backward_mistakes(data: dict[str, np.ndarray], causal: bool) -> dict[str, dict[str, np.ndarray]]:
    """The gradients of each known backward mistake, by gradient name: {name: {mistake: value}}."""
    variants: dict[str, dict[str, Any]] = {
        "dS = P * dP, without D (dS = P * (dP - D), D = rowsum(dO * O))": {"dterm": "none"},
        "D computed from dO and Q; D = rowsum(dO * O), with the output O": {"dterm": "q"},
    }
    if data["q"].shape[-2] == data["k"].shape[-2]:
        variants["the transposes of dq and dk swapped (dq = dS K * scale, dk = dS^T Q * scale)"] = {
            "transposed": True
        }
    found: dict[str, dict[str, np.ndarray]] = {"dq": {}, "dk": {}, "dv": {}}
    for mistake, knobs in variants.items():
        with np.errstate(all="ignore"):
            grads = flash_backward(data, causal, **knobs)
        for name, value in grads.items():
            found[name][mistake] = value
    return found


def online_softmax(data: dict[str, np.ndarray], causal: bool, tile: int, mistake: str) -> np.ndarray:
    """The output of a tiled forward over key tiles of ``tile``, making ``mistake``: ``"acc"`` (the
    accumulator not rescaled when the running maximum changes), ``"sum"`` (the running sum not rescaled),
    ``"last tile"`` (the last, partial key tile dropped)."""
    q, v = np.asarray(data["q"], np.float64), np.asarray(data["v"], np.float64)
    s = scores(q, data["k"], causal, 1.0 / math.sqrt(q.shape[-1]))
    nk = s.shape[-1]
    end = (nk // tile) * tile if mistake == "last tile" else nk
    m = np.full(s.shape[:-1], -np.inf)
    total = np.zeros(s.shape[:-1])
    acc = np.zeros(q.shape[:-1] + v.shape[-1:])
    with np.errstate(all="ignore"):
        for j0 in range(0, end, tile):
            sj = s[..., j0 : min(j0 + tile, end)]
            new = np.maximum(m, sj.max(-1))
            safe = np.where(np.isinf(new), 0.0, new)
            p = np.exp(sj - safe[..., None])
            alpha = np.exp(m - safe)
            total = (total if mistake == "sum" else alpha * total) + p.sum(-1)
            acc = (acc if mistake == "acc" else alpha[..., None] * acc) + p @ v[..., j0 : j0 + p.shape[-1], :]
            m = new
        return acc / total[..., None]


def first_keys(data: dict[str, np.ndarray], causal: bool, count: int) -> np.ndarray:
    """The output of attention over the first ``count`` keys only (the mask kept top-left)."""
    q = np.asarray(data["q"], np.float64)
    s = scores(q, np.asarray(data["k"])[..., :count, :], causal, 1.0 / math.sqrt(q.shape[-1]))
    with np.errstate(all="ignore"):
        p = np.exp(s - s.max(-1, keepdims=True))
        return (p / p.sum(-1, keepdims=True)) @ np.asarray(data["v"], np.float64)[..., :count, :]


#: The online-softmax mistakes :func:`tiled_mistake` searches, and what each is called.
RESCALE_MISTAKES = {
    "acc": "the accumulator is not rescaled by exp(m_old - m_new) when the running maximum changes",
    "sum": "the running sum is not rescaled by exp(m_old - m_new) when the running maximum changes",
}


def _tiles(tiles: list[int]) -> str:
    shown = ", ".join(map(str, tiles[:3])) + (", ..." if len(tiles) > 3 else "")
    return f"key tiles of {shown}"


def truncation_mistake(
    actual: np.ndarray, data: dict[str, np.ndarray], causal: bool, close: Any
) -> str | None:
    """The keys left out, when ``actual`` is attention over the first K keys for exactly one K < Nk."""
    nq, nk = np.asarray(data["q"]).shape[-2], np.asarray(data["k"]).shape[-2]
    counts = [c for c in range(1, nk) if close(actual, first_keys(data, causal, c))]
    if len(counts) != 1:  # none, or several (a softmax that ignores the keys in between): not fixed
        return None
    (count,) = counts
    seen = f"your output is attention over the first {count} of the {nk} keys"
    if count == nq:
        return f"the loop over the keys stops at Nq, q's length, where k's length Nk belongs ({seen})"
    tiles = [t for t in range(2, nk) if nk % t and (nk // t) * t == count]
    if tiles:
        return (
            "the last key tile is dropped when Nk is not a multiple of the tile size (range(Nk // B)): "
            f"{seen}, as with {_tiles(tiles)}"
        )
    return None


def tiled_mistake(actual: np.ndarray, data: dict[str, np.ndarray], causal: bool, close: Any) -> str | None:
    """The online-softmax mistake that gives ``actual``, searched over every key tile size from 1 to Nk:
    keys left out (:func:`truncation_mistake`), or a running value not rescaled. Named only when one
    mistake alone explains the output (a diagnosis is right or absent); None otherwise."""
    truncated = truncation_mistake(actual, data, causal, close)
    if truncated:
        return truncated
    nk = np.asarray(data["k"]).shape[-2]
    found = {
        mistake: [t for t in range(1, nk) if close(actual, online_softmax(data, causal, t, mistake))]
        for mistake in RESCALE_MISTAKES
    }
    matched = [m for m, tiles in found.items() if tiles]
    if len(matched) != 1:
        return None
    (mistake,) = matched
    return f"{RESCALE_MISTAKES[mistake]} (your output matches that mistake with {_tiles(found[mistake])})"
