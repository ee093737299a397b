# %% [markdown]
# # 05 · Beyond the basics: custom Functions that compose
#
# In notebook 04 you wrote your own `torch.autograd.Function`s: `MulConstant`, `Exp`, `MyReLU` and
# PyTorch's `LinearFunction`, each a `forward(ctx, ...)` that saves what it needs with
# `ctx.save_for_backward` and a `backward(ctx, grad_output)` that returns one gradient per input,
# guarded by `ctx.needs_input_grad`; you wrapped `LinearFunction` in a module and let `gradcheck`
# confirm it. Those Functions work for the one thing they were written for: a first derivative of a
# 2-D batch, through `.backward()`.
#
# Real code asks more of them. It batches over several leading axes (sequences, images), maps a
# function over a stack of weights with `torch.func.vmap`, takes second derivatives (a gradient
# penalty, a Hessian-vector product), returns outputs that have no gradient (indices), works in
# place to save memory, and must stay finite for logits of 1000. This notebook takes the
# `autograd.Function` through each of these, one feature per exercise:
#
# | exercise | you write | feature | points |
# |---|---|---|---|
# | 1 | `LinearFunctionFunc` | `setup_context`, `torch.func.vmap` and `torch.func.grad` | 4 |
# | 2 | `LinearFunction` | any number of leading batch dimensions | 3 |
# | 3 | `Cube`, `NumpyCube` | double backward, `once_differentiable` | 3 |
# | 4 | `MaxWithIndex`, `InplaceReLU`, `SquareAndCube` | three things `ctx` can say | 3 |
# | 5 | `SoftmaxCrossEntropy` | a fused, numerically stable loss | 3 |
# | 6 | `LegendrePolynomial3`, `fit_legendre` | PyTorch's own example, and a curve fit with it | 3.5 |
#
# The rule of notebook 04 still holds everywhere: **a gradient has the shape of its input**, and
# `backward` returns exactly one per input of `forward` (None for an input that gets none). The
# checks call your `backward` directly as well as through autograd, because autograd silently sums
# some wrong shapes back into the right one; they run in float64, with random upstream gradients,
# sizes that all differ, and N = 1 as a case of its own.

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
from torch.autograd.function import once_differentiable

from autograder.checks import (
    check_batched_linear,
    check_ctx_features,
    check_double_backward,
    check_fit_legendre,
    check_legendre,
    check_linear_function_func,
    check_softmax_cross_entropy_function,
)
from backprop_utils import compare

torch.set_default_dtype(torch.float64)

# %% [markdown]
# ## Exercise 1: LinearFunctionFunc, the form torch.func needs (4 points)
#
# `torch.func` transforms functions rather than tensors: `vmap(f)` maps `f` over a batch axis,
# `grad(f)` returns the function that computes `f`'s gradient. To do that it must run your
# `forward` on special tensors (batched, or carrying a gradient level) without autograd's context,
# so it needs `forward` to be a plain function of the inputs. The modern form of a Function splits
# the old `forward(ctx, ...)` in two:
#
# - `forward(input, weight, bias=None)`: no `ctx`, only the computation, returns the output;
# - `setup_context(ctx, inputs, output)`: receives the tuple of inputs and the output, and saves
#   what `backward` needs with `ctx.save_for_backward`. In the PyTorch this course pins, `apply`
#   fills in forward's defaults first, so `inputs` has three elements even for `apply(x, W)`, the
#   last one None (the test file checks this), and `ctx.needs_input_grad` has three entries too;
# - `backward(ctx, grad_output)`: unchanged from notebook 04.
#
# For `vmap`, set the class attribute `generate_vmap_rule = True`: PyTorch then vmaps your `forward`
# and `backward` themselves, which works because they use only torch operations. The rule vmap
# guarantees, for a stack of weights $W_1, \dots, W_B$:
#
# $$\mathrm{vmap}(f)(W_{1:B})_k = f(W_k), \qquad f(W) = x W^\top + b .$$
#
# **Shapes.** x (N, D), W (M, D), b (M,), out (N, M); stacked weights (B, M, D) give (B, N, M).
# `grad_input` (N, D), `grad_weight` (M, D) and `grad_bias` (M,) are the gradients you derived in
# notebooks 01 and 04. **Expected error.** Rounding only, about 1e-16.
#
# <details><summary>Hint 1</summary>
#
# `inputs` is `(input, weight, bias)`, with `bias` None when it was left out, so it unpacks into three
# names directly. If you want code that does not rely on the defaults being filled in, append None and
# keep the first three before unpacking: that works either way.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# `forward` is notebook 04's forward without `ctx` and without `save_for_backward` (that moves to
# `setup_context`); `backward` is notebook 04's, unchanged.
#
# </details>
#
# <details><summary>Hint 3: the formulas</summary>
#
# `input, weight, bias = (*inputs, None)[:3]`; in backward `grad_output.mm(weight)`,
# `grad_output.t().mm(input)` and `grad_output.sum(0)`, each under its `needs_input_grad` entry.
#
# </details>


# %% solution grade_id="linear_function_func"
class LinearFunctionFunc(torch.autograd.Function):
    """``out = input @ weight.T + bias``, torch.func form: input (N, D), weight (M, D), bias (M,) or None.

    Hint: ``inputs`` in setup_context holds forward's arguments, its defaults filled in.
    """

    generate_vmap_rule = True

    @staticmethod
    def forward(input, weight, bias=None):
        """The output (N, M), computed without ctx."""
        ### BEGIN SOLUTION
        output = input.mm(weight.t())
        if bias is not None:
            output = output + bias
        return output
        ### END SOLUTION

    @staticmethod
    def setup_context(ctx, inputs, output):
        """Save input, weight and bias (which may be None) for backward."""
        ### BEGIN SOLUTION
        input, weight, bias = (*inputs, None)[:3]
        ctx.save_for_backward(input, weight, bias)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        """grad_input (N, D), grad_weight (M, D), grad_bias (M,), each None when not needed."""
        ### BEGIN SOLUTION
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        return grad_input, grad_weight, grad_bias
        ### END SOLUTION


# %% [markdown]
# Try it: vmap over three weights against a loop of `F.linear`, `torch.func.grad` of a scalar function
# of the weight against ordinary autograd through `F.linear`, and the three gradients of a direct
# backward call (N=4, D=3, M=5, all different) against `F.linear`'s, with the bias and without it
# (`apply(x, W)`). References come from copies taken before your code runs. Every row should say `ok`.

# %%
torch.manual_seed(0)
x, b = torch.randn(4, 3), torch.randn(5)
weights = torch.randn(3, 5, 3)
g = torch.randn(4, 5)
looped = torch.stack([F.linear(x, w, b) for w in weights])
W_ref = weights[0].clone().requires_grad_(True)
(dW_ref,) = torch.autograd.grad((F.linear(x, W_ref, b) * g).sum(), W_ref)
leaves = [t.clone().requires_grad_(True) for t in (x, weights[0], b)]
refs = torch.autograd.grad(F.linear(*leaves), leaves, g)
refs_nobias = torch.autograd.grad(F.linear(*leaves[:2]), leaves[:2], g)
g0 = g.clone()  # taken before your code runs

batched = torch.func.vmap(lambda w: LinearFunctionFunc.apply(x, w, b))(weights)
dW = torch.func.grad(lambda w: (LinearFunctionFunc.apply(x, w, b) * g).sum())(weights[0])
mine = [t.clone().requires_grad_(True) for t in (x, weights[0], b)]
direct = LinearFunctionFunc.backward(LinearFunctionFunc.apply(*mine).grad_fn, g)
direct_nobias = LinearFunctionFunc.backward(LinearFunctionFunc.apply(*mine[:2]).grad_fn, g)
print(
    "bias gradient without a bias:", direct_nobias[2] if len(direct_nobias) > 2 else None, "(should be None)"
)
compare(
    vmap=(batched, looped),
    func_grad=(dW, dW_ref),
    grad_input=(direct[0], refs[0]),
    grad_weight=(direct[1], refs[1]),
    grad_bias=(direct[2], refs[2]),
    grad_input_no_bias=(direct_nobias[0], refs_nobias[0]),
    grad_weight_no_bias=(direct_nobias[1], refs_nobias[1]),
    g_afterwards=(g, g0),
)

# %% tests grade_id="test_linear_function_func" points=4
"""LinearFunctionFunc matches F.linear with autograd, a direct backward call, vmap and torch.func.grad."""
score = check_linear_function_func(LinearFunctionFunc)
### BEGIN HIDDEN TESTS
score = check_linear_function_func(LinearFunctionFunc, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 2: LinearFunction for any leading batch dimensions (3 points)
#
# `nn.Linear` accepts input of shape (..., D): a batch of sequences (N, T, D), of images of feature
# vectors, or a single vector (D,). It applies the same W to every leading position:
# $\text{out}[\dots, m] = \sum_d \text{input}[\dots, d]\, W[m, d] + b[m]$.
#
# **Shapes.** input (..., D) gives output (..., M); grad_input has input's shape, (..., D);
# grad_weight is (M, D) and grad_bias (M,) whatever the number of leading axes, also none: a 1-D
# input (D,) gives an output (M,). `matmul` (or `@`) handles any leading axes for the forward pass;
# `mm` only takes 2-D. Use the old form, `forward(ctx, ...)`, as in notebook 04.
#
# The question to answer: W is used at every leading position. What does that make its gradient, and
# the bias's, and how do you compute that for any number of leading axes, including none? A small
# case to reason with: input (2, 3, D) is six rows of D features; what would notebook 04's
# `LinearFunction` do with those six rows stacked as a (6, D) matrix?
#
# <details><summary>Hint 1</summary>
#
# A parameter used in several places receives the sum of the gradients from every place (notebook 03's
# diamond). So grad_weight and grad_bias are sums over every leading position, exactly as in notebook 04
# they were sums over the N rows of the batch.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# Flatten the leading axes into one, of size P = the product of the leading sizes (1 for a 1-D input):
# `reshape(-1, D)` and `reshape(-1, M)`. Then notebook 04's formulas apply. grad_input needs no
# flattening: a `matmul` with W keeps every leading axis.
#
# </details>
#
# <details><summary>Hint 3: the formulas</summary>
#
# With `G = grad_output.reshape(-1, M)` and `X = input.reshape(-1, D)`: `grad_weight = G.t().mm(X)`,
# `grad_bias = G.sum(0)`, `grad_input = grad_output.matmul(weight)`.
#
# </details>


# %% solution grade_id="batched_linear"
class LinearFunction(torch.autograd.Function):
    """``out = input @ weight.T + bias`` for input (..., D), weight (M, D), bias (M,) or None -> (..., M).

    Hint: W and b are used at every leading position.
    """

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        """The output (..., M); saves input, weight and bias."""
        ### BEGIN SOLUTION
        ctx.save_for_backward(input, weight, bias)
        output = input.matmul(weight.t())
        if bias is not None:
            output = output + bias
        return output
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        """grad_input (..., D), grad_weight (M, D), grad_bias (M,), each None when not needed."""
        ### BEGIN SOLUTION
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        flat_grad = grad_output.reshape(-1, weight.shape[0])
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.matmul(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = flat_grad.t().mm(input.reshape(-1, weight.shape[1]))
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = flat_grad.sum(0)
        return grad_input, grad_weight, grad_bias
        ### END SOLUTION


# %% [markdown]
# Try it on a (2, 3, 4, 5) input and on a single vector (5,): each gradient of a direct backward call
# (`LinearFunction.backward(out.grad_fn, g)`: the grad_fn is the ctx) next to autograd's through
# `F.linear`. A direct call shows the shapes autograd would otherwise repair, and the table checks the
# shapes too. References come from copies taken before your code runs. A case where your code raises
# is reported on its own line, and the table still shows the other case.

# %%
torch.manual_seed(1)
rows = {}
for label, shape in (("4d", (2, 3, 4, 5)), ("1d", (5,))):
    x = torch.randn(*shape)
    W = torch.randn(6, 5)
    b = torch.randn(6)
    g = torch.randn(*shape[:-1], 6)
    leaves = [t.clone().requires_grad_(True) for t in (x, W, b)]
    out_ref = F.linear(*leaves)
    refs = torch.autograd.grad(out_ref, leaves, g)
    mine = [t.clone().requires_grad_(True) for t in (x, W, b)]
    try:
        out = LinearFunction.apply(*mine)
        direct = LinearFunction.backward(out.grad_fn, g)
    except Exception as error:  # noqa: BLE001 - shown, and the other case still compared
        print(f"{label} input of shape {shape}: your code raised {type(error).__name__}: {error}")
        continue
    rows[f"out_{label}"] = (out, out_ref)
    for name, got, ref in zip(("dx", "dW", "db"), direct, refs, strict=True):
        rows[f"{name}_{label}"] = (got, ref)
compare(**rows)

# %% tests grade_id="test_batched_linear" points=3
"""LinearFunction matches F.linear for inputs (2, 3, 4, D), (N, D), (1, D) and (D,), with exact shapes."""
score = check_batched_linear(LinearFunction)
### BEGIN HIDDEN TESTS
score = check_batched_linear(LinearFunction, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 3: double backward, and saying when there is none (3 points)
#
# A second derivative differentiates the backward pass itself. With
# `torch.autograd.grad(y, x, g, create_graph=True)`, autograd records the operations your `backward`
# performs, so the gradient it returns is itself a function of x and of `grad_output`, and can be
# differentiated again: that is how a Hessian-vector product, a gradient penalty or `gradgradcheck`
# works. It works **if backward computes its result from forward's inputs (or outputs), saved with
# `save_for_backward`, with differentiable torch operations**. Forward itself runs with autograd off: a
# value it computes and saves reaches backward as a constant, and whatever depends on x through it is
# lost to the second derivative. For the cube, $y = x^3$, backward returns
# $h(x, g) = \frac{d}{dx}(x^3)\, g$, elementwise, a function of two tensors. Differentiating
# $\langle h(x, g), v\rangle$ once more, with respect to x and to g, gives the second derivatives that
# the try-it cell checks by hand: derive them from your $h$ before you run it.
#
# A backward written in numpy (or on `.detach()`ed tensors, or under `torch.no_grad()`) computes the
# right first derivative and cuts the graph: the second derivative then fails with an unhelpful
# error, or, worse, comes out as zero. If a backward cannot be differentiated, say so: decorate it
# with `@once_differentiable` (below `@staticmethod`), and torch raises a `RuntimeError` that names
# the decorator as soon as anyone tries. The stub of `NumpyCube` already carries the decorator,
# below `@staticmethod` as PyTorch's documentation writes it (the other order works too in the
# Python and PyTorch this course pins; the test file checks both, and the two failures above).
#
# **Shapes.** Everything is elementwise: x, y, g and every derivative share x's shape (the checks
# use (4, 3)). Write `Cube` with torch operations and `NumpyCube` with numpy in both passes
# (`x.detach().numpy()`, `torch.from_numpy(...)`).
#
# <details><summary>Hint 1</summary>
#
# Backward reads x from `ctx.saved_tensors` and multiplies the derivative of $x^3$ by `grad_output`.
# For `Cube`, every operation must be a torch operation on those tensors (no `.detach()`, no `.numpy()`,
# no `no_grad`), so that autograd can record them when `create_graph=True`.
#
# </details>
#
# <details><summary>Hint 2: the formulas</summary>
#
# $h = 3x^2 g$: `3 * x**2 * grad_output`. Then $\partial \langle h, v\rangle / \partial x = 6 x g v$ and
# $\partial \langle h, v\rangle / \partial g = 3 x^2 v$. `NumpyCube` computes the same from numpy arrays
# and returns `torch.from_numpy(...)`.
#
# </details>


# %% solution grade_id="cube"
class Cube(torch.autograd.Function):
    """``y = x**3``, elementwise, with a backward that can itself be differentiated.

    Hint: build backward from the saved x with torch operations only.
    """

    @staticmethod
    def forward(ctx, x):
        """y = x**3; saves x."""
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        return x**3
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        """dL/dx (the shape of x), built from differentiable operations."""
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return 3 * x**2 * grad_output
        ### END SOLUTION


class NumpyCube(torch.autograd.Function):
    """``y = x**3`` computed in numpy; its backward is numpy too, so it is marked once_differentiable.

    Hint: ``torch.from_numpy(array)`` turns a float64 numpy array back into a float64 tensor.
    """

    @staticmethod
    def forward(ctx, x):
        """y = x**3 via numpy; saves x."""
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        return torch.from_numpy(x.detach().numpy() ** 3)
        ### END SOLUTION

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_output):
        """dL/dx (the shape of x), computed in numpy."""
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return torch.from_numpy(3 * x.numpy() ** 2 * grad_output.numpy())
        ### END SOLUTION


# %% [markdown]
# Try it: `gradgradcheck` compares your second derivatives with finite differences of your first
# ones (it should print True); then the second derivatives with respect to x and to g against the
# formulas $6xgv$ and $3x^2 v$ (Hint 2), with `NumpyCube`'s first derivative next to `Cube`'s; and
# what torch says when `NumpyCube` is differentiated twice: it must refuse, naming
# `once_differentiable`.

# %%
torch.manual_seed(2)
x = torch.randn(4, 3, requires_grad=True)
g = torch.randn(4, 3, requires_grad=True)
v = torch.randn(4, 3)
print("gradgradcheck(Cube):", torch.autograd.gradgradcheck(Cube.apply, (x,), raise_exception=False))
(dx,) = torch.autograd.grad(Cube.apply(x), x, g, create_graph=True)
second_x, second_g = torch.autograd.grad(dx, (x, g), v, allow_unused=True)
(dx_numpy,) = torch.autograd.grad(NumpyCube.apply(x), x, g.detach())
xd, gd = x.detach(), g.detach()
compare(
    first=(dx, 3 * xd**2 * gd),
    second_x=(second_x, 6 * xd * gd * v),
    second_g=(second_g, 3 * xd**2 * v),
    numpy_first=(dx_numpy, 3 * xd**2 * gd),
)

# %%
x, g, v = torch.randn(4, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True), torch.randn(4, 3)
(dx,) = torch.autograd.grad(NumpyCube.apply(x), x, g, create_graph=True)
try:
    (dx * v).sum().backward()
    print("NumpyCube twice: no error. WRONG: a numpy backward must be marked once_differentiable")
except RuntimeError as error:
    verdict = "ok" if "once_differentiable" in str(error) else "WRONG: not the once_differentiable error"
    print("NumpyCube twice:", error, f"\n-> {verdict}")

# %% tests grade_id="test_double_backward" points=3
"""Cube's second derivatives match PyTorch's; NumpyCube refuses a second derivative (once_differentiable)."""
score = check_double_backward(Cube, NumpyCube)
### BEGIN HIDDEN TESTS
score = check_double_backward(Cube, NumpyCube, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 4: three things ctx can say (3 points)
#
# Three methods of `ctx` tell autograd something only the Function knows:
#
# - **`ctx.mark_non_differentiable(t)`**: output t has no gradient, and autograd sets its
#   `requires_grad` to False. Indices, counts and masks are such outputs. `backward` still receives
#   one gradient per output (zeros for the marked ones) and ignores it. `MaxWithIndex` returns the
#   maximum of each row of scores (N, C) and its index: values (N,) float, indices (N,) int64,
#   $\text{values}_i = \max_k s_{ik}$. Which scores does a value depend on, with which slope? When a
#   row holds its maximum more than once, the index forward returns says which entry the value came
#   from, and the gradient goes to that entry alone, as the backward of `scores.max(dim=1)` does
#   (`torch.amax` would share it between the tied entries).
# - **`ctx.mark_dirty(x)`**: forward modified its input x in place and returns it. Autograd then
#   knows that the old value of x is gone and that the returned tensor **is** x (same object,
#   version counter bumped). `InplaceReLU` clamps its input with `x.clamp_(min=0)` and returns x;
#   its backward can only use the output (the input is overwritten), which is enough:
#   $x > 0 \iff \mathrm{relu}(x) > 0$. Autograd refuses in-place operations on a leaf that
#   requires grad, so use it on an intermediate result.
# - **`ctx.set_materialize_grads(False)`**: by default, an output that does not reach the loss gets
#   a gradient of zeros, made just so that backward can add it. With this call autograd passes
#   None instead, and backward must skip that term. `SquareAndCube` returns $(x^2, x^3)$; x reaches
#   the loss through both outputs, so its gradient has one term per output, and the term of an
#   output whose gradient is None is left out.
#
# **Shapes.** MaxWithIndex: scores (N, C) -> values (N,), indices (N,) int64, gradient (N, C);
# InplaceReLU and SquareAndCube are elementwise.
#
# <details><summary>Hint 1: MaxWithIndex</summary>
#
# Nudging a score that is not its row's maximum does not change the maximum; nudging the maximum by
# $\varepsilon$ changes it by $\varepsilon$ (for ties, the rule above). So each row of the gradient has
# one nonzero entry, at the saved index, equal to that row's upstream value.
#
# </details>
#
# <details><summary>Hint 2: MaxWithIndex</summary>
#
# `grad_values.new_zeros(N, C)`, then put `grad_values[i]` at `[i, indices[i]]` for every row at once:
# `tensor.scatter(1, indices.unsqueeze(1), grad_values.unsqueeze(1))`, or index with
# `[torch.arange(N), indices]` on a fresh tensor. Save the indices and C in forward.
#
# </details>
#
# <details><summary>Hint 3: InplaceReLU</summary>
#
# In forward: `x.clamp_(min=0)`, `ctx.mark_dirty(x)`, save x (now the output), return x. In backward:
# the ReLU mask from the saved output times `grad_output`, as a new tensor.
#
# </details>
#
# <details><summary>Hint 4: SquareAndCube</summary>
#
# The two terms are $2x\,g_{\mathrm{sq}}$ and $3x^2 g_{\mathrm{cu}}$. Start from `torch.zeros_like(x)`
# and add each term whose gradient is not None; call `ctx.set_materialize_grads(False)` in forward.
#
# </details>


# %% solution grade_id="max_with_index"
class MaxWithIndex(torch.autograd.Function):
    """Row maxima of scores (N, C) and their indices; the indices are non-differentiable.

    Hint: ``scores.max(dim=1)`` returns both.
    """

    @staticmethod
    def forward(ctx, scores):
        """values (N,) and indices (N,) int64."""
        ### BEGIN SOLUTION
        values, indices = scores.max(dim=1)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.num_classes = scores.shape[1]
        return values, indices
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        """Gradient of scores (N, C); grad_indices (for the non-differentiable output) is ignored."""
        ### BEGIN SOLUTION
        (indices,) = ctx.saved_tensors
        grad = grad_values.new_zeros(grad_values.shape[0], ctx.num_classes)
        return grad.scatter(1, indices.unsqueeze(1), grad_values.unsqueeze(1))
        ### END SOLUTION


# %% solution grade_id="inplace_relu"
class InplaceReLU(torch.autograd.Function):
    """ReLU that overwrites its input and returns it, marked dirty.

    Hint: the input is overwritten, so backward can only use the output.
    """

    @staticmethod
    def forward(ctx, x):
        """x, clamped at 0 in place."""
        ### BEGIN SOLUTION
        x.clamp_(min=0)
        ctx.mark_dirty(x)
        ctx.save_for_backward(x)
        return x
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        """dL/dx (the shape of x), gradient 0 where the output is 0, as a new tensor."""
        ### BEGIN SOLUTION
        (out,) = ctx.saved_tensors
        return grad_output * (out > 0)
        ### END SOLUTION


# %% solution grade_id="square_and_cube"
class SquareAndCube(torch.autograd.Function):
    """Returns (x**2, x**3); a gradient of an unused output arrives as None.

    Hint: one term per output, and none for an output whose gradient is None.
    """

    @staticmethod
    def forward(ctx, x):
        """(x**2, x**3), elementwise."""
        ### BEGIN SOLUTION
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x)
        return x**2, x**3
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_square, grad_cube):
        """dL/dx (the shape of x), leaving out the term of a None gradient."""
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        grad = torch.zeros_like(x)
        if grad_square is not None:
            grad = grad + 2 * x * grad_square
        if grad_cube is not None:
            grad = grad + 3 * x**2 * grad_cube
        return grad
        ### END SOLUTION


# %% [markdown]
# Try it: the gradient of MaxWithIndex against `torch.max` (through autograd and from a direct
# backward call), the in-place ReLU (same object?) and SquareAndCube with only its square used and
# with only its cube used, each against autograd on copies. Right values do not show the three
# lessons (int64 indices never require grad, and zeros for an unused output give the same sum), so
# two small subclasses of your Functions look inside: did forward mark the indices, and what did
# backward receive for the unused cube? The lines say `ok` or `WRONG`; every row of the table should
# say `ok`.

# %%
torch.manual_seed(3)
scores = torch.randn(4, 5, requires_grad=True)
g = torch.randn(4)
(ds_ref,) = torch.autograd.grad(scores.max(dim=1).values, scores, g)
seen = {}


class MaxSpy(MaxWithIndex):
    """Your MaxWithIndex, noting which outputs forward marked (int64 indices never require grad, so
    ``indices.requires_grad`` is False either way)."""

    @staticmethod
    def forward(ctx, scores):
        values, indices = MaxWithIndex.forward(ctx, scores)
        seen["marked"] = any(t is indices for t in getattr(ctx, "non_differentiable", None) or ())
        return values, indices


values, indices = MaxSpy.apply(scores)
print("indices marked non-differentiable:", seen["marked"], "ok" if seen["marked"] else "WRONG")
(ds,) = torch.autograd.grad(values, scores, g)
direct = MaxWithIndex.backward(MaxWithIndex.apply(scores)[0].grad_fn, g, torch.zeros(4))

a = torch.randn(4, 5, requires_grad=True)
ga = torch.randn(4, 5)
(da_ref,) = torch.autograd.grad(torch.relu(a), a, ga)
h = a * 1.0
out = InplaceReLU.apply(h)
print("InplaceReLU returns its input:", out is h, "ok" if out is h else "WRONG")
(da,) = torch.autograd.grad(out, a, ga)


class SquareAndCubeSpy(SquareAndCube):
    """Your SquareAndCube, noting what backward receives for the cube's gradient."""

    @staticmethod
    def backward(ctx, grad_square, grad_cube):
        seen["grad_cube"] = grad_cube
        return SquareAndCube.backward(ctx, grad_square, grad_cube)


z = torch.randn(6, requires_grad=True)
square, cube = SquareAndCubeSpy.apply(z)
(dz_square,) = torch.autograd.grad(square.sum(), z)
arrived = "None" if seen["grad_cube"] is None else "a tensor of zeros"
print("cube unused: its gradient arrived as", arrived, "ok" if seen["grad_cube"] is None else "WRONG")
square, cube = SquareAndCube.apply(z)
(dz_cube,) = torch.autograd.grad(cube.sum(), z)
zd = z.detach()
compare(
    dscores=(ds, ds_ref),
    dscores_direct=(direct, ds_ref),
    da=(da, da_ref),
    dz_square_only=(dz_square, 2 * zd),
    dz_cube_only=(dz_cube, 3 * zd**2),
)

# %% tests grade_id="test_ctx_features" points=3
"""MaxWithIndex, InplaceReLU and SquareAndCube match PyTorch and use the three ctx features."""
score = check_ctx_features(MaxWithIndex, InplaceReLU, SquareAndCube)
### BEGIN HIDDEN TESTS
score = check_ctx_features(MaxWithIndex, InplaceReLU, SquareAndCube, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 5: a fused, stable softmax cross-entropy (3 points)
#
# Composing `softmax`, `log` and an indexed mean from torch operations gives the right loss, but
# autograd then stores every intermediate and runs one backward per operation. A fused Function
# does what notebook 02 did by hand: one forward that saves what backward needs, and one backward
# from the gradient you derived there, which cancels almost everything:
#
# $$L = -\frac{1}{N}\sum_i \log p_{i y_i},\qquad p_{ij} = \frac{e^{s_{ij}}}{\sum_k e^{s_{ik}}}.$$
#
# Two things are new. First, `grad_output`, $g$, is a scalar here but not necessarily 1 (a loss can
# be scaled, or be a term of a larger loss): the gradient of the scores is $g$ times the gradient of L.
# Second, the forward must stay finite for logits of magnitude 1000, as in notebook 02, and must
# compute $\log p$ without taking the log of a probability that underflows to 0.
#
# **Shapes.** scores (N, C) float, targets (N,) int64, loss () a 0-d tensor. `backward` returns two
# values: the gradient of the scores (N, C), and None for the targets, which are integers and have
# no gradient. Do not modify scores or targets, nor `grad_output`.
#
# <details><summary>Hint 1 (forward)</summary>
#
# Subtract each row's maximum first (softmax does not change), and take $\log p$ as the shifted score
# minus the log of the sum of the exponentials of the shifted row.
#
# </details>
#
# <details><summary>Hint 2 (backward)</summary>
#
# Notebook 02's gradient needs the probabilities and the targets: save those in forward (with
# `ctx.save_for_backward`; the probabilities are the exponential of the log-probabilities you already
# have), and multiply the result by `grad_output`.
#
# </details>
#
# <details><summary>Hint 3: the formula</summary>
#
# $\partial L / \partial s = \frac{g}{N}\,\bigl(p - \mathrm{onehot}(y)\bigr)$: a copy of the probabilities,
# minus 1 at `[torch.arange(N), targets]`, times `grad_output / N`; and None for the targets.
#
# </details>


# %% solution grade_id="softmax_cross_entropy_function"
class SoftmaxCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of softmax(scores) (N, C) against int64 targets (N,); stable for |scores| ~ 1000.

    Hint: notebook 02's gradient, times grad_output.
    """

    @staticmethod
    def forward(ctx, scores, targets):
        """The mean loss, a 0-d tensor."""
        ### BEGIN SOLUTION
        shifted = scores - scores.max(dim=1, keepdim=True).values
        log_probs = shifted - shifted.exp().sum(dim=1, keepdim=True).log()
        n = scores.shape[0]
        ctx.save_for_backward(log_probs.exp(), targets)
        return -log_probs[torch.arange(n), targets].mean()
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        """(gradient of scores (N, C), None for the targets)."""
        ### BEGIN SOLUTION
        probs, targets = ctx.saved_tensors
        n = probs.shape[0]
        grad = probs.clone()
        grad[torch.arange(n), targets] -= 1.0
        return grad * (grad_output / n), None
        ### END SOLUTION


# %% [markdown]
# Try it against `F.cross_entropy`, with logits of magnitude 1000 and an upstream gradient of 0.7,
# then with N = 1 and ordinary logits, and once more through a direct backward call. The references
# use copies taken before your code runs. Expect errors around 1e-16 and no NaN. A gradient
# 1 / 0.7 ≈ 1.43 times the reference's is one that ignores `grad_output`.

# %%
torch.manual_seed(4)
rows = {}
for label, scores, targets in (
    ("large", 1000 * torch.randn(4, 6), torch.randint(0, 6, (4,))),
    ("N1", torch.randn(1, 6), torch.randint(0, 6, (1,))),
):
    leaf = scores.clone().requires_grad_(True)
    loss_ref = F.cross_entropy(leaf, targets)
    (dscores_ref,) = torch.autograd.grad(loss_ref, leaf, torch.tensor(0.7))
    scores0, targets0 = scores.clone(), targets.clone()  # taken before your code runs
    mine = scores.clone().requires_grad_(True)
    loss = SoftmaxCrossEntropy.apply(mine, targets)
    (dscores,) = torch.autograd.grad(loss, mine, torch.tensor(0.7))
    direct = SoftmaxCrossEntropy.backward(SoftmaxCrossEntropy.apply(mine, targets).grad_fn, torch.tensor(0.7))
    print(f"{label}: gradient for the targets {direct[1]} (should be None)")
    rows |= {
        f"loss_{label}": (loss, loss_ref),
        f"dscores_{label}": (dscores, dscores_ref),
        f"dscores_direct_{label}": (direct[0], dscores_ref),
        f"targets_afterwards_{label}": (targets.double(), targets0.double()),
    }
compare(**rows)

# %% tests grade_id="test_softmax_cross_entropy_function" points=3
"""SoftmaxCrossEntropy matches F.cross_entropy in loss and gradient, for N = 1 and logits of 1000 too."""
score = check_softmax_cross_entropy_function(SoftmaxCrossEntropy)
### BEGIN HIDDEN TESTS
score = check_softmax_cross_entropy_function(SoftmaxCrossEntropy, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 6: PyTorch's LegendrePolynomial3, and a curve fit (3.5 points)
#
# PyTorch's tutorial "Learning PyTorch with Examples" introduces custom Functions with the Legendre
# polynomial of degree 3 and fits a model built from it to $\sin(x)$:
#
# $$P_3(x) = \tfrac12\,(5x^3 - 3x),\qquad \hat y = a + b\,P_3(c + d\,x).$$
#
# ### 6a. LegendrePolynomial3 (1.5 points)
#
# Elementwise: input, output and gradient share a shape. The backward multiplies $P_3'$ by
# `grad_output`, into a new tensor: the check also differentiates `y.sum()`, whose upstream gradient
# is one value of 1 seen through a stride-0 view, and writing into it (`grad_output.mul_(...)`)
# raises an error there (the test file checks that it does). Check your $P_3'$ on a value you can
# do by hand: $P_3(1) = 1$ and $P_3(1.001) \approx 1.006$, a slope of about 6.
#
# <details><summary>Hint: the derivative</summary>
#
# $P_3'(x) = \tfrac12\,(15x^2 - 3) = \tfrac32\,(5x^2 - 1)$, which is 6 at x = 1.
#
# </details>


# %% solution grade_id="legendre"
class LegendrePolynomial3(torch.autograd.Function):
    """``P3(x) = 0.5 * (5 x**3 - 3 x)``, elementwise; backward ``P3'(x) * grad_output``, a new tensor."""

    @staticmethod
    def forward(ctx, input):
        """P3(input), same shape as input."""
        ### BEGIN SOLUTION
        ctx.save_for_backward(input)
        return 0.5 * (5 * input**3 - 3 * input)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output):
        """grad_output * P3'(input)."""
        ### BEGIN SOLUTION
        (input,) = ctx.saved_tensors
        return grad_output * 1.5 * (5 * input**2 - 1)
        ### END SOLUTION


# %% [markdown]
# Try it, with a random upstream gradient (its copy taken before your code runs) and through `y.sum()`,
# against autograd through the polynomial written out.

# %%
torch.manual_seed(5)
x = torch.linspace(-2, 2, 7, requires_grad=True)
g = torch.randn(7)
g0 = g.clone()  # taken before your code runs
(dx_ref,) = torch.autograd.grad(0.5 * (5 * x**3 - 3 * x), x, g0)
(dx_sum_ref,) = torch.autograd.grad((0.5 * (5 * x**3 - 3 * x)).sum(), x)
(dx,) = torch.autograd.grad(LegendrePolynomial3.apply(x), x, g)
(dx_sum,) = torch.autograd.grad(LegendrePolynomial3.apply(x).sum(), x)
compare(
    P3=(LegendrePolynomial3.apply(x), 0.5 * (5 * x**3 - 3 * x)),
    P3_at_1=(LegendrePolynomial3.apply(torch.tensor([1.0])), [1.0]),
    dx=(dx, dx_ref),
    dx_of_sum=(dx_sum, dx_sum_ref),
    g_afterwards=(g, g0),
)

# %% tests grade_id="test_legendre" points=1.5
"""LegendrePolynomial3 matches P3 and its derivative, with the exact gradient shape from a direct call."""
score = check_legendre(LegendrePolynomial3)
### BEGIN HIDDEN TESTS
score = check_legendre(LegendrePolynomial3, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ### 6b. fit_legendre (2 points)
#
# Fit $\hat y = a + b\,P_3(c + d\,x)$ to the points (x, y) by plain gradient descent, exactly as the
# tutorial does: start from $a = 0$, $b = -1$, $c = 0$, $d = 0.3$ (float64 scalars that require
# grad), minimise the **sum** of squared errors $\sum_i (\hat y_i - y_i)^2$ with learning rate
# $5 \cdot 10^{-6}$ for 2000 steps, and compute $P_3$ with `LegendrePolynomial3.apply`. Each step is
# a forward pass, `loss.backward()`, and the update your `sgd_step` of notebook 03 made: in place, not
# recorded, gradients cleared afterwards.
#
# **Target.** On the tutorial's data (2000 points on $[-\pi, \pi]$, $y = \sin x$) this loop ends at
# a sum of squared errors of 8.94 (we measured it in float64), from 461.9 at the start (the try-it cell
# below prints both). The test cell calls `fit_legendre` on that data; the grader, and
# `python -m autograder check`, call it on data drawn anew for each run (a sine scaled by a drawn
# amplitude, at drawn points x), so their target is another number. Each recomputes the loss of the
# (a, b, c, d) you return with its own code and expects it within 5% of what the same loop reaches on
# the same data.


# %% solution grade_id="fit_legendre"
def fit_legendre(x: torch.Tensor, y: torch.Tensor) -> tuple[float, float, float, float]:
    """Fit ``a + b * P3(c + d * x)`` to y (x, y of shape (n,)); return the final (a, b, c, d) as floats.

    Hint: the tutorial's loop: forward, ``loss.backward()``, update under ``torch.no_grad()``.
    """
    ### BEGIN SOLUTION
    params = [torch.tensor(v, requires_grad=True) for v in (0.0, -1.0, 0.0, 0.3)]
    a, b, c, d = params
    learning_rate = 5e-6
    for _ in range(2000):
        y_pred = a + b * LegendrePolynomial3.apply(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            for p in params:
                p -= learning_rate * p.grad
                p.grad = None
    return a.item(), b.item(), c.item(), d.item()
    ### END SOLUTION


# %% [markdown]
# Try it: the fitted curve over the sine, and the loss of the (a, b, c, d) you return, recomputed here,
# next to the 8.94 that the tutorial's loop reaches (within 5% counts, as in the check).

# %%
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)


def fitted(a, b, c, d):
    """a + b P3(c + d x), with P3 written out."""
    return a + b * 0.5 * (5 * (c + d * x) ** 3 - 3 * (c + d * x))


start = float(((fitted(0.0, -1.0, 0.0, 0.3) - y) ** 2).sum())
a, b, c, d = fit_legendre(x, y.clone())
y_fit = fitted(a, b, c, d)
sse = float(((y_fit - y) ** 2).sum())
print(f"y = {a:.4f} + {b:.4f} * P3({c:.4f} + {d:.4f} x); sum of squared errors {sse:.3f}, from {start:.1f}")
print("within 5% of 8.94:", "ok" if sse <= 1.05 * 8.94 else "WRONG")
plt.plot(x, y, label="sin(x)")
plt.plot(x, y_fit, label="fit")
plt.legend()
plt.show()

# %% tests grade_id="test_fit_legendre" points=2
"""fit_legendre returns (a, b, c, d) whose recomputed loss is within 5% of the tutorial's loop."""
score = check_fit_legendre(fit_legendre)
### BEGIN HIDDEN TESTS
score = check_fit_legendre(fit_legendre, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Summary
#
# This notebook:
#
# - `forward` without ctx plus `setup_context` is the form `torch.func` needs; with
#   `generate_vmap_rule = True` a Function built from torch operations works under `vmap` and
#   `grad` with no extra code.
# - A layer that accepts (..., D) sums its parameter gradients over every leading position:
#   flatten, multiply, and the shapes come out right for a single vector too.
# - A backward made of differentiable torch operations gives second derivatives for free; one that
#   is not should say so with `@once_differentiable`, rather than silently return a wrong zero.
# - `ctx` tells autograd what only the Function knows: outputs without gradients
#   (`mark_non_differentiable`), inputs overwritten in place (`mark_dirty`), and that a missing
#   gradient may stay None (`set_materialize_grads(False)`).
# - A fused loss saves what its backward needs (the probabilities), stays finite for any logits by
#   subtracting the row maximum, and multiplies by `grad_output` even when it is "just a scalar".
#
# And the course as a whole: in notebooks 01 and 02 you wrote every forward and backward pass by
# hand in numpy, and learned that a gradient has the shape of its input and that shapes which all
# differ tell you the formula. In notebook 03 autograd did that bookkeeping for you, recording the
# graph of the forward pass and replaying it backwards. In notebook 04 you extended autograd with
# Functions of your own and checked them with `gradcheck`; here you made them compose with the rest
# of PyTorch. Every check along the way asked the same questions, which are worth asking of any
# gradient you write: right shape, right values for a random upstream gradient, N = 1 as well as
# N > 1, inputs left alone, extreme values handled, and a direct call of backward, where autograd
# cannot repair a mistake for you.
