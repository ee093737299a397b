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
try:  # the course's own package: `make` installs it; away from the repository, its wheel does
    import autograder.checks  # noqa: F401
    import backprop_utils  # noqa: F401
except ModuleNotFoundError as error:
    raise ModuleNotFoundError(
        f"{error.msg}. Run `%pip install backprop_course-0.1.0-py3-none-any.whl` (the course's wheel,"
        " published with the notebooks), then this cell again."
    ) from None

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
# - `setup_context(ctx, inputs, output)`: receives the tuple of inputs exactly as passed to
#   `apply` (so `inputs` has two elements for `apply(x, W)`) and the output, and saves what
#   `backward` needs with `ctx.save_for_backward`;
# - `backward(ctx, grad_output)`: unchanged from notebook 04.
#
# For `vmap`, set the class attribute `generate_vmap_rule = True`: PyTorch then vmaps your `forward`
# and `backward` themselves, which works because they use only torch operations. The rule vmap
# guarantees, for a stack of weights $W_1, \dots, W_B$:
#
# $$\mathrm{vmap}(f)(W_{1:B})_k = f(W_k), \qquad f(W) = x W^\top + b .$$
#
# **Shapes.** x (N, D), W (M, D), b (M,), out (N, M); stacked weights (B, M, D) give (B, N, M).
# `grad_input` (N, D) is `grad_output @ W`, `grad_weight` (M, D) is `grad_output.T @ x`, and
# `grad_bias` (M,) is `grad_output.sum(0)`. **Expected error.** Rounding only, about 1e-16.


# %% solution grade_id="linear_function_func"
class LinearFunctionFunc(torch.autograd.Function):
    """``out = input @ weight.T + bias``, torch.func form: input (N, D), weight (M, D), bias (M,) or None.

    Hint: ``inputs`` in setup_context has 2 or 3 elements; pad it with None before unpacking.
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
# Try it: vmap over three weights against a loop of `F.linear`, and `torch.func.grad` of a scalar
# function of the weight against ordinary autograd through `F.linear`. Both rows should say `ok`.

# %%
torch.manual_seed(0)
x, b = torch.randn(4, 3), torch.randn(5)
weights = torch.randn(3, 5, 3)
batched = torch.func.vmap(lambda w: LinearFunctionFunc.apply(x, w, b))(weights)
looped = torch.stack([F.linear(x, w, b) for w in weights])

g = torch.randn(4, 5)
W = weights[0].clone().requires_grad_(True)
(dW_ref,) = torch.autograd.grad((F.linear(x, W, b) * g).sum(), W)
dW = torch.func.grad(lambda w: (LinearFunctionFunc.apply(x, w, b) * g).sum())(weights[0])
compare(vmap=(batched, looped), func_grad=(dW, dW_ref))

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
# vectors, or a single vector (D,). It applies the same W to every leading position. The gradient of
# W is then a sum over **every** leading position, and so is the bias's: flatten the leading axes
# into one of size $P = \prod(\text{leading sizes})$ and you are back in notebook 04,
#
# $$\frac{\partial L}{\partial W} = \sum_{p=1}^{P} g_p\, x_p^\top = G^\top X, \qquad
# G = \texttt{grad\_output.reshape(-1, M)},\; X = \texttt{input.reshape(-1, D)} .$$
#
# **Shapes.** input (..., D) gives output (..., M); grad_input has input's shape, (..., D);
# grad_weight is (M, D) and grad_bias (M,) whatever the number of leading axes, also none: a 1-D
# input (D,) gives an output (M,), and then P = 1. `matmul` (or `@`) handles any leading axes for
# the forward pass and for grad_input; `mm` does not. Use the old form, `forward(ctx, ...)`, as in
# notebook 04.


# %% solution grade_id="batched_linear"
class LinearFunction(torch.autograd.Function):
    """``out = input @ weight.T + bias`` for input (..., D), weight (M, D), bias (M,) or None -> (..., M).

    Hint: grad_weight and grad_bias sum over every leading axis: reshape grad_output to (-1, M).
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
# Try it on a (2, 3, 4, 5) input: each gradient next to autograd's through `F.linear`. Calling
# `backward` directly (`LinearFunction.backward(out.grad_fn, g)`: the grad_fn is the ctx) shows the
# shapes autograd would otherwise repair; it needs an output whose graph has not been used yet.

# %%
torch.manual_seed(1)
x = torch.randn(2, 3, 4, 5, requires_grad=True)
W = torch.randn(6, 5, requires_grad=True)
b = torch.randn(6, requires_grad=True)
g = torch.randn(2, 3, 4, 6)
out = LinearFunction.apply(x, W, b)
grads = torch.autograd.grad(out, (x, W, b), g)
grads_ref = torch.autograd.grad(F.linear(x, W, b), (x, W, b), g)
# a fresh output: autograd.grad above freed the saved tensors of the first one
direct = LinearFunction.backward(LinearFunction.apply(x, W, b).grad_fn, g)
print("direct backward shapes:", [tuple(t.shape) for t in direct])
compare(**{name: (mine, ref) for name, mine, ref in zip(("dx", "dW", "db"), grads, grads_ref, strict=True)})

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
# works. It works **if backward is built from differentiable torch operations on the saved
# tensors**. For the cube,
#
# $$y = x^3,\qquad \frac{\partial L}{\partial x} = 3x^2 g,\qquad
# \frac{\partial}{\partial x}\langle 3x^2 g, v\rangle = 6 x\, g\, v,\qquad
# \frac{\partial}{\partial g}\langle 3x^2 g, v\rangle = 3x^2 v .$$
#
# A backward written in numpy (or on `.detach()`ed tensors, or under `torch.no_grad()`) computes the
# right first derivative and cuts the graph: the second derivative then fails with an unhelpful
# error, or, worse, comes out as zero. If a backward cannot be differentiated, say so: decorate it
# with `@once_differentiable` (below `@staticmethod`), and torch raises a `RuntimeError` that names
# the decorator as soon as anyone tries. The stub of `NumpyCube` already carries the decorator,
# below `@staticmethod` where it belongs (above it, it would wrap the staticmethod object instead of
# the function).
#
# **Shapes.** Everything is elementwise: x, y, g and every derivative share x's shape (the checks
# use (4, 3)). Write `Cube` with torch operations and `NumpyCube` with numpy in both passes
# (`x.detach().numpy()`, `torch.from_numpy(...)`).


# %% solution grade_id="cube"
class Cube(torch.autograd.Function):
    """``y = x**3``, elementwise, with a backward that can itself be differentiated.

    Hint: compute ``3 * x**2 * grad_output`` from the saved x, with torch operations only.
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
        """dx = 3 x**2 * grad_output, built from differentiable operations."""
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
        """dx = 3 x**2 * grad_output via numpy."""
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return torch.from_numpy(3 * x.numpy() ** 2 * grad_output.numpy())
        ### END SOLUTION


# %% [markdown]
# Try it: `gradgradcheck` compares your second derivatives with finite differences of your first
# ones (it should print True), the Hessian-vector product $6xgv$ by hand, and what torch says when
# `NumpyCube` is differentiated twice.

# %%
torch.manual_seed(2)
x = torch.randn(4, 3, requires_grad=True)
g = torch.randn(4, 3, requires_grad=True)
v = torch.randn(4, 3)
print("gradgradcheck(Cube):", torch.autograd.gradgradcheck(Cube.apply, (x,)))
(dx,) = torch.autograd.grad(Cube.apply(x), x, g, create_graph=True)
(hvp,) = torch.autograd.grad(dx, x, v)
compare(hvp=(hvp, 6 * x * g * v))
(dx,) = torch.autograd.grad(NumpyCube.apply(x), x, g, create_graph=True)
try:
    (dx * v).sum().backward()
except RuntimeError as error:
    print("NumpyCube twice:", error)

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
#   maximum of each row of scores (N, C) and its index: values (N,) float, indices (N,) int64. Its
#   gradient routes each upstream value to the position of the maximum:
#   $\partial L / \partial s_{ij} = g_i$ if $j = \mathrm{argmax}_k\, s_{ik}$, else 0.
# - **`ctx.mark_dirty(x)`**: forward modified its input x in place and returns it. Autograd then
#   knows that the old value of x is gone and that the returned tensor **is** x (same object,
#   version counter bumped). `InplaceReLU` clamps its input with `x.clamp_(min=0)` and returns x;
#   its backward can only use the output (the input is overwritten), which is enough:
#   $x > 0 \iff \mathrm{relu}(x) > 0$. Autograd refuses in-place operations on a leaf that
#   requires grad, so use it on an intermediate result.
# - **`ctx.set_materialize_grads(False)`**: by default, an output that does not reach the loss gets
#   a gradient of zeros, made just so that backward can add it. With this call autograd passes
#   None instead, and backward must skip that term. `SquareAndCube` returns $(x^2, x^3)$; its input
#   gradient is $2x\,g_{\mathrm{sq}} + 3x^2 g_{\mathrm{cu}}$, with the term of a None gradient left
#   out.
#
# **Shapes.** MaxWithIndex: scores (N, C) -> values (N,), indices (N,) int64, gradient (N, C);
# InplaceReLU and SquareAndCube are elementwise.


# %% solution grade_id="max_with_index"
class MaxWithIndex(torch.autograd.Function):
    """Row maxima of scores (N, C) and their indices; the indices are non-differentiable.

    Hint: ``scores.max(dim=1)`` returns both; ``Tensor.scatter`` puts each g_i at its index.
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
        """Gradient of scores (N, C): grad_values[i] at [i, indices[i]], 0 elsewhere."""
        ### BEGIN SOLUTION
        (indices,) = ctx.saved_tensors
        grad = grad_values.new_zeros(grad_values.shape[0], ctx.num_classes)
        return grad.scatter(1, indices.unsqueeze(1), grad_values.unsqueeze(1))
        ### END SOLUTION


# %% solution grade_id="inplace_relu"
class InplaceReLU(torch.autograd.Function):
    """ReLU that overwrites its input and returns it, marked dirty.

    Hint: ``x.clamp_(min=0)`` works in place; save the output, not the (overwritten) input.
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
        """grad_output where the output is > 0, else 0."""
        ### BEGIN SOLUTION
        (out,) = ctx.saved_tensors
        return grad_output * (out > 0)
        ### END SOLUTION


# %% solution grade_id="square_and_cube"
class SquareAndCube(torch.autograd.Function):
    """Returns (x**2, x**3); a gradient of an unused output arrives as None.

    Hint: start from ``torch.zeros_like(x)`` and add each term whose gradient is not None.
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
        """2 x grad_square + 3 x**2 grad_cube, leaving out the term of a None gradient."""
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
# Try it: the gradient of MaxWithIndex against `torch.max`, whether the indices require grad, the
# in-place ReLU (same object?) and SquareAndCube with only its square used.

# %%
torch.manual_seed(3)
scores = torch.randn(4, 5, requires_grad=True)
g = torch.randn(4)
values, indices = MaxWithIndex.apply(scores)
print("indices.requires_grad:", indices.requires_grad)
(ds,) = torch.autograd.grad(values, scores, g)
(ds_ref,) = torch.autograd.grad(scores.max(dim=1).values, scores, g)

a = torch.randn(4, 5, requires_grad=True)
h = a * 1.0
out = InplaceReLU.apply(h)
print("InplaceReLU returns its input:", out is h)
(da,) = torch.autograd.grad(out, a, g[:, None].expand(4, 5))
(da_ref,) = torch.autograd.grad(torch.relu(a), a, g[:, None].expand(4, 5))

z = torch.randn(6, requires_grad=True)
square, cube = SquareAndCube.apply(z)
(dz,) = torch.autograd.grad(square.sum(), z)
compare(dscores=(ds, ds_ref), da=(da, da_ref), dz=(dz, 2 * z))

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
# does what notebook 02 did by hand: one forward that saves the probabilities, and one backward
# from the formula that cancels almost everything,
#
# $$L = -\frac{1}{N}\sum_i \log p_{i y_i},\qquad p_{ij} = \frac{e^{s_{ij} - m_i}}{\sum_k e^{s_{ik} - m_i}},
# \quad m_i = \max_k s_{ik}, \qquad
# \frac{\partial L}{\partial s} = \frac{g}{N}\,\bigl(p - \mathrm{onehot}(y)\bigr),$$
#
# where $g$ is `grad_output`, a scalar here but not necessarily 1 (a loss can be scaled, or be a
# term of a larger loss). Subtracting the row maximum $m_i$ keeps every exponent $\le 0$: without
# it, logits of magnitude 1000 overflow to inf and the loss becomes NaN. Compute $\log p$ as
# `shifted - log(sum(exp(shifted)))` rather than `log(p)`, which is $-\infty$ where p underflows.
#
# **Shapes.** scores (N, C) float, targets (N,) int64, loss () a 0-d tensor. `backward` returns two
# values: the gradient of the scores (N, C), and None for the targets, which are integers and have
# no gradient. Do not modify scores or targets.


# %% solution grade_id="softmax_cross_entropy_function"
class SoftmaxCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy of softmax(scores) (N, C) against int64 targets (N,); stable for |scores| ~ 1000.

    Hint: save the probabilities in forward; backward is (p - onehot(y)) * grad_output / N, and None.
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
# Try it against `F.cross_entropy`, with logits of magnitude 1000 and an upstream gradient of 0.7.
# Expect errors around 1e-16 and no NaN.

# %%
torch.manual_seed(4)
scores = (1000 * torch.randn(4, 6)).requires_grad_(True)
targets = torch.randint(0, 6, (4,))
loss = SoftmaxCrossEntropy.apply(scores, targets)
(dscores,) = torch.autograd.grad(loss, scores, torch.tensor(0.7))
loss_ref = F.cross_entropy(scores, targets)
(dscores_ref,) = torch.autograd.grad(loss_ref, scores, torch.tensor(0.7))
compare(loss=(loss, loss_ref), dscores=(dscores, dscores_ref))

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
# $$P_3(x) = \tfrac12\,(5x^3 - 3x),\qquad P_3'(x) = \tfrac32\,(5x^2 - 1),\qquad
# \hat y = a + b\,P_3(c + d\,x).$$
#
# ### 6a. LegendrePolynomial3 (1.5 points)
#
# Elementwise: input, output and gradient share a shape. The backward multiplies $P_3'$ by
# `grad_output`, into a new tensor: the check also differentiates `y.sum()`, whose upstream gradient
# is one value of 1 seen through a stride-0 view, and writing into it (`grad_output.mul_(...)`)
# raises an error there.


# %% solution grade_id="legendre"
class LegendrePolynomial3(torch.autograd.Function):
    """``P3(x) = 0.5 * (5 x**3 - 3 x)``, elementwise; backward ``1.5 * (5 x**2 - 1) * grad_output``."""

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


# %%
torch.manual_seed(5)
x = torch.linspace(-2, 2, 7, requires_grad=True)
g = torch.randn(7)
(dx,) = torch.autograd.grad(LegendrePolynomial3.apply(x), x, g)
(dx_ref,) = torch.autograd.grad(0.5 * (5 * x**3 - 3 * x), x, g)
compare(P3=(LegendrePolynomial3.apply(x), 0.5 * (5 * x**3 - 3 * x)), dx=(dx, dx_ref))

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
# $5 \cdot 10^{-6}$ for 2000 steps, and compute $P_3$ with `LegendrePolynomial3.apply`. Update
# each parameter under `torch.no_grad()` with `p -= lr * p.grad`, then reset `p.grad = None`.
#
# **Target.** On the tutorial's data (2000 points on $[-\pi, \pi]$, $y = \sin x$) this loop ends at
# a sum of squared errors of 8.94 (we measured it in float64), from 461.9 at the start. The check
# calls `fit_legendre` on that data and on a rescaled sine, recomputes the loss of the (a, b, c, d)
# you return with its own code, and expects it within 5% of what the same loop reaches.


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
# Try it: the fitted curve over the sine.

# %%
x = torch.linspace(-math.pi, math.pi, 2000)
y = torch.sin(x)
a, b, c, d = fit_legendre(x, y)
y_fit = a + b * 0.5 * (5 * (c + d * x) ** 3 - 3 * (c + d * x))
print(
    f"y = {a:.4f} + {b:.4f} * P3({c:.4f} + {d:.4f} x); sum of squared errors {((y_fit - y) ** 2).sum():.3f}"
)
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
