# %% [markdown]
# # 06 · Memory-efficient attention: a Function that saves less, and a custom operator
#
# Notebooks 04 and 05 wrote `autograd.Function`s that autograd could have differentiated on its
# own: `LinearFunction` is `F.linear` with a hand-written backward. PyTorch's "Extending PyTorch"
# note gives other reasons first for writing one today:
#
# - **saving less for backward.** Autograd keeps every intermediate that some backward formula
#   needs until the backward pass has used it. For attention, that is a matrix with one entry per
#   pair of positions: memory quadratic in the sequence length N. A Function decides for itself
#   what it saves, and can recompute the rest during backward.
# - **code autograd cannot see**: a C++ or GPU kernel, a Triton kernel, a numpy routine. There the
#   note recommends a **custom operator** (`torch.library.custom_op`) rather than a bare Function,
#   because an operator also tells `torch.compile` and `torch.export` what it returns
#   (`register_fake`) and can be tested by PyTorch's own `torch.library.opcheck`.
#
# This notebook does both with attention, the layer of every transformer:
#
# $$\mathrm{attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt d}\right) V .$$
#
# You will measure what autograd saves for it, write FlashAttention's algorithm (Dao et al., 2022;
# its second version, 2023, is the one sketched here) as a Function that walks the keys in tiles and
# saves only its inputs, its output and one number per query, prove with measurements that it saves
# memory linear in N, and turn it into a custom operator that `torch.compile` traces in one graph.
#
# | exercise | you write | feature | points |
# |---|---|---|---|
# | 1 | `attention` | plain softmax attention, the causal mask | 2 |
# | 2 | `saved_tensors` | what autograd saves, with `saved_tensors_hooks` | 2 |
# | 3 | `FlashAttention` | online softmax, a backward that recomputes | 6 |
# | 4 | (your `FlashAttention`, measured) | memory linear in N, not quadratic | 2 |
# | 5 | `attention_op` | a custom operator, `opcheck`, `torch.compile` | 3 |
#
# **Shapes.** q has shape (..., Nq, d) and k, v have (..., Nk, d): any number of leading batch
# dimensions (heads, say), the same for all three, and a number of queries Nq that need not equal the
# number of keys Nk. The output has q's shape. The checks use every such case, in float64 and float32,
# with random upstream gradients of every layout, on sizes that change at each grading. Everything
# here runs on a CPU in a few minutes; when a GPU is present, the try-it cells use it.

# %% locked grade_id="setup"
try:  # the course's package (the checks, backprop_utils): `make` installs it in the repository
    import autograder.checks  # noqa: F401
except ModuleNotFoundError:  # elsewhere (a hosted notebook service, say), by name from the package index
    import importlib

    from IPython import get_ipython

    print("The course's package is not installed here; installing it: %pip install backprop-course==0.1.0")
    get_ipython().run_line_magic("pip", "install backprop-course==0.1.0")
    importlib.invalidate_caches()
    import autograder.checks  # noqa: F401

import math

import matplotlib.pyplot as plt
import torch
import torch.nn.functional as F

from autograder.checks import (
    check_attention,
    check_attention_op,
    check_flash_attention,
    check_flash_memory,
    check_saved_tensors,
)
from backprop_utils import compare

torch.set_default_dtype(torch.float64)
device = "cuda" if torch.cuda.is_available() else "cpu"  # the try-it cells use a GPU when there is one

# %% [markdown]
# ## Exercise 1: plain attention (2 points)
#
# Each query row $q_i$ scores every key, $s_{ij} = q_i \cdot k_j / \sqrt d$, the softmax of each row
# of scores gives weights $p_{ij}$ that sum to 1 over j, and the output row is the weighted average
# of the value rows, $o_i = \sum_j p_{ij} v_j$. The scale $1/\sqrt d$ keeps the scores' spread
# independent of d.
#
# **Causal attention** lets query i see only keys $j \le i$ (a language model must not read ahead).
# We use PyTorch's convention, that of `F.scaled_dot_product_attention(..., is_causal=True)`: the
# allowed pairs are the lower triangle of an (Nq, Nk) matrix of ones, aligned at its top-left corner,
# also when Nq differs from Nk. A masked pair gets the score $-\infty$ before the softmax, so its
# weight is exactly 0.
#
# Write `attention(q, k, v, is_causal=False)` from torch operations, for any number of leading batch
# dimensions. `F.scaled_dot_product_attention` is the reference the check compares with, so it is
# the one function you may not call. **Expected error.** Rounding, about 1e-16 in float64.
#
# <details><summary>Hint 1</summary>
#
# `@` (`matmul`) multiplies the last two dimensions and broadcasts the leading ones; what you need
# is the transpose of k's last two dimensions, whatever comes before them.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# `torch.ones(Nq, Nk, dtype=torch.bool).tril()` is True where a pair is allowed; `masked_fill` puts
# a value where a mask is True. Make the mask on the scores' device.
#
# </details>
#
# <details><summary>Hint 3</summary>
#
# `scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])`, masked where the allowed mask is
# False (`~allowed`) with `float("-inf")`; then `torch.softmax(scores, dim=-1) @ v`.
#
# </details>


# %% solution grade_id="attention"
def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v for q (..., Nq, d), k and v (..., Nk, d) -> (..., Nq, d).

    Hint: with is_causal, query i sees keys j <= i (the top-left lower triangle of (Nq, Nk)).
    """
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        n_q, n_k = scores.shape[-2:]
        allowed = torch.ones(n_q, n_k, dtype=torch.bool, device=scores.device).tril()
        scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
    ### END SOLUTION


# %% [markdown]
# Try it against `F.scaled_dot_product_attention`, outputs and the three gradients for a random
# upstream gradient: two heads of 5 queries and 7 keys (so the causal mask is not square), causal and
# not, and a single query row with no batch dimension. Every row should say `ok`.

# %%
torch.manual_seed(0)
rows = {}
for label, q_shape, k_shape, causal in (
    ("full", (2, 5, 4), (2, 7, 4), False),
    ("causal", (2, 5, 4), (2, 7, 4), True),
    ("one_row", (1, 4), (3, 4), True),
):
    q, k, v = (torch.randn(s, device=device) for s in (q_shape, k_shape, k_shape))
    g = torch.randn(q_shape, device=device)
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out_ref = F.scaled_dot_product_attention(*leaves, is_causal=causal)
    refs = torch.autograd.grad(out_ref, leaves, g)
    mine = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out = attention(*mine, is_causal=causal)
    grads = torch.autograd.grad(out, mine, g)
    rows[f"out_{label}"] = (out, out_ref)
    for name, got, ref in zip(("dq", "dk", "dv"), grads, refs, strict=True):
        rows[f"{name}_{label}"] = (got, ref)
compare(**rows)

# %% tests grade_id="test_attention" points=2
"""attention matches F.scaled_dot_product_attention, causal or not, for Nq != Nk and any batch dims."""
score = check_attention(attention)
### BEGIN HIDDEN TESTS
score = check_attention(attention, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 2: what autograd saves (2 points)
#
# Autograd stores, for every recorded operation, the tensors its backward formula will need: for
# `a @ b` both factors, for `softmax` its output, for `exp` its output, for a mask its mask. They stay
# in memory from the forward pass until the backward pass has used them. PyTorch lets you watch this
# with a context manager:
#
# ```python
# with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
#     out = f(x)
# ```
#
# Inside it, every time autograd saves a tensor for backward, it calls `pack_hook(tensor)` and stores
# whatever that returns; when backward needs the tensor, it calls `unpack_hook(stored)` and uses what
# that returns. PyTorch uses this pair to move saved tensors to the CPU or to disk; here it is a
# meter. Each tensor saved is packed once, in the order the forward pass saves them; a tensor that
# two operations save is packed twice.
#
# Write `saved_tensors(fn, *args)`: run `fn(*args)` under the hooks and return a list with one
# `(shape, nbytes)` per packed tensor, in pack order, where `shape` is a tuple of ints and
# `nbytes = numel * element_size` (what the tensor's elements take). Backward must still work if the
# caller runs it: the unpack hook gives back what the pack hook was given. The caller makes the
# inputs require grad (autograd saves nothing for a computation that needs no gradient).
#
# <details><summary>Hint 1</summary>
#
# The pack hook can append to a list defined in `saved_tensors` (a closure) and return the tensor
# unchanged; the unpack hook returns its argument.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# `tuple(t.shape)` and `t.numel() * t.element_size()`.
#
# </details>


# %% solution grade_id="saved_tensors"
def saved_tensors(fn, *args) -> list[tuple[tuple[int, ...], int]]:
    """Run ``fn(*args)``; return ``(shape, nbytes)`` of each tensor autograd saves for backward, in order.

    Hint: torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook).
    """
    ### BEGIN SOLUTION
    saved = []

    def pack(tensor):
        saved.append((tuple(tensor.shape), tensor.numel() * tensor.element_size()))
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*args)
    return saved
    ### END SOLUTION


# %% [markdown]
# Try it. First on single operations whose saved tensors we know: `exp` saves its output (its
# derivative is itself), `sin` its input (for the cosine), and nothing is saved when no input requires
# grad; and backward run under your hooks must still work. Each line should say `ok`. Then your plain
# attention for N = 6 queries and keys and d = 4, in float32 (4 bytes an element), without the mask
# and with it: which operation saved each tensor? Then the total over sequence lengths from 64 to
# 1024 with d = 16, on log-log axes, where a power law $N^a$ is a straight line of slope a. Before you
# run it: from the shapes above, which tensors grow as $N^2$?

# %%
torch.manual_seed(1)
x32 = torch.randn(6, 4, dtype=torch.float32, device=device, requires_grad=True)
x64 = torch.randn(3, 5, dtype=torch.float64, device=device, requires_grad=True)
for label, fn, args, expected in (
    ("exp saves its output", torch.exp, (x32,), [((6, 4), 96)]),
    ("sin saves its input", torch.sin, (x64,), [((3, 5), 120)]),
    ("nothing without requires_grad", torch.exp, (x32.detach(),), []),
    (
        "backward under the hooks",
        lambda a: torch.autograd.grad(torch.exp(a).sum(), a),
        (x32,),
        [((6, 4), 96)],
    ),
):
    got = saved_tensors(fn, *args)
    print(f"{label}: {got}", "ok" if got == expected else f"WRONG, expected {expected}")

q, k, v = (torch.randn(6, 4, dtype=torch.float32, device=device, requires_grad=True) for _ in range(3))
for causal in (False, True):
    print(f"attention(q, k, v, is_causal={causal}) saves:")
    for shape, nbytes in saved_tensors(attention, q, k, v, causal):
        print(f"  shape {str(shape):10} {nbytes:6d} bytes")

lengths = [64, 128, 256, 512, 1024]
plain_bytes = []
for n in lengths:
    q, k, v = (torch.randn(n, 16, dtype=torch.float32, device=device, requires_grad=True) for _ in range(3))
    plain_bytes.append(sum(nbytes for _, nbytes in saved_tensors(attention, q, k, v)))
print("saved bytes:", dict(zip(lengths, plain_bytes, strict=True)))
plt.loglog(lengths, plain_bytes, "o-", label="plain attention (autograd)")
plt.xlabel("sequence length N")
plt.ylabel("bytes saved for backward")
plt.legend()
plt.show()

# %% tests grade_id="test_saved_tensors" points=2
"""saved_tensors reports the shape and bytes of each tensor autograd saves, in order; backward still works."""
score = check_saved_tensors(saved_tensors)
### BEGIN HIDDEN TESTS
score = check_saved_tensors(saved_tensors, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 3: FlashAttention, a Function that saves less (6 points)
#
# The (N, N) float tensors you just saw are the scores' softmax $P$, saved twice: once by `softmax` for its
# own backward and once by `P @ v`. FlashAttention never keeps $P$. Its forward walks the keys in
# **tiles** of B keys (B = 16, say) and keeps, for each query row, a small running state; its
# backward walks the tiles again and recomputes each tile of $P$ when it needs it.
#
# ### The forward: an online softmax
#
# Fix one query row with scaled scores $s_1, \dots, s_{N_k}$. After the tiles seen so far (the set
# of keys J), the state of that row is three things, all defined relative to a number $m$:
#
# $$m = \max_{j \in J} s_j, \qquad \ell = \sum_{j \in J} e^{\,s_j - m}, \qquad
#   a = \sum_{j \in J} e^{\,s_j - m}\, v_j \quad (\text{a vector of size } d).$$
#
# That is the contract: whatever tiles you have processed, $(m, \ell, a)$ must equal these sums over
# exactly those keys. At the end, J is every key, and the output row is $a / \ell$. Subtracting the
# maximum keeps every exponential at most 1, as in notebook 02's stable softmax. Your job is the
# update: a new tile arrives with scores $s_j$, $j \in T$. What are the new $m'$, $\ell'$ and $a'$,
# computed from the old state and the tile alone? The difficulty is that the old $\ell$ and $a$ were
# computed relative to the old $m$, and the new maximum may be larger.
#
# The cell below is a worked case to test your update on, one query, three keys, in two tiles:
# scores (2, 0 | 4), one-dimensional values (1, 2 | 3). It prints the state after the first tile and
# after both, computed from the definitions; your update from the first state and the second tile
# must reproduce the second.
#
# **What backward needs.** Save the logsumexp of each row, $L = \log \sum_j e^{s_j}$, a tensor of
# shape (..., Nq): from $L$, any tile of probabilities can be recomputed on its own,
# $p_{ij} = e^{s_{ij} - L_i}$, with no pass over the whole row. Find $L$ from the final state.
# The contract: `forward(ctx, q, k, v, is_causal=False)` saves exactly q, k, v, the output o and L
# with `ctx.save_for_backward` (a bool such as `is_causal` goes on `ctx` directly) and never forms a
# tensor of Nq × Nk scores; (..., Nq, B) at a time is fine.
#
# ### The backward, tile by tile
#
# `backward(ctx, grad_output)` receives $dO$, the gradient of the loss with respect to o, of o's
# shape, and returns `(dq, dk, dv, None)` (None for `is_causal`, and None for a tensor whose entry of
# `ctx.needs_input_grad` is False, as in notebook 04). Derive it for plain attention
# first, in matrix form with $S = QK^\top/\sqrt d$, $P = \mathrm{softmax}(S)$ row by row and
# $O = PV$:
#
# 1. $O = PV$ is a matrix product, as in notebook 01: what are $dV$ and $dP$?
# 2. The softmax of one row, from notebook 02: $\partial p_j / \partial s_i = p_j(\delta_{ij} - p_i)$.
#    What is $dS$ in terms of $P$ and $dP$? Your formula needs, for each row, one sum over the whole
#    row. That sum would need a whole row of $P$, which you never hold; write it in terms of tensors
#    you saved, $O$ and $dO$ (substitute $dP$ from step 1 into the sum).
# 3. $S = QK^\top/\sqrt d$ is a matrix product again: $dQ$ and $dK$.
#
# Then tile it: for each tile of keys, recompute that tile's $P$ from L, and see which gradients are
# sums over tiles (accumulate them) and which belong to the tile alone (one piece of the result).
# The second worked case below, two queries and three keys, runs plain attention written out with
# autograd and `retain_grad()` to print $P$, $dP$ and $dS$: check each of your formulas against it.
#
# **The rest of the contract.** Any number of leading batch dimensions; Nq ≠ Nk; sizes that are not
# multiples of B (the last tile is shorter); the causal mask of exercise 1 (a score masked in one tile
# is $-\infty$; the first tile always holds key 0, which every query may see); float32 and float64,
# in the inputs' dtype; and any `grad_output` autograd may pass: non-contiguous (a transpose), or
# expanded (the gradient of `o.sum()` is one number seen through strides of 0), so never `.view` it,
# and never modify it in place. `F.scaled_dot_product_attention` and asking autograd for the
# backward (`torch.enable_grad()` and `autograd.grad` inside `backward`) are what this exercise
# replaces: the check looks for both.
#
# We split the work into two plain functions, which exercise 5 reuses, and a Function that calls
# them. **Expected error.** About 1e-15 in float64, 1e-6 in float32.
#
# <details><summary>Hint 1 (forward)</summary>
#
# Start with $m = -\infty$, $\ell = 0$, $a = 0$ for every row: shapes (..., Nq), (..., Nq) and
# (..., Nq, d). A tile's scores are `q @ k_tile.transpose(-2, -1) / sqrt(d)`, shape (..., Nq, B);
# `k[..., start:start + B, :]` is a tile, and shorter at the end by itself. For causal attention,
# compare the tile's key indices `start + arange(B)` with the query indices.
#
# </details>
#
# <details><summary>Hint 2 (forward)</summary>
#
# When the maximum grows from $m$ to $m'$, write each old term $e^{s_j - m'}$ as the old term
# $e^{s_j - m}$ times something that does not depend on j: the old $\ell$ and the old $a$ then need
# one factor per row, and the tile's own terms are added relative to $m'$. For $L$: what is
# $\log \sum_j e^{s_j}$ in terms of $m$ and $\ell$ at the end?
#
# </details>
#
# <details><summary>Hint 3 (backward)</summary>
#
# $dV$ and $dK$ of a tile depend only on that tile's P and dS: compute each tile's piece and
# `torch.cat` them along the key dimension. $dQ$ sums a contribution from every tile. For the row sum
# in $dS$: write $dP_{ij}$ as a dot product of a row of $dO$ with a row of $V$, and look at what the
# sum over j of $p_{ij}$ times that is.
#
# </details>
#
# <details><summary>Hint 4: the formulas</summary>
#
# Forward, per tile with scores S (..., Nq, B): `m_new = maximum(m, S.amax(-1))`,
# `P = exp(S - m_new[..., None])`, `alpha = exp(m - m_new)`, `l = alpha * l + P.sum(-1)`,
# `acc = alpha[..., None] * acc + P @ v_tile`, `m = m_new`; at the end `o = acc / l[..., None]`,
# `L = m + log(l)`.
#
# Backward: `D = (dO * O).sum(-1)` once; per tile `P = exp(S - L[..., None])`, `dV_tile = P^T dO`,
# `dP = dO @ v_tile^T`, `dS = P * (dP - D[..., None])`, `dQ += dS @ k_tile / sqrt(d)`,
# `dK_tile = dS^T @ Q / sqrt(d)` (transposes over the last two dimensions).
#
# </details>

# %% [markdown]
# The two worked cases: the forward's state by its definition, and plain attention's $P$, $dP$ and
# $dS$ from autograd.

# %%
scores, values = torch.tensor([2.0, 0.0, 4.0]), torch.tensor([1.0, 2.0, 3.0])
for seen in (2, 3):  # the first tile holds keys 0 and 1; the second, key 2
    s, val = scores[:seen], values[:seen]
    m = s.max()
    ell = torch.exp(s - m).sum()
    a = (torch.exp(s - m) * val).sum()
    print(f"after {seen} keys: m = {m:.4f}, l = {ell:.4f}, a = {a:.4f}, a / l = {a / ell:.4f}")
print(f"softmax(scores) @ values = {torch.softmax(scores, 0) @ values:.4f}")
print(f"logsumexp(scores) = {torch.logsumexp(scores, 0):.4f}")

torch.manual_seed(2)
q, k, v = torch.randn(2, 3), torch.randn(3, 3), torch.randn(3, 3)
dO = torch.randn(2, 3)
S = (q @ k.T / math.sqrt(3)).requires_grad_(True)
P = torch.softmax(S, dim=-1)
P.retain_grad()
out = P @ v
out.backward(dO)
for name, value in (("O", out), ("dO", dO), ("P", P), ("dP", P.grad), ("dS", S.grad)):
    print(f"{name} =\n{value.detach()}")


# %% solution grade_id="flash_attention"
def flash_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, tile: int = 16
) -> tuple[torch.Tensor, torch.Tensor]:
    """(o (..., Nq, d), L (..., Nq)) walking k and v in tiles of ``tile`` keys with an online softmax.

    Hint: keep m, l and the accumulator per query row, defined relative to the running maximum m.
    """
    ### BEGIN SOLUTION
    scale = 1 / math.sqrt(q.shape[-1])
    rows = torch.arange(q.shape[-2], device=q.device)[:, None]
    m = q.new_full(q.shape[:-1], float("-inf"))
    ell = q.new_zeros(q.shape[:-1])
    acc = q.new_zeros(*q.shape[:-1], v.shape[-1])
    for start in range(0, k.shape[-2], tile):
        k_tile, v_tile = k[..., start : start + tile, :], v[..., start : start + tile, :]
        s = q @ k_tile.transpose(-2, -1) * scale
        if is_causal:
            cols = torch.arange(start, start + k_tile.shape[-2], device=q.device)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        m_new = torch.maximum(m, s.amax(dim=-1))
        p = torch.exp(s - m_new[..., None])
        alpha = torch.exp(m - m_new)
        ell = alpha * ell + p.sum(dim=-1)
        acc = alpha[..., None] * acc + p @ v_tile
        m = m_new
    return acc / ell[..., None], m + torch.log(ell)
    ### END SOLUTION


def flash_backward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    o: torch.Tensor,
    L: torch.Tensor,
    grad_o: torch.Tensor,
    is_causal: bool = False,
    tile: int = 16,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(dq, dk, dv) from the saved q, k, v, o, L and grad_o, recomputing P one tile of keys at a time.

    Hint: p = exp(scores - L) for a tile; the row sum your dS needs comes from o and grad_o.
    """
    ### BEGIN SOLUTION
    scale = 1 / math.sqrt(q.shape[-1])
    rows = torch.arange(q.shape[-2], device=q.device)[:, None]
    D = (grad_o * o).sum(dim=-1)
    dq = torch.zeros_like(q)
    dk_tiles, dv_tiles = [], []
    for start in range(0, k.shape[-2], tile):
        k_tile, v_tile = k[..., start : start + tile, :], v[..., start : start + tile, :]
        s = q @ k_tile.transpose(-2, -1) * scale
        if is_causal:
            cols = torch.arange(start, start + k_tile.shape[-2], device=q.device)[None, :]
            s = s.masked_fill(cols > rows, float("-inf"))
        p = torch.exp(s - L[..., None])
        dv_tiles.append(p.transpose(-2, -1) @ grad_o)
        dp = grad_o @ v_tile.transpose(-2, -1)
        ds = p * (dp - D[..., None])
        dq = dq + ds @ k_tile * scale
        dk_tiles.append(ds.transpose(-2, -1) @ q * scale)
    return dq, torch.cat(dk_tiles, dim=-2), torch.cat(dv_tiles, dim=-2)
    ### END SOLUTION


class FlashAttention(torch.autograd.Function):
    """Attention that saves q, k, v, o and the logsumexp L only: memory linear in the sequence length."""

    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        """The output (..., Nq, d); saves q, k, v, o and L with save_for_backward."""
        ### BEGIN SOLUTION
        o, L = flash_forward(q, k, v, is_causal)
        ctx.save_for_backward(q, k, v, o, L)
        ctx.is_causal = is_causal
        return o
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        """(dq, dk, dv, None), recomputing the probabilities tile by tile from L; None where
        ctx.needs_input_grad says no gradient is needed."""
        ### BEGIN SOLUTION
        q, k, v, o, L = ctx.saved_tensors
        grads = flash_backward(q, k, v, o, L, grad_output, ctx.is_causal)
        return *(g if needed else None for g, needed in zip(grads, ctx.needs_input_grad, strict=False)), None
        ### END SOLUTION


# %% [markdown]
# Try it against `F.scaled_dot_product_attention`: sizes that are not multiples of 16, Nq ≠ Nk, zero
# and two batch dimensions, causal and not, float32, and three upstream gradients: a random one, a
# transposed copy (non-contiguous) and the expanded one of `o.sum()`. References come from copies
# taken before your code runs. Then what your Function saved, for Nq = 37 and Nk = 50.

# %%
torch.manual_seed(3)
rows = {}
for label, q_shape, k_shape, causal, dtype in (
    ("2d_causal", (37, 8), (50, 8), True, torch.float64),
    ("4d_full", (2, 3, 50, 8), (2, 3, 21, 8), False, torch.float64),
    ("4d_causal_f32", (2, 3, 21, 8), (2, 3, 50, 8), True, torch.float32),
):
    q, k, v = (torch.randn(s, dtype=dtype, device=device) for s in (q_shape, k_shape, k_shape))
    g_random = torch.randn(q_shape, dtype=dtype, device=device)
    g_transposed = g_random.transpose(-2, -1).contiguous().transpose(-2, -1)  # same values, other strides
    g_expanded = torch.ones((), dtype=dtype, device=device).expand(q_shape)  # what o.sum() sends
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out_ref = F.scaled_dot_product_attention(*leaves, is_causal=causal)
    for g_label, g in (("", g_random), ("_transposed", g_transposed), ("_expanded", g_expanded)):
        refs = torch.autograd.grad(out_ref, leaves, g.clone(), retain_graph=True)
        mine = [t.clone().requires_grad_(True) for t in (q, k, v)]
        out = FlashAttention.apply(*mine, causal)
        grads = torch.autograd.grad(out, mine, g)
        rows[f"out_{label}"] = (out, out_ref)
        for name, got, ref in zip(("dq", "dk", "dv"), grads, refs, strict=True):
            rows[f"{name}_{label}{g_label}"] = (got, ref)
print(compare(**rows))

q = torch.randn(37, 8, device=device, requires_grad=True)
k, v = (torch.randn(50, 8, device=device, requires_grad=True) for _ in range(2))
print("FlashAttention saved:", saved_tensors(FlashAttention.apply, q, k, v, True))
print("plain attention saved:", saved_tensors(attention, q, k, v, True))

# %% tests grade_id="test_flash_attention" points=6
"""FlashAttention's output, logsumexp and gradients match a float64 reference: ragged, batched, causal."""
score = check_flash_attention(FlashAttention)
### BEGIN HIDDEN TESTS
score = check_flash_attention(FlashAttention, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 4: prove it saves less (2 points)
#
# A claim about memory deserves a measurement. Your `saved_tensors` meters both Functions over the
# same sequence lengths as before (float32, d = 16, Nq = Nk = N). Before you run it, predict both
# totals at N = 1024 from the shapes: plain attention saves two copies of a 1024 × 1024 float32
# matrix and a few (1024, 16) ones; yours saves four (1024, 16) tensors and one (1024,). On log-log
# axes a quadratic is a line of slope 2 and a linear cost one of slope 1.
#
# There is nothing new to write: this exercise's points are for what your `FlashAttention` saves,
# measured by the check with the same hooks on fresh sizes. It must save q, k, v, o and L through
# `save_for_backward` (a tensor kept as a `ctx` attribute escapes autograd's checks, and the meter,
# and is named), no tensor with Nq × Nk elements, and bytes within a budget linear in Nq and Nk.

# %%
lengths = [64, 128, 256, 512, 1024]
plain_bytes, flash_bytes = [], []
for n in lengths:
    q, k, v = (torch.randn(n, 16, dtype=torch.float32, device=device, requires_grad=True) for _ in range(3))
    plain_bytes.append(sum(nbytes for _, nbytes in saved_tensors(attention, q, k, v)))
    flash_bytes.append(sum(nbytes for _, nbytes in saved_tensors(FlashAttention.apply, q, k, v)))
slopes = [math.log2(b[-1] / b[-2]) for b in (plain_bytes, flash_bytes)]
n = lengths[-1]
print(f"at N = {n}: plain attention saves {plain_bytes[-1]:,} bytes, FlashAttention {flash_bytes[-1]:,}")
print(f"ratio {plain_bytes[-1] / flash_bytes[-1]:.1f}")
print(f"log-log slopes from N = {n // 2} to {n}: {slopes[0]:.2f} (plain), {slopes[1]:.2f} (yours)")
plt.loglog(lengths, plain_bytes, "o-", label="plain attention (autograd)")
plt.loglog(lengths, flash_bytes, "s-", label="FlashAttention (yours)")
plt.xlabel("sequence length N")
plt.ylabel("bytes saved for backward")
plt.legend()
plt.show()

# %% tests grade_id="test_flash_memory" points=2
"""FlashAttention saves q, k, v, o and L only, with save_for_backward: bytes linear in the sequence length."""
score = check_flash_memory(FlashAttention)
### BEGIN HIDDEN TESTS
score = check_flash_memory(FlashAttention, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 5: the same attention as a custom operator (3 points)
#
# `torch.compile` runs your Python once with fake tensors (shapes and dtypes, no data) to capture a
# graph of operations, then hands that graph to a compiler. For an `autograd.Function` made of torch
# operations it traces forward and backward through; but code it cannot trace (a C++ or GPU kernel of
# your own, a call into a library it does not know) breaks the graph, and what it can trace it may
# rewrite (numpy calls on arrays made from tensors it traces too, by turning them into torch ones). A **custom
# operator** is one opaque node in that graph, with everything the tools need said explicitly:
#
# - `torch.library.custom_op("backprop_course::attention", mutates_args=())` turns a function with
#   type hints into the operator `torch.ops.backprop_course.attention` (its schema comes from the
#   hints; `mutates_args=()` says it modifies none of its inputs). Its body is the real kernel, run
#   without autograd: here, your `flash_forward`.
# - `register_fake` gives the **fake kernel**: from fake inputs, a tensor with the output's shape,
#   dtype, device and strides, and no computation. Compilers and `torch.export` run it instead of
#   the kernel.
# - `register_autograd(backward, setup_context=setup_context)` gives its gradient, in the form of
#   notebook 05's `setup_context`: `setup_context(ctx, inputs, output)` saves what backward needs,
#   `backward(ctx, grad_output)` returns one gradient per input (None for `is_causal`). The operator
#   returns only o, so L is not there to save: backward recomputes it (a second forward pass, still
#   memory linear in N).
# - `torch.library.opcheck(op, args)` runs PyTorch's own tests of an operator on your inputs: the
#   schema against what the kernel does, the autograd registration, the fake kernel against the
#   real one, and tracing with AOTAutograd (the part of `torch.compile` that traces backward).
#
# Defining an operator of the same name again replaces the earlier definition (`custom_op` allows
# that on purpose, for notebooks): re-running the cell is safe and the last version wins.
#
# **Which backend.** `torch.compile`'s default backend, inductor, generates C++ (on a CPU) or Triton
# (on a GPU) code and compiles it, which needs a C++ compiler on the machine; the grading sandbox has
# none. `backend="aot_eager"` runs the same capture (Dynamo) and the same forward-and-backward tracing
# (AOTAutograd, which calls your fake kernel and your `setup_context` and traces your backward), then
# runs the traced graphs as they are instead of generating code. With `fullgraph=True`, any graph break
# is an error rather than a silent fallback to Python. That is what the check uses; the cell after it
# also prints the graphs AOTAutograd traced.
#
# **When to write which.** Compose built-in operations when they express what you need: autograd
# differentiates them, and compilers fuse them (in real code, attention is
# `F.scaled_dot_product_attention`, which already has memory-efficient kernels). Write an
# `autograd.Function` when the computation is made of torch operations but autograd's gradient is not
# the one you want: it saves too much (this notebook), is unstable, or is not the gradient you mean
# (a straight-through estimator). Write a custom operator when the tools cannot see into the code
# (a kernel of your own, another library), or must not: you want one node that `torch.compile` and
# `torch.export` keep as it is.
#
# <details><summary>Hint 1</summary>
#
# The kernel is your `flash_forward`, which returns two tensors; the operator returns one. An
# operator's output must not be a view of an input, and must have the strides the fake kernel
# promises: a new contiguous tensor is safe.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# The fake kernel allocates and computes nothing: `q.new_empty(shape)`, with the output's shape, which
# is q's with its last size taken from v. `inputs` in `setup_context` is `(q, k, v, is_causal)`; save
# the three inputs and the output, and put `is_causal` on `ctx`.
#
# </details>
#
# <details><summary>Hint 3</summary>
#
# In backward: `_, L = flash_forward(q, k, v, ctx.is_causal)`, then `flash_backward(...)` as in
# `FlashAttention.backward`, and return four values.
#
# </details>


# %% solution grade_id="attention_op"
@torch.library.custom_op("backprop_course::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False) -> torch.Tensor:
    """Attention as an operator: q (..., Nq, d), k and v (..., Nk, d) -> a new tensor (..., Nq, d).

    Hint: your flash_forward, without autograd (an operator's kernel never sees it).
    """
    ### BEGIN SOLUTION
    return flash_forward(q, k, v, is_causal)[0].contiguous()
    ### END SOLUTION


@attention_op.register_fake
def _(q, k, v, is_causal=False):
    """An empty tensor with the output's shape, dtype, device and strides (no computation)."""
    ### BEGIN SOLUTION
    return q.new_empty((*q.shape[:-1], v.shape[-1]))
    ### END SOLUTION


def attention_setup_context(ctx, inputs, output):
    """Save what attention_backward needs: inputs is (q, k, v, is_causal), output is o."""
    ### BEGIN SOLUTION
    q, k, v, is_causal = inputs
    ctx.save_for_backward(q, k, v, output)
    ctx.is_causal = is_causal
    ### END SOLUTION


def attention_backward(ctx, grad_output):
    """(dq, dk, dv, None) for the operator."""
    ### BEGIN SOLUTION
    q, k, v, o = ctx.saved_tensors
    _, L = flash_forward(q, k, v, ctx.is_causal)
    dq, dk, dv = flash_backward(q, k, v, o, L, grad_output, ctx.is_causal)
    return dq, dk, dv, None
    ### END SOLUTION


attention_op.register_autograd(attention_backward, setup_context=attention_setup_context)

# %% [markdown]
# Try it: the operator against `F.scaled_dot_product_attention` (output and gradients), then
# `opcheck`'s four tests on the causal case, each of which should say `SUCCESS`.

# %%
torch.manual_seed(4)
q = torch.randn(2, 21, 8, device=device)
k, v = torch.randn(2, 35, 8, device=device), torch.randn(2, 35, 8, device=device)
g = torch.randn(2, 21, 8, device=device)
rows = {}
for causal in (False, True):
    leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out_ref = F.scaled_dot_product_attention(*leaves, is_causal=causal)
    refs = torch.autograd.grad(out_ref, leaves, g)
    mine = [t.clone().requires_grad_(True) for t in (q, k, v)]
    out = attention_op(*mine, causal)
    grads = torch.autograd.grad(out, mine, g)
    rows[f"out_causal_{causal}"] = (out, out_ref)
    for name, got, ref in zip(("dq", "dk", "dv"), grads, refs, strict=True):
        rows[f"{name}_causal_{causal}"] = (got, ref)
print(compare(**rows))
args = tuple(t.clone().requires_grad_(True) for t in (q, k, v))
print("opcheck, is_causal=True:", torch.library.opcheck(attention_op, (*args, True)))

# %% [markdown]
# And under `torch.compile`: a tiny self-attention module (one linear map to q, k and v, your causal
# operator, one linear map out), compiled with `fullgraph=True` and the `aot_eager` backend, against
# the same module run eagerly on your plain `attention`. A backend of our own, built the way
# `aot_eager` is, records the two graphs AOTAutograd traced: the forward graph holds your operator as
# one node, and the backward graph holds your backward's operations, tile by tile.

# %%
from functorch.compile import make_boxed_func  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402


class TinySelfAttention(torch.nn.Module):
    """x (..., N, d) -> causal self-attention through ``attend`` -> (..., N, d)."""

    def __init__(self, d, attend):
        super().__init__()
        self.qkv, self.out, self.attend = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d), attend

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.out(self.attend(q, k, v, True))


graphs = {}


def keep(name):
    def compiler(graph_module, example_inputs):
        graphs[name] = graph_module
        return make_boxed_func(graph_module.forward)

    return compiler


torch.manual_seed(5)
model = TinySelfAttention(8, attention_op).to(device)
eager = TinySelfAttention(8, attention).to(device)
eager.load_state_dict(model.state_dict())
x = torch.randn(3, 40, 8, device=device)
rows = {"y_not_compiled": (model(x), eager(x))}  # run as it is first, where an error reads plainly
for backend in ("aot_eager", aot_autograd(fw_compiler=keep("forward"), bw_compiler=keep("backward"))):
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    y, y_ref = compiled(x), eager(x)
    grads = torch.autograd.grad(y.sum(), list(model.parameters()))
    refs = torch.autograd.grad(y_ref.sum(), list(eager.parameters()))
    label = backend if isinstance(backend, str) else "recorded"
    rows[f"y_{label}"] = (y, y_ref)
    for (name, _), got, ref in zip(model.named_parameters(), grads, refs, strict=True):
        rows[f"d{name.replace('.', '_')}_{label}"] = (got, ref)
print(compare(**rows))
for name, graph_module in graphs.items():
    calls = [str(n.target) for n in graph_module.graph.nodes if n.op == "call_function"]
    ours = [c for c in calls if c.startswith("backprop_course")]
    print(f"{name} graph: {len(calls)} operations, of them {ours or 'none'} from backprop_course")

# %% tests grade_id="test_attention_op" points=3
"""attention_op passes opcheck, matches attention in value and gradient, and compiles with fullgraph=True."""
score = check_attention_op(attention_op)
### BEGIN HIDDEN TESTS
score = check_attention_op(attention_op, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Summary
#
# This notebook:
#
# - Autograd saves, for each operation, what its backward formula needs; `saved_tensors_hooks` shows
#   exactly what that is. For attention it is the (N, N) matrix of probabilities, twice: memory
#   quadratic in the sequence length.
# - An online softmax computes the same output walking the keys in tiles, with a running maximum,
#   a running sum and an accumulator rescaled whenever the maximum grows. Saving its logsumexp, one
#   number per query, lets backward recompute any tile of probabilities on its own: the backward
#   trades a second pass of arithmetic for memory linear in N, which is FlashAttention's idea.
# - The softmax backward's row sum needs no row of P: it comes from the output and its gradient,
#   which backward has anyway.
# - A custom operator wraps a computation as one node with a schema, a fake kernel and a registered
#   gradient; `opcheck` tests all three, and `torch.compile(fullgraph=True)` traces it with no graph
#   break. Prefer built-in operations, then a Function for a gradient of your own, then an operator for
#   code the tools cannot or must not see.
#
# The course began with the gradient of one linear layer written by hand in numpy. It ends with the
# reason most custom Functions are written today: not because autograd cannot find a gradient, but
# because the gradient it finds keeps too much in memory, or cannot see the code it would need to
# differentiate.
