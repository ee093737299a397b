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
    Stable at scores of ~1000: the loss stays finite there (-log(softmax(scores)) does not).
    Hint: ``F.cross_entropy(scores, y)`` is the mean softmax cross-entropy.
    """
    ### BEGIN SOLUTION
    W1, b1, W2, b2 = params["W1"], params["b1"], params["W2"], params["b2"]
    scores = torch.relu(X @ W1.T + b1) @ W2.T + b2
    loss = F.cross_entropy(scores, y) + 0.5 * reg * ((W1**2).sum() + (W2**2).sum())
    ### END SOLUTION
    return loss


# %% [markdown]
# Try it: the same parameters as numpy arrays for notebook 02's backward pass by hand, and as leaf
# tensors for your function. After `loss.backward()`, each `.grad` should match the hand-written
# gradient, every row `ok` with errors around 1e-16. The hand-written pass is in the cell (notebook 02
# is already graded, so it is no secret; you may paste your own `two_layer_net` instead). The cell also
# checks that the loss is a 0-d tensor with a `grad_fn`, and that your function left `X` and the
# parameters as they were. A `.grad` that is `None` means the graph was cut before that parameter.


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
X_t = torch.tensor(X_np)
loss = two_layer_loss_torch(params, X_t, torch.tensor(y_np), reg=0.1)
is_tensor = isinstance(loss, torch.Tensor)
print("a 0-d tensor:", is_tensor and loss.dim() == 0, "| grad_fn:", loss.grad_fn if is_tensor else None)
loss.backward()
compare(
    loss=(loss, loss_np),
    **{f"{k}.grad": (params[k].grad, grads_np[k]) for k in params},
    X_afterwards=(X_t, X_np),  # your function must not modify its arguments
    **{f"{k}_afterwards": (params[k].detach(), params_np[k]) for k in params},
)

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
# **Work one by hand first.** In the diamond above, write down the seven nodes and, for each, the nodes
# that have it in their `next_functions` (its parents): `AddBackward0` has `SumBackward0`;
# `MulBackward0` has `AddBackward0`; `SinBackward0` and `CosBackward0` have `MulBackward0`;
# `ExpBackward0` has `SinBackward0`, `CosBackward0` and `AddBackward0`; the `AccumulateGrad` of `x` has
# `ExpBackward0`. Now list them so that every node comes after all its parents. Then ask: what did you
# do, step by step, and how would a program know that a node's parents are all listed? A breadth-first
# walk from the top, or listing each node the first time a depth-first walk reaches it, fails on
# exactly this graph; the try-it cell below runs both and shows where.
#
# A recursive walk is fine here: these graphs are a few dozen nodes deep.
#
# <details><summary>Hint 1</summary>
#
# Rule 3 is about all the parents of a node, and a walk discovers a node's parents one at a time. Either
# delay listing a node until it is certain that no parent is still to come, or first collect every
# parent relation and then list.
#
# </details>
#
# <details><summary>Hint 2: depth first</summary>
#
# In a depth-first walk, a node's descendants are all finished before the node itself is finished. So
# record each node when you finish it (after visiting all of its `next_functions`), never when you first
# reach it. Keep a set of visited nodes so that a node reached twice is visited once. What is the order
# of the finished list, and how do you turn it into the order backward needs?
#
# </details>
#
# <details><summary>Hint 3: counting parents</summary>
#
# Walk the graph once and count, for each node, how many links point to it. Then start from
# `result.grad_fn` (whose count is 0): list a node whose count is 0, decrease the count of each node it
# points to, and repeat (Kahn's algorithm).
#
# </details>
#
# <details><summary>Hint 4: near the answer</summary>
#
# The depth-first way needs three things: a set of the nodes already visited, a list of finished
# nodes, and a recursive helper that, for a node it has not visited, first visits every child in
# `next_functions` and only then puts the node on the finished list. On the diamond above the finished
# list comes out as `AccumulateGrad`, `ExpBackward0`, `SinBackward0`, `CosBackward0`, `MulBackward0`,
# `AddBackward0`, `SumBackward0`: the leaves first, the output last. Compare it with the three rules.
#
# </details>


# %% solution grade_id="backward_order"
def backward_order(result: torch.Tensor) -> list[str]:
    """Class names of the grad_fn nodes reachable from ``result.grad_fn`` (AccumulateGrad included),
    each node once, every node after all the nodes that have it in their next_functions.

    result is a tensor with a grad_fn. Skip None entries of next_functions; tell nodes apart by
    identity, not by name. Returns a list of strings, ``type(node).__name__`` for each node.
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
# Try it. The cell builds three graphs of the shapes the check builds, with as many nodes: a chain
# (6 nodes, exactly one valid order), a diamond like the one above but fed by a matrix product,
# `a = exp(x @ w)` with `x` not requiring grad (8 nodes: the product adds `MmBackward0`), and the network
# of Exercise 1 with `reg > 0` (18 nodes), where the `AccumulateGrad` nodes of `W1` and `W2` must come
# after both of the nodes that feed them. The check draws its elementwise operations (sin, exp, tanh...)
# from its seed, so its names differ from these, never its node counts. It writes each layer as
# `F.linear`, one `AddmmBackward0` node; the same layer written `X @ W.T + b` has two more nodes per
# network (an `MmBackward0` and an `AddBackward0` for each `AddmmBackward0`), which is why the cell
# uses `F.linear` too. For each graph it prints the number of nodes, your list and a verdict: whether
# your names can be matched to the graph's nodes, each once, in an order where every node comes after
# all of its parents. The lines `breadth_first` and `first_reached` say whether a breadth-first walk,
# and a depth-first walk that lists each node when it first reaches it, give a valid order: the text
# says both fail on the diamond. The picture of the network shows its two-parent nodes with a red arrow.

# %%
from functools import cache


def graph_of(result: torch.Tensor) -> tuple[list, list[str], list[set[int]]]:
    """The nodes reachable from result.grad_fn (by identity), their class names, and for each node
    the indices of its parents (the nodes that have it in their next_functions)."""
    nodes, index, parents = [result.grad_fn], {result.grad_fn: 0}, [set()]
    for i, node in enumerate(nodes):  # the list grows while we walk it
        for child, _ in node.next_functions:
            if child is not None and child not in index:
                index[child] = len(nodes)
                nodes.append(child)
                parents.append(set())
            if child is not None:
                parents[index[child]].add(i)
    return nodes, [type(n).__name__ for n in nodes], parents


def problem(listed: list[str], result: torch.Tensor) -> str | None:
    """None when the listed names can be matched to the graph's nodes in a valid backward order."""
    _, names, parents = graph_of(result)
    if sorted(map(str, listed)) != sorted(names):
        return f"the graph's nodes are {sorted(names)}"

    @cache
    def can_finish(done: frozenset) -> bool:  # can listed[len(done):] be matched, given `done`?
        if len(done) == len(names):
            return True
        want = listed[len(done)]
        return any(
            i not in done and names[i] == want and parents[i] <= done and can_finish(done | {i})
            for i in range(len(names))
        )

    return None if can_finish(frozenset()) else "some node is listed before one of its parents"


def breadth_first(result: torch.Tensor) -> list[str]:
    return graph_of(result)[1]  # graph_of visits the nodes breadth first


def first_reached(result: torch.Tensor) -> list[str]:
    """Depth first, each node listed the first time the walk reaches it."""
    order, seen, stack = [], set(), [result.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        order.append(type(node).__name__)
        stack.extend(child for child, _ in reversed(node.next_functions))
    return order


rng = np.random.default_rng(1)
x = torch.tensor(rng.standard_normal((4, 3)), requires_grad=True)
x_in = torch.tensor(rng.standard_normal((4, 3)))  # an input that does not require grad
w = torch.tensor(rng.standard_normal((3, 5)), requires_grad=True)
a = torch.exp(x_in @ w)
graphs = {
    "chain": torch.cos(torch.sin(torch.exp(0.5 * x))).sum(),
    "diamond": (torch.sin(a) * torch.cos(a) + a).sum(),
}
params = {
    "W1": torch.tensor(rng.standard_normal((6, 4)), requires_grad=True),
    "b1": torch.tensor(rng.standard_normal(6), requires_grad=True),
    "W2": torch.tensor(rng.standard_normal((3, 6)), requires_grad=True),
    "b2": torch.tensor(rng.standard_normal(3), requires_grad=True),
}
X, y = torch.tensor(rng.standard_normal((5, 4))), torch.tensor([0, 1, 2, 1, 0])
scores = F.linear(torch.relu(F.linear(X, params["W1"], params["b1"])), params["W2"], params["b2"])
graphs["network"] = F.cross_entropy(scores, y) + 0.5 * 0.1 * (
    (params["W1"] ** 2).sum() + (params["W2"] ** 2).sum()
)

for name, result in graphs.items():
    yours = backward_order(result)
    found = problem(yours, result)
    print(f"{name}, {len(graph_of(result)[0])} nodes: {yours}")
    print(f"  yours: {'ok' if found is None else 'WRONG: ' + found}")
    for walk in (breadth_first, first_reached):
        print(f"  {walk.__name__}: {'valid' if problem(walk(result), result) is None else 'not valid'}")
draw_graph(graphs["network"], names=params, title="the network, reg > 0")
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
# ### Updating a leaf
#
# A gradient-descent step changes the parameters, and that change must not itself be recorded in the
# graph: it is not part of the function being differentiated. It must also change the tensors the
# caller holds, not make new ones. Two natural ways to write the step are wrong:
#
# - `p -= lr * p.grad` as it stands: autograd is recording, and it refuses to change a leaf that
#   requires grad in place (the change would have to enter the graph, and `p` would stop being a
#   leaf), so PyTorch raises an error.
# - `p = p - lr * p.grad`: no error, but it computes a **new** tensor, a non-leaf with a `grad_fn`, and
#   binds the name `p` to it. The tensor the optimizer (or the caller) holds is unchanged, and the new
#   one gets no `.grad` from the next backward, because it is not a leaf.
#
# The tool that fixes the first one is `torch.no_grad()`: a context manager (`with torch.no_grad():`)
# inside which autograd records nothing, so results computed there have no `grad_fn` and do not
# require grad. The demonstration below shows the two failures, and what `no_grad` does to an
# ordinary operation. Putting the pieces together is Exercise 3.

# %%
p = torch.tensor([1.0, 2.0], requires_grad=True)
(p**2).sum().backward()
lr = 0.1
try:
    p -= lr * p.grad
except RuntimeError as error:
    print("in place, recording:", str(error).split(".")[0])

rebound = p - lr * p.grad
print("p = p - lr * p.grad ->", "is_leaf:", rebound.is_leaf, "grad_fn:", rebound.grad_fn, "| p:", p)

with torch.no_grad():
    doubled = 2 * p
print("2 * p inside no_grad ->", "requires_grad:", doubled.requires_grad, "grad_fn:", doubled.grad_fn)
print("p itself:", p, "is_leaf:", p.is_leaf)

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
# The wrong versions from the pitfalls each lose points: an in-place step while autograd records
# raises; `p = p - lr * p.grad` leaves the caller's tensors unchanged; clearing the gradients *before*
# the update makes it subtract zero; not clearing them makes the second step use the sum of both
# gradients.
#
# <details><summary>Hint 1</summary>
#
# Two requirements from "Updating a leaf": nothing recorded, and the caller's tensor itself changed.
# Which of the operations you have seen changes a tensor without creating a new one, and what stops it
# from raising?
#
# </details>
#
# <details><summary>Hint 2</summary>
#
# An in-place operation (`-=`, or a method ending in `_`) changes the tensor object the caller also
# holds. Inside `with torch.no_grad():` it is allowed on a leaf, and the leaf stays a leaf.
#
# </details>
#
# <details><summary>Hint 3: near the answer</summary>
#
# Inside one `with torch.no_grad():` block, loop over the params and subtract `lr` times each one's
# `.grad` in place. After the loop (and only after it), set each `p.grad = None`.
#
# </details>


# %% solution grade_id="sgd_step"
def sgd_step(params: list[torch.Tensor], lr: float) -> None:
    """One gradient-descent step, in place: ``p -= lr * p.grad`` for every p in params, then clear p.grad.

    params is a list of leaf tensors with requires_grad=True whose .grad is filled. The update runs
    inside ``torch.no_grad()`` and changes the tensors themselves; afterwards every p is still a leaf
    that requires grad, and p.grad is None (or zero). A parameter may be a 0-d tensor: update the
    tensor itself, never a slice of it such as p[:]. Returns None.
    Hint: see "Updating a leaf" above.
    """
    ### BEGIN SOLUTION
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad
    for p in params:
        p.grad = None
    ### END SOLUTION


# %% [markdown]
# Try it, in two cells. The first does what the check does: two parameters (a (3, 2) matrix and a
# vector of 4), a loss whose gradient changes with the parameters, $L = \tfrac12 \lVert p_0 \rVert^2 +
# \sum_i \sum c_i \sin p_i$, so that its gradient is $p_0 + c_0 \cos p_0$ and $c_1 \cos p_1$, and two
# steps, each after a fresh `backward()`. The expected values come from numpy, stepping copies of the
# starting values with that gradient. Rows `step 1` and `step 2` compare the caller's tensors with
# them; the lines below say whether every `.grad` was cleared and every parameter is still a leaf.

# %%
rng = np.random.default_rng(2)
start = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
coefs = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
lr = 0.3


def sin_loss(ps: list[torch.Tensor]) -> torch.Tensor:
    """0.5 * ||p0||^2 + sum of c * sin(p) over both parameters."""
    return 0.5 * (ps[0] ** 2).sum() + sum(
        (torch.tensor(c) * torch.sin(q)).sum() for q, c in zip(ps, coefs, strict=True)
    )


def sin_loss_gradient(values: list[np.ndarray]) -> list[np.ndarray]:
    """The same gradient by hand, in numpy: p0 + c0 cos p0, and c1 cos p1."""
    return [values[0] + coefs[0] * np.cos(values[0]), coefs[1] * np.cos(values[1])]


ours = [torch.tensor(v, requires_grad=True) for v in start]  # the caller's tensors
expected = [v.copy() for v in start]
rows, cleared, leaves = {}, [], []
for step in (1, 2):
    sin_loss(ours).backward()
    expected = [v - lr * g for v, g in zip(expected, sin_loss_gradient(expected), strict=True)]
    sgd_step(list(ours), lr)
    for i, q in enumerate(ours):
        rows[f"step_{step}_param_{i}"] = (q.detach().clone(), expected[i])
        cleared.append(q.grad is None or bool((q.grad == 0).all()))
        leaves.append(q.is_leaf and q.requires_grad and q.grad_fn is None)
print("every .grad cleared after each step:", all(cleared))
print("every parameter still a leaf that requires grad:", all(leaves))
compare(**rows)

# %% [markdown]
# And notebook 02's training on the spiral, without a single line of backward pass. Each step is the
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
