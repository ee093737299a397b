# %% [markdown]
# # 03 · Autograd and the computational graph
#
# In notebook 02 you wrote the backward pass of a two-layer network by hand: every forward step kept a
# cache, and the backward pass called every local rule again, in reverse order, handing each one the
# gradient the step above had returned. It worked, and it took care: one cache passed to the wrong
# function, one call out of order, and the gradients are wrong without any error. Four pieces are
# manageable. Fifty layers are not, and neither is a network whose structure depends on its input (a
# loop that runs a different number of times for each sentence, a branch taken for some examples only).
#
# The bookkeeping you did by hand is mechanical, so a program can do it. That is what PyTorch's
# **autograd** does. While the forward pass runs, every operation on a tensor that requires a gradient
# is recorded in a **computational graph**. Drawn on paper, its nodes are the tensors and its edges are
# the functions that compute one tensor from others. PyTorch stores the same graph from the other
# side: one node per function, its backward function (the result's `grad_fn`), linked to the nodes
# that produced the function's inputs. `loss.backward()` then walks that graph from the loss down to
# the parameters, calls each node's backward function with the gradient that arrived from above, and
# adds the result into the `.grad` of each parameter. The caches and the reverse order you managed in
# notebook 02 are exactly what the graph stores.
#
# | exercise | you write | points |
# |---|---|---|
# | 1 | `two_layer_loss_torch`: notebook 02's loss in torch, so that `backward()` fills every `.grad` | 4 |
# | 2 | `backward_order`: walk the graph and list its nodes in an order backward can run them | 3 |
# | 3 | `sgd_step`: a gradient-descent step on leaf tensors, done the way that works | 3 |
#
# Everything is float64, as before. The test cells call your functions on tensors of their own, run
# `backward()` themselves where it matters, and compare what they find with reference values computed
# outside your code.

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

from autograder.checks import check_backward_order, check_sgd_step, check_two_layer_loss_torch
from backprop_utils import compare, draw_graph, make_spiral, plot_decision_boundary, plot_losses

# tensors made from Python floats are float64, like the numpy arrays of notebooks 01 and 02
torch.set_default_dtype(torch.float64)

# %% [markdown]
# ## Tensors that remember where they came from
#
# A tensor created with `requires_grad=True` is a **leaf**: a value you made yourself, whose gradient
# you want. Every result computed from a tensor that requires grad also requires grad, and carries a
# `grad_fn`: the backward function of the operation that made it. Calling `backward()` on a scalar
# result computes the gradient of that scalar with respect to every leaf and stores it in the leaf's
# `.grad`. Here $f(x) = \sum_i x_i^2$, whose gradient is $2x$:

# %%
x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
y = x**2
f = y.sum()
print("x:", x.is_leaf, x.grad_fn, "| y:", y.is_leaf, y.grad_fn, "| f:", f.grad_fn)
f.backward()
print("x.grad =", x.grad, " 2 * x =", 2 * x.detach())

# %% [markdown]
# `f.grad_fn` is a `SumBackward0` node: it knows how to turn the gradient of `f` into the gradient of
# its input `y` (copy it to every element). Its `next_functions` are the nodes its result is sent on
# to, each paired with an index saying which output of that node it belongs to (an index you can
# ignore here). `y`'s node, `PowBackward0`, sends its result to an `AccumulateGrad` node: the node that
# adds the gradient into the leaf's `.grad` (its `.variable` is the leaf itself). A tensor that does
# not require grad has no node at all, and shows up as `None` in `next_functions`.

# %%
print(f.grad_fn.next_functions)
print(f.grad_fn.next_functions[0][0].next_functions)
print(f.grad_fn.next_functions[0][0].next_functions[0][0].variable is x)

# %% [markdown]
# ## Exercise 1: two_layer_loss_torch (4 points)
#
# Write notebook 02's loss with torch tensors instead of numpy arrays, and only the forward pass: with
# $W_1$ (H, D), $W_2$ (C, H) in the `nn.Linear` convention,
#
# $$s = \mathrm{relu}(X W_1^\top + b_1)\, W_2^\top + b_2, \qquad
# L = \mathrm{CE}(s, y) + \tfrac{1}{2}\,\mathrm{reg}\,\big(\lVert W_1 \rVert^2 + \lVert W_2 \rVert^2\big),$$
#
# where CE is the mean softmax cross-entropy over the batch and the penalty is on the weights only.
# `params` holds the leaf tensors `W1` (H, D), `b1` (H,), `W2` (C, H), `b2` (C,), all float64 with
# `requires_grad=True`; `X` is an (N, D) float64 tensor and `y` an (N,) int64 tensor of labels. Return
# the loss as a **0-d tensor** that is still attached to the graph. There is no backward to write: the
# caller runs `loss.backward()`, and autograd fills `params["W1"].grad` and the others.
#
# Rules that the check tests, because each one is an easy way to get no gradient or a wrong one:
#
# - **Stay in torch.** `.item()`, `float(...)`, `.numpy()`, `.detach()`, `.data`, or rebuilding a tensor
#   with `torch.tensor(...)` from a result all cut the graph: the loss either cannot be differentiated at
#   all, or the cut-off parameter gets `.grad = None`.
# - **Do not call `backward()` yourself.** The caller does; a second call adds a second copy of every
#   gradient into `.grad` (more on that in part 3).
# - **Do not modify the arguments.** No in-place operation on `X` or on the parameters.
#
# `F.cross_entropy(scores, y)` computes the mean softmax cross-entropy stably (it subtracts the row
# maximum and uses log-sum-exp, as you did by hand); `torch.relu`, `@` and `.T` do the rest.
# **Expected error:** the check compares the loss and every `.grad` with PyTorch's own reference
# network; both evaluate the same float64 formula, so the differences are about 1e-16.


# %% solution grade_id="two_layer_loss_torch"
def two_layer_loss_torch(
    params: dict[str, torch.Tensor], X: torch.Tensor, y: torch.Tensor, reg: float = 0.0
) -> torch.Tensor:
    """Notebook 02's loss in torch, ``CE(relu(X @ W1.T + b1) @ W2.T + b2, y) + 0.5 * reg * ||W||^2``.

    The penalty is ``0.5 * reg * (||W1||^2 + ||W2||^2)``, on the weights only.

    params holds leaf tensors W1 (H, D), b1 (H,), W2 (C, H), b2 (C,) that require grad; X is (N, D)
    float64, y is (N,) int64. Returns the loss as a 0-d tensor attached to the graph, so that
    ``loss.backward()`` fills every ``params[k].grad``. Do not call backward, do not modify the inputs.
    Hint: ``F.cross_entropy(scores, y)`` is the mean softmax cross-entropy.
    """
    ### BEGIN SOLUTION
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    scores = torch.relu(X @ W1.T + b1) @ W2.T + b2
    loss = F.cross_entropy(scores, y) + 0.5 * reg * ((W1**2).sum() + (W2**2).sum())
    ### END SOLUTION
    return loss


# %% [markdown]
# To see that autograd computes what you computed by hand, we need notebook 02's answer. Here is a
# compact version of it (notebook 02 is already graded, so this is no secret); if you prefer, replace
# the body with your own `two_layer_net` from notebook 02.


# %%
def two_layer_net_numpy(
    params: dict[str, np.ndarray], X: np.ndarray, y: np.ndarray, reg: float = 0.0
) -> tuple[float, dict[str, np.ndarray]]:
    """Notebook 02's answer, for comparison: the loss and its gradients, by hand, in numpy."""
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    z = X @ W1.T + b1
    h = np.maximum(z, 0.0)
    scores = h @ W2.T + b2
    shifted = scores - scores.max(axis=1, keepdims=True)
    log_p = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
    n = X.shape[0]
    loss = -log_p[np.arange(n), y].mean() + 0.5 * reg * (np.sum(W1**2) + np.sum(W2**2))
    dscores = np.exp(log_p)
    dscores[np.arange(n), y] -= 1.0
    dscores /= n
    dh = dscores @ W2
    dz = dh * (z > 0)
    grads = {
        "W1": dz.T @ X + reg * W1,
        "b1": dz.sum(axis=0),
        "W2": dscores.T @ h + reg * W2,
        "b2": dscores.sum(axis=0),
    }
    return loss, grads


# %% [markdown]
# Try it: the same parameters as numpy arrays for notebook 02's backward pass, and as leaf tensors for
# yours. After `loss.backward()`, each `.grad` should match the hand-written gradient, every row `ok`
# with errors around 1e-16.

# %%
rng = np.random.default_rng(0)
N, D, H, C = 5, 4, 6, 3
params_np = {
    "W1": rng.standard_normal((H, D)),
    "b1": rng.standard_normal(H),
    "W2": rng.standard_normal((C, H)),
    "b2": rng.standard_normal(C),
}
X_np, y_np = rng.standard_normal((N, D)), np.array([0, 1, 2, 1, 0])
loss_np, grads_np = two_layer_net_numpy(params_np, X_np, y_np, reg=0.1)

params = {k: torch.tensor(v, requires_grad=True) for k, v in params_np.items()}
loss = two_layer_loss_torch(params, torch.tensor(X_np), torch.tensor(y_np), reg=0.1)
loss.backward()
print("loss.grad_fn:", loss.grad_fn)
compare(loss=(loss, loss_np), **{f"{k}.grad": (params[k].grad, grads_np[k]) for k in params})

# %% tests grade_id="test_two_layer_loss_torch" points=4
"""two_layer_loss_torch gives PyTorch's loss, stays in the graph, and backward fills every .grad correctly."""
score = check_two_layer_loss_torch(two_layer_loss_torch)
### BEGIN HIDDEN TESTS
score = check_two_layer_loss_torch(two_layer_loss_torch, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## The graph, and the order backward runs it in
#
# Each `grad_fn` node points, through `next_functions`, to the nodes of the tensors its operation
# consumed. Following those links from the loss reaches every operation that contributed to it, down
# to one `AccumulateGrad` node per leaf. `draw_graph` (from `utils`) draws that: one box per node,
# an arrow for each link, leaves' `AccumulateGrad` boxes in green. Arrows point the way gradient flows
# during backward: from the loss down.
#
# Here is a small graph in which one intermediate result, `a`, is used three times:

# %%
x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
a = torch.exp(x)
out = (torch.sin(a) * torch.cos(a) + a).sum()
draw_graph(out, names={"x": x}, title="out = sum(sin(a) * cos(a) + a), a = exp(x)")
plt.show()

# %% [markdown]
# The picture places each node on the row of its *shortest* distance from the output. `ExpBackward0`
# is only two links below `SumBackward0` (through `AddBackward0`), so it sits on row 2, and the arrows
# from `SinBackward0` and `CosBackward0` point *up* into it (drawn in red). That is the whole difficulty
# of ordering a backward pass: `ExpBackward0` needs the **sum** of the gradients of `a` from its three
# users, $\frac{\partial L}{\partial a} = \cos(a)\cos(a) - \sin(a)\sin(a) + 1$ here, so it cannot run
# until all three have sent theirs. Running nodes in order of distance from the loss (breadth first),
# or the moment a depth-first walk first reaches them, would run it too early.
#
# The engine therefore runs the nodes in a **topological order**: a node runs only after every node that
# sends gradient into it. In the picture, every arrow must go from a node that runs earlier to a node
# that runs later.

# %% [markdown]
# ## Exercise 2: backward_order (3 points)
#
# Write `backward_order(result)`: starting at `result.grad_fn`, walk the graph through
# `next_functions` and return the class names of its nodes, `type(node).__name__` (such as
# `"AddmmBackward0"`, `"ReluBackward0"`, `"AccumulateGrad"`), in an order backward can run them.
# Precisely, the list must satisfy:
#
# 1. **Every node reachable** from `result.grad_fn` through `next_functions` appears, skipping the
#    `None` entries (inputs that do not require grad). The `AccumulateGrad` nodes of the leaves are
#    included.
# 2. **Each node exactly once**, even when several nodes point to it. Nodes are different objects even
#    when they share a class name (the network has two matrix products, two `MmBackward0` or two
#    `AddmmBackward0` nodes, depending on how you wrote it): tell nodes apart by identity, e.g. by
#    keeping the node objects themselves in a `set`, never by name.
# 3. **A node comes after every node that has it in its `next_functions`.** So `result.grad_fn` is
#    first.
#
# When several orders satisfy these rules (in the graph above, `SinBackward0` and `CosBackward0` can
# run in either order), any of them earns full points: the check does not compare with one fixed list;
# it verifies the three rules. It builds its own graphs: a chain of operations, a diamond like the one
# above, and the two-layer network of Exercise 1 with `reg > 0` (where `W1` and `W2` are each used
# twice, in a layer and in the penalty).
#
# Two ways to get rule 3 right:
#
# - **Reverse post-order.** Walk depth first, keeping a set of visited nodes, and append a node to a list
#   only *after* visiting all of its `next_functions`; the reversed list is a valid order.
# - **Count parents (Kahn's algorithm).** Walk once to count, for each node, how many links point to it;
#   then start from `result.grad_fn` and repeatedly take a node whose count is zero, list it, and
#   decrease the count of each node it points to.
#
# A recursive walk is fine here: these graphs are a few dozen nodes deep.


# %% solution grade_id="backward_order"
def backward_order(result: torch.Tensor) -> list[str]:
    """Class names of the grad_fn nodes reachable from ``result.grad_fn`` (AccumulateGrad included),
    each node once, every node after all the nodes that have it in their next_functions.

    result is a tensor with a grad_fn. Skip None entries of next_functions; tell nodes apart by
    identity, not by name. Hint: reverse the depth-first post-order.
    """
    ### BEGIN SOLUTION
    seen: set = set()
    post_order: list = []

    def visit(node) -> None:
        if node is None or node in seen:
            return
        seen.add(node)
        for child, _ in node.next_functions:
            visit(child)
        post_order.append(node)  # after all of its descendants

    visit(result.grad_fn)
    order = [type(node).__name__ for node in reversed(post_order)]
    ### END SOLUTION
    return order


# %% [markdown]
# Try it. On a chain there is exactly one valid order; on the diamond above, `ExpBackward0` must come
# after `SinBackward0`, `CosBackward0` and `AddBackward0`; on the network of Exercise 1, the
# `AccumulateGrad` nodes of `W1` and `W2` must come after both of the nodes that feed them. The picture
# of the network shows those two-parent nodes with a red arrow.

# %%
chain = torch.sin(torch.exp(2.0 * x)).sum()
print(backward_order(chain))
print(
    backward_order(chain)
    == ["SumBackward0", "SinBackward0", "ExpBackward0", "MulBackward0", "AccumulateGrad"]
)
print(backward_order(out))

params = {k: torch.tensor(v, requires_grad=True) for k, v in params_np.items()}
net_loss = two_layer_loss_torch(params, torch.tensor(X_np), torch.tensor(y_np), reg=0.1)
print(backward_order(net_loss))
draw_graph(net_loss, names=params, title="two_layer_loss_torch, reg > 0")
plt.show()

# %% tests grade_id="test_backward_order" points=3
"""backward_order lists every node of three graphs once, each after all the nodes that send it gradient."""
score = check_backward_order(backward_order)
### BEGIN HIDDEN TESTS
score = check_backward_order(backward_order, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Pitfalls that bite in practice
#
# Autograd takes the bookkeeping off your hands, but it follows a few rules that surprise everyone
# once. Each one below comes with a demonstration small enough to check by hand.
#
# ### Gradients accumulate
#
# `backward()` **adds** into `.grad`; it never overwrites it. (Within one backward pass, the
# contributions of a tensor used in several places are summed before they arrive, as in the diamond
# above.) So a second backward, from a second loss or a second training step, adds to whatever the
# first one left:

# %%
w = torch.tensor([1.0, 2.0], requires_grad=True)
(3 * w).sum().backward()
print("after one backward: ", w.grad)
(3 * w).sum().backward()
print("after two backwards:", w.grad, "<- 3 + 3, not 3")
w.grad = None  # what optimizer.zero_grad() does (it sets the grads to None by default)
(3 * w).sum().backward()
print("cleared, then once: ", w.grad)

# %% [markdown]
# So a training loop clears the gradients once per step: `optimizer.zero_grad()`, or `p.grad = None`
# for each parameter (or `p.grad.zero_()`, which keeps the tensor and fills it with zeros). Forgetting
# it raises no error; each step just uses the sum of all the gradients so far.
#
# A related rule: by default backward **frees the graph** as it goes (the saved tensors are released
# to save memory), so calling `backward()` twice on the same result fails. Pass
# `retain_graph=True` to the first call when you really need two passes.

# %%
w = torch.tensor([1.0, 2.0], requires_grad=True)
f = (w**2).sum()
f.backward()
try:
    f.backward()
except RuntimeError as error:
    print("second backward:", str(error).split(".")[0])

# %% [markdown]
# ### Updating a leaf: inside `torch.no_grad()`, in place
#
# A gradient-descent step changes the parameters, and that change must not itself be recorded in the
# graph: it is not part of the function being differentiated. Three ways to write the step, two of
# them wrong:
#
# - `p -= lr * p.grad` **outside** `torch.no_grad()`: autograd is recording, and it refuses to change a
#   leaf that requires grad in place (the change would have to enter the graph, and `p` would stop
#   being a leaf), so PyTorch raises an error.
# - `p = p - lr * p.grad`: no error, but it computes a **new** tensor, a non-leaf with a `grad_fn`, and
#   binds the name `p` to it. The tensor the optimizer (or the caller) holds is unchanged, and the new
#   one gets no `.grad` from the next backward, because it is not a leaf.
# - `with torch.no_grad(): p -= lr * p.grad`: updates the same tensor in place, records nothing, and
#   `p` stays a leaf that requires grad.

# %%
p = torch.tensor([1.0, 2.0], requires_grad=True)
(p**2).sum().backward()
lr = 0.1
try:
    p -= lr * p.grad
except RuntimeError as error:
    print("outside no_grad:", str(error).split(".")[0])

rebound = p - lr * p.grad
print("p = p - lr * p.grad ->", "is_leaf:", rebound.is_leaf, "grad_fn:", rebound.grad_fn, "| p:", p)

with torch.no_grad():
    p -= lr * p.grad
print(
    "inside no_grad      ->", "is_leaf:", p.is_leaf, "grad_fn:", p.grad_fn, "requires_grad:", p.requires_grad
)
print("p =", p)

# %% [markdown]
# ### detach: a value without its history
#
# `t.detach()` returns a tensor with the same values (it even shares the memory) but no `grad_fn`:
# gradient does not flow through it. That is what you want for a value you log, plot or use as a fixed
# target; anywhere in the computation of a loss it silently cuts the gradient of everything before it.

# %%
w = torch.tensor([1.0, 2.0], requires_grad=True)
y = w**2
(y * y.detach()).sum().backward()  # d/dw of y * const: the detached factor counts as a constant
print("with detach:   ", w.grad, " (2 w * y, i.e. 2 w^3)")
w.grad = None
y = w**2  # a fresh graph: the first backward freed the old one
(y * y).sum().backward()
print("without detach:", w.grad, " (d/dw w^4 = 4 w^3)")

# %% [markdown]
# ### retain_grad: gradients of intermediate tensors
#
# Only leaves keep their `.grad`. An intermediate result's gradient is computed during backward and
# then dropped: its `.grad` stays `None` (and reading it makes PyTorch warn). When you want to inspect
# one, for instance to compare it with the `dh` of your notebook 02 backward pass, call
# `retain_grad()` on it before `backward()`:

# %%
W = torch.tensor([[1.0, -2.0], [0.5, 3.0], [-1.0, 0.0]], requires_grad=True)
xb = torch.tensor([[2.0, 1.0]])
h = torch.relu(xb @ W.T)
h.retain_grad()
(h * torch.tensor([[1.0, 2.0, 3.0]])).sum().backward()
print("h.grad =", h.grad, "(the upstream gradient dh)")
print("W.grad =", W.grad, "(dh masked by h > 0, times x)")

# %% [markdown]
# ## Exercise 3: sgd_step (3 points)
#
# Write `sgd_step(params, lr)`, one step of gradient descent on a list of leaf tensors whose `.grad`
# the caller has just filled with `backward()`:
#
# $$p \leftarrow p - \mathrm{lr}\;\nabla_p L \qquad \text{for every } p \text{ in params},$$
#
# then clear each gradient (`p.grad = None`, or `p.grad.zero_()`), so that the next backward starts
# from zero. It returns nothing: the point is its effect on the tensors the caller holds. The check
# grades it on exactly that effect. It fills the gradients, calls your `sgd_step`, computes fresh
# gradients at the new values, calls it again, and then looks at its own tensors:
#
# - after one step, each tensor holds $p - \mathrm{lr}\, \nabla_p L$ (1 point);
# - after the second step, it holds the first step's result minus $\mathrm{lr}$ times the *fresh*
#   gradient only (1 point);
# - every `.grad` is `None` or zero after each step (0.5);
# - every parameter is still a leaf that requires grad, with `grad_fn` None (0.5).
#
# The wrong versions from the pitfalls each lose points: a step outside `no_grad` raises; `p = p - lr *
# p.grad` leaves the caller's tensors unchanged; clearing the gradients *before* the update makes it
# subtract zero; not clearing them makes the second step use the sum of both gradients.


# %% solution grade_id="sgd_step"
def sgd_step(params: list[torch.Tensor], lr: float) -> None:
    """One gradient-descent step, in place: ``p -= lr * p.grad`` for every p in params, then clear p.grad.

    params is a list of leaf tensors with requires_grad=True whose .grad is filled. The update runs
    inside ``torch.no_grad()`` and changes the tensors themselves; afterwards every p is still a leaf
    that requires grad, and p.grad is None (or zero). Returns None.
    Hint: ``with torch.no_grad():`` around the loop, and ``p.grad = None`` after the update.
    """
    ### BEGIN SOLUTION
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
    for p in params:
        p.grad = None
    ### END SOLUTION


# %% [markdown]
# Try it: notebook 02's training on the spiral, without a single line of backward pass. Each step is the
# forward pass of Exercise 1, `loss.backward()`, and your `sgd_step`. With the same initialisation and
# learning rate as in notebook 02, 300 steps reach 97-99% training accuracy in about a second.

# %%
X_spiral, y_spiral = make_spiral(seed=0)
X_t, y_t = torch.tensor(X_spiral), torch.tensor(y_spiral)
rng = np.random.default_rng(0)
hidden, n_classes = 100, 3
params = {
    "W1": torch.tensor(rng.standard_normal((hidden, 2)) * np.sqrt(2 / 2), requires_grad=True),
    "b1": torch.zeros(hidden, requires_grad=True),
    "W2": torch.tensor(rng.standard_normal((n_classes, hidden)) * np.sqrt(1 / hidden), requires_grad=True),
    "b2": torch.zeros(n_classes, requires_grad=True),
}
losses = []
for _ in range(300):
    loss = two_layer_loss_torch(params, X_t, y_t, reg=1e-3)
    loss.backward()
    sgd_step(list(params.values()), lr=1.0)
    losses.append(loss.item())


def predict(points: np.ndarray) -> np.ndarray:
    """Class labels of the trained network for an (M, 2) array of points (the forward pass in numpy)."""
    W1, b1, W2, b2 = (params[k].detach().numpy() for k in ("W1", "b1", "W2", "b2"))
    return (np.maximum(points @ W1.T + b1, 0.0) @ W2.T + b2).argmax(axis=1)


print(f"final loss {losses[-1]:.3f}, training accuracy {np.mean(predict(X_spiral) == y_spiral):.1%}")
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
plot_losses(losses, ax=axes[0])
plot_decision_boundary(predict, X_spiral, y_spiral, ax=axes[1])
plt.show()

# %% tests grade_id="test_sgd_step" points=3
"""sgd_step updates the caller's leaf tensors in place under no_grad and clears .grad, over two steps."""
score = check_sgd_step(sgd_step)
### BEGIN HIDDEN TESTS
score = check_sgd_step(sgd_step, seed=7)
### END HIDDEN TESTS
score

# %% [markdown]
# ## Summary
#
# - Autograd records a graph during the forward pass: every result of an operation on tensors that
#   require grad carries a `grad_fn` node, whose `next_functions` lead to the nodes of its inputs and,
#   at the bottom, to one `AccumulateGrad` node per leaf.
# - `loss.backward()` runs those nodes in a topological order, each after every node that sends it
#   gradient, and adds the results into the leaves' `.grad`: the reverse-order bookkeeping you did by
#   hand in notebook 02.
# - The graph only sees torch operations: `.item()`, `.numpy()`, `.detach()`, `.data` and
#   `torch.tensor(...)` of a result cut it.
# - `.grad` accumulates: clear it once per step. Update parameters in place inside `torch.no_grad()`;
#   `p = p - lr * p.grad` creates a new non-leaf tensor and leaves the original alone. Intermediate
#   tensors keep their gradient only after `retain_grad()`.
#
# Every node in these graphs was one of PyTorch's built-in backward functions. In notebook 04 you write
# your own: a `torch.autograd.Function` with a `forward` and a `backward` you supply, the backward of
# notebooks 01 and 02 plugged into the engine you have just taken apart, so that `loss.backward()` calls
# your code for your layer.
