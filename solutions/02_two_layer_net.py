# %% [markdown]
# # 02 · A two-layer network by hand (numpy)
#
# In notebook 01 you wrote one linear layer, its backward pass, and fitted it with gradient descent.
# One linear layer can only draw straight lines, and stacking a second one does not help: two affine
# maps in a row are a single affine map, $W_2 (W_1 x + b_1) + b_2 = (W_2 W_1) x + (W_2 b_1 + b_2)$.
# What turns a stack of layers into a network is the **nonlinearity** between them. In this notebook
# you build the smallest real network, affine → ReLU → affine → softmax, write its whole backward
# pass by hand, and train it on a data set that no straight line can separate.
#
# **The chain rule through a nonlinearity.** Every piece keeps the interface of notebook 01:
# `forward(inputs) -> (out, cache)` and `backward(dout, cache) -> gradients`, where
# `dout` $= \partial L / \partial\, \mathrm{out}$ is the gradient arriving from the layer above. An
# activation $f$ acts element by element: $\mathrm{out}_{ij}$ depends on $x_{ij}$ alone. The chain
# rule then collapses to a product, element by element:
#
# $$\frac{\partial L}{\partial x_{ij}} = \frac{\partial L}{\partial\, \mathrm{out}_{ij}}\; f'(x_{ij}),
# \qquad \texttt{dx = dout * f'(x)}.$$
#
# The backward pass of the whole network is nothing more than local rules like this one (and the
# linear layer's from notebook 01) called in reverse order, each one handing its `dx` to the layer
# below as that layer's `dout`.
#
# **Shapes tell you the formula.** A gradient has the shape of what it is the gradient of: `dW2` has
# the shape of `W2`, `dx` the shape of `x`. That often leaves one way to combine the arrays you
# have. If `W2` is (C, H), the upstream gradient `dscores` is (N, C) and the layer's input `h` is
# (N, H), the only product of the two that is (C, H) is `dscores.T @ h`. This works only when the
# sizes differ: with N = C = H every transpose has a valid shape. That is why every example and check
# here uses sizes that are all different (N=5, D=4, H=6, C=3).
#
# | exercise | you write | points |
# |---|---|---|
# | 1 | `relu`, `sigmoid`, `tanh`: forward and backward | 3 |
# | 2 | `softmax_cross_entropy`: the loss and its gradient | 3 |
# | 3 | `two_layer_net`: scores, loss and every gradient | 5 |
# | 4 | `train_two_layer_net`: gradient descent on a spiral | 3 |
#
# Everything you write is float64 numpy. In the "try it" cells we use PyTorch as a calculator that
# gives reference values for the same computation; notebook 03 explains how it computes them. Each
# graded cell runs your functions on inputs of its own, compares the results with PyTorch's in
# shape, dtype and values, and prints which property failed and the likely mistake.

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

import matplotlib.pyplot as plt
import numpy as np

from autograder.checks import (
    check_relu,
    check_sigmoid,
    check_softmax_cross_entropy,
    check_tanh,
    check_train_two_layer_net,
    check_two_layer_net,
)
from backprop_utils import compare, make_spiral, plot_decision_boundary, plot_losses


# %% [markdown]
# ## Exercise 1: activations (3 points)
#
# Each activation is a forward/backward pair with the interface of notebook 01. The backward pass
# is `dx = dout * f'(x)`; finding $f'$ is the exercise. For sigmoid and tanh the derivative can be
# written with the output alone, so that is what the cache holds:
#
# | activation | forward | cache |
# |---|---|---|
# | ReLU | $\max(0, x)$ | `x` |
# | sigmoid | $s = 1 / (1 + e^{-x})$ | `s` |
# | tanh | $t = \tanh x$ | `t` |
#
# **Your tools.** The derivative is the limit of the difference quotient, and notebook 01's centred
# difference $\big(f(x + h) - f(x - h)\big) / (2h)$ measures it at any point to about 1e-10. So every
# formula you derive can be checked before it goes into a backward pass: the cell below prints the
# measured slope of each activation at a few points next to its output. A formula for $f'$ in terms of
# s (or t) is right when it reproduces the slope column from the output column, at every point.
#
# **Shapes.** `x`, `out`, `dout` and `dx` are all (N, D): an elementwise function has an elementwise
# gradient. **Expected error.** You and PyTorch evaluate the same float64 formula, so the differences
# are rounding noise, about 1e-16 relative; the checks allow 1e-7, and every real mistake is far
# larger.
#
# Three details the checks test on purpose:
#
# - **ReLU at exactly 0.** The derivative does not exist at the kink (the slope column shows what the
#   centred difference makes of it). Like PyTorch, we use 0 there. Exact zeros are common in practice
#   (the input of a layer is often the output of a ReLU), so the check includes them.
# - **Leave `dout` alone.** `dout[x <= 0] = 0; return dout` gives the right numbers and silently
#   overwrites the caller's array. Compute `dx` as a new array instead.
# - **Large inputs.** `np.exp(800)` overflows float64 (the limit is about `exp(709)`): numpy prints a
#   `RuntimeWarning` and returns `inf`. A naive `1 / (1 + np.exp(-x))` at x = -800 still lands on the
#   right value, 0, but writes that warning; `np.exp(x) / (1 + np.exp(x))` at x = 800 gives `inf / inf
#   = nan`. A stable sigmoid only ever exponentiates numbers that are at most 0. (`np.where(x >= 0, a,
#   b)` computes both `a` and `b` everywhere, so an overflowing expression inside it still overflows.)

# %%
# A check you can run: the slope of each activation at a few points, by centred differences.
points = np.array([-2.0, -0.5, 0.0, 0.5, 2.0])
h = 1e-5
activations = {
    "relu": lambda v: np.maximum(v, 0.0),
    "sigmoid": lambda v: 1.0 / (1.0 + np.exp(-v)),
    "tanh": np.tanh,
}
for name, f in activations.items():
    print(name)
    for v, out_v, slope in zip(points, f(points), (f(points + h) - f(points - h)) / (2 * h), strict=True):
        print(f"  x = {v:+.1f}   output {out_v:.6f}   slope {slope:.6f}")

# %% [markdown]
# ### 1a. ReLU (1 point)
#
# <details><summary>Hint 1</summary>
#
# Away from 0, ReLU is either the identity or the constant 0. What is the slope of each, and which one
# applies where?
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# An elementwise comparison such as `x < 1` gives an array of booleans, which multiplies like 0 and 1.
# Choose the comparison so that the slope is 0 at exactly 0.
#
# </details>
#
# <details><summary>Hint 3: near the answer</summary>
#
# $f'(x)$ is 1 where $x > 0$ and 0 elsewhere, at 0 included. `dx` is `dout` times that, element by
# element: one comparison of the cached `x`, one product, and no assignment into `dout`.
#
# </details>


# %% solution grade_id="relu"
def relu_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ReLU, elementwise: ``out = max(0, x)``; x and out are (N, D). The cache is x.

    Hint: ``np.maximum`` works elementwise and returns a new array.
    """
    ### BEGIN SOLUTION
    out = np.maximum(x, 0.0)
    cache = x
    ### END SOLUTION
    return out, cache


def relu_backward(dout: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """Gradient of the loss with respect to x, given dout (N, D) and the cache x; dx is (N, D).

    The gradient at exactly x == 0 is 0, as in PyTorch. Do not modify dout: return a new array.
    """
    ### BEGIN SOLUTION
    x = cache
    dx = dout * (x > 0)
    ### END SOLUTION
    return dx


# %% [markdown]
# Try it: your ReLU on a (4, 5) input with three exact zeros and a random upstream gradient. The
# reference slope is a centred difference of $\max(0, x)$ on a copy of x taken before your code runs:
# exactly 1 or 0 away from the kink, and 0.5 at the three zeros, where we set it to the convention, 0.
# Every row should say `ok`, with errors around 1e-11 or exactly 0. The last two rows compare `x` and
# `dout` after your code ran with the copies: a backward that writes into `dout` shows there.

# %%
from autograder.checks.tolerances import FINITE_DIFFERENCE

rng = np.random.default_rng(0)
x = rng.standard_normal((4, 5))
x[0, :3] = 0.0  # exact zeros: the gradient there is 0 by convention
dout = rng.standard_normal((4, 5))
x0, dout0 = x.copy(), dout.copy()  # taken before your code runs

out, cache = relu_forward(x)
dx = relu_backward(dout, cache)

h = 1e-5
slope = (np.maximum(x0 + h, 0.0) - np.maximum(x0 - h, 0.0)) / (2 * h)
slope[x0 == 0] = 0.0  # the convention at the kink
compare(
    tol=FINITE_DIFFERENCE,
    out=(out, np.maximum(x0, 0.0)),
    dx=(dx, dout0 * slope),
    x_afterwards=(x, x0),  # your functions must leave their inputs as they were
    dout_afterwards=(dout, dout0),
)

# %% tests grade_id="test_relu" points=1
"""relu_forward and relu_backward match PyTorch (also for N = 1 and D = 1), with gradient 0 at x == 0,
and leave inputs unchanged."""
score = check_relu(relu_forward, relu_backward)
### BEGIN HIDDEN TESTS
score = check_relu(relu_forward, relu_backward, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ### 1b. Sigmoid (1 point)
#
# Two things to work out: a forward pass that never overflows, and the derivative written with s.
#
# <details><summary>Hint 1 (forward)</summary>
#
# The only danger is the exponential of a large positive number. For $x \ge 0$, $e^{-x} \le 1$ is
# safe. For $x < 0$, multiply the numerator and the denominator of $1 / (1 + e^{-x})$ by $e^{x}$: the
# value is the same and only $e^{x} < 1$ appears.
#
# </details>
#
# <details><summary>Hint 2 (forward)</summary>
#
# Both forms need only $z = e^{-|x|}$, which is at most 1 for every x. Beware: `np.where(cond, a, b)`
# computes `a` and `b` everywhere before it chooses, so an overflowing expression inside it still
# overflows (and warns). Build both branches from z.
#
# </details>
#
# <details><summary>Hint 3 (forward): near the answer</summary>
#
# With $z = e^{-|x|}$: where $x \ge 0$, z is $e^{-x}$, and the definition gives s directly; where
# $x < 0$, z is $e^{x}$, and the form of Hint 1 gives it. Compute z once, both candidates from it, and
# choose between them by the sign of x.
#
# </details>
#
# <details><summary>Hint 4 (backward)</summary>
#
# Differentiate $s = (1 + e^{-x})^{-1}$ with the chain rule: $s' = e^{-x} / (1 + e^{-x})^2$. Split it
# into a product of two fractions with denominator $1 + e^{-x}$; one of them is s.
#
# </details>
#
# <details><summary>Hint 5 (backward): near the answer</summary>
#
# The other fraction is $e^{-x} / (1 + e^{-x}) = \big((1 + e^{-x}) - 1\big) / (1 + e^{-x})$: write
# it with s. Then check your $s'$ on the slope table above: at x = 0, s = 0.5 and the slope is 0.25;
# at x = 2, s = 0.880797 and the slope is 0.104994.
#
# </details>


# %% solution grade_id="sigmoid"
def sigmoid_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sigmoid, elementwise: ``out = s = 1 / (1 + exp(-x))``; x and out are (N, D). The cache is s.

    Must be stable for large |x| (no overflow warning, no NaN at x = -800 or 800).
    Hint: exponentiate only numbers that are <= 0.
    """
    ### BEGIN SOLUTION
    z = np.exp(-np.abs(x))
    out = np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))
    cache = out
    ### END SOLUTION
    return out, cache


def sigmoid_backward(dout: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """Gradient of the loss with respect to x, ``dx = dout * sigmoid'(x)``, with sigmoid' written in
    terms of the cached output s; dout and dx are (N, D). Do not modify dout."""
    ### BEGIN SOLUTION
    s = cache
    dx = dout * s * (1.0 - s)
    ### END SOLUTION
    return dx


# %% [markdown]
# Try it, on an input whose first row is [-800, -50, 0, 50, 800]. There the exact values are known:
# $e^{-800}$ is below the smallest float64 and rounds to 0, $\sigma(-50) = e^{-50} / (1 + e^{-50})$ is
# $e^{-50}$ to float64 precision, $\sigma(0) = 0.5$, and $\sigma(50) = \sigma(800) = 1$ in float64. The
# reference is the naive formula with numpy's overflow warning switched off (it is right for every x,
# only noisy), and its centred difference for the gradient, on copies taken before your code runs. The
# first line lists the warnings your code raised, and the row `number_of_warnings` counts them: a
# stable sigmoid raises none.

# %%
import warnings

from autograder.checks.tolerances import FINITE_DIFFERENCE

rng = np.random.default_rng(1)
x = rng.standard_normal((4, 5))
x[0] = [-800.0, -50.0, 0.0, 50.0, 800.0]
dout = rng.standard_normal((4, 5))
x0, dout0 = x.copy(), dout.copy()  # taken before your code runs

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    out, cache = sigmoid_forward(x)
    dx = sigmoid_backward(dout, cache)


def sigmoid_reference(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) with the overflow warning off: exp(800) = inf gives 1 / inf = 0, as it should."""
    with np.errstate(over="ignore"):
        return 1.0 / (1.0 + np.exp(-x))


h = 1e-5
print("warnings from your code:", [str(w.message) for w in caught] or "none")
compare(
    tol=FINITE_DIFFERENCE,
    out=(out, sigmoid_reference(x0)),
    out_row_0=(out[0], [0.0, np.exp(-50.0), 0.5, 1.0, 1.0]),
    dx=(dx, dout0 * (sigmoid_reference(x0 + h) - sigmoid_reference(x0 - h)) / (2 * h)),
    number_of_warnings=(float(len(caught)), 0.0),
    x_afterwards=(x, x0),  # your functions must leave their inputs as they were
    dout_afterwards=(dout, dout0),
)

# %% tests grade_id="test_sigmoid" points=1
"""sigmoid_forward and sigmoid_backward match PyTorch, also at |x| = 800 and for N = 1 and D = 1, and
leave inputs unchanged."""
score = check_sigmoid(sigmoid_forward, sigmoid_backward)
### BEGIN HIDDEN TESTS
score = check_sigmoid(sigmoid_forward, sigmoid_backward, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ### 1c. Tanh (1 point)
#
# <details><summary>Hint 1</summary>
#
# Write $\tanh x = \sinh x / \cosh x$ and use the quotient rule, with $\sinh' = \cosh$ and
# $\cosh' = \sinh$.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# The quotient rule gives $(\cosh^2 x - \sinh^2 x) / \cosh^2 x$. Divide each term by $\cosh^2 x$.
#
# </details>
#
# <details><summary>Hint 3: near the answer</summary>
#
# The first term becomes 1, and the second is the square of a quotient you have met in Hint 1: write
# it with t. Check it on the slope table above: at x = 0.5, t = 0.462117 and the slope is 0.786448.
#
# </details>


# %% solution grade_id="tanh"
def tanh_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tanh, elementwise: ``out = t = tanh(x)``; x and out are (N, D). The cache is t.

    Hint: ``np.tanh`` is stable for any x; a formula built from ``np.exp`` overflows at |x| = 800.
    """
    ### BEGIN SOLUTION
    out = np.tanh(x)
    cache = out
    ### END SOLUTION
    return out, cache


def tanh_backward(dout: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """Gradient of the loss with respect to x, ``dx = dout * tanh'(x)``, with tanh' written in terms
    of the cached output t; dout and dx are (N, D). Do not modify dout."""
    ### BEGIN SOLUTION
    t = cache
    dx = dout * (1.0 - t**2)
    ### END SOLUTION
    return dx


# %% [markdown]
# Try it, with the same extreme row. `np.tanh` is the reference for the forward pass, its centred
# difference for the gradient: expect errors around 1e-11.

# %%
from autograder.checks.tolerances import FINITE_DIFFERENCE

rng = np.random.default_rng(2)
x = rng.standard_normal((4, 5))
x[0] = [-800.0, -50.0, 0.0, 50.0, 800.0]
dout = rng.standard_normal((4, 5))
x0, dout0 = x.copy(), dout.copy()  # taken before your code runs

out, cache = tanh_forward(x)
dx = tanh_backward(dout, cache)

h = 1e-5
compare(
    tol=FINITE_DIFFERENCE,
    out=(out, np.tanh(x0)),
    dx=(dx, dout0 * (np.tanh(x0 + h) - np.tanh(x0 - h)) / (2 * h)),
    x_afterwards=(x, x0),  # your functions must leave their inputs as they were
    dout_afterwards=(dout, dout0),
)

# %% tests grade_id="test_tanh" points=1
"""tanh_forward and tanh_backward match PyTorch, also at |x| = 800 and for N = 1 and D = 1, and leave
inputs unchanged."""
score = check_tanh(tanh_forward, tanh_backward)
### BEGIN HIDDEN TESTS
score = check_tanh(tanh_forward, tanh_backward, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 2: softmax_cross_entropy (3 points)
#
# The network ends with one score per class. Softmax turns row $i$ of the scores into probabilities,
# and the loss is the mean negative log-probability of the true classes $y_i$:
#
# $$p_{ij} = \frac{e^{s_{ij}}}{\sum_k e^{s_{ik}}}, \qquad
# L = -\frac{1}{N} \sum_{i=1}^{N} \log p_{i, y_i}.$$
#
# The pair is always written as one function, because the gradient of the two together is much
# simpler than either part alone; deriving $\partial L / \partial s_{ij}$ is the exercise.
#
# **Shapes.** `scores` is (N, C) float64, `y` is (N,) integer labels in `0 .. C-1`; `loss` is a
# scalar (a Python float or a numpy float64) and `dscores` is (N, C). The softmax normalises each
# row, over the classes (`axis=1`), never over the batch. **Expected error:** about 1e-16 relative
# against PyTorch; about 1e-10 against the centred differences of the try-it cell.
#
# **A case to check your derivation by hand.** One example, two classes, scores [0, 0], true class 0:
# both probabilities are 1/2 and $L = \log 2 \approx 0.6931$. Raise the first score to 0.001 and L
# becomes $\log(e^{0.001} + 1) - 0.001 \approx 0.6926$: it falls by about 0.0005, a slope of -0.5.
# Raising the second score instead makes L rise with slope +0.5. Your `dscores` must be [[-0.5, 0.5]]
# there. What changes with N examples in the batch?
#
# **Stability.** Scores can be large (a badly scaled or diverging network easily produces hundreds),
# and `np.exp(1000)` is `inf`. Two facts to build on: softmax does not change when the same constant
# is subtracted from every score of a row, and a class 1000 below its row's maximum has a probability
# of $e^{-1000}$, which is exactly 0 in float64, while its log-probability is about -1000, a perfectly
# ordinary number. `np.log(p)` of that 0 gives `-inf`, and `np.log(p + 1e-7)` gives about -16: both
# wrong. The check includes such a row, and so does the try-it cell.
#
# <details><summary>Hint 1 (stability)</summary>
#
# Subtract each row's maximum $m_i$ from its scores first. Then every exponent is at most 0, the
# largest term of the sum is $e^0 = 1$, and the sum lies between 1 and C: no overflow.
#
# </details>
#
# <details><summary>Hint 2 (stability)</summary>
#
# Never take the log of a probability. Take the log of the definition of $p_{i, y_i}$ instead, after
# the shift of Hint 1: the log of a quotient is a difference of logs, and the log of
# $e^{s - m}$ needs no exponential at all.
#
# </details>
#
# <details><summary>Hint 3 (stability): near the answer</summary>
#
# $\log p_{i, j} = (s_{i, j} - m_i) - \log \sum_k e^{s_{ik} - m_i}$: the first term needs no
# exponential, and the sum lies between 1 and C. For the whole array at once, keep the reduced axis
# (`keepdims=True`) so that a row's maximum and a row's sum broadcast against that row.
#
# </details>
#
# <details><summary>Hint 4 (gradient)</summary>
#
# For one example, $-\log p_{y} = \log \sum_k e^{s_k} - s_y$. Differentiate each of the two terms with
# respect to $s_j$, once for $j = y$ and once for $j \ne y$.
#
# </details>
#
# <details><summary>Hint 5 (gradient)</summary>
#
# $\partial / \partial s_j \log \sum_k e^{s_k} = e^{s_j} / \sum_k e^{s_k} = p_j$, and
# $\partial (-s_y) / \partial s_j$ is -1 for $j = y$ and 0 otherwise. The mean over the batch divides
# every row's gradient by N.
#
# </details>
#
# <details><summary>Hint 6 (gradient): near the answer</summary>
#
# Row i of the gradient is the row's probabilities, with 1 taken away at the true class $y_i$, and
# divided by N. Check it on the hand-worked case: [1/2, 1/2] minus [1, 0] is [[-0.5, 0.5]]. In numpy
# the probabilities are `np.exp(log_p)`, and one element per row is reached with a pair of index
# arrays, the row numbers and `y`.
#
# </details>


# %% solution grade_id="softmax_cross_entropy"
def softmax_cross_entropy(scores: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of softmax(scores) against integer labels y, and its gradient.

    scores is (N, C), y is (N,) of ints in 0..C-1. Returns the loss (a scalar),
    ``loss = -mean over i of log softmax(scores)[i, y[i]]``, and dscores = dloss/dscores (N, C).
    Stable for |scores| ~ 1000. Do not modify scores.
    Hint: softmax does not change when a constant is subtracted from a row.
    """
    ### BEGIN SOLUTION
    n = scores.shape[0]
    shifted = scores - scores.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    rows = np.arange(n)
    loss = -log_p[rows, y].mean()
    dscores = np.exp(log_p)
    dscores[rows, y] -= 1.0
    dscores /= n
    ### END SOLUTION
    return loss, dscores


# %% [markdown]
# Try it, on three cases. First the hand-worked case above, one row of scores [0, 0]. Then random
# scores, N = 4, C = 3. Then large logits, N = 3: the first row's true class is the maximum, 1000, with
# a rival at 999 (its loss is $\log(1 + e^{-1}) \approx 0.3133$); in the second and third the true class
# sits 1000 below the maximum. The whole loss is $(2000 + 2 \log(1 + e^{-1})) / 3 \approx 666.8755$.
# The reference loss is the definition, written with numpy's own stable log-sum-exp
# (`np.logaddexp.reduce`), and the reference gradient is its centred difference, the method of
# notebook 01, taken on copies made before your code runs. The tolerance is `LOSS`, 1e-6 relative: a
# loss written as `log(p + 1e-7)` is off by about 1e-7 relative on ordinary scores, a style the checks
# accept (it still fails on the large logits), while every real mistake is off by far more.

# %%
from autograder.checks.tolerances import LOSS


def cross_entropy_reference(scores: np.ndarray, y: np.ndarray) -> float:
    """The mean of -log p[i, y[i]], with log p = s - log(sum(exp(s))) computed by numpy's logaddexp."""
    return float(np.mean(np.logaddexp.reduce(scores, axis=1) - scores[np.arange(len(y)), y]))


def centred_difference(f, a: np.ndarray, h: float = 1e-5) -> np.ndarray:
    """Notebook 01's numerical gradient of the scalar function f at a (a is not modified)."""
    grad = np.zeros_like(a)
    for index in np.ndindex(a.shape):
        step = np.zeros_like(a)
        step[index] = h
        grad[index] = (f(a + step) - f(a - step)) / (2 * h)
    return grad


rng = np.random.default_rng(3)
cases = {
    "hand-worked": (np.array([[0.0, 0.0]]), np.array([0])),
    "random": (rng.standard_normal((4, 3)), np.array([0, 2, 1, 2])),
    "large": (
        np.array([[1000.0, 999.0, -1000.0], [1000.0, 0.0, 999.0], [-1000.0, 1000.0, 0.0]]),
        np.array([0, 1, 2]),
    ),
}
for name, (scores, y) in cases.items():
    scores0, y0 = scores.copy(), y.copy()  # taken before your code runs
    loss, dscores = softmax_cross_entropy(scores, y)
    dscores_ref = centred_difference(lambda s, y0=y0: cross_entropy_reference(s, y0), scores0)
    print(name)
    print(
        compare(
            tol=LOSS,
            loss=(loss, cross_entropy_reference(scores0, y0)),
            dscores=(dscores, dscores_ref),
            scores_afterwards=(scores, scores0),  # your function must leave scores as they were
        ),
        end="\n\n",
    )

# %% tests grade_id="test_softmax_cross_entropy" points=3
"""softmax_cross_entropy matches PyTorch's cross_entropy in loss and gradient, also at logits of 1000."""
score = check_softmax_cross_entropy(softmax_cross_entropy)
### BEGIN HIDDEN TESTS
score = check_softmax_cross_entropy(softmax_cross_entropy, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 3: the two-layer network (5 points)
#
# The network has two affine layers in the `nn.Linear` convention of notebook 01 (a weight has shape
# (out, in)), with a ReLU between them and the softmax loss on top. With the L2 penalty on the
# weights (never the biases), the loss is
#
# $$s = \mathrm{relu}(X W_1^\top + b_1)\, W_2^\top + b_2, \qquad
# L = \mathrm{CE}(s, y) + \tfrac{1}{2}\,\mathrm{reg}\,\big(\lVert W_1 \rVert^2 + \lVert W_2 \rVert^2\big).$$
#
# The forward pass is four pieces, each with the interface you know:
#
# | forward | output shape | its backward takes | and returns |
# |---|---|---|---|
# | `z, cache1 = linear_forward(X, W1, b1)` | (N, H) | `dz` (N, H) | `dX`, `dW1`, `db1` |
# | `h, cache_relu = relu_forward(z)` | (N, H) | `dh` (N, H) | `dz` |
# | `s, cache2 = linear_forward(h, W2, b2)` | (N, C) | `ds` (N, C) | `dh`, `dW2`, `db2` |
# | `loss = CE(s, y)` | scalar | (nothing: L is where backward starts) | `ds` |
#
# The backward pass is the exercise: which piece runs first, which gradient each one receives, which
# cache goes with which call, and what the penalty adds. Parameters live in a dict,
# `params = {"W1": (H, D), "b1": (H,), "W2": (C, H), "b2": (C,)}`, and the gradients come back in a
# dict with exactly the same keys, so that training can update every parameter with one loop.
#
# **A check for the penalty by hand.** Take a one-element weight $w = 3$ and reg = 0.1: the penalty is
# $\tfrac12 \cdot 0.1 \cdot 9 = 0.45$; at $w = 3.001$ it is 0.4503, a slope of 0.3. What formula gives
# 0.3 here, and does it work for every element of a matrix?
#
# <details><summary>Hint 1</summary>
#
# Backward runs the pieces in the reverse order of the forward pass, starting from the loss. Each
# backward receives the gradient of its own output, returned by the piece that used that output.
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# `softmax_cross_entropy` returns `ds`; `linear_backward(ds, cache2)` returns `dh` together with the
# second layer's parameter gradients; `relu_backward` turns `dh` into `dz`; `linear_backward(dz,
# cache1)` gives the first layer's parameter gradients (its `dX` is not needed).
#
# </details>
#
# <details><summary>Hint 3: the penalty, near the answer</summary>
#
# The penalty is a sum of $\tfrac12 \mathrm{reg}\, w^2$ over the elements w of W1 and W2, so each
# element's derivative is that of its own term alone (the 0.5 is there so that the 2 of the square
# cancels); the case above, w = 3 and reg = 0.1, must give 0.3. It adds to `dW1` and `dW2`, not to the
# biases, which the penalty does not contain.
#
# </details>
#
# **Reuse your layers.** The point of the forward/cache/backward interface is that pieces compose:
# the network is three layer calls and the loss forward, the same three layers backward in reverse
# order. So first paste `linear_forward` and
# `linear_backward` from notebook 01 into the next cell (it is not graded on its own; it is graded
# through `two_layer_net`). If you prefer, you can instead write the two affine steps inline in
# `two_layer_net`; the check only looks at what `two_layer_net` returns.


# %% solution grade_id="linear_layer_from_01"
def linear_forward(x: np.ndarray, W: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, tuple]:
    """From notebook 01: ``out = x @ W.T + b``; x is (N, D), W is (M, D), b is (M,); out is (N, M)."""
    ### BEGIN SOLUTION
    out = x @ W.T + b
    cache = (x, W)
    ### END SOLUTION
    return out, cache


def linear_backward(dout: np.ndarray, cache: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From notebook 01: the gradients with respect to x (N, D), W (M, D) and b (M,), given dout (N, M)."""
    ### BEGIN SOLUTION
    x, W = cache
    dx = dout @ W
    dW = dout.T @ x
    db = dout.sum(axis=0)
    ### END SOLUTION
    return dx, dW, db


# %% [markdown]
# Now the network. With `y=None` it returns the scores only (that is how it predicts); with labels it
# returns the loss and the gradients.


# %% solution grade_id="two_layer_net"
def two_layer_net(
    params: dict[str, np.ndarray], X: np.ndarray, y: np.ndarray | None = None, reg: float = 0.0
) -> np.ndarray | tuple[float, dict[str, np.ndarray]]:
    """Affine-ReLU-affine-softmax: ``scores = relu(X @ W1.T + b1) @ W2.T + b2``.

    params holds W1 (H, D), b1 (H,), W2 (C, H), b2 (C,); X is (N, D), y is (N,) integer labels.
    Returns scores (N, C) when y is None; otherwise (loss, grads), where
    ``loss = CE(scores, y) + 0.5 * reg * (||W1||^2 + ||W2||^2)`` and grads has the keys of params.
    Do not modify params or X. Stable at scores of any size (|scores| ~ 1000): compute the loss with
    your stable softmax_cross_entropy (log-sum-exp), never -log(p).
    Hint: reuse linear_forward, relu_forward and their backward functions.
    """
    ### BEGIN SOLUTION
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    z, cache1 = linear_forward(X, W1, b1)
    h, cache_relu = relu_forward(z)
    scores, cache2 = linear_forward(h, W2, b2)
    if y is None:
        return scores

    data_loss, dscores = softmax_cross_entropy(scores, y)
    loss = data_loss + 0.5 * reg * (np.sum(W1**2) + np.sum(W2**2))
    dh, dW2, db2 = linear_backward(dscores, cache2)
    dz = relu_backward(dh, cache_relu)
    _, dW1, db1 = linear_backward(dz, cache1)
    grads = {"W1": dW1 + reg * W1, "b1": db1, "W2": dW2 + reg * W2, "b2": db2}
    ### END SOLUTION
    return loss, grads


# %% [markdown]
# Try it, with sizes that are all different, some hidden units inactive (ReLU zeroes them), and
# `reg > 0`. The reference is the loss written out from its definition in numpy, and each reference
# gradient is its centred difference with respect to one parameter, on copies taken before your code
# runs. Expect errors around 1e-10; the tolerance is `LOSS` (1e-6 relative), as in the previous try-it.

# %%
from autograder.checks.tolerances import LOSS

rng = np.random.default_rng(4)
N, D, H, C = 5, 4, 6, 3
params = {
    "W1": rng.standard_normal((H, D)),
    "b1": rng.standard_normal(H),
    "W2": rng.standard_normal((C, H)),
    "b2": rng.standard_normal(C),
}
X = rng.standard_normal((N, D))
y = np.array([0, 1, 2, 1, 0])
reg = 0.1
params0, X0 = {k: v.copy() for k, v in params.items()}, X.copy()  # taken before your code runs

loss, grads = two_layer_net(params, X, y, reg=reg)
scores = two_layer_net(params, X)


def reference_scores(p: dict[str, np.ndarray]) -> np.ndarray:
    """relu(X W1^T + b1) W2^T + b2, from the definition."""
    return np.maximum(X0 @ p["W1"].T + p["b1"], 0.0) @ p["W2"].T + p["b2"]


def reference_loss(p: dict[str, np.ndarray]) -> float:
    """Mean cross-entropy (numpy's stable logaddexp) plus 0.5 * reg * (||W1||^2 + ||W2||^2)."""
    s = reference_scores(p)
    ce = np.mean(np.logaddexp.reduce(s, axis=1) - s[np.arange(N), y])
    return float(ce + 0.5 * reg * (np.sum(p["W1"] ** 2) + np.sum(p["W2"] ** 2)))


def centred_difference(key: str, h: float = 1e-5) -> np.ndarray:
    """Notebook 01's numerical gradient of reference_loss with respect to params0[key]."""
    grad = np.zeros_like(params0[key])
    for index in np.ndindex(grad.shape):
        plus = {k: v.copy() for k, v in params0.items()}
        minus = {k: v.copy() for k, v in params0.items()}
        plus[key][index] += h
        minus[key][index] -= h
        grad[index] = (reference_loss(plus) - reference_loss(minus)) / (2 * h)
    return grad


unchanged = np.array_equal(X, X0) and all(np.array_equal(params[k], params0[k]) for k in params0)
print("inputs unchanged:", unchanged, " grads has the keys of params:", sorted(grads) == sorted(params0))
compare(
    tol=LOSS,
    scores=(scores, reference_scores(params0)),
    loss=(loss, reference_loss(params0)),
    **{f"d{k}": (grads.get(k), centred_difference(k)) for k in params0},
)

# %% tests grade_id="test_two_layer_net" points=5
"""two_layer_net matches PyTorch in scores, loss (with and without L2) and each of its four gradients,
also for one input feature and one hidden unit, and at scores of 1000."""
score = check_two_layer_net(two_layer_net)
### BEGIN HIDDEN TESTS
score = check_two_layer_net(two_layer_net, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 4: training on a spiral (3 points)
#
# `make_spiral` draws 300 points in the plane, 100 on each of three interleaved spiral arms. No
# straight line separates the arms, so a linear classifier (softmax on $X W^\top + b$) stays near 50%
# training accuracy (54% after 3000 steps of gradient descent, the test file measures it); the hidden
# ReLU layer lets the network bend its decision boundary around them.
#
# Write `train_two_layer_net`: full-batch gradient descent on `two_layer_net`,
#
# $$\theta \leftarrow \theta - \mathrm{lr}\; \frac{\partial L}{\partial \theta} \quad \text{for every
# parameter } \theta \in \{W_1, b_1, W_2, b_2\},$$
#
# recording the loss at every step (before each update). The gradient descent step is the short part.
# The part to think about is where the parameters start:
#
# - **Not all equal.** If every hidden unit starts with the same weights, every one computes the same
#   output and receives the same gradient, so they stay equal forever: the network behaves as if it
#   had a single hidden unit. (Starting from weights all 0.1, 500 steps leave every row of `W1` equal
#   and reach 51% accuracy.) The weights must start at random; the biases may start at zero.
# - **The right size.** Each unit of $z = X W_1^\top$ is a sum of D products. If the inputs have mean
#   square 1 and the weights are independent with mean 0 and variance $v$, the variance of each unit is
#   $D\,v$. Choose $v$ so that the signal keeps its size through each layer; a ReLU zeroes about half
#   of its inputs, which halves the mean square that the next layer receives. Weights that are too
#   small (standard deviation 0.01) shrink the signal and its gradients: after 500 steps that network
#   reaches about 89% instead of 99%.
#
# Use `np.random.default_rng(seed)` for every random number, so that a seed gives the same network.
# With a good start and the defaults below, training takes about a second or less and reaches 97-99%
# training accuracy.
#
# <details><summary>Hint 1</summary>
#
# The number of classes is not an argument: the labels are `0 .. C-1`, so C is one more than the
# largest label. D is the number of columns of X.
#
# </details>
#
# <details><summary>Hint 2: a tool, measuring the scale</summary>
#
# You can measure what a scale does before you derive it. Take inputs of mean square 1, such as
# `Z = rng.standard_normal((1000, D))`, draw a weight matrix of shape (hidden, D) with
# `rng.standard_normal` times a standard deviation σ, and print the mean square of
# `np.maximum(Z @ W1.T, 0)` for a few values of σ (0.01, 0.1, 1) and of D. The value you want is 1,
# the inputs' own mean square: the layer keeps the signal's size.
#
# </details>
#
# <details><summary>Hint 3: near the answer</summary>
#
# With weights of variance v, each unit of $X W_1^\top$ has variance $D\,v$, and the ReLU keeps about
# half of its mean square: choose v for `W1` so that $D\,v / 2 = 1$. `W2` feeds the softmax with no
# ReLU, over H inputs: $H\,v = 1$ is enough. Multiply standard normal draws by $\sqrt v$; the biases
# start at zero. The loop: `steps` times, one call of `two_layer_net` gives the loss and every
# gradient; record the loss as a float, then update every entry of `params` in place.
#
# </details>
#
# **How it is graded.** The check calls `train_two_layer_net(X, y, seed=...)` itself, with your
# defaults, on a spiral drawn from a seed this notebook does not use (the hidden test also turns it by
# an angle drawn anew each time), and measures the training
# accuracy of the parameters you return with the course's own forward pass (not your
# `two_layer_net`, and not anything your function prints). 1 point for returning `(params, losses)`
# of the right form (float64 parameters W1 (H, 2), b1 (H,), W2 (3, H), b2 (3,) for any H, and a
# finite loss per step), 1 point for an accuracy of at least 70%, 1 more for at least 95%. The check
# trains twice, so keep training under a few seconds.


# %% solution grade_id="train_two_layer_net"
def train_two_layer_net(
    X: np.ndarray,
    y: np.ndarray,
    hidden: int = 100,
    lr: float = 1.0,
    reg: float = 1e-3,
    steps: int = 500,
    seed: int = 0,
) -> tuple[dict[str, np.ndarray], list[float]]:
    """Train a two-layer network on (X, y) by full-batch gradient descent; return (params, losses).

    X is (N, D), y is (N,) integer labels in 0..C-1. params holds W1 (hidden, D), b1 (hidden,),
    W2 (C, hidden), b2 (C,), float64, initialised at random from ``np.random.default_rng(seed)``.
    Then ``steps`` updates ``p <- p - lr * dL/dp`` of every parameter, L being the loss of
    ``two_layer_net(params, X, y, reg)``. losses has one float per step: the loss before that update.
    Hint: the scale of the initial weights matters; see the text above.
    """
    ### BEGIN SOLUTION
    rng = np.random.default_rng(seed)
    d, c = X.shape[1], int(y.max()) + 1
    params = {
        "W1": rng.standard_normal((hidden, d)) * np.sqrt(2.0 / d),
        "b1": np.zeros(hidden),
        "W2": rng.standard_normal((c, hidden)) * np.sqrt(1.0 / hidden),
        "b2": np.zeros(c),
    }
    losses = []
    for _ in range(steps):
        loss, grads = two_layer_net(params, X, y, reg=reg)
        losses.append(float(loss))
        for k in params:
            params[k] -= lr * grads[k]
    ### END SOLUTION
    return params, losses


# %% [markdown]
# Try it: train on the spiral, then on a spiral drawn from another seed, as the check does, and measure
# the training accuracy with a forward pass written here (not your `two_layer_net`). The cell also
# checks the form of what you return. Then look at the loss curve and at how the trained network
# splits the plane. The loss starts around 1.5: above $\log 3 \approx 1.1$, the loss of guessing each
# class with probability 1/3, because the random start already makes confident guesses, most of them
# wrong. It falls quickly over the first hundred steps (to about 0.3), then slowly; the coloured
# regions should follow the arms.

# %%
import time


def predict(params: dict[str, np.ndarray], points: np.ndarray) -> np.ndarray:
    """Class labels from relu(points W1^T + b1) W2^T + b2, written here from the definition."""
    h = np.maximum(points @ params["W1"].T + params["b1"], 0.0)
    return (h @ params["W2"].T + params["b2"]).argmax(axis=1)


for seed in (0, 5):
    X, y = make_spiral(seed=seed)
    start = time.perf_counter()
    params, losses = train_two_layer_net(X, y.copy())
    seconds = time.perf_counter() - start
    H = params["W1"].shape[0]
    shapes = {"W1": (H, 2), "b1": (H,), "W2": (3, H), "b2": (3,)}
    form_ok = (
        sorted(params) == sorted(shapes)
        and all(params[k].shape == shapes[k] and params[k].dtype == np.float64 for k in shapes)
        and len(losses) > 0
        and bool(np.all(np.isfinite(losses)))
    )
    accuracy = np.mean(predict(params, X) == y)
    print(
        f"spiral seed {seed}: form {'ok' if form_ok else 'WRONG'}, {len(losses)} losses, "
        f"first {losses[0]:.3f}, last {losses[-1]:.3f}, training accuracy {accuracy:.1%} "
        f"({'at least 95%' if accuracy >= 0.95 else 'below 95%'}), {seconds:.2f} s"
    )

fig, axes = plt.subplots(1, 2, figsize=(10, 4))
plot_losses(losses, ax=axes[0])
plot_decision_boundary(lambda points: predict(params, points), X, y, ax=axes[1])
plt.show()

# %% tests grade_id="test_train_two_layer_net" points=3
"""train_two_layer_net returns params that fit a fresh spiral with at least 95% training accuracy."""
score = check_train_two_layer_net(train_two_layer_net)
### BEGIN HIDDEN TESTS
score = check_train_two_layer_net(train_two_layer_net, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Summary
#
# - An activation's backward pass is an elementwise product, `dx = dout * f'(x)`, and for sigmoid
#   and tanh the derivative is cheapest in terms of the output the forward pass cached.
# - Conventions and numerics are part of the answer: ReLU's gradient at 0 is 0; a stable sigmoid
#   exponentiates only $-|x|$; softmax cross-entropy subtracts the row maximum and takes logs by
#   log-sum-exp.
# - Softmax and cross-entropy, taken together, have a gradient simpler than either part alone:
#   $(p - \mathrm{onehot}(y)) / N$.
# - A network's backward pass is its forward pass read backwards: every piece gets the gradient of
#   its output and returns the gradients of its inputs, and the shapes tell you how to combine them.
# - The hidden ReLU layer is what lets a network classify data no straight line can separate.
#
# Writing `two_layer_net` meant keeping track of every cache and calling every backward in the
# right order by hand. That is manageable for four pieces; it does not scale to a network with
# fifty layers, or one whose structure changes with its input. In notebook 03 PyTorch's autograd
# does that bookkeeping for you: it records the operations of the forward pass as they run and
# replays their backward functions in reverse order, which is exactly what you just did by hand.
