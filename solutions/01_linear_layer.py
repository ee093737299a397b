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
try:  # the course's own package: `make` installs it; away from the repository, its wheel does
    import autograder.checks  # noqa: F401
    import backprop_utils  # noqa: F401
except ModuleNotFoundError as error:
    raise ModuleNotFoundError(
        f"{error.msg}. Run `%pip install backprop_course-0.1.0-py3-none-any.whl` (the course's wheel,"
        " published with the notebooks), then this cell again."
    ) from None

from collections.abc import Callable

import matplotlib.pyplot as plt
import numpy as np

from autograder.checks import check_fit_cubic, check_linear_layer, check_mse_loss, check_numerical_gradient
from autograder.tolerances import FINITE_DIFFERENCE
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
# Two details matter:
#
# - x can have any shape (a weight matrix, a bias vector, a batch of images): visit every index, for
#   example with `np.ndindex(x.shape)`.
# - Change one element of x in place, evaluate f, and then put that element back exactly as it was:
#   save the old value and restore it, rather than adding h back, because `x + h - h` is not always `x`
#   in floating point. The caller's x must be unchanged when your function returns.


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
# We know the gradient of $f(x) = \sum_i x_i \sin x_i$ by hand: it is $\sin x + x \cos x$, element by
# element. The table compares your numerical gradient with it, using the tolerance `FINITE_DIFFERENCE`
# (about 1e-8 absolute). Expect a max abs error around 1e-10, and `x unchanged: True`.

# %%
rng = np.random.default_rng(0)
x = rng.standard_normal((3, 4))
x_before = x.copy()

grad_num = numerical_gradient(lambda x: np.sum(x * np.sin(x)), x)
grad_exact = np.sin(x) + x * np.cos(x)

print("x unchanged:", np.array_equal(x, x_before))
compare(tol=FINITE_DIFFERENCE, grad=(grad_num, grad_exact))

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
# layer's three inputs. By the chain rule, each one is a sum over every element of `out` that the
# input influences, weighted by `dout`:
#
# - $dx = dout\,W$, (N, M) @ (M, D) → (N, D). The input $x[n, d]$ enters $\text{out}[n, m]$ for every
#   output m, with slope $W[m, d]$, so $dx[n, d] = \sum_m dout[n, m]\,W[m, d]$.
# - $dW = dout^\top x$, (M, N) @ (N, D) → (M, D). The weight $W[m, d]$ enters $\text{out}[n, m]$ for
#   every example n, with slope $x[n, d]$, so $dW[m, d] = \sum_n dout[n, m]\,x[n, d]$: a sum over the
#   batch. A sum over n is a matrix product over the N axis, which both arrays share as their first
#   axis; transposing `dout` puts it in the middle, and the result has W's shape (M, D), as a gradient
#   of W must.
# - $db = \sum_n dout[n, :]$, `dout.sum(axis=0)`, (N, M) → (M,). The bias $b[m]$ is added to
#   $\text{out}[n, m]$ for every example n with slope 1, so its gradient is the sum of `dout[:, m]`
#   over the batch. A broadcast in the forward pass becomes a sum in the backward pass.
#
# A habit worth keeping: write the shapes next to every product. When N, D and M are all different,
# the shapes leave essentially one way to combine the arrays you have into the shape you need. That
# is also why the checks never use square shapes only: with N = D = M, a transposed `dW` has the right
# shape and silently wrong values.


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

    dx[n, d] = sum over m of dout[n, m] * W[m, d]
    dW[m, d] = sum over n of dout[n, m] * x[n, d]
    db[m]    = sum over n of dout[n, m]

    Hint: write each sum as one matrix product or one ``sum``, and check its shape against the table.
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
# Your `numerical_gradient` can test these formulas, but it needs a scalar function, and the layer
# outputs an (N, M) array. The trick: pick a random `dout` and take $L = \sum_{n,m}
# \text{out}[n, m]\,dout[n, m]$. The gradient of this L with respect to `out` is exactly `dout`, so
# its gradient with respect to `x`, `W` or `b` is what `linear_backward` returns for that `dout`.
# The layer is linear in each of its inputs, so the centred difference has no truncation error here;
# only rounding is left, and you should see max abs errors around 1e-10. An error near 1e-3 or larger
# is a bug, and the verdict column names the likely one. The first row checks `out` against the same
# sum written with `np.einsum`.

# %%
rng = np.random.default_rng(1)
N, D, M = 4, 3, 5  # all different, so that a transposed gradient cannot hide behind a valid shape
x = rng.standard_normal((N, D))
W = rng.standard_normal((M, D))
b = rng.standard_normal(M)
dout = rng.standard_normal((N, M))

out, cache = linear_forward(x, W, b)
dx, dW, db = linear_backward(dout, cache)

dx_num = numerical_gradient(lambda x_: np.sum(linear_forward(x_, W, b)[0] * dout), x)
dW_num = numerical_gradient(lambda W_: np.sum(linear_forward(x, W_, b)[0] * dout), W)
db_num = numerical_gradient(lambda b_: np.sum(linear_forward(x, W, b_)[0] * dout), b)
compare(
    tol=FINITE_DIFFERENCE,
    out=(out, np.einsum("nd,md->nm", x, W) + b),
    dx=(dx, dx_num),
    dW=(dW, dW_num),
    db=(db, db_num),
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
# $$L = \frac{1}{NM} \sum_{n,m} \left(\text{pred}[n, m] - \text{target}[n, m]\right)^2, \qquad
# d\text{pred} = \frac{\partial L}{\partial\, \text{pred}} = \frac{2\,(\text{pred} - \text{target})}{NM},$$
#
# with `pred`, `target` and `dpred` all of shape (N, M). Each element of `pred` appears in exactly one
# term of the sum: the derivative of the square gives $2(\text{pred} - \text{target})$, and the mean
# gives $1/(NM)$. Dividing by the number of elements, not only by N, keeps the size of the loss, and
# the learning rate that suits it, independent of the batch size and of the number of outputs.
#
# Return the loss as a plain number: `float(...)` of a numpy scalar does it.


# %% solution grade_id="mse_loss"
def mse_loss(pred: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean squared error over all elements, and its gradient with respect to ``pred``.

    loss  = sum((pred - target) ** 2) / (N * M)
    dpred = 2 * (pred - target) / (N * M)

    Args:
        pred: predictions, (N, M).
        target: targets, the same shape as pred.

    Returns:
        ``(loss, dpred)``: loss is a float, dpred has the shape of pred, (N, M).

    Hint: ``pred.size`` is N * M.
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
# A case small enough to do in your head: predictions 1, 2 and 4 against targets 0 give
# $(1 + 4 + 16) / 3 = 7$. Then the gradient, against your numerical gradient of the loss as a
# function of `pred`: expect a max abs error around 1e-11.

# %%
loss_small, _ = mse_loss(np.array([[1.0], [2.0], [4.0]]), np.zeros((3, 1)))

rng = np.random.default_rng(2)
pred = rng.standard_normal((4, 3))
target = rng.standard_normal((4, 3))
loss, dpred = mse_loss(pred, target)
dpred_num = numerical_gradient(lambda p: mse_loss(p, target)[0], pred)
compare(tol=FINITE_DIFFERENCE, loss_small=(loss_small, 7.0), dpred=(dpred, dpred_num))

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
# (`make_sine_regression`). One step of gradient descent is:
#
# 1. forward: `pred, cache = linear_forward(features, W, b)`;
# 2. loss: `loss, dpred = mse_loss(pred, target)`;
# 3. backward: `_, dW, db = linear_backward(dpred, cache)` (nothing comes before the layer, so `dx` is
#    not needed);
# 4. update: `W -= lr * dW` and `b -= lr * db`, a small step against the gradient, the direction in
#    which the loss decreases fastest.
#
# Record the loss of every step in a list, so that we can plot it.
#
# Watch the shapes: y has shape (N,) and pred has shape (N, 1). `pred - y` does not fail: numpy
# broadcasts it to (N, N), every prediction against every target, and the loss is silently wrong.
# That is why `fit_cubic` below reshapes y into `target` of shape (N, 1) before the loop.
#
# How do we know when we are done? For this model the best possible loss can be computed directly, by
# least squares (`np.linalg.lstsq`): about 0.0073 on this data, the noise ($0.05^2 = 0.0025$) plus the
# part of a sine that no cubic can follow. Gradient descent gets there with a suitable learning rate:
# with lr between 0.1 and 0.8 it converges within 1000 steps, in well under a second. A much smaller
# lr crawls; from lr = 1 on, each step overshoots further than the last, and the loss grows to inf and
# then NaN.
#
# How it is graded: the check calls your `fit_cubic(x, y)` with your default `lr` and `steps`, on this
# data set and on the same curve shifted up by 1, which only a model whose bias learns can fit. It
# recomputes the loss of the `W` and `b` you return (it does not use your `losses`) and compares it
# with the least-squares optimum: within 5% of it counts as converged. Partial credit goes to `W` and
# `b` of the right shapes, to a `losses` list that goes down and ends at the loss of the parameters you
# return, and to a loss well below that of always predicting the mean of y.

# %%
x_data, y_data = make_sine_regression()  # N = 256, seed 0: the data set the visible check uses


def cubic_features(x: np.ndarray) -> np.ndarray:
    """The features [x, x**2, x**3] of every point: (N,) -> (N, 3)."""
    return np.stack([x, x**2, x**3], axis=1)


print("x", x_data.shape, " y", y_data.shape, " features", cubic_features(x_data).shape)


# %% solution grade_id="fit_cubic"
def fit_cubic(
    x: np.ndarray, y: np.ndarray, lr: float = 0.5, steps: int = 1000
) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """Fit ``y ≈ cubic_features(x) @ W.T + b`` by gradient descent on the mean squared error.

    Each step: linear_forward, mse_loss, linear_backward, then W -= lr * dW and b -= lr * db.

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
# The cell below trains with your defaults, prints the final loss next to the least-squares optimum,
# and plots the loss curve (log scale) and the fitted curve. Expect the two losses to agree to about
# three digits, and the loss curve to fall steeply and then flatten. Then try a few variations (not
# graded): `lr=0.05`, `lr=1.0`, or `steps=50`, and watch what the loss curve does.

# %%
W_fit, b_fit, losses = fit_cubic(x_data, y_data)

features = cubic_features(x_data)
pred, _ = linear_forward(features, W_fit, b_fit)
final_loss, _ = mse_loss(pred, y_data.reshape(-1, 1))
# The best loss any cubic can reach on this data: least squares, solved directly.
A = np.c_[features, np.ones(len(x_data))]
coef, *_ = np.linalg.lstsq(A, y_data, rcond=None)
best_loss = np.mean((A @ coef - y_data) ** 2)
print(f"after {len(losses)} steps: loss {final_loss:.5f}, least squares {best_loss:.5f}")
with np.printoptions(precision=3, suppress=True):
    print("W =", W_fit, " b =", b_fit, "  least squares: W =", coef[:3], " b =", coef[3:])

fig, (ax_loss, ax_fit) = plt.subplots(1, 2, figsize=(10, 3.5))
plot_losses(losses, ax=ax_loss)
plot_fit(x_data, y_data, pred, ax=ax_fit)
fig.tight_layout()

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
# - `linear_forward` and `linear_backward`: one layer, its cache, and its three gradients. `dx = dout @ W`
#   passes the gradient on to whatever came before the layer; `dW = dout.T @ x` and
#   `db = dout.sum(axis=0)` sum over the batch and are what the update needs.
# - `mse_loss`: a loss, which starts every backward pass with its `dpred`, carrying the 1/(NM) of the mean.
# - `fit_cubic`: forward, loss, backward, update. Every training run repeats this loop; here you wrote
#   every gradient in it yourself.
#
# The features of the cubic were chosen by us. Notebook 02 lets the network learn its own: it stacks
# linear layers with nonlinear activations between them into a two-layer network that classifies
# points no straight line can separate. The layers keep the interface you built here, forward returns
# `(out, cache)` and backward takes the `dout` of the layer after it, so the chain rule becomes a loop
# over layers in reverse order.
