# %% [markdown]
# # 01 · One linear layer by hand (numpy)
#
# This course builds backpropagation from the ground up: first by hand in numpy, then as custom
# `torch.autograd.Function`s that PyTorch's own engine calls. This first notebook does the smallest
# complete job: one linear layer, its gradients, a loss, and a training loop that fits a curve.
#
# Why by hand first? `loss.backward()` computes every gradient for you, which is exactly why it is hard
# to see what it computes. Writing the backward pass yourself shows where each gradient comes from, why
# it has the shape it has, and which mistakes give wrong numbers without raising any error. By the end
# of this notebook you will have written:
#
# 1. `numerical_gradient`: a slow but trustworthy gradient made from nothing but function values. You
#    will use it to test every gradient you write by hand.
# 2. `linear_forward` and `linear_backward`: the layer `out = x @ W.T + b` and its three gradients.
# 3. `mse_loss`: the mean squared error and its gradient.
# 4. `fit_cubic`: a training loop built from the three, which fits a cubic polynomial to a noisy sine.
#
# ## Conventions
#
# The whole course uses PyTorch's conventions, so that what you write here matches `torch.nn.Linear`,
# and the `LinearFunction` example in PyTorch's documentation, without a single transpose:
#
# - A weight has shape `(out_features, in_features)`, and a linear layer computes `out = x @ W.T + b`.
#   Each row of `x` is one example.
# - Losses are means, not sums, as with PyTorch's default `reduction="mean"`: they average over the
#   batch (the squared error over every element of it), so the gradient a loss sends back is divided by
#   the number of terms in that mean.
# - Every array is float64. In float32, rounding noise is large enough to hide real mistakes and to
#   make correct code look wrong.
# - A gradient has the shape of the thing it is the gradient with respect to: `dW.shape == W.shape`.
#
# | name | shape | meaning |
# |---|---|---|
# | `N` | | batch size: the number of examples |
# | `D` | | input features (`in_features`) |
# | `M` | | output features (`out_features`) |
# | `x` | `(N, D)` | the input, one example per row |
# | `W` | `(M, D)` | the weight |
# | `b` | `(M,)` | the bias |
# | `out` | `(N, M)` | the output of the layer |
# | `dout` | `(N, M)` | the upstream gradient ∂L/∂out, handed to a backward function |
# | `dx`, `dW`, `db` | like `x`, `W`, `b` | the gradients of the loss L with respect to `x`, `W`, `b` |
#
# ## How this notebook is graded
#
# Each exercise is a function with a fixed name and signature. Replace `# YOUR CODE HERE` and
# `raise NotImplementedError()` with your code, and leave the rest of the cell as it is: later
# notebooks and the checks rely on these names. After each exercise, a "try it" cell compares your
# results with an independent computation, and then a test cell grades them. The test cell prints one
# line per property it checks (shapes, values, each gradient, edge cases such as a batch of one), names
# the likely mistake when it recognises one, and ends with your score for the exercise; each property
# earns its share of the points. When your work is graded, the checks run again on inputs you have not
# seen, so make each function correct rather than just the printout.
#
# Run the cells in order, from the top.

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

from collections.abc import Callable

import matplotlib.pyplot as plt
import numpy as np

from autograder.checks import check_fit_cubic, check_linear_layer, check_mse_loss, check_numerical_gradient
from autograder.checks.tolerances import FINITE_DIFFERENCE
from backprop_utils import compare, make_sine_regression, plot_fit, plot_losses

# %% [markdown]
# ## Exercise 1: numerical_gradient (3 points)
#
# Before we compute any gradient with calculus, we want a way to test it. A derivative is the limit of
# a difference quotient, so for a small step h we can estimate it from two function values. For a
# scalar function f of an array x, the partial derivative with respect to one element $x_i$ is
#
# $$\frac{\partial f}{\partial x_i} \approx \frac{f(x + h\,e_i) - f(x - h\,e_i)}{2h},$$
#
# where $e_i$ is the array with a 1 at position i and zeros everywhere else. Doing this for every
# element gives an array of the same shape as x: the numerical gradient.
#
# Why step both ways? Taylor's formula says $f(x + h) = f(x) + h f' + \frac{h^2}{2} f'' +
# \frac{h^3}{6} f''' + \dots$. The forward difference $(f(x + h) - f(x)) / h$ is therefore off by about
# $\frac{h}{2} f''$: around 1e-5 for h = 1e-5 when $f''$ is of order one, too coarse to tell a correct
# gradient from a slightly wrong one. In the centred difference the $f''$ terms cancel, which leaves
# $\frac{h^2}{6} f'''$, around 1e-11. Rounding adds about $\varepsilon |f| / h$, where
# $\varepsilon \approx 2 \cdot 10^{-16}$ is the float64 machine epsilon: again around 1e-11. So with
# h = 1e-5 in float64, expect the centred difference to match the true gradient to within about 1e-10
# to 1e-9, while real mistakes (a transpose, a wrong sign, a missing factor) are off by something of
# the size of the gradient itself. The check tests your function on strongly curved functions, where
# forward differences miss by far more than its tolerance.
#
# The price is two evaluations of f per element: far too slow to train with (a layer with a million
# weights would need two million forward passes per step), but just right for testing on small arrays.
#
# The contract, which the check tests:
#
# - x can have any shape (a weight matrix, a bias vector, a batch of images), and the result has the
#   shape of x.
# - The step is the argument `h`, not a number of your choice: the check calls your function with
#   other steps than the default.
# - When your function returns, the caller's x holds exactly, bit for bit, the values it held before.
#
# <details><summary>Hint 1</summary>
#
# You need one difference quotient per element, so one loop over every index of x, whatever its number
# of axes. `np.ndindex(x.shape)` yields every index of an array of that shape as a tuple, which you can
# use as `x[index]`.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# f takes a whole array. Rather than building two new arrays per element, change the one element of x
# in place, call f, change it again, call f again. Then the element has to go back.
#
# </details>
#
# <details><summary>Hint 3</summary>
#
# Putting the element back by arithmetic is not exact: in floating point, `x + h - h` is not always `x`
# (`0.5 + 1e-5 - 1e-5 == 0.5` is `False`), and stepping to `x + h`, then by `- 2 * h`, then by `+ h`
# changes about three random values in four in their last bit. Save the element's value before you
# change it and assign the saved value back afterwards.
#
# </details>


# %% solution grade_id="numerical_gradient"
def numerical_gradient(f: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Estimate the gradient of the scalar function ``f`` at ``x`` by centred differences.

    For every element i of x, whatever the shape of x:
        grad[i] = (f(x with x[i] + h) - f(x with x[i] - h)) / (2 h)

    Args:
        f: takes an array shaped like x and returns a number.
        x: float64 array of any shape. You may change its elements while you work, but each one must
            be restored to exactly its original value before you return.
        h: the step.

    Returns:
        grad: float64 array shaped like x.

    Hint: ``for i in np.ndindex(x.shape):`` visits every index of an array of any shape.
    """
    grad = np.zeros(x.shape, dtype=np.float64)
    ### BEGIN SOLUTION
    for index in np.ndindex(x.shape):
        saved = x[index]
        x[index] = saved + h
        f_plus = f(x)
        x[index] = saved - h
        f_minus = f(x)
        # Put back the saved value: saved - h + h can differ from saved in the last bit.
        x[index] = saved
        grad[index] = (f_plus - f_minus) / (2 * h)
    ### END SOLUTION
    return grad


# %% [markdown]
# ### Try it
#
# Two functions whose gradients we know by hand. For $f(x) = \sum_i x_i \sin x_i$ it is
# $\sin x + x \cos x$, element by element; the table compares your numerical gradient with it on a
# (3, 4) array, using the tolerance `FINITE_DIFFERENCE` (1e-8 absolute plus 1e-7 relative). Expect a max
# abs error around 1e-10.
#
# The second function tests that you use `h`. For $f(x) = \sum_i x_i^3$ the centred difference can be
# worked out exactly: $\big((x + h)^3 - (x - h)^3\big) / (2h) = (6x^2 h + 2h^3) / (2h) = 3x^2 + h^2$.
# With h = 1e-3 a correct function therefore returns $3x^2 + 10^{-6}$ (up to rounding), while one that
# ignores `h` and steps by 1e-5 returns about $3x^2 + 10^{-10}$, 1e-6 away: more than the tolerance.
# That case runs on a 1-D and on a 3-D array. The first lines compare each array after your function
# ran with a copy taken before, bit for bit.

# %%
rng = np.random.default_rng(0)
x_2d = rng.standard_normal((3, 4))
x_1d = rng.standard_normal(5)
x_3d = rng.standard_normal((2, 3, 4))
before = {"x_2d": x_2d.copy(), "x_1d": x_1d.copy(), "x_3d": x_3d.copy()}  # taken before your code runs
h = 1e-3

grad_sin = numerical_gradient(lambda x: np.sum(x * np.sin(x)), x_2d)
grad_cube_1d = numerical_gradient(lambda x: np.sum(x**3), x_1d, h=h)
grad_cube_3d = numerical_gradient(lambda x: np.sum(x**3), x_3d, h=h)

for name, x in {"x_2d": x_2d, "x_1d": x_1d, "x_3d": x_3d}.items():
    same = np.array_equal(x, before[name])  # bit for bit: a tolerance would hide a last-bit change
    print(
        f"{name} unchanged, bit for bit: {'ok' if same else 'WRONG, some elements were not restored exactly'}"
    )
compare(
    tol=FINITE_DIFFERENCE,
    grad_sin=(grad_sin, np.sin(before["x_2d"]) + before["x_2d"] * np.cos(before["x_2d"])),
    grad_cube_1d=(grad_cube_1d, 3 * before["x_1d"] ** 2 + h**2),
    grad_cube_3d=(grad_cube_3d, 3 * before["x_3d"] ** 2 + h**2),
)

# %% [markdown]
# ### Reading the table
#
# Each row of a comparison table compares one array of yours with its reference, element by element.
# `max abs err` is the largest absolute error, $|\text{yours} - \text{ref}|$. `max rel err` is the
# largest relative error: the absolute error divided by the size of the two numbers compared,
#
# $$\text{rel err} = \frac{|\text{yours} - \text{ref}|}{|\text{yours}| + |\text{ref}|},$$
#
# with a denominator below 1e-8 counted as 1e-8, so that two numbers that are both about 0 do not give
# 0 / 0. It is 0 for equal numbers and at most 1 (one of them 0, or opposite signs), whatever the scale
# of the values: an error of 1e-6 is negligible on a gradient of size 1000 and is the whole gradient
# when its size is 1e-6. The verdict `ok` comes from the tolerance of the comparison (for the table
# above, 1e-8 absolute plus 1e-7 relative), not from this column; the column says how far off you are.
#
# What size to expect when your code and the reference compute the same formula: only rounding. A
# float64 number carries about 16 significant digits, so the same products or sums taken in another
# order differ by about 1e-16 relative; a float32 number carries about 7, and rounding a value to
# float32 moves it by up to $2^{-24} \approx 6 \cdot 10^{-8}$ of itself, which this definition, whose
# denominator holds both numbers, halves: up to about 3e-8. The cell below shows both, and computes the
# column by hand once.
# Errors far above these sizes come from the method or from a mistake: the centred differences of the
# try-it above are off by about 1e-10 relative, their truncation error, not rounding.

# %%
rng = np.random.default_rng(1)
a, b, c = rng.standard_normal((3, 1000))
left, right = (a * b) * c, a * (b * c)  # the same products, in two orders, in float64
rel = np.abs(left - right) / np.maximum(np.abs(left) + np.abs(right), 1e-8)
print(f"max rel err by hand: {rel.max():.1e}")
compare(
    float64_two_orders=(left, right),
    float32_rounded=(left.astype(np.float32), left),  # the same values, rounded to float32
)

# %% tests grade_id="test_numerical_gradient" points=3
"""numerical_gradient matches autograd on 1-D, 2-D and 3-D arrays, uses h, and leaves x unchanged."""
score = check_numerical_gradient(numerical_gradient)
### BEGIN HIDDEN TESTS
score = check_numerical_gradient(numerical_gradient, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 2: linear_forward and linear_backward (4 points)
#
# The forward pass of a linear layer is one line:
#
# $$\text{out} = x\,W^\top + b, \qquad x\ (N, D),\quad W\ (M, D),\quad b\ (M,),\quad \text{out}\ (N, M).$$
#
# Element by element, $\text{out}[n, m] = \sum_d x[n, d]\,W[m, d] + b[m]$: the bias is broadcast over
# the N rows. `linear_forward` returns `out` and a `cache`, which holds whatever the backward pass will
# need (here `x` and `W`).
#
# The backward pass receives `dout` $= \partial L / \partial \text{out}$, shape (N, M), from whatever
# comes after the layer (a loss, another layer), and returns the gradients of L with respect to the
# layer's three inputs: `dx` (N, D), `dW` (M, D) and `db` (M,). Deriving them is the exercise. The
# tools:
#
# - **The chain rule, element by element.** L depends on $x[n, d]$ only through the elements of `out`.
#   So $\partial L / \partial x[n, d] = \sum_{n', m} dout[n', m]\;\partial \text{out}[n', m] /
#   \partial x[n, d]$, and the same for every element of `W` and of `b`. Most of those partial
#   derivatives are 0: first find which elements of `out` contain $x[n, d]$ at all, and with which
#   factor.
# - **A worked small case.** Take N = 1, D = 2, M = 2, no bias. Then
#   $\text{out}[0, 0] = x_0 W_{00} + x_1 W_{01}$ and $\text{out}[0, 1] = x_0 W_{10} + x_1 W_{11}$. The
#   input $x_0$ appears in both outputs, with the factors $W_{00}$ and $W_{10}$, so
#   $\partial L / \partial x_0 = dout_0\, W_{00} + dout_1\, W_{10}$. Do the same for $W_{01}$ (it appears in
#   one output only) and for $b_0$, then see what changes when N = 2: which terms are added?
# - **Shapes.** A gradient has the shape of what it is the gradient of. Once you have a gradient as a
#   sum over an index, write it as one matrix product or one `sum` over an axis. When N, D and M are
#   all different, the shapes leave essentially one way to combine the arrays you have, `dout` (N, M),
#   `x` (N, D) and `W` (M, D), into the shape you need. That is also why the checks never use square
#   shapes only: with N = D = M, a transposed `dW` has the right shape and silently wrong values.
#
# **Expected error**: the checks compare with PyTorch in float64, where rounding differences are about
# 1e-16; every real mistake (a transpose, a missing sum, a wrong axis) is off by the size of the
# gradient itself.
#
# <details><summary>Hint 1: which outputs does each input touch?</summary>
#
# $x[n, d]$ appears in $\text{out}[n, m]$ for every output m of the same example n, and in no other
# example's row. $W[m, d]$ appears in $\text{out}[n, m]$ for every example n, always in column m.
# $b[m]$ is added to $\text{out}[n, m]$ for every example n. So `dx` is a sum over m, while `dW` and
# `db` are sums over the batch.
#
# </details>
#
# <details><summary>Hint 2: the factors</summary>
#
# $\partial \text{out}[n, m] / \partial x[n, d] = W[m, d]$, $\partial \text{out}[n, m] / \partial W[m, d]
# = x[n, d]$ and $\partial \text{out}[n, m] / \partial b[m] = 1$. Write out the three sums with these
# factors and `dout`.
#
# </details>
#
# <details><summary>Hint 3: from sums to array operations</summary>
#
# A sum over a shared index is a matrix product when that index is the last axis of the left array and
# the first axis of the right one; a transpose moves it there. A sum over the batch of one array is a
# `sum` over axis 0. A broadcast in the forward pass (the bias is copied to every row) becomes a sum in
# the backward pass.
#
# </details>
#
# <details><summary>Hint 4: near the answer</summary>
#
# $dx[n, d] = \sum_m dout[n, m]\,W[m, d]$, $dW[m, d] = \sum_n dout[n, m]\,x[n, d]$ and
# $db[m] = \sum_n dout[n, m]$: one product of `dout` with `W`, one product of `dout` transposed with
# `x`, and one sum over axis 0.
#
# </details>


# %% solution grade_id="linear_layer"
def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, tuple]:
    """Compute ``out = x @ W.T + b``; x is (N, D), W is (M, D), b is (M,); out is (N, M).

    Returns ``(out, cache)``, where cache holds what linear_backward needs.
    """
    ### BEGIN SOLUTION
    out = x @ W.T + b
    cache = (x, W)
    ### END SOLUTION
    return out, cache


def linear_backward(dout: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Gradients of the loss with respect to x (N, D), W (M, D) and b (M,), given dout (N, M).

    The forward pass was ``out[n, m] = sum over d of x[n, d] * W[m, d] + b[m]``; dout is dL/dout.
    Returns ``(dx, dW, db)``, each shaped like what it is the gradient of. Do not modify dout or
    the arrays in cache.

    Hint: write each gradient as a sum over an index first, then as one matrix product or one ``sum``.
    """
    ### BEGIN SOLUTION
    x, W = cache
    dx = dout @ W
    dW = dout.T @ x
    db = dout.sum(axis=0)
    ### END SOLUTION
    return dx, dW, db


# %% [markdown]
# ### Try it
#
# Your `numerical_gradient` can test your gradients, but it needs a scalar function, and the layer
# outputs an (N, M) array. The trick: pick a random `dout` and take $L = \sum_{n,m}
# \text{out}[n, m]\,dout[n, m]$. The gradient of this L with respect to `out` is exactly `dout`, so
# its gradient with respect to `x`, `W` or `b` is what `linear_backward` must return for that `dout`.
# The reference uses only the forward pass, written out with `np.einsum` (not your `linear_forward`),
# on copies of the inputs taken before your code runs, so a backward pass that changes its inputs
# cannot move the reference. The layer is linear in each of its inputs, so the centred difference has
# no truncation error here; only rounding is left, and you should see max abs errors around 1e-10 (if
# your `numerical_gradient` passed its test). An error near 1e-3 or larger is a bug, and the verdict
# column names the likely one. The last rows say whether your functions left their inputs unchanged.

# %%
rng = np.random.default_rng(1)
N, D, M = 4, 3, 5  # all different, so that a transposed gradient cannot hide behind a valid shape
x = rng.standard_normal((N, D))
W = rng.standard_normal((M, D))
b = rng.standard_normal(M)
dout = rng.standard_normal((N, M))
x0, W0, b0, dout0 = x.copy(), W.copy(), b.copy(), dout.copy()  # taken before your code runs


def layer_loss(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> float:
    """L = sum of out * dout, with out computed from the forward's formula (not from your code)."""
    return float(np.sum((np.einsum("nd,md->nm", x, W) + b) * dout0))


out, cache = linear_forward(x, W, b)
dx, dW, db = linear_backward(dout, cache)

compare(
    tol=FINITE_DIFFERENCE,
    out=(out, np.einsum("nd,md->nm", x0, W0) + b0),
    dx=(dx, numerical_gradient(lambda x_: layer_loss(x_, W0, b0), x0.copy())),
    dW=(dW, numerical_gradient(lambda W_: layer_loss(x0, W_, b0), W0.copy())),
    db=(db, numerical_gradient(lambda b_: layer_loss(x0, W0, b_), b0.copy())),
    x_afterwards=(x, x0),  # your functions must leave their inputs as they were
    W_afterwards=(W, W0),
    dout_afterwards=(dout, dout0),
)

# %% tests grade_id="test_linear_layer" points=4
"""linear_forward and linear_backward match PyTorch in shape, values and every gradient."""
score = check_linear_layer(linear_forward, linear_backward)
### BEGIN HIDDEN TESTS
score = check_linear_layer(linear_forward, linear_backward, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 3: mse_loss (3 points)
#
# A loss turns the predictions into one number to minimise, and it starts the backward pass: its
# gradient is the first `dout`. For regression we use the mean squared error over all N·M elements,
# as `torch.nn.functional.mse_loss` does by default:
#
# $$L = \frac{1}{NM} \sum_{n,m} \left(\text{pred}[n, m] - \text{target}[n, m]\right)^2,$$
#
# with `pred` and `target` of shape (N, M). Return the loss as a plain number (`float(...)` of a numpy
# scalar does it) and its gradient with respect to `pred`, `dpred` $= \partial L / \partial\,
# \text{pred}$, which has the shape of `pred`. Dividing by the number of elements, not only by N, keeps
# the size of the loss, and the learning rate that suits it, independent of the batch size and of the
# number of outputs.
#
# Deriving `dpred` takes one question: in how many terms of the sum does one element
# $\text{pred}[n, m]$ appear? A small case to check your answer by hand: N = 1, M = 2, pred = [[3, 1]],
# target = [[1, 1]]. Then L = ((3 - 1)² + 0²) / 2 = 2. Nudge pred[0, 0] from 3 to 3.001: L becomes
# (2.001² + 0) / 2 = 2.0020005, so the derivative there is about 2.0. Your formula must give 2 for that
# element and 0 for the other one.
#
# <details><summary>Hint 1</summary>
#
# Each element of `pred` appears in exactly one term of the sum, so the derivative of L with respect to
# it is the derivative of that one term, times the constant in front of the sum.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# The derivative of $(p - t)^2$ with respect to p is $2(p - t)$. The constant in front of the sum is
# $1/(NM)$, and `pred.size` is N·M.
#
# </details>
#
# <details><summary>Hint 3: near the answer</summary>
#
# Put Hints 1 and 2 together for one element, then let numpy do every element at once: the result has
# the shape of `pred`. On the small case above it must be [[2, 0]]: the 2 of the square, times the
# difference 2, divided by N·M = 2.
#
# </details>


# %% solution grade_id="mse_loss"
def mse_loss(pred: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean squared error over all elements, and its gradient with respect to ``pred``.

    loss  = sum((pred - target) ** 2) / (N * M)
    dpred = the gradient of loss with respect to pred, shaped like pred

    Args:
        pred: predictions, (N, M).
        target: targets, the same shape as pred.

    Returns:
        ``(loss, dpred)``: loss is a float, dpred has the shape of pred, (N, M).

    Hint: in how many terms of the sum does one element of pred appear?
    """
    ### BEGIN SOLUTION
    diff = pred - target
    loss = float(np.mean(diff**2))
    dpred = 2.0 * diff / diff.size
    ### END SOLUTION
    return loss, dpred


# %% [markdown]
# ### Try it
#
# Two cases small enough to do in your head, then the gradient against your numerical gradient.
# The first case has one column: predictions 1, 2 and 4 against targets 0 give $(1 + 4 + 16) / 3 = 7$.
# The second has two rows and three columns, so that dividing by N, or by M, instead of by N·M shows:
# the differences are [[1, 2, 0], [0, 1, 2]], the squares add up to 10, and the loss is 10 / 6.
# Then a random (4, 3) case: its reference loss is the formula above, written out on copies of the
# inputs, and its reference gradient is your `numerical_gradient` of that formula (not of your
# `mse_loss`, whose loss might be wrong in the same way as its gradient). Expect a max abs error around
# 1e-11 for `dpred`.

# %%
loss_one_column, _ = mse_loss(np.array([[1.0], [2.0], [4.0]]), np.zeros((3, 1)))
loss_two_rows, _ = mse_loss(np.array([[1.0, 2.0, 0.0], [0.0, 1.0, 2.0]]), np.zeros((2, 3)))

rng = np.random.default_rng(2)
N, M = 4, 3
pred = rng.standard_normal((N, M))
target = rng.standard_normal((N, M))
pred0, target0 = pred.copy(), target.copy()  # taken before your code runs


def mse_reference(p: np.ndarray) -> float:
    """The loss from its definition: the sum of squares over all N * M elements, divided by N * M."""
    return float(np.sum((p - target0) ** 2) / (N * M))


loss, dpred = mse_loss(pred, target)
compare(
    tol=FINITE_DIFFERENCE,
    loss_one_column=(loss_one_column, 7.0),
    loss_two_rows=(loss_two_rows, 10 / 6),
    loss=(loss, mse_reference(pred0)),
    dpred=(dpred, numerical_gradient(mse_reference, pred0.copy())),
    pred_afterwards=(pred, pred0),  # your function must leave its inputs as they were
    target_afterwards=(target, target0),
)

# %% tests grade_id="test_mse_loss" points=3
"""mse_loss matches PyTorch's mse_loss and its gradient for (N, M) and (N, 1) predictions and N = 1."""
score = check_mse_loss(mse_loss)
### BEGIN HIDDEN TESTS
score = check_mse_loss(mse_loss, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 4: fit a cubic by gradient descent (3 points)
#
# Now the pieces make a training loop. The task is the warm-up of PyTorch's tutorial "Learning PyTorch
# with Examples": fit a third-degree polynomial to a sine curve with numpy, computing the gradients by
# hand. Here the polynomial is our linear layer applied to the features $[x, x^2, x^3]$ of each point:
#
# $$\hat y = W_{00}\,x + W_{01}\,x^2 + W_{02}\,x^3 + b_0, \qquad
# \text{pred} = \text{features}\,W^\top + b,$$
#
# with features (N, 3), W (1, 3), b (1,) and pred (N, 1). The model is linear in its parameters,
# though not in x: the curve comes from the fixed features, and gradient descent only has to find four
# numbers.
#
# The data: N = 256 points x evenly spaced in [-1, 1], and y = sin(πx) plus a little noise
# (`make_sine_regression`). One step of gradient descent moves every parameter a small step against
# its gradient, the direction in which the loss decreases fastest:
#
# $$W \leftarrow W - \text{lr}\;\frac{\partial L}{\partial W}, \qquad
# b \leftarrow b - \text{lr}\;\frac{\partial L}{\partial b},$$
#
# where the gradients are those of the loss at the current W and b. Your three functions from the
# exercises above compute everything this needs; the exercise is to connect them. Record the loss of
# every step in a list, so that we can plot it.
#
# <details><summary>Hint 1</summary>
#
# Follow the computation forward (features → pred → loss), then the gradients backward: the loss hands
# its gradient to the layer, as the layer's `dout`.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# Nothing comes before the layer, so its `dx` is not needed. Update W and b in place (`-=`), so that the
# next step's forward pass uses the new values.
#
# </details>
#
# <details><summary>Hint 3: one step, near the answer</summary>
#
# `linear_forward(features, W, b)` gives the predictions and the cache; `mse_loss(pred, target)` gives
# the loss and `dpred`; `linear_backward(dpred, cache)` gives `(dx, dW, db)`; then subtract `lr` times
# each gradient from its parameter and append the loss to `losses`.
#
# </details>
#
# Watch the shapes: y has shape (N,) and pred has shape (N, 1). `pred - y` does not fail: numpy
# broadcasts it to (N, N), every prediction against every target, and the loss is silently wrong.
# That is why `fit_cubic` below reshapes y into `target` of shape (N, 1) before the loop.
#
# How do we know when we are done? For this model the best possible loss can be computed directly, by
# least squares (`np.linalg.lstsq`): about 0.0073 on this data, the noise ($0.05^2 = 0.0025$) plus the
# part of a sine that no cubic can follow. Gradient descent gets there with a suitable learning rate:
# with lr from 0.1 to 0.85 it ends within 5% of that optimum after 1000 steps, in well under a second.
# A much smaller lr crawls (lr = 0.05 is still about twice the optimum after 1000 steps). Above about
# 0.89 each step overshoots further than the last: after 1000 steps, lr = 0.9 ends with a loss around
# 1e13 and lr = 1 around 1e186, and lr = 1.5 overflows to inf and then NaN. (0.89 is 2 divided by the
# largest eigenvalue of the loss's curvature, $\frac{2}{N} A^\top A$ with A the features plus a column
# of ones; the try-it cell below computes it.)
#
# How it is graded: the check calls your `fit_cubic(x, y)` with your default `lr` and `steps`, on this
# data set and on the same curve shifted up by 1, which only a model whose bias learns can fit (the
# hidden test mirrors and rescales the curve and shifts it further, by amounts drawn anew each time). It
# recomputes the loss of the `W` and `b` you return (it does not use your `losses`) and compares it
# with the least-squares optimum: within 5% of it counts as converged. Partial credit goes to `W` and
# `b` of the right shapes, to a `losses` list that goes down and ends at the loss of the parameters you
# return, and to a loss well below that of always predicting the mean of y.


# %% solution grade_id="fit_cubic"
def cubic_features(x: np.ndarray) -> np.ndarray:
    """The features [x, x**2, x**3] of every point: (N,) -> (N, 3)."""
    return np.stack([x, x**2, x**3], axis=1)


def fit_cubic(
    x: np.ndarray, y: np.ndarray, lr: float = 0.5, steps: int = 1000
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Fit ``y ≈ cubic_features(x) @ W.T + b`` by gradient descent on the mean squared error.

    Each step computes the loss of the current W and b with your functions above, then moves W and
    b against their gradients: ``W <- W - lr * dL/dW``, ``b <- b - lr * dL/db``.

    Args:
        x, y: the data, both (N,).
        lr: the learning rate.
        steps: the number of gradient descent steps.

    Returns:
        ``(W, b, losses)``: W (1, 3) and b (1,) after training, and losses, a list of ``steps``
        floats: the loss at each step, before that step's update.
    """
    features = cubic_features(x)  # (N, 3)
    target = y.reshape(-1, 1)  # (N, 1), like pred: pred - y would broadcast to (N, N)
    W = 0.1 * np.random.default_rng(0).standard_normal((1, 3))
    b = np.zeros(1)
    losses = []
    ### BEGIN SOLUTION
    for _ in range(steps):
        pred, cache = linear_forward(features, W, b)
        loss, dpred = mse_loss(pred, target)
        _, dW, db = linear_backward(dpred, cache)
        W -= lr * dW
        b -= lr * db
        losses.append(loss)
    ### END SOLUTION
    return W, b, losses


# %% [markdown]
# ### Try it
#
# The cell below trains with your defaults on the data above and on the same curve shifted up by 1,
# and compares the final loss of the `W` and `b` you return with the least-squares optimum, computed
# here directly (within 5% counts as converged, as in the check). It also checks that `losses` has one
# entry per step and that its last entry, the loss before the last update, is close to the
# final loss. Then it plots the loss curve (log scale) and the fitted curve: the curve should fall
# steeply and then flatten. The last lines train with a few other learning rates (your function, your
# `steps`) and print where each ends, next to the threshold 2 / (largest curvature) from the text.

# %%
x_data, y_data = make_sine_regression()
features = cubic_features(x_data)
A = np.c_[features, np.ones(len(x_data))]  # features plus a column of ones: the bias


def final_and_best_loss(W: np.ndarray, b: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """The loss of (W, b) on (features, y), computed here, and the least-squares optimum."""
    final = float(np.mean((features @ W.T + b - y.reshape(-1, 1)) ** 2))
    coef, *_ = np.linalg.lstsq(A, y, rcond=None)
    return final, float(np.mean((A @ coef - y) ** 2))


for label, y in [("sine", y_data), ("sine + 1", y_data + 1.0)]:
    W_fit, b_fit, losses = fit_cubic(x_data, y.copy())
    final_loss, best_loss = final_and_best_loss(W_fit, b_fit, y)
    verdict = "converged" if final_loss <= 1.05 * best_loss else "NOT converged"
    print(
        f"{label:9}: {len(losses)} losses, last {losses[-1]:.5f}; final loss {final_loss:.5f}, "
        f"least squares {best_loss:.5f}: {verdict}"
    )

W_fit, b_fit, losses = fit_cubic(x_data, y_data.copy())
fig, (ax_loss, ax_fit) = plt.subplots(1, 2, figsize=(10, 3.5))
plot_losses(losses, ax=ax_loss)
plot_fit(x_data, y_data, features @ W_fit.T + b_fit, ax=ax_fit)
fig.tight_layout()
plt.show()

curvature = np.linalg.eigvalsh(2 / len(x_data) * A.T @ A)
print(f"2 / largest curvature = {2 / curvature.max():.3f}")
with np.errstate(over="ignore", invalid="ignore"):
    for lr in [0.05, 0.1, 0.85, 0.9, 1.0, 1.5]:
        final_loss, _ = final_and_best_loss(*fit_cubic(x_data, y_data.copy(), lr=lr)[:2], y_data)
        print(f"lr = {lr:4}: final loss {final_loss:.3g}")

# %% tests grade_id="test_fit_cubic" points=3
"""fit_cubic reaches the least-squares loss, on the sine and on the sine shifted up by 1."""
score = check_fit_cubic(fit_cubic)
### BEGIN HIDDEN TESTS
score = check_fit_cubic(fit_cubic, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## What we have
#
# - `numerical_gradient`: gradients from function values alone. It is slow, but it does not share any
#   calculus you might get wrong, so from now on every backward pass you write can be tested against it.
# - `linear_forward` and `linear_backward`: one layer, its cache, and its three gradients. `dx` passes
#   the gradient on to whatever came before the layer; `dW` and `db` sum over the batch and are what
#   the update needs.
# - `mse_loss`: a loss, which starts every backward pass with its `dpred`, carrying the 1/(NM) of the mean.
# - `fit_cubic`: forward, loss, backward, update. Every training run repeats this loop; here you wrote
#   every gradient in it yourself.
#
# The features of the cubic were chosen by us. Notebook 02 lets the network learn its own: it stacks
# linear layers with nonlinear activations between them into a two-layer network that classifies
# points no straight line can separate. The layers keep the interface you built here, forward returns
# `(out, cache)` and backward takes the `dout` of the layer after it, so the chain rule becomes a loop
# over layers in reverse order.
