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
try:  # the course's own package: `make` installs it; away from the repository, its wheel does
    import autograder.checks  # noqa: F401
    import backprop_utils  # noqa: F401
except ModuleNotFoundError as error:
    raise ModuleNotFoundError(
        f"{error.msg}. Run `%pip install backprop_course-0.1.0-py3-none-any.whl` (the course's wheel,"
        " published with the notebooks), then this cell again."
    ) from None

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
# notebook 02, now written in the shape autograd expects.
#
# | Function | forward | backward returns | saves |
# |---|---|---|---|
# | `MulConstant.apply(x, c)` | $c\,x$, `c` a Python number | `grad_output * c`, `None` | `c`, on ctx |
# | `Exp.apply(x)` | $e^x$ | `grad_output * result` | its **output** `result` |
# | `MyReLU.apply(x)` | $\max(0, x)$ | `grad_output` where $x > 0$, else 0 | `x` |
#
# `Exp` saves its output rather than its input: the derivative of $e^x$ is $e^x$ itself, already
# computed, so backward does one multiplication and no second `exp`. Saving an output works exactly
# like saving an input: `ctx.save_for_backward(result)`. `MyReLU` follows `torch.relu`'s convention,
# gradient 0 at exactly $x = 0$.
#
# **Shapes.** `x`, the output, `grad_output` and `grad_input` all have the same shape. **Expected
# error**: about 1e-16 against PyTorch in float64. Never modify `grad_output` in place
# (`grad_output[x <= 0] = 0`): it belongs to the caller, and for `out.sum().backward()` it is an
# expanded tensor whose elements all share one memory location, so the write fails.
#
# The checks also look inside `ctx`: a tensor kept as a ctx attribute loses points, as does `Exp`
# saving anything other than its output.
#
# ### 1a. MulConstant (1 point)


# %% solution grade_id="mul_constant"
class MulConstant(torch.autograd.Function):
    """``out = x * constant`` for a tensor x and a Python number constant."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, constant: float) -> torch.Tensor:
        """Store the constant on ctx (it is not a tensor) and return ``x * constant``.

        Hint: ``ctx.constant = constant``.
        """
        ### BEGIN SOLUTION
        ctx.constant = constant
        return x * constant
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> tuple[torch.Tensor, None]:
        """Return ``(grad_output * constant, None)``: the constant, a Python number, has no gradient."""
        ### BEGIN SOLUTION
        return grad_output * ctx.constant, None
        ### END SOLUTION


# %% [markdown]
# Try it: your forward and your backward called directly, against PyTorch's `x * 2.5`. `out.grad_fn`
# is the ctx your forward filled in, so `MulConstant.backward(out.grad_fn, g)` runs your backward
# alone, exactly as written. Every row should say `ok`.

# %%
x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
g = torch.randn(3, 4, dtype=torch.float64)
out = MulConstant.apply(x, 2.5)
grad_x, grad_constant = MulConstant.backward(out.grad_fn, g)
out_ref, (grad_x_ref, _) = torch_grads(lambda t, c: t * c, (x, 2.5), g)
print("grad for the constant:", grad_constant)
compare(out=(out, out_ref), grad_x=(grad_x, grad_x_ref))

# %% tests grade_id="test_mul_constant" points=1
"""MulConstant matches x * c, returns None for the constant, and keeps tensors off ctx."""
score = check_mul_constant(MulConstant)
### BEGIN HIDDEN TESTS
score = check_mul_constant(MulConstant, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ### 1b. Exp (1 point)


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
        """Return ``grad_output * result``, with result read from ``ctx.saved_tensors``."""
        ### BEGIN SOLUTION
        (result,) = ctx.saved_tensors
        return grad_output * result
        ### END SOLUTION


# %% [markdown]
# Try it, then see the version counter at work: doubling the output in place after forward makes
# backward refuse to run, because the tensor it saved has changed. (Had `Exp` kept its output as
# `ctx.result`, backward would have run and returned a gradient twice too large, with no error.)

# %%
x = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
g = torch.randn(3, 4, dtype=torch.float64)
out = Exp.apply(x)
out_ref, (grad_ref,) = torch_grads(torch.exp, (x,), g)
print(compare(out=(out, out_ref), grad_x=(Exp.backward(out.grad_fn, g), grad_ref)))
print(
    "saved tensors:",
    len(out.grad_fn.saved_tensors),
    "- the output itself:",
    out.grad_fn.saved_tensors[0].equal(out),
)
with torch.no_grad():
    out.mul_(2)
try:
    out.backward(g)
except RuntimeError as error:
    print("backward refused:", str(error)[:95], "...")

# %% tests grade_id="test_exp" points=1
"""Exp matches torch.exp in value and gradient and saves its output with save_for_backward."""
score = check_exp(Exp)
### BEGIN HIDDEN TESTS
score = check_exp(Exp, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ### 1c. MyReLU (1 point)


# %% solution grade_id="my_relu"
class MyReLU(torch.autograd.Function):
    """``out = max(0, x)``, elementwise, with gradient 0 at exactly x == 0 (as torch.relu)."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        """Save x and return ``x.clamp(min=0)``."""
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        return x.clamp(min=0)
        ### END SOLUTION

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor) -> torch.Tensor:
        """Return grad_output where x > 0 and 0 elsewhere, as a new tensor.

        Hint: ``grad_output * (x > 0)`` leaves grad_output unchanged.
        """
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return grad_output * (x > 0)
        ### END SOLUTION


# %% [markdown]
# Try it on an input with exact zeros, through `.backward()` this time, against `torch.relu`.

# %%
x = torch.randn(3, 4, dtype=torch.float64)
x[0, :2] = 0.0
x.requires_grad_(True)
g = torch.randn(3, 4, dtype=torch.float64)
out = MyReLU.apply(x)
out.backward(g)
out_ref, (grad_ref,) = torch_grads(torch.relu, (x,), g)
compare(out=(out, out_ref), grad_x=(x.grad, grad_ref))

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
# \frac{\partial L}{\partial\, \text{input}} = G\, W, \quad
# \frac{\partial L}{\partial W} = G^\top\, \text{input}, \quad
# \frac{\partial L}{\partial b} = \textstyle\sum_n G_{n,:},$$
#
# with $G$ = `grad_output`. **Shapes**: input (N, in), weight (out, in), bias (out,) or absent,
# output and `grad_output` (N, out); `grad_input` (N, in), `grad_weight` (out, in), `grad_bias`
# (out,). **Expected error**: about 1e-16 in float64.
#
# Three things make it more than notebook 01's `linear_backward`:
#
# - **`bias=None`.** The bias is optional, and there are two ways to leave it out:
#   `LinearFunction.apply(x, W)` (forward's default applies) and `LinearFunction.apply(x, W, None)`.
#   `ctx.save_for_backward` accepts None, so saving `(input, weight, bias)` works in both cases;
#   backward then returns `None` for the bias.
# - **`ctx.needs_input_grad`** is a tuple of three bools, one per input. Compute each gradient only
#   when its entry is True and return None otherwise: a frozen weight (fine-tuning) or an input that
#   is data (the first layer) should not cost a matrix product. The checks run cases where only the
#   weight, only the input, or only the bias requires grad.
# - **Exact shapes.** If backward returns `grad_output` itself for the bias, shape (N, out), autograd
#   sums it over the batch for you, because it can be reduced to the bias's shape: `.backward()` and
#   even `gradcheck` pass. It is still a wrong answer, and the check, which calls your backward
#   directly, reports it. Sum it yourself: `grad_output.sum(0)`.


# %% solution grade_id="linear_function"
class LinearFunction(torch.autograd.Function):
    """``output = input @ weight.T + bias`` (the bias optional), as ``torch.nn.functional.linear``."""

    @staticmethod
    def forward(
        ctx, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        """input (N, in), weight (out, in), bias (out,) or None -> output (N, out).

        Save input, weight and bias with ``ctx.save_for_backward`` (None can be saved).
        Hint: ``input.mm(weight.t())``, then add the bias (broadcast over the batch) when there is one.
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
        when there is no bias.
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
# (N=4, in=3, out=5) so that a transposed gradient cannot have the right shape; then with only the
# weight requiring grad, where `grad_input` and `grad_bias` should come back as None.

# %%
x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
W = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
b = torch.randn(5, dtype=torch.float64, requires_grad=True)
g = torch.randn(4, 5, dtype=torch.float64)
out = LinearFunction.apply(x, W, b)
grad_input, grad_weight, grad_bias = LinearFunction.backward(out.grad_fn, g)
out_ref, (gx_ref, gW_ref, gb_ref) = torch_grads(F.linear, (x, W, b), g)
print(
    compare(
        out=(out, out_ref),
        grad_input=(grad_input, gx_ref),
        grad_weight=(grad_weight, gW_ref),
        grad_bias=(grad_bias, gb_ref),
    )
)
frozen = LinearFunction.apply(x.detach(), W, b.detach())
print("needs_input_grad:", frozen.grad_fn.needs_input_grad)
print(
    "returned:", [None if t is None else tuple(t.shape) for t in LinearFunction.backward(frozen.grad_fn, g)]
)

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
#    sum-reduces a gradient that was broadcast (that is how the (N, out) `grad_bias` gets repaired),
#    and accumulates the results into the leaves' `.grad`.
# 3. `out.grad_fn.apply(g)` runs **this one node** and nothing else: it calls your backward with
#    `ctx = out.grad_fn` and returns what backward returned, a tuple with one entry per forward input,
#    unchecked and unreduced. No other node runs, no `.grad` is filled in.
#
# Way 3 is how you debug a backward in place, and it is what the checks of this notebook do.
# Write `backward_by_hand`, which takes any linear-like Function class and returns what way 3 gives.
# The check calls it with a Function of its own whose backward returns the bias gradient unsummed,
# so the difference from way 2 shows.


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
# Try it with your `LinearFunction`: the tuple matches what `.backward()` leaves in `.grad`, and
# `.grad` itself stays empty.

# %%
x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
W = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
b = torch.randn(5, dtype=torch.float64, requires_grad=True)
g = torch.randn(4, 5, dtype=torch.float64)
by_hand = backward_by_hand(LinearFunction, x, W, b, g)
print("x.grad after backward_by_hand:", x.grad)
_, refs = torch_grads(F.linear, (x, W, b), g)
compare(grad_input=(by_hand[0], refs[0]), grad_weight=(by_hand[1], refs[1]), grad_bias=(by_hand[2], refs[2]))

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
# two rounded values by $2\varepsilon$ amplifies that to about 6e-8 / 2e-6 ≈ 0.03: a correct
# backward fails. That is why every check here is in float64.

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
# where it should be around 1e-2. For the numerical Jacobian, perturb copies of the inputs
# (`t.detach().clone()`) under `torch.no_grad()`.


# %% solution grade_id="max_jacobian_error"
def max_jacobian_error(fn, inputs: tuple[torch.Tensor, ...], eps: float = 1e-6) -> float:
    """Largest |analytical - numerical| over all Jacobian entries of ``fn(*inputs)`` w.r.t. every input.

    inputs: tensors that require grad, all of one dtype. The analytical Jacobian of output element i
    is ``torch.autograd.grad(out, t, one_hot_i, retain_graph=True)``; the numerical one uses centred
    differences ``(f(x + eps e_j) - f(x - eps e_j)) / (2 eps)``, computed in the inputs' dtype.
    Returns a Python float.
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
# Jacobian, which hides the truncation error of finite differences).


# %%
def layer(x, W, b):
    return torch.tanh(LinearFunction.apply(x, W, b))


print(f"float64: {max_jacobian_error(layer, inputs64):.2e}")
print(f"float32: {max_jacobian_error(layer, inputs32):.2e}   (gradcheck allows about 1e-5)")

# %% tests grade_id="test_max_jacobian_error" points=2
"""max_jacobian_error is about 1e-10 in float64 and about 1e-2 in float32, as the course's own."""
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
# Initialise like `nn.Linear`, so that the same `torch.manual_seed` gives the same numbers: make
# `weight` (out, in) and `bias` (out,) with `torch.empty`, then, **in this order**,
# `nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))` (uniform in $\pm 1/\sqrt{\text{in}}$) and
# `nn.init.uniform_(self.bias, -bound, bound)` with `bound = 1 / math.sqrt(in_features)`. With
# `bias=False`, register the bias as None: `self.register_parameter("bias", None)`.
#
# The check (2 points) compares your parameters with `nn.Linear`'s from the same seed exactly, and
# forward and backward with `F.linear` in float64 (after `.double()`).


# %% solution grade_id="linear_module"
class Linear(nn.Module):
    """``y = x @ weight.T + bias`` through LinearFunction; parameters initialised as in nn.Linear."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        """weight (out_features, in_features) and bias (out_features,) as nn.Parameter, bias None if not bias.

        Hint: ``nn.Parameter(torch.empty(out_features, in_features))``, then the two init calls, in order.
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
# Try it: the same seed, the same parameters as `nn.Linear`.

# %%
torch.manual_seed(1)
mine = Linear(3, 5)
torch.manual_seed(1)
theirs = nn.Linear(3, 5)
print([name for name, _ in mine.named_parameters()])
compare(weight=(mine.weight, theirs.weight), bias=(mine.bias, theirs.bias))

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
# so follow the docstring exactly.


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


# %%
losses_mine = train_spiral(Linear, steps=100)
losses_nn = train_spiral(nn.Linear, steps=100)
print(f"largest difference over 100 steps: {np.max(np.abs(np.subtract(losses_mine, losses_nn))):.1e}")
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
# call, some microseconds, so it should dominate for small layers and vanish for large ones, where
# the matrix products take milliseconds.
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
# For small layers the ratio is above 1: the arithmetic takes a few microseconds, and the Python
# calls of forward and backward, the ctx and the saved tensors add a fixed cost of the same order.
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
