"""The checks of notebook 03 give full points to the reference, zero to a blank answer, and fewer
points, with feedback that names the mistake, to realistic wrong answers."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from check_helpers import blank, failed, grade, item, scores_silently, scores_zero_as_blank, solution_cells

from autograder.checks import autograd_graph as checks
from autograder.grading import autograd_graph as graders

# ---------------------------------------------------------------------------------------------------
# Reference answers: the course's own solutions, run once, and other correct answers by hand
# ---------------------------------------------------------------------------------------------------

SOLUTION = solution_cells("03_autograd_graph", "breadth_first", "first_reached")
two_layer_loss_torch = SOLUTION["two_layer_loss_torch"]
backward_order = SOLUTION["backward_order"]
sgd_step = SOLUTION["sgd_step"]


def test_the_references_are_the_solutions():
    for fn in (two_layer_loss_torch, backward_order, sgd_step):
        assert fn.__code__.co_filename.startswith("03_autograd_graph.py:"), fn
    # the set-up cell's torch.set_default_dtype(torch.float64) did not leak into the test session
    assert torch.get_default_dtype() == torch.float32


def backward_order_kahn(result):
    """Another valid answer: count each node's parents, list a node when the count reaches zero."""
    root, waiting, stack, seen = result.grad_fn, {}, [result.grad_fn], {result.grad_fn}
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if child is not None:
                waiting[child] = waiting.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
    order, ready = [], [root]
    while ready:
        node = ready.pop(0)
        order.append(type(node).__name__)
        for child, _ in node.next_functions:
            if child is not None:
                waiting[child] -= 1
                if waiting[child] == 0:
                    ready.append(child)
    return order


def sgd_step_zero(params, lr):
    with torch.no_grad():
        for p in params:
            p.sub_(lr * p.grad)
            p.grad.zero_()


def sgd_step_optim(params, lr):
    """Also correct: PyTorch's own optimizer, then its zero_grad."""
    optimizer = torch.optim.SGD(params, lr=lr)
    optimizer.step()
    optimizer.zero_grad()


REFERENCE_RUNS = {
    "two_layer_loss_torch": (checks.check_two_layer_loss_torch, two_layer_loss_torch, 4.0),
    "backward_order": (checks.check_backward_order, backward_order, 3.0),
    "backward_order (Kahn)": (checks.check_backward_order, backward_order_kahn, 3.0),
    "sgd_step": (checks.check_sgd_step, sgd_step, 3.0),
    "sgd_step (zero_)": (checks.check_sgd_step, sgd_step_zero, 3.0),
    "sgd_step (optimizer)": (checks.check_sgd_step, sgd_step_optim, 3.0),
}

CHECKS = {
    "two_layer_loss_torch": (checks.TWO_LAYER_LOSS_TORCH, two_layer_loss_torch),
    "backward_order": (checks.BACKWARD_ORDER, backward_order),
    "sgd_step": (checks.SGD_STEP, sgd_step),
}


@pytest.mark.parametrize("name", list(REFERENCE_RUNS))
@pytest.mark.parametrize("seed", [0, 7])
def test_reference_gets_full_points_without_stderr(name, seed, capfd):
    check_fn, learner, points = REFERENCE_RUNS[name]
    scores_silently(check_fn(learner, seed=seed), points, capfd)


@pytest.mark.parametrize("name", list(CHECKS))
def test_blank_scores_exactly_zero(name, capfd):
    check, _ = CHECKS[name]
    scores_zero_as_blank(checks.run_check(check, blank), capfd)


@pytest.mark.parametrize("name", list(CHECKS))
def test_evidence_survives_json_and_grades_identically(name):
    check, learner = CHECKS[name]
    report = grade(check, learner)
    assert report.score == check.points


# ---------------------------------------------------------------------------------------------------
# two_layer_loss_torch: wrong answers
# ---------------------------------------------------------------------------------------------------


def loss_sum_over_batch(params, X, y, reg=0.0):
    z = X @ params["W1"].T + params["b1"]
    scores = torch.relu(z) @ params["W2"].T + params["b2"]
    penalty = 0.5 * reg * ((params["W1"] ** 2).sum() + (params["W2"] ** 2).sum())
    return F.cross_entropy(scores, y, reduction="sum") + penalty


def loss_reg_on_biases(params, X, y, reg=0.0):
    return two_layer_loss_torch(params, X, y, reg) + 0.5 * reg * sum(
        (params[k] ** 2).sum() for k in ("b1", "b2")
    )


def loss_detached(params, X, y, reg=0.0):
    W1 = params["W1"].detach()
    z = X @ W1.T + params["b1"]
    scores = torch.relu(z) @ params["W2"].T + params["b2"]
    return F.cross_entropy(scores, y) + 0.5 * reg * ((W1**2).sum() + (params["W2"] ** 2).sum())


def loss_item(params, X, y, reg=0.0):
    return two_layer_loss_torch(params, X, y, reg).item()


def loss_calls_backward(params, X, y, reg=0.0):
    loss = two_layer_loss_torch(params, X, y, reg)
    loss.backward(retain_graph=True)
    return loss


def loss_numpy_rewrapped(params, X, y, reg=0.0):
    value = two_layer_loss_torch({k: v.detach() for k, v in params.items()}, X, y, reg).numpy()
    return torch.tensor(value, requires_grad=True)


def loss_float32(params, X, y, reg=0.0):
    return two_layer_loss_torch({k: v.float() for k, v in params.items()}, X.float(), y, reg)


def loss_keepdim(params, X, y, reg=0.0):
    return two_layer_loss_torch(params, X, y, reg).reshape(1)


def loss_no_relu(params, X, y, reg=0.0):
    scores = (X @ params["W1"].T + params["b1"]) @ params["W2"].T + params["b2"]
    return F.cross_entropy(scores, y) + 0.5 * reg * ((params["W1"] ** 2).sum() + (params["W2"] ** 2).sum())


def loss_modifies_X(params, X, y, reg=0.0):
    X.mul_(1.0)
    X[0, 0] = 0.0
    return two_layer_loss_torch(params, X, y, reg)


def loss_X_requires_grad(params, X, y, reg=0.0):
    X.requires_grad_()
    return two_layer_loss_torch(params, X, y, reg)


def loss_X_copy_requires_grad(params, X, y, reg=0.0):
    """Correct: the gradient of a copy of X is the learner's own business."""
    return two_layer_loss_torch(params, X.detach().clone().requires_grad_(), y, reg)


def test_X_requires_grad_on_the_callers_tensor_is_named_and_a_copy_is_not():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_X_requires_grad)
    assert failed(report) == {"inputs unchanged"}
    assert "requires_grad of the caller's X" in item(report, "inputs unchanged").message
    assert grade(checks.TWO_LAYER_LOSS_TORCH, loss_X_copy_requires_grad).score == 4.0


def test_loss_sum_over_batch_loses_points_and_is_named():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_sum_over_batch)
    assert report.score < 4.0
    assert {"loss", "W1.grad", "b2.grad", "reg > 0"} <= failed(report)
    assert "N=5" in item(report, "loss").message
    # the mean and the sum agree at N = 1 (that is why N >= 3 matters): the size-1 item fails on D = H = 1
    assert item(report, "size 1 (N = 1; D = H = 1)").message.startswith("D=1, H=1: ")


def test_loss_reg_on_biases_is_named():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_reg_on_biases)
    assert failed(report) == {"reg > 0"}
    assert "biases are regularised" in item(report, "reg > 0").message


def test_loss_detached_weight_says_not_connected():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_detached)
    assert report.score < 4.0
    assert "W1.grad is None" in item(report, "W1.grad").message
    assert "b1.grad" not in failed(report)


@pytest.mark.parametrize("fn", [loss_item, loss_numpy_rewrapped])
def test_loss_out_of_the_graph(fn):
    report = grade(checks.TWO_LAYER_LOSS_TORCH, fn)
    assert report.score < 2.0
    assert "loss in the graph" in failed(report)
    message = item(report, "loss in the graph").message
    assert (
        ("Python float. Likely mistake: the loss converted to a number" in message)
        if fn is loss_item
        else ("grad_fn None" in message and "Likely mistake" not in message)
    )
    assert "W2.grad" in failed(report)


def test_loss_calling_backward_itself_is_named():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_calls_backward)
    assert {"W1.grad", "b1.grad", "W2.grad", "b2.grad"} <= failed(report)
    assert "Likely mistake: your function calls backward itself" in item(report, "W1.grad").message


def test_loss_float32_and_shape_one():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_float32)
    assert "loss" in failed(report) and "single precision" in item(report, "loss").message
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_keepdim)
    assert "loss" in failed(report) and "size 1" in item(report, "loss").message


def test_loss_no_relu_and_modified_input():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_no_relu)
    assert report.score < 4.0 and "loss" in failed(report)
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_modifies_X)
    assert "inputs unchanged" in failed(report)
    assert "changed its argument X" in item(report, "inputs unchanged").message


def loss_log_softmax_by_hand(params, X, y, reg=0.0):
    """-log(softmax): right for ordinary scores, inf where a true class's probability underflows."""
    scores = torch.relu(X @ params["W1"].T + params["b1"]) @ params["W2"].T + params["b2"]
    p = torch.softmax(scores, dim=1)
    penalty = 0.5 * reg * ((params["W1"] ** 2).sum() + (params["W2"] ** 2).sum())
    return -torch.log(p[torch.arange(len(y)), y]).mean() + penalty


def loss_log_softmax_stable(params, X, y, reg=0.0):
    """Also correct: log_softmax and nll_loss, PyTorch's stable pieces of cross_entropy."""
    scores = torch.relu(F.linear(X, params["W1"], params["b1"])) @ params["W2"].T + params["b2"]
    penalty = 0.5 * reg * (params["W1"].pow(2).sum() + params["W2"].pow(2).sum())
    return F.nll_loss(F.log_softmax(scores, dim=1), y) + penalty


def loss_squeezes_hidden(params, X, y, reg=0.0):
    """h.squeeze(-1): a no-op for H > 1, a (N,) vector for one hidden unit."""
    h = torch.relu(X @ params["W1"].T + params["b1"]).squeeze(-1)
    scores = h @ params["W2"].T + params["b2"]
    return F.cross_entropy(scores, y) + 0.5 * reg * ((params["W1"] ** 2).sum() + (params["W2"] ** 2).sum())


def loss_weights_as_in_out(params, X, y, reg=0.0):
    scores = torch.relu(X @ params["W1"] + params["b1"]) @ params["W2"] + params["b2"]
    return F.cross_entropy(scores, y)


def loss_global_max(params, X, y, reg=0.0):
    """Log-sum-exp shifted by the batch's one maximum: right while the rows' maxima are near."""
    scores = torch.relu(X @ params["W1"].T + params["b1"]) @ params["W2"].T + params["b2"]
    shifted = scores - scores.max()
    log_p = shifted - torch.log(torch.exp(shifted).sum(dim=1, keepdim=True))
    penalty = 0.5 * reg * ((params["W1"] ** 2).sum() + (params["W2"] ** 2).sum())
    return -log_p[torch.arange(len(y)), y].mean() + penalty


def loss_one_hot_from_labels(params, X, y, reg=0.0):
    """F.one_hot(y) without num_classes: y.max() + 1 columns."""
    scores = torch.relu(X @ params["W1"].T + params["b1"]) @ params["W2"].T + params["b2"]
    penalty = 0.5 * reg * ((params["W1"] ** 2).sum() + (params["W2"] ** 2).sum())
    return -(F.log_softmax(scores, dim=1) * F.one_hot(y)).sum(dim=1).mean() + penalty


def test_loss_shifted_by_the_global_maximum_fails_large_scores_named():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_global_max, seed=7)
    assert failed(report) == {"large scores (|s| ~ 1000)"}
    assert "batch's one maximum" in item(report, "large scores (|s| ~ 1000)").message


def test_loss_with_a_one_hot_sized_from_the_labels_fails_reg_named():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_one_hot_from_labels, seed=7)
    assert "reg > 0" in failed(report)
    for name in failed(report) - {"inputs unchanged"}:  # every case whose labels leave out the last class
        assert "sized from the labels" in item(report, name).message, item(report, name).message


def test_loss_from_log_softmax_by_hand_fails_only_large_scores():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_log_softmax_by_hand)
    assert failed(report) == {"large scores (|s| ~ 1000)"}
    message = item(report, "large scores (|s| ~ 1000)").message
    assert "underflows to 0" in message
    assert "axis 0" not in message and "batch" not in message


def test_loss_from_log_softmax_and_nll_loss_gets_full_points():
    assert grade(checks.TWO_LAYER_LOSS_TORCH, loss_log_softmax_stable, seed=2).score == 4.0


def test_loss_squeezing_the_hidden_layer_fails_only_the_size_one_item():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_squeezes_hidden)
    # inputs unchanged cannot pass while a case did not run
    assert failed(report) == {"size 1 (N = 1; D = H = 1)", "inputs unchanged"}
    assert item(report, "size 1 (N = 1; D = H = 1)").message.startswith("D=1, H=1: ")


def test_loss_using_weights_as_in_out_is_named():
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_weights_as_in_out)
    assert report.score == 0.0
    message = item(report, "loss").message
    assert "cannot be multiplied" in message and "a weight used as (in, out)?" in message


# ---------------------------------------------------------------------------------------------------
# backward_order: graphs and wrong answers
# ---------------------------------------------------------------------------------------------------


def test_graphs_are_what_the_notebook_says():
    for seed in (0, 7):
        names, parents = graders.graph_structure(checks.build_graph("two-layer net", seed))
        assert names.count("AddmmBackward0") == 2 and names.count("AccumulateGrad") == 4
        # W1's and W2's AccumulateGrad are each fed by two nodes (the layer and the penalty)
        assert sum(len(p) == 2 for n, p in zip(names, parents, strict=True) if n == "AccumulateGrad") == 2
        names, parents = graders.graph_structure(checks.build_graph("diamond", seed))
        assert max(len(p) for p in parents) == 3
    chains = {tuple(graders.graph_structure(checks.build_graph("chain", s))[0]) for s in range(4)}
    assert len(chains) > 1  # the seed changes the operations


def test_every_valid_order_is_accepted():
    # the engine's own execution order, recorded with hooks, is valid; so is the Kahn order
    result = checks.build_graph("two-layer net", 3)
    names, parents = graders.graph_structure(result)
    seen, nodes, stack = set(), [], [result.grad_fn]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        nodes.append(node)
        stack.extend(c for c, _ in node.next_functions if c is not None)
    ran: list[str] = []
    for node in nodes:
        node.register_prehook(lambda grads, node=node: ran.append(type(node).__name__))
    result.backward()
    assert graders.order_problem(ran, names, parents) is None
    assert (
        graders.order_problem(backward_order_kahn(checks.build_graph("two-layer net", 3)), names, parents)
        is None
    )
    assert backward_order_kahn(checks.build_graph("diamond", 0)) != backward_order(
        checks.build_graph("diamond", 0)
    )


# Depth first listing each node when first reached, and breadth first: the two walks the notebook
# itself shows to be no backward order, taken from its cell (the one after exercise 2's answer).
order_preorder, order_breadth_first = SOLUTION["first_reached"], SOLUTION["breadth_first"]


def order_no_dedup(result):
    order = []

    def visit(node):
        if node is None:
            return
        order.append(type(node).__name__)
        for child, _ in node.next_functions:
            visit(child)

    visit(result.grad_fn)
    return order


def order_without_accumulate(result):
    return [n for n in backward_order(result) if n != "AccumulateGrad"]


def order_forward(result):
    return backward_order(result)[::-1]


def order_dedup_by_name(result):
    out = []
    for n in backward_order(result):
        if n not in out:
            out.append(n)
    return out


def order_nodes(result):
    seen, post = set(), []

    def visit(node):
        if node is None or node in seen:
            return
        seen.add(node)
        for child, _ in node.next_functions:
            visit(child)
        post.append(node)

    visit(result.grad_fn)
    return post[::-1]


def order_first_input_only(result):
    order, node = [], result.grad_fn
    while node is not None:
        order.append(type(node).__name__)
        node = node.next_functions[0][0] if node.next_functions else None
    return order


WRONG_ORDERS = {
    order_preorder: "comes too early",
    order_breadth_first: "comes too early",
    order_no_dedup: "list each node once",
    order_without_accumulate: "include the AccumulateGrad",
    order_forward: "reversed. Likely mistake: the nodes listed leaves first",
    order_dedup_by_name: "by identity",
    order_nodes: "Likely mistake: the nodes themselves listed, not their names",
    order_first_input_only: "missing",
}


@pytest.mark.parametrize("fn", list(WRONG_ORDERS), ids=lambda f: f.__name__)
def test_wrong_orders_lose_points_with_a_reason(fn, capfd):
    report = grade(checks.BACKWARD_ORDER, fn)
    assert report.score < 3.0
    assert "two-layer net" in failed(report)
    assert WRONG_ORDERS[fn] in item(report, "two-layer net").message
    assert capfd.readouterr().err == ""


def order_depths(result):
    """Not names and not nodes: a list of numbers is refused without naming the nodes as the mistake."""
    return [1, 2, 3]


def test_a_list_that_is_not_of_nodes_is_not_named_as_one():
    message = item(grade(checks.BACKWARD_ORDER, order_depths), "two-layer net").message
    assert "return a list of strings" in message and "Likely mistake" not in message, message


def test_preorder_passes_the_chain_only():
    report = grade(checks.BACKWARD_ORDER, order_preorder)
    assert failed(report) == {"diamond", "two-layer net"}


def order_kahn_counts_links_releases_children(result):
    """Kahn's algorithm, as Hint 3 puts it, but the release walks a set of children: right on the
    notebook's diamond, where no node has the same child twice; a * a never reaches zero."""
    waiting, stack, seen = {}, [result.grad_fn], {result.grad_fn}
    while stack:
        node = stack.pop()
        for child, _ in node.next_functions:
            if child is not None:
                waiting[child] = waiting.get(child, 0) + 1
                if child not in seen:
                    seen.add(child)
                    stack.append(child)
    order, ready = [], [result.grad_fn]
    while ready:
        node = ready.pop(0)
        order.append(type(node).__name__)
        for child in {c for c, _ in node.next_functions if c is not None}:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    return order


def order_marked_when_pushed(result):
    """Hint 2's depth-first finish order without recursion, a node marked visited when pushed."""
    stack, seen, finished = [(result.grad_fn, False)], {result.grad_fn}, []
    while stack:
        node, expanded = stack.pop()
        if expanded:
            finished.append(type(node).__name__)
            continue
        stack.append((node, True))
        for child, _ in node.next_functions:
            if child is not None and child not in seen:
                seen.add(child)
                stack.append((child, False))
    return finished[::-1]


def order_marked_when_expanded(result):
    """The same stack, a node marked when it is expanded: correct."""
    stack, seen, finished = [(result.grad_fn, False)], set(), []
    while stack:
        node, expanded = stack.pop()
        if expanded:
            finished.append(type(node).__name__)
        elif node not in seen:
            seen.add(node)
            stack.append((node, True))
            stack.extend((c, False) for c, _ in node.next_functions if c is not None and c not in seen)
    return finished[::-1]


REPEATED_USE = {
    order_kahn_counts_links_releases_children: "released once per distinct child",
    order_marked_when_pushed: "marked visited when it is pushed",
}


@pytest.mark.parametrize("fn", list(REPEATED_USE), ids=lambda f: f.__name__)
def test_walks_right_on_the_diamond_fail_a_tensor_used_twice_and_are_named(fn, capfd):
    assert grade(checks.BACKWARD_ORDER, fn).score == 3.0  # the visible call's three graphs
    report = grade(checks.BACKWARD_ORDER, fn, seed=7)
    assert failed(report) == {checks.REPEATED_CASE}
    assert REPEATED_USE[fn] in item(report, checks.REPEATED_CASE).message
    assert "first reached" not in item(report, checks.REPEATED_CASE).message
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("seed", [3, 7, 11])
def test_the_repeated_use_graph_uses_a_node_twice_and_accepts_every_valid_walk(seed):
    graph = checks.build_graph(checks.REPEATED_CASE, seed)
    square = graph.grad_fn.next_functions[0][0].next_functions[0][0]
    assert square.next_functions[0][0] is square.next_functions[1][0]  # a * a
    assert checks.graph_cases(0) == checks.GRAPH_CASES and checks.REPEATED_CASE in checks.graph_cases(seed)
    for fn in (backward_order, backward_order_kahn, order_marked_when_expanded):
        assert grade(checks.BACKWARD_ORDER, fn, seed=seed).score == 3.0, fn.__name__


def test_the_preorder_is_not_blamed_on_a_stack_marked_when_pushed():
    report = grade(checks.BACKWARD_ORDER, order_preorder, seed=7)
    assert "first reached" in item(report, "diamond").message


# ---------------------------------------------------------------------------------------------------
# sgd_step: wrong answers
# ---------------------------------------------------------------------------------------------------


def sgd_no_zero(params, lr):
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad


def sgd_rebind(params, lr):
    for p in params:
        p = p.detach() - lr * p.grad  # noqa: PLW2901 - the mistake under test
        p.requires_grad_()
    for p in params:
        p.grad = None


def sgd_outside_no_grad(params, lr):
    for p in params:
        p -= lr * p.grad
        p.grad = None


def sgd_zero_first(params, lr):
    for p in params:
        p.grad.zero_()
    with torch.no_grad():
        for p in params:
            p -= lr * p.grad


def sgd_sign(params, lr):
    with torch.no_grad():
        for p in params:
            p += lr * p.grad
            p.grad = None


def sgd_detaches(params, lr):
    for p in params:
        p.detach_()
        p -= lr * p.grad
        p.grad = None


def sgd_returns_new(params, lr):
    return [(p - lr * p.grad).detach().requires_grad_() for p in params]


def test_sgd_without_zero_grad_is_named():
    report = grade(checks.SGD_STEP, sgd_no_zero)
    assert failed(report) == {"two steps", "grads cleared"}
    assert "old gradient plus the new one" in item(report, "two steps").message


@pytest.mark.parametrize("fn", [sgd_rebind, sgd_returns_new, sgd_zero_first])
def test_sgd_without_effect_is_named(fn):
    report = grade(checks.SGD_STEP, fn)
    assert {"one step", "two steps"} <= failed(report)
    assert "unchanged" in item(report, "one step").message
    assert report.score <= 1.0


def test_sgd_outside_no_grad_raises_and_gets_zero():
    report = grade(checks.SGD_STEP, sgd_outside_no_grad)
    assert report.score == 0.0
    assert "torch.no_grad()" in item(report, "one step").message


def test_sgd_sign_and_detach():
    report = grade(checks.SGD_STEP, sgd_sign)
    assert "sign is flipped" in item(report, "one step").message and report.score < 3.0
    report = grade(checks.SGD_STEP, sgd_detaches)
    assert "still leaves" in failed(report) and report.score < 3.0
    assert "no longer requires grad" in item(report, "still leaves").message


def sgd_step_slicing(params, lr):
    with torch.no_grad():
        for p in params:
            p[:] -= lr * p.grad
    for p in params:
        p.grad = None


def test_sgd_covers_a_scalar_parameter_and_names_slicing():
    assert () in checks.SGD_SHAPES
    report = grade(checks.SGD_STEP, sgd_step_slicing)
    assert report.score == 0.0
    assert "a parameter can be a 0-d scalar tensor" in item(report, "one step").message


def test_an_sgd_step_that_does_nothing_earns_nothing() -> None:
    def nothing(params, lr):
        return None

    assert grade(checks.SGD_STEP, nothing).score == 0


def loss_penalty_item(params, X, y, reg=0.0):
    """The penalty cut from the graph by .item(): the loss is right, its gradient lacks reg * W."""
    scores = torch.relu(X @ params["W1"].T + params["b1"]) @ params["W2"].T + params["b2"]
    penalty = 0.5 * reg * ((params["W1"] ** 2).sum() + (params["W2"] ** 2).sum()).item()
    return F.cross_entropy(scores, y) + penalty


def test_loss_penalty_cut_by_item_gets_notebook_03s_words():
    """Graded as before (only reg > 0 fails), but named as a cut graph: notebook 02's advice to 'add reg * W'
    by hand means nothing where autograd computes the gradient."""
    report = grade(checks.TWO_LAYER_LOSS_TORCH, loss_penalty_item)
    assert failed(report) == {"reg > 0"} and report.score == 3.33
    message = item(report, "reg > 0").message
    assert ".item()" in message and "cut it from the graph" in message
    assert "add reg * W" not in message


def sgd_through_data(params, lr):
    for p in params:
        p.data -= lr * p.grad
        p.grad = None


def test_sgd_through_data_keeps_its_points_with_a_method_note():
    """p.data -= lr * p.grad computes the right values, so the points stay (the exercise grades the effect);
    the feedback notes that .data bypasses autograd's version tracking and names torch.no_grad()."""
    report = grade(checks.SGD_STEP, sgd_through_data)
    assert report.score == checks.SGD_STEP.points and not failed(report)
    assert len(report.notes) == 1
    assert ".data" in report.notes[0] and "version tracking" in report.notes[0]
    assert "with torch.no_grad():" in report.notes[0]
    # the reference's update, inside no_grad, earns no note
    assert not grade(checks.SGD_STEP, sgd_step).notes


def test_data_bypasses_version_tracking_as_the_note_says():
    """The note's claim: after y = p * p saved p, an update through .data is used silently by backward,
    while the same update inside no_grad makes backward raise."""
    p = torch.tensor([1.0, 2.0], requires_grad=True)
    y = (p * p).sum()
    p.data -= 1.0
    y.backward()
    assert p.grad.tolist() == [0.0, 2.0]  # 2 * (new p): the old values are gone, and nothing said so
    q = torch.tensor([1.0, 2.0], requires_grad=True)
    z = (q * q).sum()
    with torch.no_grad():
        q -= 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        z.backward()
