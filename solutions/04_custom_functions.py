# %% [markdown]
# # 04 · Custom autograd Functions
#
# In notebook 03 autograd did the bookkeeping of notebook 02 for you: every operation on a tensor
# that requires grad records a node in a graph (the tensor's `grad_fn`), and `.backward()` walks that
# graph in reverse, calling each node's backward function. Every node so far was one of PyTorch's
# own. This notebook adds your own: a subclass of `torch.autograd.Function` is a new kind of node,
# with a forward you write and a backward you write, and autograd treats it like any built-in.
#
# **Why write one?** Autograd already differentiates any composition of torch operations, so a
# Function is worth writing when that composition is not what you want:
#
# - **fused kernels**: one forward and one backward for a whole block (a fused attention, a fused
#   optimizer step) instead of dozens of small recorded operations, each storing its inputs;
# - **custom gradients**: a gradient that is not the derivative of the forward on purpose, such as
#   the straight-through estimator for rounding, or gradient clipping inside the graph;
# - **numerical stability**: a derivative with a better formula than the one autograd would chain
#   together, such as `exp` reusing its own output, or log-sum-exp;
# - **code autograd cannot see**: numpy, SciPy, a C library or a GPU kernel, called from forward,
#   with its gradient supplied by backward.
#
# **The anatomy.** A Function has two static methods and is called through `apply`:
#
# ```python
# class MyFunction(torch.autograd.Function):
#     @staticmethod
#     def forward(ctx, input, some_number):   # any Python objects, not only tensors
#         ctx.save_for_backward(input)        # tensors backward needs
#         ctx.some_number = some_number       # non-tensors go on ctx directly
#         return ...                          # the output tensor
#
#     @staticmethod
#     def backward(ctx, grad_output):          # dL/d(output), the shape of the output
#         (input,) = ctx.saved_tensors
#         return grad_input, None              # one entry per forward input, in order
#
# out = MyFunction.apply(x, 2.0)
# ```
#
# `ctx` is the node itself: the object that becomes `out.grad_fn`. Forward runs with gradient
# recording switched off (what happens inside it is your business, not autograd's), and its output
# gets `grad_fn = ctx`. Backward receives the gradient of the loss with respect to the output and
# returns exactly **one gradient per forward input, in order**: `None` for an input that is not a
# tensor (a Python number has no gradient) and may be `None` for a tensor input that needs no
# gradient, which `ctx.needs_input_grad` (one bool per input) tells you.
#
# Tensors that backward needs go through `ctx.save_for_backward(...)`, never `ctx.attribute = tensor`.
# Saved tensors carry a version counter: if anything modifies one in place between forward and
# backward, backward refuses to run instead of computing a silently wrong gradient. A tensor stashed
# as a ctx attribute escapes that check, and also keeps memory alive in ways autograd cannot manage.
#
# | exercise | you write | points |
# |---|---|---|
# | 1 | `MulConstant`, `Exp`, `MyReLU`: elementwise Functions | 3 |
# | 2 | `LinearFunction`: PyTorch's own example, with `needs_input_grad` and an optional bias | 6 |
# | 3 | `backward_by_hand`: running one backward node by hand | 2 |
# | 4 | `max_jacobian_error`: what gradcheck measures, and why float32 fails it | 2 |
# | 5 | `Linear` (an `nn.Module` on `LinearFunction`) and `train_spiral` | 4 |
# | 6 | a measured comparison of `LinearFunction` with `F.linear` (not graded) | 0 |
#
# Everything graded runs in float64. Each check calls your `backward` **directly** as well as through
# `.backward()`, because autograd silently repairs some wrong answers (you will see one in exercise 2).

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
import time
import timeit
import warnings

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Function  # noqa: F401 - PyTorch's documented examples subclass Function

from autograder.checks import (
    check_backward_by_hand,
    check_exp,
    check_linear_function,
    check_linear_module,
    check_max_jacobian_error,
    check_mul_constant,
    check_my_relu,
    check_train_spiral,
)
from backprop_utils import compare, make_spiral, plot_losses

torch.manual_seed(0)


def torch_grads(fn, inputs, grad_output):
    """PyTorch's output of ``fn(*inputs)`` and the gradient of every tensor input, for an upstream
    gradient ``grad_output``: the reference the try-it cells compare with."""
    leaves = [t.detach().clone().requires_grad_(True) if isinstance(t, torch.Tensor) else t for t in inputs]
    out = fn(*leaves)
    out.backward(grad_output)
    return out.detach(), [t.grad if isinstance(t, torch.Tensor) else None for t in leaves]


# %% [markdown]
# ## Exercise 1: elementwise Functions (3 points)
#
# Three small Functions, each with an elementwise backward `grad_input = grad_output * f'(x)` as in
# notebook 02, now written in the shape autograd expects. Deriving each $f'$ and deciding what
# backward returns for every forward input is the exercise.
#
# | Function | forward | saves |
# |---|---|---|
# | `MulConstant.apply(x, c)` | $c\,x$, `c` a Python number | `c`, on ctx |
# | `Exp.apply(x)` | $e^x$ | its **output** `result` |
# | `MyReLU.apply(x)` | $\max(0, x)$ | `x` |
#
# `Exp` saves its output rather than its input, because its backward can be written with the output
# alone, with no second `exp` (the hint under 1b says how, if you need it). Saving an output works
# exactly like saving an input: `ctx.save_for_backward(result)`. `MyReLU` follows `torch.relu`'s
# convention, gradient 0 at exactly $x = 0$.
#
# **Shapes.** `x`, the output, `grad_output` and `grad_input` all have the same shape. **Expected
# error**: about 1e-16 against PyTorch in float64. Never modify `grad_output` in place
# (`grad_output[x <= 0] = 0`): it belongs to the caller, who may still need it. Worse, for
# `out.sum().backward()` it is an expanded tensor whose elements all share one memory location: the
# write prints two deprecation warnings, zeroes that one location, and so silently turns the whole
# gradient into zeros (the test file measures exactly this).
#
# The checks also look inside `ctx`: a tensor kept as a ctx attribute loses points, as does `Exp`
# saving anything other than its output.
#
# ### 1a. MulConstant (1 point)
#
# <details><summary>Hint 1</summary>
#
# The derivative of $c\,x$ with respect to $x$ is $c$, element by element. Backward returns one entry
# per forward input, in order: what is the entry for `c`, which is not a tensor?
#
# </details>
#
# <details><summary>Hint 2: the formula</summary>
#
# `return grad_output * ctx.constant, None`.
#
# </details>


# %% solution grade_id="mul_constant"
class MulConstant(torch.autograd.Function):
    """``out = x * constant`` for a tensor x and a Python number constant."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, constant: float) -> torch.Tensor:
        """Store the constant on ctx (it is not a tensor) and return ``x * constant``."""
        ### BEGIN SOLUTION
        ctx.constant = constant
        return x * constant
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """One gradient per forward input: dL/dx (the shape of x), then one for the constant."""
        ### BEGIN SOLUTION
        return grad_output * ctx.constant, None
        ### END SOLUTION


# %% [markdown]
# Try it: your forward and your backward called directly, against PyTorch's `x * 2.5`. `out.grad_fn`
# is the ctx your forward filled in, so `MulConstant.backward(out.grad_fn, g)` runs your backward
# alone, exactly as written. The reference is computed from copies taken before your code runs, and
# the last row checks that your backward left `g` as it was. Every row should say `ok`.

# %%
x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
g = torch.randn(3, 4, dtype=torch.float64)
out_ref, (grad_x_ref, _) = torch_grads(lambda t, c: t * c, (x, 2.5), g.clone())
g0 = g.clone()  # taken before your code runs
out = MulConstant.apply(x, 2.5)
returned = MulConstant.backward(out.grad_fn, g)
returned = returned if isinstance(returned, tuple) else (returned,)  # a lone tensor is one value
grad_x, grad_constant = (*returned, "missing", "missing")[:2]
count_ok = len(returned) >= 2 and all(r is None for r in returned[2:])  # the engine ignores extra Nones
print(f"backward returned {len(returned)} value(s) for forward's 2 inputs:", "ok" if count_ok else "WRONG")
print(
    "gradient for the constant:", grad_constant, "ok" if grad_constant is None else "WRONG (should be None)"
)
compare(out=(out, out_ref), grad_x=(grad_x, grad_x_ref), g_afterwards=(g, g0))

# %% tests grade_id="test_mul_constant" points=1
"""MulConstant matches x * c, returns None for the constant, and keeps tensors off ctx."""
score = check_mul_constant(MulConstant)
### BEGIN HIDDEN TESTS
score = check_mul_constant(MulConstant, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ### 1b. Exp (1 point)
#
# <details><summary>Hint 1</summary>
#
# The derivative of $e^x$ is $e^x$: the very tensor forward returned and saved.
#
# </details>
#
# <details><summary>Hint 2: the formula</summary>
#
# `(result,) = ctx.saved_tensors`, then `return grad_output * result`.
#
# </details>


# %% solution grade_id="exp"
class Exp(torch.autograd.Function):
    """``out = exp(x)``, elementwise; backward reuses the output."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        """Return ``exp(x)`` and save that output (not x) with ``ctx.save_for_backward``."""
        ### BEGIN SOLUTION
        result = x.exp()
        ctx.save_for_backward(result)
        return result
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        """Return dL/dx, the shape of x, using the output that forward saved (``ctx.saved_tensors``)."""
        ### BEGIN SOLUTION
        (result,) = ctx.saved_tensors
        return grad_output * result
        ### END SOLUTION


# %% [markdown]
# Try it, then see the version counter at work: doubling the output in place after forward makes
# backward refuse to run, because the tensor it saved has changed. (Had `Exp` kept its output as
# `ctx.result`, backward would have run and returned a gradient twice too large, with no error; the
# test file checks that too.) Each line ends with a verdict.

# %%
x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
g = torch.randn(3, 4, dtype=torch.float64)
out_ref, (grad_ref,) = torch_grads(torch.exp, (x,), g.clone())
g0 = g.clone()  # taken before your code runs
out = Exp.apply(x)
print(compare(out=(out, out_ref), grad_x=(Exp.backward(out.grad_fn, g), grad_ref), g_afterwards=(g, g0)))
saved = out.grad_fn.saved_tensors
saves_output = len(saved) == 1 and saved[0].equal(out)
print(f"saved tensors: {len(saved)}, the output itself: {saves_output}:", "ok" if saves_output else "WRONG")
with torch.no_grad():
    out.mul_(2)
try:
    out.backward(g)
    print("backward ran on a changed output: WRONG (is the output saved with ctx.save_for_backward?)")
except RuntimeError as error:
    print("backward refused:", str(error)[:95], "... ok")

# %% tests grade_id="test_exp" points=1
"""Exp matches torch.exp in value and gradient and saves its output with save_for_backward."""
score = check_exp(Exp)
### BEGIN HIDDEN TESTS
score = check_exp(Exp, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ### 1c. MyReLU (1 point)
#
# <details><summary>Hint 1</summary>
#
# The same derivative as notebook 02's ReLU: 1 where $x > 0$, 0 elsewhere (also at exactly 0). A
# comparison of tensors gives a boolean tensor, which multiplies like 0 and 1.
#
# </details>
#
# <details><summary>Hint 2: the formula</summary>
#
# `(x,) = ctx.saved_tensors`, then `return grad_output * (x > 0)`: a new tensor, `grad_output` untouched.
#
# </details>


# %% solution grade_id="my_relu"
class MyReLU(torch.autograd.Function):
    """``out = max(0, x)``, elementwise, with gradient 0 at exactly x == 0 (as torch.relu)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        """Save x and return max(0, x), elementwise."""
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        return x.clamp(min=0)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        """Return dL/dx (the shape of x), gradient 0 at exactly x == 0, as a new tensor.

        Never write into grad_output.
        """
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return grad_output * (x > 0)
        ### END SOLUTION


# %% [markdown]
# Try it on an input with exact zeros, through `.backward()` this time, against `torch.relu`: once with
# a random upstream gradient `g` (the reference computed from copies taken before your code runs, and
# the last row checking that `g` is unchanged), and once through `out.sum().backward()`, where the
# upstream gradient is the expanded tensor of ones described above. A backward that writes into
# `grad_output` shows there as a gradient of all zeros (the table's guess, a missing computation, is
# then not the reason), and as a changed `g` in the last row.

# %%
x = torch.randn(3, 4, dtype=torch.float64)
x[0, :2] = 0.0
x.requires_grad_(True)
g = torch.randn(3, 4, dtype=torch.float64)
out_ref, (grad_ref,) = torch_grads(torch.relu, (x,), g.clone())
_, (grad_sum_ref,) = torch_grads(lambda t: torch.relu(t).sum(), (x,), None)
g0 = g.clone()  # taken before your code runs

out = MyReLU.apply(x)
out.backward(g)
grad_x = x.grad.clone()
x.grad = None
MyReLU.apply(x).sum().backward()
compare(
    out=(out, out_ref), grad_x=(grad_x, grad_ref), grad_x_of_sum=(x.grad, grad_sum_ref), g_afterwards=(g, g0)
)

# %% tests grade_id="test_my_relu" points=1
"""MyReLU matches torch.relu, with gradient 0 at x == 0, and leaves grad_output unchanged."""
score = check_my_relu(MyReLU)
### BEGIN HIDDEN TESTS
score = check_my_relu(MyReLU, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 2: LinearFunction (6 points)
#
# This is the example at the centre of PyTorch's "Extending PyTorch" guide: the linear layer of
# notebook 01 as a Function, in the `nn.Linear` convention (a weight is (out, in)):
#
# $$\text{output} = \text{input}\, W^\top + b, \qquad
# \text{output}[n, o] = \sum_i \text{input}[n, i]\, W[o, i] + b[o].$$
#
# **Shapes**: input (N, in), weight (out, in), bias (out,) or absent, output and `grad_output`
# (N, out); `grad_input` (N, in), `grad_weight` (out, in), `grad_bias` (out,). **Expected error**:
# about 1e-16 in float64. You derived the three gradients in notebook 01, with `dout` for
# `grad_output`; here they are torch operations (`@` or `.mm`, `.t()`, `.sum`).
#
# Three things make it more than notebook 01's `linear_backward`:
#
# - **`bias=None`.** The bias is optional, and there are two ways to leave it out:
#   `LinearFunction.apply(x, W)` (forward's default applies) and `LinearFunction.apply(x, W, None)`.
#   `ctx.save_for_backward` accepts None, so saving `(input, weight, bias)` works in both cases;
#   backward then returns `None` for the bias.
# - **`ctx.needs_input_grad`** has one bool per input passed to `apply`: three for
#   `apply(x, W, b)` and for `apply(x, W, None)` (the entry of None is False), but only two for
#   `apply(x, W)`, where the default was used. Compute each gradient only when it is asked for and
#   return None otherwise: a frozen weight (fine-tuning) or an input that is data (the first layer)
#   should not cost a matrix product. The checks run cases where only the weight, only the input, or
#   only the bias requires grad. Reading `ctx.needs_input_grad[2]` after `apply(x, W)` raises an
#   `IndexError`, so find out whether there is a bias before you look at its entry.
# - **Exact shapes.** If backward returns a bias gradient of the wrong shape that can be reduced to
#   the bias's shape, such as `grad_output` itself, (N, out), autograd sums it over the batch for you:
#   `.backward()` and even `gradcheck` pass. It is still a wrong answer, and the check, which calls
#   your backward directly, reports it. Return exactly the shape (out,).
#
# <details><summary>Hint 1</summary>
#
# Notebook 01's sums, in this notation: the gradient of input[n, i] sums `grad_output[n, o] * W[o, i]`
# over o; that of W[o, i] sums `grad_output[n, o] * input[n, i]` over n; that of b[o] sums
# `grad_output[n, o]` over n. Check each result's shape against the list above.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# Start with `grad_input = grad_weight = grad_bias = None`, and fill in each one under an `if` on its
# entry of `ctx.needs_input_grad` (for the bias, test `bias is not None` first).
#
# </details>
#
# <details><summary>Hint 3: the formulas</summary>
#
# `grad_input = grad_output.mm(weight)`, `grad_weight = grad_output.t().mm(input)`,
# `grad_bias = grad_output.sum(0)`.
#
# </details>


# %% solution grade_id="linear_function"
class LinearFunction(torch.autograd.Function):
    """``output = input @ weight.T + bias`` (the bias optional), as ``torch.nn.functional.linear``."""

    @staticmethod
    def forward(
        ctx, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        """input (N, in), weight (out, in), bias (out,) or None -> output (N, out).

        Save input, weight and bias with ``ctx.save_for_backward`` (None can be saved).
        The formula above in torch operations; a bias, when there is one, is added to every row.
        """
        ### BEGIN SOLUTION
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        if bias is not None:
            output = output + bias
        return output
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        """grad_output (N, out) -> (grad_input (N, in), grad_weight (out, in), grad_bias (out,)).

        Each is computed only if ``ctx.needs_input_grad`` asks for it, else None; grad_bias is None
        when there is no bias. Each has exactly the shape of its input.
        """
        ### BEGIN SOLUTION
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_weight = grad_bias = None
        if ctx.needs_input_grad[0]:
            grad_input = grad_output.mm(weight)
        if ctx.needs_input_grad[1]:
            grad_weight = grad_output.t().mm(input)
        if bias is not None and ctx.needs_input_grad[2]:
            grad_bias = grad_output.sum(0)
        ### END SOLUTION
        return grad_input, grad_weight, grad_bias


# %% [markdown]
# Try it: forward and backward called directly against `F.linear`, with sizes that are all different
# (N=4, in=3, out=5) so that a transposed gradient cannot have the right shape, and the reference
# computed from copies taken before your code runs. Then the bias left out both ways, and three cases
# where only one input requires grad: the lines say whether each gradient comes back as None exactly
# when it should, and with its input's shape otherwise.

# %%
x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
W = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
b = torch.randn(5, dtype=torch.float64, requires_grad=True)
g = torch.randn(4, 5, dtype=torch.float64)
out_ref, (gx_ref, gW_ref, gb_ref) = torch_grads(F.linear, (x, W, b), g.clone())
out_nobias_ref, (gx_nb_ref, gW_nb_ref, _) = torch_grads(F.linear, (x, W, None), g.clone())
g0 = g.clone()  # taken before your code runs

out = LinearFunction.apply(x, W, b)
grad_input, grad_weight, grad_bias = LinearFunction.backward(out.grad_fn, g)
out_default = LinearFunction.apply(x, W)  # the default bias=None
grads_default = LinearFunction.backward(out_default.grad_fn, g)
out_none = LinearFunction.apply(x, W, None)
grads_none = LinearFunction.backward(out_none.grad_fn, g)
print(
    compare(
        out=(out, out_ref),
        grad_input=(grad_input, gx_ref),
        grad_weight=(grad_weight, gW_ref),
        grad_bias=(grad_bias, gb_ref),
        out_default=(out_default, out_nobias_ref),
        grad_weight_default=(grads_default[1], gW_nb_ref),
        out_none=(out_none, out_nobias_ref),
        grad_input_none=(grads_none[0], gx_nb_ref),
        g_afterwards=(g, g0),
    )
)
print("the bias gradient of apply(x, W, None):", grads_none[2], "(should be None)")
for wanted in ("input", "weight", "bias"):
    inputs = [
        t.detach().clone().requires_grad_(name == wanted)
        for t, name in zip((x, W, b), ("input", "weight", "bias"), strict=True)
    ]
    returned = LinearFunction.backward(LinearFunction.apply(*inputs).grad_fn, g)
    right = all(
        (r is None) == (not t.requires_grad) and (r is None or r.shape == t.shape)
        for r, t in zip(returned, inputs, strict=True)
    )
    shapes = [None if r is None else tuple(r.shape) for r in returned]
    print(f"only {wanted:6} requires grad: returned {shapes}: {'ok' if right else 'WRONG'}")

# %% tests grade_id="test_linear_function" points=6
"""LinearFunction matches F.linear: every gradient's exact shape and value, needs_input_grad, no bias."""
score = check_linear_function(LinearFunction)
### BEGIN HIDDEN TESTS
score = check_linear_function(LinearFunction, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 3: three ways to call it (2 points)
#
# A Function is used in three ways, each at a different level:
#
# 1. `out = LinearFunction.apply(x, W, b)` runs forward and records the node `out.grad_fn`. (Never
#    call `forward` yourself: without `apply` there is no ctx and no node.)
# 2. `out.backward(g)` (or `torch.autograd.grad`) hands `g` to the **engine**, which walks the whole
#    graph: it calls each node's backward, checks that every returned gradient fits its input,
#    sum-reduces a gradient that was broadcast (that is how an (N, out) `grad_bias` gets repaired),
#    and accumulates the results into the leaves' `.grad`.
# 3. Running **this one node** and nothing else: your backward called with `ctx = out.grad_fn`,
#    returning what backward returned, a tuple with one entry per forward input, unchecked and
#    unreduced. No other node runs, no `.grad` is filled in.
#
# Way 3 is how you debug a backward in place, and it is what the checks of this notebook do.
# Write `backward_by_hand`, which takes any linear-like Function class and returns what way 3 gives.
# The check calls it with a Function of its own whose backward returns the bias gradient unsummed,
# so the difference from way 2 shows; so does the try-it cell.
#
# <details><summary>Hint 1</summary>
#
# Way 2 is out of the question: `.backward()` and `torch.autograd.grad` go through the engine. What
# you need is on the node itself, `out.grad_fn`: it is the ctx your forward filled in, and it is
# callable. Look at what it offers with `dir(out.grad_fn)`.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# A node, like a Function class, has an `apply` method. The node's `apply` takes the upstream gradient
# and runs the node's backward with the node as ctx.
#
# </details>
#
# <details><summary>Hint 3: the answer line</summary>
#
# `out = function.apply(x, W, b)`, then `out.grad_fn.apply(grad)`.
#
# </details>


# %% solution grade_id="backward_by_hand"
def backward_by_hand(
    function: type[torch.autograd.Function],
    x: torch.Tensor,
    W: torch.Tensor,
    b: torch.Tensor | None,
    grad: torch.Tensor,
) -> tuple[torch.Tensor | None, ...]:
    """Run ``function.apply(x, W, b)``, then only its backward node on ``grad``; return that node's result.

    x (N, in), W (out, in), b (out,) or None, grad (N, out); which of them require grad is up to the
    caller. Returns the tuple ``out.grad_fn.apply(grad)`` gives, one entry per input of forward. Must
    not call ``.backward()`` (nothing may end up in any ``.grad``).
    """
    ### BEGIN SOLUTION
    out = function.apply(x, W, b)
    result = out.grad_fn.apply(grad)
    ### END SOLUTION
    return tuple(result)


# %% [markdown]
# Try it with a Function whose backward returns the bias gradient unsummed, (N, out), as the check's
# does. Way 3 must return exactly that: the rows compare your tuple with `F.linear`'s gradients for
# the input and the weight, and with `g` itself, unsummed, for the bias (a summed (out,) bias gradient
# means your function went through the engine). The last line says whether any `.grad` was filled in.


# %%
class UnsummedBias(torch.autograd.Function):
    """F.linear, with a backward that returns the bias gradient unsummed: (N, out) instead of (out,)."""

    @staticmethod
    def forward(ctx, x, W, b):
        ctx.save_for_backward(x, W)
        return F.linear(x, W, b)

    @staticmethod
    def backward(ctx, grad_output):
        x, W = ctx.saved_tensors
        with torch.enable_grad():  # backward runs with recording off when the engine calls it
            _, (grad_x, grad_W, _) = torch_grads(F.linear, (x, W, None), grad_output)
        return grad_x, grad_W, grad_output.clone()


x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
W = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
b = torch.randn(5, dtype=torch.float64, requires_grad=True)
g = torch.randn(4, 5, dtype=torch.float64)
_, refs = torch_grads(F.linear, (x, W, b), g.clone())
g0 = g.clone()  # taken before your code runs
by_hand = backward_by_hand(UnsummedBias, x, W, b, g)
print("no .grad filled in:", x.grad is None and W.grad is None and b.grad is None)
compare(
    grad_input=(by_hand[0], refs[0]),
    grad_weight=(by_hand[1], refs[1]),
    grad_bias_unsummed=(by_hand[2], g0),
)

# %% tests grade_id="test_backward_by_hand" points=2
"""backward_by_hand returns exactly what the node's backward returns, unsummed and without touching .grad."""
score = check_backward_by_hand(backward_by_hand)
### BEGIN HIDDEN TESTS
score = check_backward_by_hand(backward_by_hand, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 4: gradcheck, and why float32 fails it (2 points)
#
# `torch.autograd.gradcheck(fn, inputs)` builds two Jacobians of `fn` at `inputs` and compares them
# entry by entry: the **analytical** one, from your backward (one backward pass per output element,
# with a one-hot upstream gradient), and the **numerical** one, by centred differences with
# $\varepsilon = 10^{-6}$,
#
# $$J_{ij} \approx \frac{f_i(x + \varepsilon e_j) - f_i(x - \varepsilon e_j)}{2 \varepsilon}.$$
#
# It passes when $|J^{\text{an}} - J^{\text{num}}| \le 10^{-5} + 10^{-3} |J^{\text{num}}|$ everywhere.
# In float64 the difference is about rounding / $\varepsilon$ = 1e-16 / 1e-6 = 1e-10, far inside.
# In float32 each evaluation of $f$ is rounded to about 6e-8 relative, and dividing a difference of
# two rounded values by $2\varepsilon$ amplifies that to about 6e-8 / 2e-6 ≈ 0.03 per unit of $|f|$
# (on the small tanh layer of the try-it below we measure 0.04 to 0.15): a correct backward fails.
# That is why every check here is in float64.

# %%
inputs64 = tuple(torch.randn(s, dtype=torch.float64, requires_grad=True) for s in [(4, 3), (5, 3), (5,)])
inputs32 = tuple(t.detach().float().requires_grad_(True) for t in inputs64)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # gradcheck warns about non-double inputs: that is the point here
    print("float64:", torch.autograd.gradcheck(LinearFunction.apply, inputs64))
    print("float32:", torch.autograd.gradcheck(LinearFunction.apply, inputs32, raise_exception=False))

# %% [markdown]
# A boolean hides how far from the limit you are. Write `max_jacobian_error`, which returns the
# number gradcheck compares with its tolerance: the largest absolute difference between the
# analytical and the numerical Jacobian, over every input. Work in the dtype of the inputs (do not
# convert them): the check calls it in float64, where it should be around 1e-10, and in float32,
# where it should be a few hundredths, and in both on the same layer with one entry of its analytical
# Jacobian off by an amount drawn anew each time, where your answer should be that amount (give or
# take the dtype's own error). For the numerical Jacobian, perturb copies of the inputs
# (`t.detach().clone()`) under `torch.no_grad()`.
#
# A worked small case to test your understanding: for $f(x) = x^2$ on a vector of 2, the Jacobian is
# the (2, 2) diagonal matrix with $2x_0$ and $2x_1$ on the diagonal. A backward that returns twice the
# right gradient has the analytical Jacobian $\mathrm{diag}(4x_0, 4x_1)$, so the error is
# $2 \max |x_i|$; the try-it cell plants exactly such a bug to see that your function notices it.
#
# <details><summary>Hint 1: the analytical Jacobian</summary>
#
# Row i of the Jacobian is the gradient of output element i alone: a backward pass with an upstream
# gradient that is 1 at element i and 0 elsewhere (a one-hot tensor shaped like the output). One
# backward per output element; the graph must survive the first one.
#
# </details>
#
# <details><summary>Hint 2: the analytical Jacobian</summary>
#
# `torch.autograd.grad(out, t, one_hot, retain_graph=True)` returns a tuple with the gradient with
# respect to `t`, without touching `.grad`; flatten it into row i of a (number of outputs, number of
# elements of t) matrix.
#
# </details>
#
# <details><summary>Hint 3: the numerical Jacobian</summary>
#
# Column j is the centred difference of the whole (flattened) output for element j of one input: set
# that element of your copy to old + eps, evaluate `fn` on all the copies, set it to old - eps,
# evaluate again, put old back. `copy.view(-1)[j]` reaches element j of a tensor of any shape.
#
# </details>


# %% solution grade_id="max_jacobian_error"
def max_jacobian_error(fn, inputs: tuple[torch.Tensor, ...], eps: float = 1e-6) -> float:
    """Largest |analytical - numerical| over all Jacobian entries of ``fn(*inputs)`` w.r.t. every input.

    inputs: tensors that require grad, all of one dtype. The analytical Jacobian comes from autograd
    (your backward); the numerical one uses centred differences ``(f(x + eps e_j) - f(x - eps e_j))
    / (2 eps)``, computed in the inputs' dtype. Returns a Python float.
    """
    ### BEGIN SOLUTION
    out = fn(*inputs)
    m = out.numel()
    worst = 0.0
    for k, t in enumerate(inputs):
        analytical = torch.zeros(m, t.numel(), dtype=t.dtype)
        for i in range(m):
            one_hot = torch.zeros(m, dtype=out.dtype)
            one_hot[i] = 1.0
            (row,) = torch.autograd.grad(out, t, one_hot.view_as(out), retain_graph=True)
            analytical[i] = row.reshape(-1)
        numerical = torch.zeros_like(analytical)
        with torch.no_grad():
            values = [s.detach().clone() for s in inputs]
            flat = values[k].view(-1)
            for j in range(t.numel()):
                old = flat[j].item()
                flat[j] = old + eps
                plus = fn(*values).reshape(-1)
                flat[j] = old - eps
                minus = fn(*values).reshape(-1)
                flat[j] = old
                numerical[:, j] = (plus - minus) / (2 * eps)
        worst = max(worst, (analytical - numerical).abs().max().item())
    ### END SOLUTION
    return worst


# %% [markdown]
# Try it on your `LinearFunction` followed by a tanh (a linear function alone has a constant
# Jacobian, which hides the truncation error of finite differences), in float64 and in float32, and on
# the worked case above with a planted bug: `x ** 2` whose backward returns twice the right gradient,
# where the answer is exactly $2 \max |x_i|$. Each line ends with a verdict.


# %%
class DoubledSquare(torch.autograd.Function):
    """x ** 2 with a wrong backward: 4 x instead of 2 x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * 4 * x


def layer(x, W, b):
    return torch.tanh(LinearFunction.apply(x, W, b))


inputs64 = tuple(torch.randn(s, dtype=torch.float64, requires_grad=True) for s in [(4, 3), (5, 3), (5,)])
inputs32 = tuple(t.detach().float().requires_grad_(True) for t in inputs64)
x_bug = torch.tensor([0.5, -1.5], dtype=torch.float64, requires_grad=True)
error64 = max_jacobian_error(layer, inputs64)
error32 = max_jacobian_error(layer, inputs32)
error_bug = max_jacobian_error(DoubledSquare.apply, (x_bug,))
print(f"float64: {error64:.2e}  expected about 1e-10: {'ok' if 1e-13 < error64 < 1e-8 else 'WRONG'}")
print(f"float32: {error32:.2e}  expected a few 1e-2: {'ok' if 1e-3 < error32 < 1 else 'WRONG'}")
print(f"planted bug: {error_bug:.6f}  expected 2 * 1.5 = 3: {'ok' if abs(error_bug - 3) < 1e-6 else 'WRONG'}")

# %% tests grade_id="test_max_jacobian_error" points=2
"""max_jacobian_error is about 1e-10 in float64 and a few 1e-2 in float32, as the course's own."""
score = check_max_jacobian_error(max_jacobian_error)
### BEGIN HIDDEN TESTS
score = check_max_jacobian_error(max_jacobian_error, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 5: a Linear module on LinearFunction (4 points)
#
# A Function is stateless: its weights come in as arguments. An `nn.Module` owns them as
# `nn.Parameter`s (so that `model.parameters()`, optimizers, `.double()` and `state_dict` see them)
# and calls the Function in `forward`. This is exactly how `nn.Linear` is built on `F.linear`.
#
# Initialise like `nn.Linear`, so that the same `torch.manual_seed` gives the same numbers. Which
# numbers come out depends on which random calls are made, on which tensors, and in which order, so
# "like `nn.Linear`" means exactly its recipe. Find it in PyTorch's own source, which Python shows you:
# `import inspect; print(inspect.getsource(nn.Linear.__init__))`, and the same for
# `nn.Linear.reset_parameters`. With `bias=False`, the module must still have a `bias` attribute, None,
# registered as a parameter that is absent (so that `named_parameters()` lists only the weight).
#
# <details><summary>Hint 1</summary>
#
# `__init__` creates the parameters uninitialised, with `torch.empty`, wrapped in `nn.Parameter`, and
# then calls `reset_parameters()`, which fills them: the weight first, then the bias.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# The weight is filled by `nn.init.kaiming_uniform_` with `a=math.sqrt(5)`, which amounts to a uniform
# distribution in $\pm 1/\sqrt{\text{in}}$; the bias by `nn.init.uniform_` in $\pm$ `bound`, with
# `bound = 1 / math.sqrt(in_features)`. An absent bias is registered with
# `self.register_parameter("bias", None)`.
#
# </details>
#
# <details><summary>Hint 3: the code</summary>
#
# `self.weight = nn.Parameter(torch.empty(out_features, in_features))`, the bias likewise (or
# `register_parameter("bias", None)`), then `nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))`
# and, if there is a bias, `nn.init.uniform_(self.bias, -bound, bound)`.
#
# </details>
#
# The check (2 points) compares your parameters with `nn.Linear`'s from the same seed exactly, and
# forward and backward with `F.linear` in float64 (after `.double()`).


# %% solution grade_id="linear_module"
class Linear(nn.Module):
    """``y = x @ weight.T + bias`` through LinearFunction; parameters initialised as in nn.Linear."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        """weight (out_features, in_features) and bias (out_features,) as nn.Parameter, bias None if not bias.

        Hint: the recipe of nn.Linear's own __init__ and reset_parameters.
        """
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        ### BEGIN SOLUTION
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        if bias:
            self.bias = nn.Parameter(torch.empty(out_features))
        else:
            self.register_parameter("bias", None)
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(in_features) if in_features > 0 else 0
            nn.init.uniform_(self.bias, -bound, bound)
        ### END SOLUTION

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (N, in_features) -> (N, out_features), with ``LinearFunction.apply``."""
        ### BEGIN SOLUTION
        return LinearFunction.apply(x, self.weight, self.bias)
        ### END SOLUTION


# %% [markdown]
# Try it: the same seed, the same parameters as `nn.Linear`, with and without a bias; then forward and
# backward in float64 against `F.linear` on the same parameters.

# %%
rows = {}
for bias in (True, False):
    torch.manual_seed(1)
    mine = Linear(3, 5, bias=bias)
    torch.manual_seed(1)
    theirs = nn.Linear(3, 5, bias=bias)
    names_mine = [name for name, _ in mine.named_parameters()]
    names_theirs = [name for name, _ in theirs.named_parameters()]
    print(f"bias={bias}: parameters {names_mine}: {'ok' if names_mine == names_theirs else 'WRONG'}")
    rows[f"weight_bias_{bias}"] = (mine.weight, theirs.weight)
torch.manual_seed(1)
mine = Linear(3, 5).double()
torch.manual_seed(1)
theirs = nn.Linear(3, 5).double()
rows["bias_values"] = (mine.bias, theirs.bias)
x = torch.randn(4, 3, dtype=torch.float64)
g = torch.randn(4, 5, dtype=torch.float64)
out_ref, (_, gW_ref, gb_ref) = torch_grads(F.linear, (x, theirs.weight, theirs.bias), g)
out = mine(x)
out.backward(g)
compare(
    **rows, out=(out, out_ref), weight_grad=(mine.weight.grad, gW_ref), bias_grad=(mine.bias.grad, gb_ref)
)

# %% tests grade_id="test_linear_module" points=2
"""Linear registers its parameters, initialises them exactly like nn.Linear and matches F.linear."""
score = check_linear_module(Linear)
### BEGIN HIDDEN TESTS
score = check_linear_module(Linear, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# Now train the spiral classifier of notebook 02 with it. Write `train_spiral(linear_cls, ...)`, which
# builds the network from whatever linear class it is given, so that the same function trains it with
# your `Linear` and with `nn.Linear`. Since both start from the same parameters and compute the same
# gradients, the two runs must give **the same loss at every step**, to float64 rounding. That is a
# sharper test than "the loss goes down": a gradient off by a little would make the runs drift apart.
#
# The check (2 points) calls `train_spiral` with your `Linear` and with `nn.Linear` and compares the
# two loss lists step by step, and the `nn.Linear` run with the course's own run of the same recipe,
# so follow the docstring exactly. The hidden test passes other `steps` and `hidden`, drawn anew each
# time.


# %% solution grade_id="train_spiral"
def train_spiral(
    linear_cls, seed: int = 0, steps: int = 30, hidden: int = 32, lr: float = 1.0
) -> list[float]:
    """Full-batch SGD on the spiral with ``linear_cls(2, hidden) -> ReLU -> linear_cls(hidden, 3)``.

    Recipe: ``X, y = make_spiral(seed=seed)`` as float64 and int64 tensors; ``torch.manual_seed(seed)``;
    ``model = nn.Sequential(linear_cls(2, hidden), nn.ReLU(), linear_cls(hidden, 3)).double()``;
    ``torch.optim.SGD(model.parameters(), lr=lr)``; then ``steps`` times: the cross-entropy loss
    ``F.cross_entropy(model(X), y)``, append ``loss.item()``, zero the gradients, backward, step.
    Returns the list of losses, one per step, each recorded before its update.
    """
    ### BEGIN SOLUTION
    X, y = make_spiral(seed=seed)
    X, y = torch.tensor(X), torch.tensor(y)
    torch.manual_seed(seed)
    model = nn.Sequential(linear_cls(2, hidden), nn.ReLU(), linear_cls(hidden, 3)).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(X), y)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    ### END SOLUTION
    return losses


# %% [markdown]
# Try it: 100 steps with each class. The table compares the two loss curves step by step, with the
# check's float64 tolerance; the line above it says whether you return one loss per step. Two runs
# that make the same slip agree with each other, so the last row compares your first five losses with
# five steps of the docstring's recipe computed here another way: `torch.autograd.grad` returns fresh
# gradients at every step and the update is written out, so no optimizer state is shared with yours.

# %%
losses_mine = train_spiral(Linear, steps=100)
losses_nn = train_spiral(nn.Linear, steps=100)
print(
    f"{len(losses_mine)} and {len(losses_nn)} losses for 100 steps:",
    len(losses_mine) == len(losses_nn) == 100,
)
X_start, y_start = make_spiral(seed=0)
X_start, y_start = torch.as_tensor(X_start, dtype=torch.float64), torch.as_tensor(y_start, dtype=torch.int64)
torch.manual_seed(0)
model_start = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 3)).double()
losses_start = []
for _ in range(5):
    loss_start = F.cross_entropy(model_start(X_start), y_start)
    losses_start.append(loss_start.item())
    grads_start = torch.autograd.grad(loss_start, list(model_start.parameters()))
    with torch.no_grad():
        for p, g in zip(model_start.parameters(), grads_start, strict=True):
            p -= 1.0 * g
print(
    compare(
        losses=(np.array(losses_mine), np.array(losses_nn)),
        first_five=(np.array(losses_mine[:5]), np.array(losses_start)),
    )
)
ax = plot_losses(losses_mine)
ax.plot(losses_nn, "--", label="nn.Linear")
ax.legend(["your Linear", "nn.Linear"])
plt.show()

# %% tests grade_id="test_train_spiral" points=2
"""train_spiral gives the same loss at every step with your Linear as with nn.Linear."""
score = check_train_spiral(train_spiral, Linear)
### BEGIN HIDDEN TESTS
score = check_train_spiral(train_spiral, Linear, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## 6. What a Python Function costs (not graded)
#
# `LinearFunction` does the same three matrix products as `F.linear`, but its forward and backward
# are Python: every call goes through the interpreter, builds a Python ctx, and saves tensors the
# slow way. `F.linear` and its backward are C++ all the way down. The overhead is a fixed cost per
# call, some microseconds, so it should show for small layers and vanish for large ones, where the
# matrix products take milliseconds. How much it shows depends on what else a call costs: even
# `F.linear`'s `.backward()` starts the autograd engine, which both pay.
#
# We time forward plus backward of both on one thread (`torch.set_num_threads(1)`), and count the CPU
# time of that thread (`time.thread_time`) rather than the wall-clock time, so that time the machine
# spends on other programs is not counted. We alternate the two functions and take the median of
# several repeats (the mean is pulled up by interruptions). Your numbers will differ from anyone
# else's and vary from run to run by some percent; the shape of the curve should not.


# %%
def fwd_bwd_step(fn, size: int):
    """One forward plus backward of ``fn`` on a layer with N = in = out = size, as a callable."""
    x = torch.randn(size, size, requires_grad=True)
    W = torch.randn(size, size, requires_grad=True)
    b = torch.randn(size, requires_grad=True)
    g = torch.randn(size, size)  # a dense upstream gradient, as a real layer receives

    def step():
        fn(x, W, b).backward(g)

    step()  # warm-up: the first call allocates
    return step


def time_ratio(size: int, repeats: int = 9) -> float:
    """Median time of LinearFunction over median time of F.linear, forward plus backward.

    The two are timed in alternation, so that a slow moment of the machine hits both alike.
    """
    mine, theirs = fwd_bwd_step(LinearFunction.apply, size), fwd_bwd_step(F.linear, size)
    number = max(1, min(100, int(2e7 // size**3)))  # enough calls per repeat to time small layers
    t_mine, t_theirs = [], []
    for _ in range(repeats):
        t_mine.append(timeit.Timer(mine, timer=time.thread_time).timeit(number))
        t_theirs.append(timeit.Timer(theirs, timer=time.thread_time).timeit(number))
    return float(np.median(t_mine) / np.median(t_theirs))


threads = torch.get_num_threads()
torch.set_num_threads(1)
sizes = [8, 32, 128, 512]
ratios = [time_ratio(s, repeats=21 if s < 512 else 15) for s in sizes]
torch.set_num_threads(threads)
for s, r in zip(sizes, ratios, strict=True):
    print(f"N = in = out = {s:4d}: LinearFunction / F.linear = {r:.2f}")
fig, ax = plt.subplots(figsize=(5, 3.5))
ax.semilogx(sizes, ratios, "o-", base=2)
ax.axhline(1.0, color="grey", linestyle="--")
ax.set_xlabel("N = in = out")
ax.set_ylabel("time ratio")
ax.set_title("LinearFunction / F.linear, forward + backward")
plt.show()

# %% [markdown]
# For small layers the ratio is above 1, though not by much: the Python calls of forward and backward,
# the ctx and the saved tensors add a few microseconds, next to a few tens of microseconds that both
# spend on the engine's own work for one `.backward()` (on the machine we measured: about 37 µs for
# `F.linear` at size 8, 5 µs more for `LinearFunction`, a ratio of about 1.1).
# From a few hundred features on, the ratio is 1 within the noise of the measurement: both spend their
# time in the same matrix multiplication routines, and a fixed cost of microseconds disappears next to
# milliseconds of arithmetic. A custom Function is therefore free where it matters, on large
# operations; where there are many small ones, the remedy is to fuse them into fewer, larger
# Functions (or to write them in C++, or let `torch.compile` do it).
#
# ## Summary
#
# - A `torch.autograd.Function` is a node of the autograd graph that you write: static `forward(ctx,
#   ...)` taking any Python objects, static `backward(ctx, grad_output)` returning exactly one
#   gradient per forward input, None for non-tensors and for inputs that need none.
# - Tensors for backward go through `ctx.save_for_backward` (inputs or outputs, as `Exp` saves its
#   output); the version counter then catches in-place changes. Non-tensors go on `ctx` directly.
# - `ctx.needs_input_grad` saves work that nobody asked for; `apply(x, W)` and `apply(x, W, None)` are
#   both ways of omitting an optional input.
# - The engine repairs some wrong gradient shapes by summing, so `.backward()` and `gradcheck` can
#   pass a wrong backward; calling backward directly (`Fn.backward(out.grad_fn, g)`, or
#   `out.grad_fn.apply(g)`) shows what it really returns.
# - `gradcheck` compares analytical and numerical Jacobians; it needs float64, because in float32
#   the finite differences alone are off by ~1e-2.
# - A module owns parameters and calls the Function; initialised like `nn.Linear`, it trains step for
#   step like `nn.Linear`, paying only a per-call Python overhead that vanishes for large layers.
#
# Notebook 05 goes further: the newer `setup_context` form of a Function that works with `torch.func`
# (`vmap`, `jacrev`), Functions on batched inputs with extra dimensions, and backward passes that
# are themselves differentiable (double backward, checked with `gradgradcheck`), which is where
# saving tensors the right way stops being a matter of style.
