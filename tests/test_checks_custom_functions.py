"""The checks of notebook 04 give full points to the reference, zero to a blank answer, and fewer
points, with feedback that names the tensor and the mistake, to realistic wrong answers."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from check_helpers import (
    blank,
    changed_backward,
    failed,
    grade,
    item,
    scores_silently,
    scores_zero_as_blank,
    solution_cells,
)
from torch import nn

from autograder.checks import custom_functions as checks
from autograder.checks import jacobian_layers
from autograder.grading.toolkit import backward_returns, linear_forward_mistake, step_error
from backprop_utils.data import make_spiral

# ---------------------------------------------------------------------------------------------------
# Reference answers: the course's own solutions, run once; the wrong answers below are hand-written
# ---------------------------------------------------------------------------------------------------

SOLUTION = solution_cells("04_custom_functions")
MulConstant, Exp, MyReLU = SOLUTION["MulConstant"], SOLUTION["Exp"], SOLUTION["MyReLU"]
LinearFunction, Linear = SOLUTION["LinearFunction"], SOLUTION["Linear"]
backward_by_hand, max_jacobian_error = SOLUTION["backward_by_hand"], SOLUTION["max_jacobian_error"]
train_spiral = SOLUTION["train_spiral"]


def test_the_references_are_the_solutions():
    for fn in (MulConstant.forward, LinearFunction.backward, Linear.forward, train_spiral):
        assert fn.__code__.co_filename.startswith("04_custom_functions.py:"), fn


class BlankFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError()

    @staticmethod
    def backward(ctx, grad_output):
        raise NotImplementedError()


class BlankLinear(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        raise NotImplementedError()

    def forward(self, x):
        raise NotImplementedError()


REFERENCE = [
    (checks.check_mul_constant, (MulConstant,), 1.0),
    (checks.check_exp, (Exp,), 1.0),
    (checks.check_my_relu, (MyReLU,), 1.0),
    (checks.check_linear_function, (LinearFunction,), 6.0),
    (checks.check_backward_by_hand, (backward_by_hand,), 2.0),
    (checks.check_max_jacobian_error, (max_jacobian_error,), 2.0),
    (checks.check_linear_module, (Linear,), 2.0),
    (checks.check_train_spiral, (train_spiral, Linear), 2.0),
]
BLANK = [
    (checks.check_mul_constant, (BlankFunction,)),
    (checks.check_exp, (BlankFunction,)),
    (checks.check_my_relu, (BlankFunction,)),
    (checks.check_linear_function, (BlankFunction,)),
    (checks.check_backward_by_hand, (blank,)),
    (checks.check_max_jacobian_error, (blank,)),
    (checks.check_linear_module, (BlankLinear,)),
    (checks.check_train_spiral, (blank, BlankLinear)),
]


@pytest.mark.parametrize(("check", "learner", "points"), REFERENCE, ids=lambda v: getattr(v, "__name__", ""))
def test_reference_scores_full_points_silently(check, learner, points, capfd) -> None:
    for seed in (0, 7):
        scores_silently(check(*learner, seed=seed), points, capfd)


@pytest.mark.parametrize(("check", "learner"), BLANK, ids=lambda v: getattr(v, "__name__", ""))
def test_blank_scores_zero(check, learner, capfd) -> None:
    scores_zero_as_blank(check(*learner), capfd)


def test_train_spiral_with_blank_linear_only_scores_zero_on_linear_items() -> None:
    # the student's untouched notebook: train_spiral written, Linear not yet
    report = grade(checks.TRAIN_SPIRAL, train_spiral, BlankLinear)
    assert failed(report) == {"losses", "same as nn.Linear"}
    assert "your Linear is not implemented yet" in item(report, "losses").message


# ---------------------------------------------------------------------------------------------------
# Exercise 1: MulConstant, Exp, MyReLU
# ---------------------------------------------------------------------------------------------------


class MulConstantGradForConstant(MulConstant):
    """Returns a tensor as the constant's gradient."""

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, torch.zeros(())


class MulConstantTooFew(MulConstant):
    """Returns only the tensor's gradient: one value for two inputs."""

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant


class MulConstantTensorOnCtx(torch.autograd.Function):
    """Keeps x on ctx and recomputes nothing, but stores a tensor as an attribute."""

    @staticmethod
    def forward(ctx, x, constant):
        ctx.x = x
        ctx.constant = constant
        return x * constant

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None


class MulConstantIgnoresUpstream(MulConstant):
    @staticmethod
    def backward(ctx, grad_output):
        return torch.full_like(grad_output, ctx.constant), None


def test_mul_constant_mistakes() -> None:
    report = grade(checks.MUL_CONSTANT, MulConstantGradForConstant)
    assert report.score < 1.0
    assert "grad_constant should be None" in item(report, "backward called directly").message
    assert (
        "Likely mistake: a value returned as grad_constant"
        in item(report, "backward called directly").message
    )
    assert "through autograd" in failed(report)

    report = grade(checks.MUL_CONSTANT, MulConstantTooFew)
    assert report.score < 1.0
    assert "returned 1 value(s) for the 2 inputs" in item(report, "backward called directly").message

    report = grade(checks.MUL_CONSTANT, MulConstantTensorOnCtx)
    assert failed(report) == {"tensors via save_for_backward"}
    assert "ctx.x" in item(report, "tensors via save_for_backward").message

    report = grade(checks.MUL_CONSTANT, MulConstantIgnoresUpstream)
    assert report.score < 0.5
    assert "grad_output is ignored" in item(report, "backward called directly").message


class ExpSavesInput(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * x.exp()


class ExpOutputOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.result = x.exp()
        return ctx.result

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.result


class ExpInPlace(Exp):
    """Multiplies grad_output in place: changes the caller's tensor, fails on .sum()'s expanded one."""

    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output.mul_(result)


class ExpUsesSavedInput(Exp):
    """Saves the output but multiplies by x: the derivative in terms of the wrong tensor."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * x


def test_exp_mistakes() -> None:
    report = grade(checks.EXP, ExpSavesInput)
    assert failed(report) == {"saves its output"}
    assert "saved its input x" in item(report, "saves its output").message
    assert "Likely mistake: ctx.save_for_backward(x), the input" in item(report, "saves its output").message

    report = grade(checks.EXP, ExpOutputOnCtx)
    assert failed(report) == {"saves its output"}
    assert "ctx.result" in item(report, "saves its output").message
    assert "the input" not in item(report, "saves its output").message

    report = grade(checks.EXP, ExpInPlace)
    assert "through autograd" in failed(report)
    assert "inputs unchanged" in failed(report)
    assert "changed its argument grad_output in place" in item(report, "inputs unchanged").message

    report = grade(checks.EXP, ExpUsesSavedInput)
    assert report.score < 0.5
    assert "saved input used where the output belongs" in item(report, "backward called directly").message


class ReLUAtZeroIsOne(MyReLU):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output * (x >= 0)


class ReLUInPlace(MyReLU):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad_output[x <= 0] = 0
        return grad_output


class ReLUMaskOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.mask = x > 0
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.mask


def test_my_relu_mistakes() -> None:
    report = grade(checks.MY_RELU, ReLUAtZeroIsOne)
    assert failed(report) == {"gradient 0 at x == 0"}
    assert "gradient 1 at x == 0" in item(report, "gradient 0 at x == 0").message

    report = grade(checks.MY_RELU, ReLUInPlace)
    assert {"through autograd", "inputs unchanged"} <= failed(report)
    assert "in-place write into grad_output" in item(report, "through autograd").message

    report = grade(checks.MY_RELU, ReLUMaskOnCtx)
    assert failed(report) == {"tensors via save_for_backward"}
    assert "ctx.mask" in item(report, "tensors via save_for_backward").message


# ---------------------------------------------------------------------------------------------------
# Exercise 2: LinearFunction
# ---------------------------------------------------------------------------------------------------


BiasNotSummed = changed_backward(
    "BiasNotSummed",
    LinearFunction,
    lambda gi, gw, gb, grad_output: (gi, gw, grad_output if gb is not None else None),
)


class WeightTransposed(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gi, _, gb = LinearFunction.backward(ctx, grad_output)
        gw = input.t().mm(grad_output) if ctx.needs_input_grad[1] else None
        return gi, gw, gb


class IgnoresNeedsInputGrad(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gb = grad_output.sum(0) if bias is not None else None
        return grad_output.mm(weight), grad_output.t().mm(input), gb


class TooFewGradients(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        return grad_output.mm(weight), grad_output.t().mm(input)


class BiasCrashesOnNone(LinearFunction):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        return input.mm(weight.t()) + bias

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        return grad_output.mm(weight), grad_output.t().mm(input), grad_output.sum(0)


class ForgetsTranspose(LinearFunction):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight)
        return output if bias is None else output + bias


class TensorsOnCtx(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.input, ctx.weight, ctx.has_bias = input, weight, bias is not None
        output = input.mm(weight.t())
        return output if bias is None else output + bias

    @staticmethod
    def backward(ctx, grad_output):
        gi = grad_output.mm(ctx.weight) if ctx.needs_input_grad[0] else None
        gw = grad_output.t().mm(ctx.input) if ctx.needs_input_grad[1] else None
        gb = grad_output.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return gi, gw, gb


class BiasGatedOnWrongEntry(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gi, gw, _ = LinearFunction.backward(ctx, grad_output)
        gb = grad_output.sum(0) if bias is not None and ctx.needs_input_grad[1] else None
        return gi, gw, gb


def test_bias_not_summed_passes_autograd_but_loses_grad_bias() -> None:
    # docs/checks.md item 8: autograd sum-reduces the (N, out) bias gradient, so .backward() and the
    # Jacobian agree with the reference; only backward called directly sees the wrong shape.
    report = grade(checks.LINEAR_FUNCTION, BiasNotSummed)
    assert item(report, "through autograd").passed
    assert not item(report, "grad_bias").passed
    message = item(report, "grad_bias").message
    assert "grad_bias has shape (4, 5), expected (5,)" in message
    assert "without .sum(0)" in message
    assert report.score < 6.0


def test_weight_transposed() -> None:
    report = grade(checks.LINEAR_FUNCTION, WeightTransposed)
    assert {"grad_weight", "through autograd", "mixed requires_grad"} <= failed(report)
    assert "grad_weight has shape (3, 5), expected (5, 3)" in item(report, "grad_weight").message
    assert "transposed" in item(report, "grad_weight").message
    assert item(report, "grad_input").passed and item(report, "grad_bias").passed


def test_ignoring_needs_input_grad_loses_only_that_item() -> None:
    report = grade(checks.LINEAR_FUNCTION, IgnoresNeedsInputGrad)
    assert failed(report) == {"needs_input_grad"}
    assert "ctx.needs_input_grad" in item(report, "needs_input_grad").message
    assert (
        "Likely mistake: ctx.needs_input_grad[0] is never consulted"
        in item(report, "needs_input_grad").message
    )
    assert 5.0 < report.score < 6.0


def test_too_few_gradients() -> None:
    report = grade(checks.LINEAR_FUNCTION, TooFewGradients)
    assert item(report, "grad_input").passed and item(report, "grad_weight").passed
    assert "grad_bias is missing" in item(report, "grad_bias").message
    assert "incorrect number of gradients" in item(report, "through autograd").message
    assert report.score < 4.0


def test_bias_crashing_with_none() -> None:
    report = grade(checks.LINEAR_FUNCTION, BiasCrashesOnNone)
    assert "no bias" in failed(report)
    assert "apply(x, W)" in item(report, "no bias").message
    assert "TypeError" in item(report, "no bias").message or "NoneType" in item(report, "no bias").message


def test_forgetting_the_transpose_in_forward() -> None:
    report = grade(checks.LINEAR_FUNCTION, ForgetsTranspose)
    assert report.score == 0.0
    assert "LinearFunction.apply raised RuntimeError" in item(report, "forward").message
    assert "Likely mistake: the input multiplied by the weight itself" in item(report, "forward").message


def test_tensors_on_ctx_attributes() -> None:
    # gradcheck and every gradient pass: only the look inside ctx tells
    report = grade(checks.LINEAR_FUNCTION, TensorsOnCtx)
    assert failed(report) == {"tensors via save_for_backward"}
    assert "ctx.input, ctx.weight" in item(report, "tensors via save_for_backward").message


def test_bias_gated_on_the_wrong_entry_of_needs_input_grad() -> None:
    report = grade(checks.LINEAR_FUNCTION, BiasGatedOnWrongEntry)
    assert {"mixed requires_grad", "needs_input_grad"} <= failed(report)
    assert "only bias requires grad" in item(report, "mixed requires_grad").message
    message = item(report, "needs_input_grad").message
    assert (
        "Likely mistake: bias's gradient is gated on ctx.needs_input_grad[1], the entry of weight" in message
    )


def test_linear_function_jacobian_evidence_is_float64() -> None:
    evidence = checks.LINEAR_FUNCTION.collect(LinearFunction, seed=0)
    jac = evidence["cases"][checks.MAIN]["outputs"]["jacobian"]
    assert {k: v.shape for k, v in jac.items()} == {"x": (20, 12), "W": (20, 15), "b": (20, 5)}
    assert all(v.dtype == np.float64 for v in jac.values())


# ---------------------------------------------------------------------------------------------------
# Exercise 3: backward_by_hand
# ---------------------------------------------------------------------------------------------------


def by_hand_through_engine(function, x, W, b, grad):
    """Runs the whole engine and returns what it leaves in .grad."""
    out = function.apply(x, W, b)
    out.backward(grad)
    return x.grad, W.grad, None if b is None else b.grad


def by_hand_autograd_grad(function, x, W, b, grad):
    out = function.apply(x, W, b)
    wanted = [t for t in (x, W, b) if t is not None and t.requires_grad]
    grads = iter(torch.autograd.grad(out, wanted, grad))
    return tuple(next(grads) if t is not None and t.requires_grad else None for t in (x, W, b))


def by_hand_first_only(function, x, W, b, grad):
    out = function.apply(x, W, b)
    return out.grad_fn.apply(grad)[0]


def by_hand_ignores_function(function, x, W, b, grad):
    out = LinearFunction.apply(x, W, b)
    return tuple(out.grad_fn.apply(grad))


def test_backward_by_hand_mistakes() -> None:
    report = grade(checks.BACKWARD_BY_HAND, by_hand_through_engine)
    assert {"what grad_fn.apply returns", "no side effects"} <= failed(report)
    assert "grad_bias has shape (5,), expected (4, 5)" in item(report, "what grad_fn.apply returns").message
    assert "summed over the batch" in item(report, "what grad_fn.apply returns").message
    assert ".grad was filled in" in item(report, "no side effects").message

    report = grade(checks.BACKWARD_BY_HAND, by_hand_autograd_grad)
    assert failed(report) == {"what grad_fn.apply returns"}

    report = grade(checks.BACKWARD_BY_HAND, by_hand_first_only)
    assert "one entry per input" in failed(report)
    assert report.score <= 1.0

    report = grade(checks.BACKWARD_BY_HAND, by_hand_ignores_function)
    assert "what grad_fn.apply returns" in failed(report)


# ---------------------------------------------------------------------------------------------------
# Exercise 4: max_jacobian_error
# ---------------------------------------------------------------------------------------------------


def jacobian_forward_differences(fn, inputs, eps=1e-6):
    """Mistake: forward differences (f(x + eps) - f(x)) / eps, accurate only to ~eps f''."""
    analytical = torch.autograd.functional.jacobian(fn, tuple(inputs))
    base = fn(*inputs).detach().reshape(-1)
    worst = 0.0
    for k, t in enumerate(inputs):
        exact = analytical[k].reshape(base.numel(), -1)
        for j in range(t.numel()):
            values = [s.detach().clone() for s in inputs]
            values[k].view(-1)[j] = values[k].view(-1)[j].item() + eps
            with torch.no_grad():
                numerical = (fn(*values).reshape(-1) - base) / eps
            worst = max(worst, (exact[:, j] - numerical).abs().max().item())
    return worst


def jacobian_not_restored(fn, inputs, eps=1e-6):
    """Mistake: centred differences that leave each element at old - eps instead of putting it back."""
    worst = 0.0
    out = fn(*inputs)
    for k, t in enumerate(inputs):
        analytical = _analytical_jacobian(out, t)
        copies = [s.detach().clone() for s in inputs]
        with torch.no_grad():
            for j in range(t.numel()):
                old = copies[k].view(-1)[j].item()
                copies[k].view(-1)[j] = old + eps
                plus = fn(*copies).reshape(-1)
                copies[k].view(-1)[j] = old - eps
                minus = fn(*copies).reshape(-1)
                worst = max(worst, (analytical[:, j] - (plus - minus) / (2 * eps)).abs().max().item())
    return worst


def _analytical_jacobian(out, t):
    """d out / d t, one row per element of ``out``, by backward passes of one-hot gradients."""
    rows = []
    for i in range(out.numel()):
        one_hot = torch.zeros(out.numel(), dtype=out.dtype)
        one_hot[i] = 1.0
        rows.append(torch.autograd.grad(out, t, one_hot.view_as(out), retain_graph=True)[0].reshape(-1))
    return torch.stack(rows)


def jacobian_always_float64(fn, inputs, eps=1e-6):
    """Mistake: the inputs converted to float64 first, so a float32 Jacobian looks exact."""
    return max_jacobian_error(fn, tuple(t.detach().double().requires_grad_(True) for t in inputs), eps)


def jacobian_gradcheck_bool(fn, inputs, eps=1e-6):
    return torch.autograd.gradcheck(fn, inputs, raise_exception=False)


def jacobian_first_input_transposed(fn, inputs, eps=1e-6):
    """Compares the analytical Jacobian with the transpose of the numerical one."""
    out = fn(*inputs)
    t = inputs[0]
    analytical = _analytical_jacobian(out, t)
    return float((analytical.sum() - analytical.t().sum()).abs() + analytical.abs().max())


def jacobian_compared_with_itself(fn, inputs, eps=1e-6):
    """Mistake: the numerical Jacobian never computed; the analytical one compared with itself."""
    analytical = torch.autograd.functional.jacobian(fn, tuple(inputs))
    return max(float((j - j.clone()).abs().max()) for j in analytical)


def test_max_jacobian_error_mistakes() -> None:
    report = grade(checks.MAX_JACOBIAN_ERROR, jacobian_forward_differences)
    assert failed(report) == {"float64: small"}
    assert "forward differences" in item(report, "float64: small").message
    assert "not put back" not in item(report, "float64: small").message

    # An element left at old - eps gives an error of the same order: it is named, not called forward
    # differences (the note's diagnosis before).
    report = grade(checks.MAX_JACOBIAN_ERROR, jacobian_not_restored)
    assert failed(report) == {"float64: small"}
    assert "not put back to its old value" in item(report, "float64: small").message
    assert "forward differences" not in item(report, "float64: small").message

    report = grade(checks.MAX_JACOBIAN_ERROR, jacobian_always_float64)
    assert failed(report) == {"float32: large"}
    assert "converted to float64" in item(report, "float32: large").message

    report = grade(checks.MAX_JACOBIAN_ERROR, jacobian_gradcheck_bool)
    assert report.score == 0.0
    assert "expected one number" in item(report, "float64: small").message

    report = grade(checks.MAX_JACOBIAN_ERROR, jacobian_first_input_transposed)
    assert report.score < 2.0

    report = grade(checks.MAX_JACOBIAN_ERROR, jacobian_compared_with_itself)
    assert "float64: small" in failed(report)
    assert "exactly 0" in item(report, "float64: small").message


def jacobian_of_a_fixed_layer(fn, inputs, eps=1e-6):
    """Mistake (or a shortcut): the error of the notebook's own layer, whatever fn it is given."""
    return max_jacobian_error(jacobian_layers.tanh_linear, inputs, eps)


@pytest.mark.parametrize("seed", [0, 7])
def test_max_jacobian_error_must_measure_the_fn_it_is_given(seed: int) -> None:
    """A planted error of a drawn size in one Jacobian entry: the right answer is that size, so a number
    right in size for any layer (the notebook's own, or a remembered one) earns nothing."""
    plant = jacobian_layers.planted_error(seed)
    assert plant["sizes"] != jacobian_layers.planted_error(seed + 1)["sizes"]
    assert max_jacobian_error(
        jacobian_layers.planted_layer(seed, "float64"),
        tuple(torch.tensor(a, requires_grad=True) for a in jacobian_layers.jacobian_inputs(seed).values()),
    ) == pytest.approx(plant["sizes"]["float64"], abs=1e-8)
    report = grade(checks.MAX_JACOBIAN_ERROR, jacobian_of_a_fixed_layer, seed=seed)
    assert report.score == 0.0
    assert failed(report) == {"float64: small", "float32: large"}
    assert "not computed on the fn and inputs given" in item(report, "float64: small").message


# ---------------------------------------------------------------------------------------------------
# Exercise 5: Linear and train_spiral
# ---------------------------------------------------------------------------------------------------


class LinearRandn(Linear):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__(in_features, out_features, bias)
        with torch.no_grad():
            self.weight.copy_(torch.randn(out_features, in_features))


class LinearBiasFirst(nn.Module):
    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        bound = 1 / math.sqrt(in_features)
        self.bias = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound)) if bias else None
        self.weight = nn.Parameter(torch.empty(out_features, in_features))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))

    def forward(self, x):
        return LinearFunction.apply(x, self.weight, self.bias)


class LinearPlainTensors(nn.Module):
    """Keeps weight and bias as plain tensors: nothing registered, .double() does not convert them."""

    def __init__(self, in_features, out_features, bias=True):
        super().__init__()
        ref = Linear(in_features, out_features, bias)
        self.w = ref.weight.detach().clone().requires_grad_(True)
        self.b = None if ref.bias is None else ref.bias.detach().clone().requires_grad_(True)

    def forward(self, x):
        return LinearFunction.apply(x, self.w.to(x.dtype), None if self.b is None else self.b.to(x.dtype))


class LinearWithoutFunction(Linear):
    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


def test_linear_module_mistakes() -> None:
    report = grade(checks.LINEAR_MODULE, LinearRandn)
    assert failed(report) == {"initialised like nn.Linear"}
    assert "weight of Linear(3, 5)" in item(report, "initialised like nn.Linear").message

    report = grade(checks.LINEAR_MODULE, LinearBiasFirst)
    assert "initialised like nn.Linear" in failed(report)
    assert "the bias drawn before the weight" in item(report, "initialised like nn.Linear").message

    report = grade(checks.LINEAR_MODULE, LinearPlainTensors)
    assert "parameters registered" in failed(report)
    assert "nn.Parameter" in item(report, "parameters registered").message
    assert report.score < 1.0

    report = grade(checks.LINEAR_MODULE, LinearWithoutFunction)
    assert failed(report) == {"uses LinearFunction"}
    assert "AddmmBackward0" in item(report, "uses LinearFunction").message


def train_spiral_ignores_class(linear_cls, seed=0, steps=30, hidden=32, lr=1.0):
    return train_spiral(nn.Linear, seed, steps, hidden, lr)


def train_spiral_seeded_late(linear_cls, seed=0, steps=30, hidden=32, lr=1.0):
    """Mistake: torch.manual_seed(seed) only after the model is built, so its weights are not the recipe's."""
    layers = iter([linear_cls(2, hidden), linear_cls(hidden, 3)])  # drawn before the seed is set
    return train_spiral(lambda *size: next(layers), seed, steps, hidden, lr)


def train_spiral_unseeded(linear_cls, seed=0, steps=30, hidden=32, lr=1.0):
    """Mistake: no torch.manual_seed at all (the layers are built, then trained, from whatever state)."""
    torch.manual_seed(seed + 12345)  # stands for the kernel's state, which is not the seed's
    layers = iter([linear_cls(2, hidden), linear_cls(hidden, 3)])
    torch.rand(1)  # and it moves on
    return train_spiral_without_seed(lambda *size: next(layers), seed, steps, hidden, lr)


def train_spiral_without_seed(linear_cls, seed, steps, hidden, lr):
    X, y = (torch.tensor(a) for a in make_spiral(seed=seed))
    model = nn.Sequential(linear_cls(2, hidden), nn.ReLU(), linear_cls(hidden, 3)).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(X), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def train_spiral_own_lr(linear_cls, seed=0, steps=30, hidden=32, lr=1.0):
    return train_spiral(linear_cls, seed, steps, hidden, 0.1)


class LinearWrongBiasGradient(Linear):
    def forward(self, x):
        return BiasGatedOnWrongEntry.apply(x, self.weight, self.bias) * 1.0 + 0.0 * self.bias.sum()


class LinearScaledGradient(Linear):
    def forward(self, x):
        return WeightTwice.apply(x, self.weight, self.bias)


class WeightTwice(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        gi, gw, gb = LinearFunction.backward(ctx, grad_output)
        return gi, 2 * gw, gb


def test_train_spiral_mistakes() -> None:
    report = grade(checks.TRAIN_SPIRAL, train_spiral_ignores_class, Linear)
    assert failed(report) == {"same as nn.Linear"}
    assert (
        "Likely mistake: train_spiral ignores its linear_cls argument"
        in item(report, "same as nn.Linear").message
    )

    report = grade(checks.TRAIN_SPIRAL, train_spiral_seeded_late, Linear)
    assert "follows the recipe" in failed(report)
    assert (
        "Likely mistake: torch.manual_seed(seed) called after the layers"
        in item(report, "follows the recipe").message
    )

    # never seeded at all: the generator is not in the seeded state at any point, so only candidates
    report = grade(checks.TRAIN_SPIRAL, train_spiral_unseeded, Linear)
    assert "follows the recipe" in failed(report)
    message = item(report, "follows the recipe").message
    assert "Candidates: torch.manual_seed(seed)" in message and "Likely mistake" not in message, message

    report = grade(checks.TRAIN_SPIRAL, train_spiral_own_lr, Linear)
    assert failed(report) == {"follows the recipe"}

    report = grade(checks.TRAIN_SPIRAL, train_spiral, LinearScaledGradient)
    assert failed(report) == {"same as nn.Linear"}
    assert "part at step 1" in item(report, "same as nn.Linear").message

    report = grade(checks.TRAIN_SPIRAL, train_spiral, LinearRandn)
    assert "part at step 0" in item(report, "same as nn.Linear").message


def train_spiral_no_zero_grad(linear_cls, seed=0, steps=30, hidden=32, lr=1.0):
    """Mistake: the recipe without optimizer.zero_grad(); both runs make it, so they agree."""
    X, y = (torch.tensor(a) for a in make_spiral(seed=seed))
    torch.manual_seed(seed)
    model = nn.Sequential(linear_cls(2, hidden), nn.ReLU(), linear_cls(hidden, 3)).double()
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(X), y)
        losses.append(loss.item())
        loss.backward()
        optimizer.step()
    return losses


def train_spiral_loss_after_step(linear_cls, seed=0, steps=30, hidden=32, lr=1.0):
    """Mistake: the loss recorded after the update (one step more run, the first loss dropped)."""
    return train_spiral(linear_cls, seed, steps + 1, hidden, lr)[1:]


SPIRAL_LOOPS = {
    train_spiral_no_zero_grad: ("step 2", "never zeroed"),
    train_spiral_loss_after_step: ("step 0", "recorded after the update"),
    train_spiral_seeded_late: ("step 0", "manual_seed(seed) called after the layers"),
    train_spiral_own_lr: ("step 1", "learning rate of 0.1"),
}


@pytest.mark.parametrize("fn", list(SPIRAL_LOOPS), ids=lambda f: f.__name__)
@pytest.mark.parametrize("seed", [0, 7])
def test_train_spiral_names_the_first_step_that_differs_and_a_cause_that_fits(fn, seed) -> None:
    report = grade(checks.TRAIN_SPIRAL, fn, Linear, seed=seed)
    assert failed(report) == {"follows the recipe"}
    message = item(report, "follows the recipe").message
    step, cause = SPIRAL_LOOPS[fn]
    assert f"part from the reference loop's at {step}" in message and cause in message, message
    assert "Follow the docstring" not in message
    others = {c for f, (_, c) in SPIRAL_LOOPS.items() if f is not fn}
    assert not any(c in message for c in others), message


def test_checks_do_not_disturb_the_global_torch_seed() -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    checks.collect_linear_module(Linear, seed=0)
    checks.collect_train_spiral(train_spiral, Linear, seed=0)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize(
    ("check", "learner", "points"),
    [
        (checks.MUL_CONSTANT, (MulConstant,), 1.0),
        (checks.EXP, (Exp,), 1.0),
        (checks.MY_RELU, (MyReLU,), 1.0),
        (checks.LINEAR_FUNCTION, (LinearFunction,), 6.0),
        (checks.BACKWARD_BY_HAND, (backward_by_hand,), 2.0),
        (checks.MAX_JACOBIAN_ERROR, (max_jacobian_error,), 2.0),
        (checks.LINEAR_MODULE, (Linear,), 2.0),
        (checks.TRAIN_SPIRAL, (train_spiral, Linear), 2.0),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_reference_evidence_survives_json_and_grades_identically(check, learner, points) -> None:
    assert grade(check, *learner, seed=3).score == points


# ---------------------------------------------------------------------------------------------------
# One rule for a correct answer; size-1 edges; factors of N; the argument that was modified
# ---------------------------------------------------------------------------------------------------


class MulConstantTrailingNones(MulConstant):
    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None, None


class ExpTrailingNone(Exp):
    @staticmethod
    def backward(ctx, grad_output):
        (result,) = ctx.saved_tensors
        return grad_output * result, None


class ReLUOneTuple(MyReLU):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return (grad_output * (x > 0),)


class ReLUAsList(MyReLU):
    """A list is one value to PyTorch, not a sequence of gradients: autograd refuses it."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return [grad_output * (x > 0)]


class LinearFunctionTrailingNone(LinearFunction):
    """PyTorch's documented example: one more None than apply(x, W) has inputs, always."""

    @staticmethod
    def backward(ctx, grad_output):
        return (*LinearFunction.backward(ctx, grad_output), None)


class LinearFunctionOtherSpelling(LinearFunction):
    """``@``, ``.T`` and ``sum(dim=0)``: the same values as the reference's ``mm``, ``.t()``, ``sum(0)``."""

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gi = grad_output @ weight if ctx.needs_input_grad[0] else None
        gw = grad_output.T @ input if ctx.needs_input_grad[1] else None
        gb = grad_output.sum(dim=0) if bias is not None and ctx.needs_input_grad[2] else None
        return gi, gw, gb


@pytest.mark.parametrize(
    ("check", "learner"),
    [
        (checks.MUL_CONSTANT, MulConstantTrailingNones),
        (checks.EXP, ExpTrailingNone),
        (checks.MY_RELU, ReLUOneTuple),
        (checks.LINEAR_FUNCTION, LinearFunctionTrailingNone),
        (checks.LINEAR_FUNCTION, LinearFunctionOtherSpelling),
    ],
    ids=lambda v: getattr(v, "__name__", getattr(v, "name", "")),
)
def test_every_form_pytorch_accepts_keeps_full_points(check, learner) -> None:
    report = grade(check, learner)
    assert report.score == check.points, report.render()


class MulConstantExtraTensor(MulConstant):
    """A third value that is not None: PyTorch refuses it, so does every item."""

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output * ctx.constant, None, grad_output


class LinearFunctionExtraTensor(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        return (*LinearFunction.backward(ctx, grad_output), grad_output)


def test_a_list_is_refused_as_pytorch_refuses_it() -> None:
    report = grade(checks.MY_RELU, ReLUAsList)
    assert {"backward called directly", "through autograd"} <= failed(report)
    assert "return a tuple" in item(report, "backward called directly").message
    assert (
        "Likely mistake: the gradients returned as a list" in item(report, "backward called directly").message
    )


def test_a_value_beyond_the_inputs_that_is_not_none_loses_points_in_every_item() -> None:
    report = grade(checks.MUL_CONSTANT, MulConstantExtraTensor)
    assert "returned 3 value(s) for the 2 inputs" in item(report, "backward called directly").message
    assert (
        "Likely mistake: a value that is not None beyond the last input"
        in item(report, "backward called directly").message
    )
    assert "through autograd" in failed(report)

    report = grade(checks.LINEAR_FUNCTION, LinearFunctionExtraTensor)
    assert {"grad_input", "grad_weight", "grad_bias", "through autograd"} <= failed(report)
    assert "only extra trailing Nones are ignored" in item(report, "grad_bias").message


# ``grad_output.sum(0).squeeze(0)``, from older PyTorch docs: a 0-d gradient when out_features = 1.
BiasSqueezed = changed_backward(
    "BiasSqueezed",
    LinearFunction,
    lambda gi, gw, gb, grad_output: (gi, gw, None if gb is None else grad_output.sum(0).squeeze(0)),
)


def test_squeezed_bias_gradient_loses_the_size_one_item_with_the_squeeze_named() -> None:
    report = grade(checks.LINEAR_FUNCTION, BiasSqueezed)
    assert failed(report) == {"in = 1, out = 1"}
    message = item(report, "in = 1, out = 1").message
    assert "when out=1" in message and "grad_bias has shape (), expected (1,)" in message
    assert ".squeeze(0)" in message and "0-d" in message
    assert report.score < 6.0


# ``.squeeze()`` with no axis: also wrong at in_features = 1? No: only the bias is squeezed; the
#     weight gradient squeezed breaks at in = 1.
BiasSqueezedEverywhere = changed_backward(
    "BiasSqueezedEverywhere",
    LinearFunction,
    lambda gi, gw, gb, grad_output: (gi, None if gw is None else gw.squeeze(), gb),
)


def test_a_squeezed_weight_gradient_loses_the_size_one_item() -> None:
    report = grade(checks.LINEAR_FUNCTION, BiasSqueezedEverywhere)
    assert failed(report) == {"in = 1, out = 1"}
    assert "when in=1: grad_weight has shape (5,), expected (5, 1)" in item(report, "in = 1, out = 1").message


BiasMean = changed_backward(
    "BiasMean",
    LinearFunction,
    lambda gi, gw, gb, grad_output: (gi, gw, None if gb is None else grad_output.mean(0)),
)


def test_a_factor_of_n_is_named_with_the_batch_size() -> None:
    report = grade(checks.LINEAR_FUNCTION, BiasMean)
    message = item(report, "grad_bias").message
    assert "a factor of 1/N with N=4" in message
    assert "constant factor" not in message


class ReLUMaskInSavedInput(MyReLU):
    """Builds the mask in the saved x itself: the caller's input is overwritten by backward."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        mask = x
        mask[x <= 0] = 0
        mask[x > 0] = 1
        return grad_output * mask


def test_a_backward_that_writes_into_its_saved_input_is_told_so() -> None:
    report = grade(checks.MY_RELU, ReLUMaskInSavedInput)
    assert "inputs unchanged" in failed(report)
    message = item(report, "inputs unchanged").message
    assert "changed its argument x in place" in message and "backward wrote into the saved x" in message
    assert "grad_output" not in message and "dout" not in message


class ExpForwardInPlace(Exp):
    """Returns its input after exp_: once that output is edited, reading its grad_fn raises."""

    @staticmethod
    def forward(ctx, x):
        result = x.exp_()
        ctx.save_for_backward(result)
        return result


class ReLUForwardInPlace(MyReLU):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x.clone())
        return x.clamp_(min=0).clone()


def test_a_forward_that_returns_none_is_a_forward_error_not_a_backward_crash() -> None:
    class ReturnsNothing(LinearFunction):
        @staticmethod
        def forward(ctx, input, weight, bias=None):
            ctx.save_for_backward(input, weight, bias)

    report = grade(checks.LINEAR_FUNCTION, ReturnsNothing)
    assert report.score == 0.0
    message = item(report, "forward").message
    assert "LinearFunction.apply returned a NoneType, expected a tensor" in message
    assert "Likely mistake: forward does not return its result" in message

    class ReturnsNumpy(LinearFunction):
        @staticmethod
        def forward(ctx, input, weight, bias=None):
            ctx.save_for_backward(input, weight, bias)
            return F.linear(input, weight, bias).numpy()

    message = item(grade(checks.LINEAR_FUNCTION, ReturnsNumpy), "forward").message
    assert "returned a ndarray" in message and "Likely mistake" not in message, message
    assert not any("backward" in i.message and "failed" in i.message for i in report.items), report.render()


def test_a_typo_in_backward_does_not_fail_the_forward() -> None:
    class BackwardTypo(LinearFunction):
        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            return grad_output.mm(weigth), None, None  # noqa: F821 - the typo is the point

    report = grade(checks.LINEAR_FUNCTION, BackwardTypo)
    assert item(report, "forward").passed
    assert "NameError" in item(report, "grad_input").message


def test_a_forward_that_writes_into_its_input_is_told_so() -> None:
    report = grade(checks.MY_RELU, ReLUForwardInPlace)
    message = item(report, "inputs unchanged").message
    assert "forward wrote into its input x" in message
    assert "grad_output" not in message


def test_an_output_autograd_refuses_after_an_edit_is_recorded_not_a_crash() -> None:
    # reading the grad_fn of a returned input that was then edited raises inside the harness: that
    # is a step's error in the evidence, and forward is still the one told it wrote into x
    report = grade(checks.EXP, ExpForwardInPlace)
    assert "forward wrote into its input x" in item(report, "inputs unchanged").message
    assert report.score < 1.0


class LinearOnSqueezedBias(Linear):
    def forward(self, x):
        return BiasSqueezed.apply(x, self.weight, self.bias)


def test_a_module_on_a_squeezed_bias_gradient_loses_only_forward_and_backward() -> None:
    report = grade(checks.LINEAR_MODULE, LinearOnSqueezedBias)
    # (its grad_fn is BiasSqueezedBackward, so "uses LinearFunction" is lost too, by name only)
    assert failed(report) == {"forward and backward", "uses LinearFunction"}
    message = item(report, "forward and backward").message
    assert message.startswith("Linear(1, 1): ") and "invalid gradient" in message


# ---------------------------------------------------------------------------------------------------
# The shared rules: a step that did not run, and a backward's return value as PyTorch reads it
# ---------------------------------------------------------------------------------------------------


def test_a_step_that_did_not_run_reports_the_error_of_the_step_that_stopped_it() -> None:
    record = {"errors": {"forward": "f raised ValueError"}, "blocked": {"direct": "forward"}}
    assert step_error(record, "direct") == "f raised ValueError"
    assert step_error({"errors": {"forward": None}, "blocked": {}}, "forward") is None
    assert "a bug in the course" in step_error({"errors": {}, "blocked": {}}, "autograd")


@pytest.mark.parametrize(
    ("kind", "grads", "n", "problem"),
    [
        ("tuple", ["g", None, None], 2, None),
        ("Tensor", ["g"], 1, None),
        ("tuple", ["g", "h"], 1, "returned 2 value(s) for the 1 input of forward"),
        ("tuple", ["g"], 2, "so b is missing"),
        ("list", ["g", "h"], 2, "return a tuple"),
    ],
)
def test_backward_returns_reads_a_return_value_as_pytorch_does(kind, grads, n, problem) -> None:
    values = [None if g is None else np.full(2, ord(g), dtype=np.float64) for g in grads]
    read, message = backward_returns({"kind": kind, "grads": values}, n, "F", ["a", "b"])
    assert len(read) == n
    if problem is None:
        assert message is None
        assert all(np.array_equal(a, b) for a, b in zip(read, values, strict=False) if a is not None)
    else:
        assert problem in message


def test_backward_by_hand_that_does_nothing_earns_nothing() -> None:
    def nothing(function, x, W, b, grad):
        return None

    assert grade(checks.BACKWARD_BY_HAND, nothing).score == 0


BiasKeepdim = changed_backward(
    "BiasKeepdim",
    LinearFunction,
    lambda gi, gw, gb, grad_output: (gi, gw, grad_output.sum(0, keepdim=True) if gb is not None else None),
)


def test_bias_summed_with_keepdim_is_not_called_unsummed_at_n_1() -> None:
    """With N = 1 the keepdim sum and grad_output itself are the same (1, out) array: the note names both
    rather than calling a keepdim sum "grad_output returned without .sum(0)" (its diagnosis before)."""
    report = grade(checks.LINEAR_FUNCTION, BiasKeepdim)
    assert "summed with keepdim" in item(report, "grad_bias").message
    message = item(report, "N = 1").message
    assert "grad_bias has shape (1, 5), expected (5,)" in message
    assert "both grad_output returned without .sum(0) and .sum(0, keepdim=True)" in message
    assert "Likely mistake: grad_output returned without .sum(0)" not in message

    report = grade(checks.LINEAR_FUNCTION, BiasNotSummed)
    assert "Likely mistake: grad_output returned without .sum(0)" in item(report, "grad_bias").message


# ------------------------------------------------------------------------------------------------
# The one Function contract (docs/checks.md items 30 and 31) and the order of the gradients
# ------------------------------------------------------------------------------------------------

GradientsSwapped = changed_backward(
    "GradientsSwapped", LinearFunction, lambda gx, gw, gb, grad_output: (gw, gx, gb)
)


def test_gradients_in_the_wrong_order_are_named_as_such_and_nothing_else():
    report = grade(checks.LINEAR_FUNCTION, GradientsSwapped)
    assert report.score < checks.LINEAR_FUNCTION.points
    text = report.render()
    assert "returns the gradients in the wrong order (grad_weight, grad_input, grad_bias)" in text, text
    assert "needs_input_grad[0] is False" not in text, text
    assert item(report, "needs_input_grad").passed, text
    for i in report.items:
        assert i.passed or "wrong order" in i.message, text


class ReLUViewsUpstream(MyReLU):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output.view(-1).view(grad_output.shape) * (x > 0)


class ReLUWritesUpstream(MyReLU):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        grad_output[x <= 0] = 0
        return grad_output


class ReLUReshapesUpstream(MyReLU):
    """The right fix of ReLUViewsUpstream."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output.reshape(-1).reshape(grad_output.shape) * (x > 0)


@pytest.mark.parametrize(
    ("learner", "says"),
    [(ReLUViewsUpstream, ".view on grad_output"), (ReLUWritesUpstream, "grad_output")],
)
def test_every_upstream_layout_is_sent_to_backward(learner, says):
    report = grade(checks.MY_RELU, learner)
    lost = item(report, "upstream gradient layouts")
    assert not lost.passed and says in lost.message, report.render()


def test_a_backward_that_reshapes_its_upstream_gradient_keeps_full_marks():
    assert grade(checks.MY_RELU, ReLUReshapesUpstream).score == checks.MY_RELU.points


# ---------------------------------------------------------------------------------------------------
# Each recogniser names its own mistake only
# ---------------------------------------------------------------------------------------------------


def test_too_few_values_for_mul_constant_are_named() -> None:
    report = grade(checks.MUL_CONSTANT, MulConstantTooFew)
    message = item(report, "backward called directly").message
    assert "so grad_constant is missing" in message
    assert "Likely mistake: backward returns values only for some inputs" in message, message


class LinearFunctionSavesOutput(LinearFunction):
    """Saves the output where the input belongs: grad_weight comes out (out, out)."""

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        output = F.linear(input, weight, bias)
        ctx.save_for_backward(output, weight, bias)
        return output


def test_the_output_saved_for_the_input_is_named_in_notebook_04_as_in_05() -> None:
    report = grade(checks.LINEAR_FUNCTION, LinearFunctionSavesOutput)
    message = item(report, "grad_weight").message
    assert "Likely mistake: the output saved where the input belongs" in message, message
    # a transposed grad_weight is the other named mistake, not this one
    transposed = changed_backward(
        "WeightGradTransposed",
        LinearFunction,
        lambda gi, gw, gb, grad_output: (gi, None if gw is None else gw.t(), gb),
    )
    message = item(grade(checks.LINEAR_FUNCTION, transposed), "grad_weight").message
    assert "output saved" not in message, message


def test_the_untransposed_weight_is_named_only_when_the_product_shows_it() -> None:
    x, W = torch.zeros(4, 3), torch.zeros(5, 3)
    with pytest.raises(RuntimeError) as untransposed:
        x.mm(W)
    assert "the weight itself" in linear_forward_mistake(str(untransposed.value), (4, 3), (5, 3))
    with pytest.raises(RuntimeError) as other:
        x.t().mm(W.t())  # (3, 4) by (3, 5): another product, not the untransposed weight
    assert linear_forward_mistake(str(other.value), (4, 3), (5, 3)) is None
    # "must be a matrix" names .mm only on an input that is not a matrix, on a line that calls mm
    assert linear_forward_mistake(
        "RuntimeError: self must be a matrix (in forward, line 3: y = x.mm(w))", (2, 3, 3), (5, 3)
    )
    assert (
        linear_forward_mistake(
            "RuntimeError: self must be a matrix (in forward, line 3: y = f(x))", (2, 3, 3), (5, 3)
        )
        is None
    )
    assert (
        linear_forward_mistake(
            "RuntimeError: self must be a matrix (in forward, line 3: y = x.mm(w))", (4, 3), (5, 3)
        )
        is None
    )


# A bias gradient summed over every axis: 0-d at every size, so every module case fails, not only (1, 1).
BiasSummedEverywhere = changed_backward(
    "BiasSummedEverywhere",
    LinearFunction,
    lambda gi, gw, gb, grad_output: (gi, gw, None if gb is None else grad_output.sum()),
)


class LinearOnBiasSummedEverywhere(Linear):
    def forward(self, x):
        return BiasSummedEverywhere.apply(x, self.weight, self.bias)


def test_a_squeezed_bias_is_named_in_the_module_and_a_bias_summed_over_every_axis_is_not() -> None:
    message = item(grade(checks.LINEAR_MODULE, LinearOnSqueezedBias), "forward and backward").message
    assert "Likely mistake: grad_output.sum(0).squeeze(0)" in message, message
    report = grade(checks.LINEAR_MODULE, LinearOnBiasSummedEverywhere)
    assert "forward and backward" in failed(report)
    assert "squeeze" not in item(report, "forward and backward").message, report.render()


def test_a_blank_says_why_its_inputs_were_not_checked() -> None:
    report = grade(checks.EXP, BlankFunction)
    message = item(report, "inputs unchanged").message
    assert message.startswith("not checked: case") and "NotImplementedError" in message, message
