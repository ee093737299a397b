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
try:  # the course's own package: `make` installs it; away from the repository, its wheel does
    import autograder.checks  # noqa: F401
    import backprop_utils  # noqa: F401
except ModuleNotFoundError as error:
    raise ModuleNotFoundError(
        f"{error.msg}. Run `%pip install backprop_course-0.1.0-py3-none-any.whl` (the course's wheel,"
        " published with the notebooks), then this cell again."
    ) from None

import matplotlib.pyplot as plt
import numpy as np
import torch
import torch.nn.functional as F

from autograder.checks import (
    check_relu,
    check_sigmoid,
    check_softmax_cross_entropy,
    check_tanh,
    check_train_two_layer_net,
    check_two_layer_net,
)
from backprop_utils import compare, make_spiral, plot_decision_boundary, plot_losses


def torch_activation(fn, x: np.ndarray, dout: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """PyTorch's ``fn(x)`` and the gradient with respect to x for the upstream gradient dout."""
    x_t = torch.tensor(x, requires_grad=True)
    out_t = fn(x_t)
    out_t.backward(torch.tensor(dout))
    return out_t.detach().numpy(), x_t.grad.numpy()


# %% [markdown]
# ## Exercise 1: activations (3 points)
#
# Each activation is a forward/backward pair with the interface of notebook 01. The backward pass
# is `dx = dout * f'(x)`, and for sigmoid and tanh the derivative is simplest in terms of the
# output, so that is what the cache should hold:
#
# | activation | forward | derivative | cache |
# |---|---|---|---|
# | ReLU | $\max(0, x)$ | $1$ if $x > 0$, else $0$ | `x` |
# | sigmoid | $s = 1 / (1 + e^{-x})$ | $s\,(1 - s)$ | `s` |
# | tanh | $t = \tanh x$ | $1 - t^2$ | `t` |
#
# **Shapes.** `x`, `out`, `dout` and `dx` are all (N, D): an elementwise function has an elementwise
# gradient. **Expected error.** You and PyTorch evaluate the same float64 formula, so the differences
# are rounding noise, about 1e-16 relative; the checks allow 1e-7, and every real mistake is far
# larger.
#
# Three details the checks test on purpose:
#
# - **ReLU at exactly 0.** The derivative does not exist at the kink. Like PyTorch, we use 0 there:
#   the mask is `x > 0`, not `x >= 0`. Exact zeros are common in practice (the input of a layer is
#   often the output of a ReLU), so the check includes them.
# - **Leave `dout` alone.** `dout[x <= 0] = 0; return dout` gives the right numbers and silently
#   overwrites the caller's array. Compute a new array instead: `dx = dout * mask`.
# - **Large inputs.** `np.exp(800)` overflows float64 (the limit is about `exp(709)`): numpy prints a
#   `RuntimeWarning` and returns `inf`. A naive `1 / (1 + np.exp(-x))` at x = -800 still lands on the
#   right value, 0, but writes that warning; `np.exp(x) / (1 + np.exp(x))` at x = 800 gives `inf / inf
#   = nan`. A stable sigmoid only ever exponentiates $-|x| \le 0$: with $z = e^{-|x|}$,
#   $s = 1 / (1 + z)$ for $x \ge 0$ and $s = z / (1 + z)$ for $x < 0$. (`np.where(x >= 0, a, b)`
#   computes both `a` and `b` everywhere, so an overflowing expression inside it still overflows.)
#
# ### 1a. ReLU (1 point)


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
    """Gradient of the loss with respect to x: dx is dout where x > 0 and 0 elsewhere; (N, D).

    The gradient at exactly x == 0 is 0, as in PyTorch. Do not modify dout: return a new array.
    """
    ### BEGIN SOLUTION
    x = cache
    dx = dout * (x > 0)
    ### END SOLUTION
    return dx


# %% [markdown]
# Try it: your ReLU next to PyTorch's on a (4, 5) input with three exact zeros and a random upstream
# gradient. Every row should say `ok`, with errors around 1e-16 or exactly 0.

# %%
rng = np.random.default_rng(0)
x = rng.standard_normal((4, 5))
x[0, :3] = 0.0  # exact zeros: the gradient there is 0 by convention
dout = rng.standard_normal((4, 5))
out, cache = relu_forward(x)
dx = relu_backward(dout, cache)
out_ref, dx_ref = torch_activation(torch.relu, x, dout)
compare(out=(out, out_ref), dx=(dx, dx_ref))

# %% tests grade_id="test_relu" points=1
"""relu_forward and relu_backward match PyTorch, with gradient 0 at x == 0, and leave inputs unchanged."""
score = check_relu(relu_forward, relu_backward)
### BEGIN HIDDEN TESTS
score = check_relu(relu_forward, relu_backward, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ### 1b. Sigmoid (1 point)


# %% solution grade_id="sigmoid"
def sigmoid_forward(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sigmoid, elementwise: ``out = s = 1 / (1 + exp(-x))``; x and out are (N, D). The cache is s.

    Must be stable for large |x| (no overflow warning, no NaN at x = -800 or 800).
    Hint: with ``z = np.exp(-np.abs(x))``, s is ``1 / (1 + z)`` where x >= 0 and ``z / (1 + z)`` elsewhere.
    """
    ### BEGIN SOLUTION
    z = np.exp(-np.abs(x))
    out = np.where(x >= 0, 1.0 / (1.0 + z), z / (1.0 + z))
    cache = out
    ### END SOLUTION
    return out, cache


def sigmoid_backward(dout: np.ndarray, cache: np.ndarray) -> np.ndarray:
    """Gradient of the loss with respect to x: ``dx = dout * s * (1 - s)``; dout and dx are (N, D)."""
    ### BEGIN SOLUTION
    s = cache
    dx = dout * s * (1.0 - s)
    ### END SOLUTION
    return dx


# %% [markdown]
# Try it, on an input whose first row reaches |x| = 800. A stable sigmoid prints no warning here.

# %%
rng = np.random.default_rng(1)
x = rng.standard_normal((4, 5))
x[0] = [-800.0, -50.0, 0.0, 50.0, 800.0]
dout = rng.standard_normal((4, 5))
out, cache = sigmoid_forward(x)
dx = sigmoid_backward(dout, cache)
out_ref, dx_ref = torch_activation(torch.sigmoid, x, dout)
compare(out=(out, out_ref), dx=(dx, dx_ref))

# %% tests grade_id="test_sigmoid" points=1
"""sigmoid_forward and sigmoid_backward match PyTorch, also at |x| = 800, and leave inputs unchanged."""
score = check_sigmoid(sigmoid_forward, sigmoid_backward)
### BEGIN HIDDEN TESTS
score = check_sigmoid(sigmoid_forward, sigmoid_backward, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ### 1c. Tanh (1 point)


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
    """Gradient of the loss with respect to x: ``dx = dout * (1 - t**2)``; dout and dx are (N, D)."""
    ### BEGIN SOLUTION
    t = cache
    dx = dout * (1.0 - t**2)
    ### END SOLUTION
    return dx


# %%
rng = np.random.default_rng(2)
x = rng.standard_normal((4, 5))
x[0] = [-800.0, -50.0, 0.0, 50.0, 800.0]
dout = rng.standard_normal((4, 5))
out, cache = tanh_forward(x)
dx = tanh_backward(dout, cache)
out_ref, dx_ref = torch_activation(torch.tanh, x, dout)
compare(out=(out, out_ref), dx=(dx, dx_ref))

# %% tests grade_id="test_tanh" points=1
"""tanh_forward and tanh_backward match PyTorch, also at |x| = 800, and leave inputs unchanged."""
score = check_tanh(tanh_forward, tanh_backward)
### BEGIN HIDDEN TESTS
score = check_tanh(tanh_forward, tanh_backward, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Exercise 2: softmax_cross_entropy (3 points)
#
# The network ends with one score per class. Softmax turns row $i$ of the scores into probabilities,
# and the loss is the mean negative log-probability of the true classes $y_i$. Its gradient is the
# reason this pair is always written as one function: almost everything cancels,
#
# $$p_{ij} = \frac{e^{s_{ij}}}{\sum_k e^{s_{ik}}}, \qquad
# L = -\frac{1}{N} \sum_{i=1}^{N} \log p_{i, y_i}, \qquad
# \frac{\partial L}{\partial s_{ij}} = \frac{p_{ij} - [j = y_i]}{N}.$$
#
# **Shapes.** `scores` is (N, C) float64, `y` is (N,) integer labels in `0 .. C-1`; `loss` is a
# scalar (a Python float or a numpy float64) and `dscores` is (N, C). The softmax normalises each
# row, over the classes (`axis=1`), never over the batch. **Expected error:** about 1e-16 relative.
#
# **Stability.** Scores can be large (a badly scaled or diverging network easily produces hundreds),
# and `np.exp(1000)` is `inf`. Softmax does not change when a constant is subtracted from a row, so
# subtract the row's maximum $m_i$ first;
# then every exponent is at most 0 and the sum lies between 1 and C. Take the log directly, by
# log-sum-exp, rather than the log of a probability:
#
# $$\log p_{i, y_i} = s_{i, y_i} - m_i - \log \sum_k e^{s_{ik} - m_i}.$$
#
# A class 1000 below its row's maximum has a probability of $e^{-1000}$, which is exactly 0 in
# float64; its log-probability is about -1000, but `np.log(p)` gives `-inf` and `np.log(p + 1e-7)`
# gives about -16. The check includes such a row.


# %% solution grade_id="softmax_cross_entropy"
def softmax_cross_entropy(scores: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of softmax(scores) against integer labels y, and its gradient.

    scores is (N, C), y is (N,) of ints in 0..C-1. Returns the loss (a scalar) and dscores (N, C),
    ``dscores = (softmax(scores) - onehot(y)) / N``. Stable for |scores| ~ 1000.
    Hint: subtract each row's max, then ``log_p = shifted - log(sum(exp(shifted), axis=1, keepdims=True))``.
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
# Try it, against PyTorch's `F.cross_entropy`, first on ordinary scores, then on logits of size 1000
# where the true class of the second row sits 1000 below the maximum.

# %%
rng = np.random.default_rng(3)
for scores, y in [
    (rng.standard_normal((4, 3)), np.array([0, 2, 1, 2])),
    (np.array([[1000.0, 999.0, -1000.0], [1000.0, 0.0, 999.0]]), np.array([0, 1])),
]:
    loss, dscores = softmax_cross_entropy(scores, y)
    scores_t = torch.tensor(scores, requires_grad=True)
    loss_t = F.cross_entropy(scores_t, torch.tensor(y))
    loss_t.backward()
    print(compare(loss=(loss, loss_t.item()), dscores=(dscores, scores_t.grad.numpy())), end="\n\n")

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
# The backward pass walks the same pieces in reverse, each `backward` taking the `dout` that the
# piece above returned:
#
# | forward | shape | backward | shapes |
# |---|---|---|---|
# | `z = X @ W1.T + b1` | (N, H) | `_, dW1, db1 = linear_backward(dz, cache1)` | (H, D), (H,) |
# | `h = relu(z)` | (N, H) | `dz = relu_backward(dh, cache_relu)` | (N, H) |
# | `s = h @ W2.T + b2` | (N, C) | `dh, dW2, db2 = linear_backward(ds, cache2)` | (N, H), (C, H), (C,) |
# | `loss = CE(s, y)` | scalar | `ds` from `softmax_cross_entropy` | (N, C) |
#
# The penalty adds its own gradient, $\partial / \partial W \,\big(\tfrac12 \mathrm{reg} \lVert W
# \rVert^2\big) = \mathrm{reg}\, W$, to `dW1` and `dW2` only: the 0.5 is there so that the 2 of the
# square cancels. Parameters live in a dict, `params = {"W1": (H, D), "b1": (H,), "W2": (C, H), "b2":
# (C,)}`, and the gradients come back in a dict with exactly the same keys, so that training can
# update every parameter with one loop: `params[k] -= lr * grads[k]`.
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
    Do not modify params or X.
    Hint: forward with linear_forward, relu_forward, linear_forward; back in the reverse order.
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
# `reg > 0`, against the same network written in PyTorch.

# %%
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

loss, grads = two_layer_net(params, X, y, reg=reg)

p = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
scores_t = F.linear(torch.relu(F.linear(torch.tensor(X), p["W1"], p["b1"])), p["W2"], p["b2"])
loss_t = F.cross_entropy(scores_t, torch.tensor(y)) + 0.5 * reg * (
    p["W1"].pow(2).sum() + p["W2"].pow(2).sum()
)
loss_t.backward()
compare(
    scores=(two_layer_net(params, X), scores_t.detach().numpy()),
    loss=(loss, loss_t.item()),
    **{f"d{k}": (grads[k], p[k].grad.numpy()) for k in params},
)

# %% tests grade_id="test_two_layer_net" points=5
"""two_layer_net matches PyTorch in scores, loss (with and without L2) and each of its four gradients."""
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
# accuracy; the hidden ReLU layer lets the network bend its decision boundary around them.
#
# Write `train_two_layer_net`: full-batch gradient descent on `two_layer_net`,
#
# $$\theta \leftarrow \theta - \mathrm{lr}\; \frac{\partial L}{\partial \theta} \quad \text{for every
# parameter } \theta \in \{W_1, b_1, W_2, b_2\},$$
#
# recording the loss at every step. Initialisation matters: start the weights at random, scaled so
# that the signal keeps its size through each layer (`W1` with standard deviation $\sqrt{2/D}$,
# `W2` with $\sqrt{1/H}$), and the biases at zero. Weights that are all equal would receive equal
# gradients and stay equal forever; weights that are too small (0.01) make training much
# slower. With the defaults below, training takes about a second or less and reaches 97-99%
# training accuracy.
#
# **How it is graded.** The check calls `train_two_layer_net(X, y, seed=...)` itself, with your
# defaults, on a spiral drawn from a seed this notebook does not use, and measures the training
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

    X is (N, D), y is (N,) integer labels in 0..C-1. Initialise with ``np.random.default_rng(seed)``:
    W1 (hidden, D) ~ N(0, 2/D), W2 (C, hidden) ~ N(0, 1/hidden), b1 and b2 zero. Then, ``steps``
    times: ``loss, grads = two_layer_net(params, X, y, reg)``, append the loss, and update every
    parameter with ``params[k] -= lr * grads[k]``. losses has one float per step.
    Hint: ``rng.standard_normal((hidden, D)) * np.sqrt(2 / D)``.
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
# Train on the spiral, then look at the loss curve and at how the trained network splits the plane.
# The loss starts a little above $\log 3 \approx 1.1$ (the loss of guessing each class with
# probability 1/3), falls quickly over the first hundred steps, then slowly; the coloured regions
# should follow the arms.

# %%
X, y = make_spiral(seed=0)
params, losses = train_two_layer_net(X, y)
accuracy = np.mean(two_layer_net(params, X).argmax(axis=1) == y)
print(f"final loss {losses[-1]:.3f}, training accuracy {accuracy:.1%}")
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
plot_losses(losses, ax=axes[0])
plot_decision_boundary(lambda points: two_layer_net(params, points).argmax(axis=1), X, y, ax=axes[1])
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
