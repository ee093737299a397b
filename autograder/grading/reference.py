"""Reference answers, computed by PyTorch autograd in float64.

Each function takes plain numpy inputs and returns plain numpy outputs, so the checks compare a
learner's numpy results with PyTorch's own on exactly the same data.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping

import numpy as np
import torch
import torch.nn.functional as F

#: torch's default CPU generator is one per process, and the grader scores several notebooks at once,
#: in threads: a reference that seeds it and then draws must have it to itself for the whole block, or
#: another thread's seed or draws land in between and the reference is not what that seed gives (a
#: correct answer then fails, with a wrong diagnosis).
_GLOBAL_GENERATOR = threading.RLock()


@contextlib.contextmanager
def torch_seeded(seed: int) -> Iterator[None]:
    """torch's global generator as ``torch.manual_seed(seed)`` leaves it, for this block and, meanwhile,
    no other thread of the grader's; its state before is put back after (``torch.random.fork_rng``).
    Every reference that draws from it (``nn.Linear``'s initialisation, ``torch.empty(...).uniform_``)
    draws in such a block."""
    with _GLOBAL_GENERATOR, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _leaf(a: np.ndarray) -> torch.Tensor:
    return torch.tensor(np.asarray(a, dtype=np.float64), dtype=torch.float64, requires_grad=True)


def _np(t: torch.Tensor | None) -> np.ndarray:
    assert t is not None
    return t.detach().numpy().copy()


def gradient(f: Callable[[torch.Tensor], torch.Tensor], x: np.ndarray) -> np.ndarray:
    """The gradient of a scalar torch function ``f`` at ``x``, by autograd."""
    xt = _leaf(x)
    (g,) = torch.autograd.grad(f(xt), xt)
    return _np(g)


def linear(x: np.ndarray, W: np.ndarray, b: np.ndarray, dout: np.ndarray) -> dict[str, np.ndarray]:
    """``out = x @ W.T + b`` (``torch.nn.functional.linear``) and its gradients for upstream ``dout``."""
    xt, Wt, bt = _leaf(x), _leaf(W), _leaf(b)
    out = F.linear(xt, Wt, bt)
    out.backward(torch.from_numpy(np.asarray(dout, dtype=np.float64)))
    return {"out": _np(out), "dx": _np(xt.grad), "dW": _np(Wt.grad), "db": _np(bt.grad)}


def mse(pred: np.ndarray, target: np.ndarray) -> dict[str, np.ndarray]:
    """The mean squared error over all elements and its gradient with respect to ``pred``."""
    pt = _leaf(pred)
    loss = F.mse_loss(pt, torch.from_numpy(np.asarray(target, dtype=np.float64)))
    loss.backward()
    return {"loss": _np(loss), "dpred": _np(pt.grad)}


def least_squares(features: np.ndarray, target: np.ndarray) -> dict[str, np.ndarray]:
    """The linear layer with the lowest mean squared error on ``(features, target)``, solved directly.

    ``features`` is (N, D) and ``target`` is (N,) or (N, 1); returns ``W`` (1, D), ``b`` (1,) and the
    mean squared error ``loss`` of ``features @ W.T + b`` against the target: the best loss that
    gradient descent on this model can reach.
    """
    A = torch.from_numpy(np.asarray(features, dtype=np.float64))
    t = torch.from_numpy(np.asarray(target, dtype=np.float64)).reshape(-1, 1)
    A1 = torch.cat([A, torch.ones(A.shape[0], 1, dtype=torch.float64)], dim=1)
    solution = torch.linalg.lstsq(A1, t, driver="gelsd").solution
    W, b = solution[:-1].T, solution[-1]
    loss = F.mse_loss(F.linear(A, W, b), t)
    return {"W": _np(W), "b": _np(b), "loss": _np(loss)}


ACTIVATIONS: Mapping[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": torch.relu,
    "sigmoid": torch.sigmoid,
    "tanh": torch.tanh,
}


def activation(kind: str, x: np.ndarray, dout: np.ndarray) -> dict[str, np.ndarray]:
    """An elementwise activation (``relu``, ``sigmoid`` or ``tanh``) and its input gradient."""
    xt = _leaf(x)
    out = ACTIVATIONS[kind](xt)
    out.backward(torch.from_numpy(np.asarray(dout, dtype=np.float64)))
    return {"out": _np(out), "dx": _np(xt.grad)}


def softmax_cross_entropy(scores: np.ndarray, y: np.ndarray) -> dict[str, np.ndarray]:
    """Mean cross-entropy of softmax(scores) against integer labels, and its gradient."""
    st = _leaf(scores)
    loss = F.cross_entropy(st, torch.from_numpy(np.asarray(y, dtype=np.int64)))
    loss.backward()
    return {"loss": _np(loss), "dscores": _np(st.grad)}


def two_layer_net(
    params: Mapping[str, np.ndarray], X: np.ndarray, y: np.ndarray | None = None, reg: float = 0.0
) -> dict[str, np.ndarray]:
    """Affine-ReLU-affine scores; with labels, also the softmax loss with L2 on W1, W2 and every gradient."""
    p = {k: _leaf(params[k]) for k in ("W1", "b1", "W2", "b2")}
    Xt = torch.from_numpy(np.asarray(X, dtype=np.float64))
    scores = F.linear(torch.relu(F.linear(Xt, p["W1"], p["b1"])), p["W2"], p["b2"])
    result = {"scores": _np(scores)}
    if y is None:
        return result
    loss = F.cross_entropy(scores, torch.from_numpy(np.asarray(y, dtype=np.int64)))
    loss = loss + 0.5 * reg * ((p["W1"] ** 2).sum() + (p["W2"] ** 2).sum())
    loss.backward()
    result["loss"] = _np(loss)
    result.update({f"d{k}": _np(t.grad) for k, t in p.items()})
    return result


def cube_second_derivatives(x: np.ndarray, g: np.ndarray, v: np.ndarray) -> dict[str, np.ndarray]:
    """``y = x**3``, its gradient ``dx`` for upstream ``g``, and the derivatives of ``<dx, v>`` with
    respect to x (``hx``, a Hessian-vector product) and to the upstream gradient (``hg``)."""
    xt, gt = _leaf(x), _leaf(g)
    y = xt**3
    (dx,) = torch.autograd.grad(y, xt, gt, create_graph=True)
    hx, hg = torch.autograd.grad(dx, [xt, gt], torch.from_numpy(np.asarray(v, dtype=np.float64)))
    return {"y": _np(y), "dx": _np(dx), "hx": _np(hx), "hg": _np(hg)}


def ctx_features(data: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """References for notebook 05's ctx exercise: max over dim 1 of ``s`` with indices and the
    gradient for upstream ``gv``; ReLU of ``a`` and its gradient for ``ga``; square and cube of ``z``
    and their gradients for ``g2``, ``g3`` and both."""
    st = _leaf(data["s"])
    values, indices = st.max(dim=1)
    (ds,) = torch.autograd.grad(values, st, torch.from_numpy(np.asarray(data["gv"], dtype=np.float64)))
    result = {"values": _np(values), "indices": indices.numpy().copy(), "ds": _np(ds)}
    at = _leaf(data["a"])
    r = torch.relu(at)
    (da,) = torch.autograd.grad(r, at, torch.from_numpy(np.asarray(data["ga"], dtype=np.float64)))
    result.update({"relu": _np(r), "da": _np(da)})
    z = np.asarray(data["z"], dtype=np.float64)
    g2, g3 = (torch.from_numpy(np.asarray(data[k], dtype=np.float64)) for k in ("g2", "g3"))
    for name, grads in (("d_both", (g2, g3)), ("d_sq", (g2, None)), ("d_cu", (None, g3))):
        zt = _leaf(z)
        outs = [o for o, gg in zip((zt**2, zt**3), grads, strict=True) if gg is not None]
        (dz,) = torch.autograd.grad(outs, zt, [gg for gg in grads if gg is not None])
        result[name] = _np(dz)
    result.update({"sq": z**2, "cu": z**3})
    return result


def legendre3(x: np.ndarray, g: np.ndarray) -> dict[str, np.ndarray]:
    """The Legendre polynomial ``P3(x) = (5 x**3 - 3 x) / 2`` and its gradient for upstream ``g``."""
    xt = _leaf(x)
    y = 0.5 * (5 * xt**3 - 3 * xt)
    y.backward(torch.from_numpy(np.asarray(g, dtype=np.float64)))
    return {"y": _np(y), "dx": _np(xt.grad)}


def legendre_fit(
    x: np.ndarray, y: np.ndarray, init: tuple[float, float, float, float], lr: float, steps: int
) -> dict[str, np.ndarray]:
    """PyTorch's "Learning PyTorch with Examples" loop: ``a + b P3(c + d x)`` fitted to ``y`` by plain
    gradient descent on the sum of squared errors. Returns the final (a, b, c, d) and their loss.

    The gradients are written out in numpy (the model has four scalars, and autograd's per-step
    overhead would make grading ten times slower); tests check them against autograd.
    """
    a, b, c, d = legendre_fit_path(x, y, init, lr, steps)[-1]
    z = c + d * np.asarray(x, dtype=np.float64)
    loss = np.sum((a + b * 0.5 * (5 * z**3 - 3 * z) - np.asarray(y, dtype=np.float64)) ** 2)
    return {"params": np.array([a, b, c, d]), "loss": np.asarray(loss)}


def legendre_fit_path(
    x: np.ndarray,
    y: np.ndarray,
    init: tuple[float, float, float, float],
    lr: float,
    steps: int,
    mean: bool = False,
) -> np.ndarray:
    """The (a, b, c, d) of :func:`legendre_fit`'s loop at its start and after each step, (steps + 1, 4);
    with ``mean``, the loop on the mean of the squared errors instead of their sum (a replayed mistake)."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    a, b, c, d = (float(v) for v in init)
    scale = 1.0 / x.size if mean else 1.0
    path = [(a, b, c, d)]
    with np.errstate(all="ignore"):
        for _ in range(steps):
            z = c + d * x
            p3 = 0.5 * (5 * z**3 - 3 * z)
            r2 = 2.0 * scale * (a + b * p3 - y)
            slope = r2 * b * 1.5 * (5 * z**2 - 1)
            a, b, c, d = (
                a - lr * r2.sum(),
                b - lr * (r2 * p3).sum(),
                c - lr * slope.sum(),
                d - lr * (slope * x).sum(),
            )
            path.append((a, b, c, d))
    return np.array(path)
