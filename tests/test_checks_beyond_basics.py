"""The checks of notebook 05 give full points to the reference, zero to a blank answer, and fewer
points, with feedback that names the mistake, to realistic wrong answers."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from check_helpers import changed_backward, failed, grade, solution_cells

from autograder.checks import Check
from autograder.checks import beyond_basics as checks
from autograder.grading import beyond_basics as graders

# ---------------------------------------------------------------------------------------------------
# Reference answers: the course's own solutions, run once; the wrong answers below are hand-written
# ---------------------------------------------------------------------------------------------------

SOLUTION = solution_cells("05_beyond_the_basics")
LinearFunctionFunc, LinearFunction = SOLUTION["LinearFunctionFunc"], SOLUTION["LinearFunction"]
Cube, NumpyCube = SOLUTION["Cube"], SOLUTION["NumpyCube"]
MaxWithIndex, InplaceReLU, SquareAndCube = (
    SOLUTION["MaxWithIndex"],
    SOLUTION["InplaceReLU"],
    SOLUTION["SquareAndCube"],
)
SoftmaxCrossEntropy, LegendrePolynomial3 = SOLUTION["SoftmaxCrossEntropy"], SOLUTION["LegendrePolynomial3"]
fit_legendre = SOLUTION["fit_legendre"]


def test_the_references_are_the_solutions():
    for fn in (LinearFunctionFunc.setup_context, LinearFunction.backward, fit_legendre):
        assert fn.__code__.co_filename.startswith("05_beyond_the_basics.py:"), fn


def fit_legendre_with(x, y, P3=LegendrePolynomial3, lr=5e-6, steps=2000, mean=False, clear=True):
    """The tutorial's loop with one setting changed: the wrong fits below are made with it."""
    a, b, c, d = (torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in (0.0, -1.0, 0.0, 0.3))
    for _ in range(steps):
        loss = (a + b * P3.apply(c + d * x) - y).pow(2)
        (loss.mean() if mean else loss.sum()).backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= lr * p.grad
                if clear:
                    p.grad = None
    return a.item(), b.item(), c.item(), d.item()


# ---------------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------------


def _assert_full(check: Check, *learner: Any, capfd) -> None:
    for seed in (0, 7):
        report = grade(check, *learner, seed=seed)
        assert report.score == check.points, report.render()
    captured = capfd.readouterr()
    assert captured.err == ""


def _assert_wrong(check: Check, *learner: Any, item: str, says: str) -> None:
    report = grade(check, *learner)
    assert report.score < check.points, report.render()
    names = [i.name for i in report.items if not i.passed]
    assert any(item in n for n in names), report.render()
    text = report.render()
    assert says.lower() in text.lower(), text


class Blank(torch.autograd.Function):
    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError()

    @staticmethod
    def backward(ctx, *args):
        raise NotImplementedError()


class BlankFunc(torch.autograd.Function):
    @staticmethod
    def forward(*args):
        raise NotImplementedError()

    @staticmethod
    def setup_context(ctx, inputs, output):
        raise NotImplementedError()

    @staticmethod
    def backward(ctx, *args):
        raise NotImplementedError()


def blank_fit(x, y):
    raise NotImplementedError()


# ---------------------------------------------------------------------------------------------------
# Exercise 1: LinearFunctionFunc
# ---------------------------------------------------------------------------------------------------


def test_func_reference_full(capfd):
    _assert_full(checks.LINEAR_FUNCTION_FUNC, LinearFunctionFunc, capfd=capfd)


def test_func_blank_zero():
    assert grade(checks.LINEAR_FUNCTION_FUNC, BlankFunc).score == 0.0


class OldStyleLinear(torch.autograd.Function):
    """Notebook 04's form: forward(ctx, ...) and no setup_context, so torch.func refuses it."""

    generate_vmap_rule = True

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = input.mm(weight.t())
        return out + bias if bias is not None else out

    backward = LinearFunctionFunc.backward


# grad_bias = grad_output: autograd sums it back to (M,), only a direct call shows the shape.
BiasNotReduced = changed_backward(
    "BiasNotReduced",
    LinearFunctionFunc,
    lambda gi, gw, gb, grad_output: (gi, gw, grad_output if gb is not None else None),
)


class NoVmapRule(LinearFunctionFunc):
    generate_vmap_rule = False


class BiasAlways(LinearFunctionFunc):
    """Ignores needs_input_grad and a missing bias: grad_output.sum(0) is returned for bias None."""

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        return grad_output.mm(weight), grad_output.t().mm(input), bias * 0 + grad_output.sum(0)


class SwappedNeeds(LinearFunctionFunc):
    """needs_input_grad indices mixed up: input and weight guards swapped."""

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        grad_input = grad_output.mm(weight) if ctx.needs_input_grad[1] else None
        grad_weight = grad_output.t().mm(input) if ctx.needs_input_grad[0] else None
        grad_bias = grad_output.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
        return grad_input, grad_weight, grad_bias


class IgnoresUpstream(LinearFunctionFunc):
    @staticmethod
    def backward(ctx, grad_output):
        return LinearFunctionFunc.backward(ctx, torch.ones_like(grad_output))


@pytest.mark.parametrize(
    ("fn", "item", "says"),
    [
        (OldStyleLinear, "vmap", "Likely mistake: forward written the old way, forward(ctx, ...)"),
        (BiasNotReduced, "direct backward", "shape (4, 5)"),
        (NoVmapRule, "vmap", "Likely mistake: generate_vmap_rule = True is missing"),
        (BiasAlways, "no bias", "NoneType"),
        (SwappedNeeds, "mixed requires_grad", "all zeros"),
        (IgnoresUpstream, "dx", "grad_output is ignored"),
    ],
)
def test_func_wrong(fn, item, says):
    _assert_wrong(checks.LINEAR_FUNCTION_FUNC, fn, item=item, says=says)


# ---------------------------------------------------------------------------------------------------
# Exercise 2: LinearFunction with leading dimensions
# ---------------------------------------------------------------------------------------------------


def test_batched_reference_full(capfd):
    _assert_full(checks.BATCHED_LINEAR, LinearFunction, capfd=capfd)


def test_batched_blank_zero():
    assert grade(checks.BATCHED_LINEAR, Blank).score == 0.0


class TwoDOnly(LinearFunction):
    """Notebook 04's version: mm works for (N, D) only."""

    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        out = input.mm(weight.t())
        return out + bias if bias is not None else out

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gi = grad_output.mm(weight) if ctx.needs_input_grad[0] else None
        gw = grad_output.t().mm(input) if ctx.needs_input_grad[1] else None
        gb = grad_output.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
        return gi, gw, gb


class BiasFirstAxisOnly(LinearFunction):
    """grad_bias summed over axis 0 only: right for (N, D), (3, 4, M) for (2, 3, 4, D)."""

    @staticmethod
    def backward(ctx, grad_output):
        gi, gw, gb = LinearFunction.backward(ctx, grad_output)
        input, weight, bias = ctx.saved_tensors
        if gb is not None:
            gb = grad_output.sum(0)
        return gi, gw, gb


WeightMean = changed_backward(
    "WeightMean",
    LinearFunction,
    lambda gi, gw, gb, grad_output: (
        gi,
        gw / (grad_output.numel() // grad_output.shape[-1]) if gw is not None else None,
        gb,
    ),
)


class TransposeLastTwo(LinearFunction):
    """grad_weight = grad_output.transpose(-1, -2) @ input summed over axis 0: fails for 1-D and 4-D."""

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gi = grad_output.matmul(weight)
        gw = grad_output.transpose(-1, -2).matmul(input)
        while gw.dim() > 2:
            gw = gw.sum(0)
        gb = grad_output.reshape(-1, weight.shape[0]).sum(0) if bias is not None else None
        return gi, gw, gb


@pytest.mark.parametrize(
    ("fn", "item", "says"),
    [
        (TwoDOnly, "out, input (2, 3, 4, D)", "Likely mistake: .mm (or torch.addmm) on a 4-D input"),
        (BiasFirstAxisOnly, "direct backward", "shape (3, 4, 6)"),
        (WeightMean, "dW", "averaged instead of summed"),
        (TransposeLastTwo, "1-D input", "Dimension out of range"),
    ],
)
def test_batched_wrong(fn, item, says):
    _assert_wrong(checks.BATCHED_LINEAR, fn, item=item, says=says)


# ---------------------------------------------------------------------------------------------------
# Exercise 3: double backward
# ---------------------------------------------------------------------------------------------------


def test_double_reference_full(capfd):
    _assert_full(checks.DOUBLE_BACKWARD, Cube, NumpyCube, capfd=capfd)


def test_double_blank_zero():
    assert grade(checks.DOUBLE_BACKWARD, Blank, Blank).score == 0.0


class CubeDetached(Cube):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return 3 * x.detach() ** 2 * grad_output


class CubeSavesDerivative(Cube):
    """The derivative computed in forward (where autograd records nothing) and saved: dx is right, and
    constant in x."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(3 * x**2)
        return x**3

    @staticmethod
    def backward(ctx, grad_output):
        (dydx,) = ctx.saved_tensors
        return dydx * grad_output


class CubeNumpyBackward(Cube):
    """A numpy backward without once_differentiable: the second derivative silently vanishes."""

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.from_numpy(3 * x.detach().numpy() ** 2 * grad_output.detach().numpy())


class NumpyCubeUndecorated(NumpyCube):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return torch.from_numpy(3 * x.detach().numpy() ** 2 * grad_output.detach().numpy())


class NumpyCubeFloat32(NumpyCube):
    """numpy arrays made float32 on the way: right values to 1e-7, wrong dtype."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.from_numpy(x.detach().numpy().astype(np.float32) ** 3)


class CubeNoGrad(Cube):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.no_grad():
            return 3 * x**2 * grad_output


@pytest.mark.parametrize(
    ("cube", "numpy_cube", "item", "says"),
    [
        (CubeDetached, NumpyCube, "second derivative through x", "x detached"),
        (CubeSavesDerivative, NumpyCube, "second derivative through x", "one computed in forward"),
        (CubeNumpyBackward, NumpyCube, "second derivative through x", "not built from differentiable"),
        (CubeNoGrad, NumpyCube, "second derivative through", "does not"),
        (
            Cube,
            NumpyCubeUndecorated,
            "NumpyCube raises",
            "Likely mistake: backward is not decorated with @once",
        ),
        (Cube, Cube, "NumpyCube raises", "raised nothing. Likely mistake: backward is not decorated"),
        (Cube, NumpyCubeFloat32, "NumpyCube: y and dx", "single precision"),
    ],
)
def test_double_wrong(cube, numpy_cube, item, says):
    _assert_wrong(checks.DOUBLE_BACKWARD, cube, numpy_cube, item=item, says=says)


# ---------------------------------------------------------------------------------------------------
# Exercise 4: ctx features
# ---------------------------------------------------------------------------------------------------


def test_ctx_reference_full(capfd):
    _assert_full(checks.CTX_FEATURES, MaxWithIndex, InplaceReLU, SquareAndCube, capfd=capfd)


def test_ctx_blank_zero():
    assert grade(checks.CTX_FEATURES, Blank, Blank, Blank).score == 0.0


class MaxIndicesDifferentiable(MaxWithIndex):
    @staticmethod
    def forward(ctx, scores):
        values, indices = scores.max(dim=1)
        ctx.save_for_backward(indices)
        ctx.num_classes = scores.shape[1]  # what the solution's backward reads
        return values, indices.double()


class ReLUNotDirty(InplaceReLU):
    @staticmethod
    def forward(ctx, x):
        x.clamp_(min=0)
        ctx.save_for_backward(x)
        return x


class ReLUCopy(InplaceReLU):
    @staticmethod
    def forward(ctx, x):
        out = x.clamp(min=0)
        ctx.save_for_backward(out)
        return out


class SquareCubeNoneUnhandled(SquareAndCube):
    @staticmethod
    def backward(ctx, grad_square, grad_cube):
        (x,) = ctx.saved_tensors
        return 2 * x * grad_square + 3 * x**2 * grad_cube


class SquareCubeFirstOnly(SquareAndCube):
    """Returns the gradient through the square only when it is there, dropping the cube's."""

    @staticmethod
    def backward(ctx, grad_square, grad_cube):
        (x,) = ctx.saved_tensors
        if grad_square is not None:
            return 2 * x * grad_square
        return 3 * x**2 * grad_cube


class MaxNotMarked(MaxWithIndex):
    """mark_non_differentiable removed: int64 indices still do not require grad, nothing fails."""

    @staticmethod
    def forward(ctx, scores):
        values, indices = scores.max(dim=1)
        ctx.save_for_backward(indices)
        ctx.num_classes = scores.shape[1]  # what the solution's backward reads
        return values, indices


class SquareCubeMaterialized(SquareAndCube):
    """set_materialize_grads(False) never called: the backward, written for None, gets zeros."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x**2, x**3


@pytest.mark.parametrize(
    ("classes", "item", "says"),
    [
        ((MaxNotMarked, InplaceReLU, SquareAndCube), "indices not differentiable", "mark_non_differentiable"),
        ((MaxWithIndex, InplaceReLU, SquareCubeMaterialized), "None for an unused output", "set_materialize"),
        (
            (MaxIndicesDifferentiable, InplaceReLU, SquareAndCube),
            "indices not differentiable",
            "Likely mistake: the indices converted to floating point",
        ),
        ((MaxWithIndex, ReLUNotDirty, SquareAndCube), "marked dirty", "mark_dirty"),
        ((MaxWithIndex, ReLUCopy, SquareAndCube), "marked dirty", "version counter"),
        (
            (MaxWithIndex, InplaceReLU, SquareCubeNoneUnhandled),
            "backward with None",
            "Likely mistake: backward computes with a gradient that is None",
        ),
        (
            (MaxWithIndex, InplaceReLU, SquareCubeFirstOnly),
            "outputs and gradients",
            "Likely mistake: backward returns only the square's term and drops the cube's",
        ),
    ],
)
def test_ctx_wrong(classes, item, says):
    _assert_wrong(checks.CTX_FEATURES, *classes, item=item, says=says)


# ---------------------------------------------------------------------------------------------------
# Exercise 5: SoftmaxCrossEntropy
# ---------------------------------------------------------------------------------------------------


def test_sce_reference_full(capfd):
    _assert_full(checks.SOFTMAX_CROSS_ENTROPY_FUNCTION, SoftmaxCrossEntropy, capfd=capfd)


def test_sce_blank_zero():
    assert grade(checks.SOFTMAX_CROSS_ENTROPY_FUNCTION, Blank).score == 0.0


class SceIgnoresUpstream(SoftmaxCrossEntropy):
    @staticmethod
    def backward(ctx, grad_output):
        return SoftmaxCrossEntropy.backward(ctx, torch.ones_like(grad_output))


class SceNaive(SoftmaxCrossEntropy):
    @staticmethod
    def forward(ctx, scores, targets):
        probs = scores.exp() / scores.exp().sum(dim=1, keepdim=True)
        n = scores.shape[0]
        ctx.save_for_backward(probs, targets)
        return -probs[torch.arange(n), targets].log().mean()


SceSum = changed_backward(
    "SceSum", SoftmaxCrossEntropy, lambda grad, _, grad_output: (grad * grad.shape[0], None)
)


class SceTargetsGrad(SoftmaxCrossEntropy):
    @staticmethod
    def backward(ctx, grad_output):
        grad, _ = SoftmaxCrossEntropy.backward(ctx, grad_output)
        return grad, torch.zeros_like(ctx.saved_tensors[1])


class SceInPlace(SoftmaxCrossEntropy):
    @staticmethod
    def forward(ctx, scores, targets):
        scores.sub_(scores.max(dim=1, keepdim=True).values)
        return SoftmaxCrossEntropy.forward(ctx, scores, targets)


@pytest.mark.parametrize(
    ("fn", "item", "says"),
    [
        (SceIgnoresUpstream, "dscores", "grad_output is ignored"),
        (SceNaive, "logits of magnitude 1000", "NaN"),
        (SceSum, "dscores", "missing 1/N"),
        (SceTargetsGrad, "direct backward", "must be None. Likely mistake: a value returned as dtargets"),
    ],
)
def test_sce_wrong(fn, item, says):
    _assert_wrong(checks.SOFTMAX_CROSS_ENTROPY_FUNCTION, fn, item=item, says=says)


# ---------------------------------------------------------------------------------------------------
# Exercise 6: LegendrePolynomial3 and the fit
# ---------------------------------------------------------------------------------------------------


def test_legendre_reference_full(capfd):
    _assert_full(checks.LEGENDRE, LegendrePolynomial3, capfd=capfd)


def test_legendre_blank_zero():
    assert grade(checks.LEGENDRE, Blank).score == 0.0


class LegendreNoHalf(LegendrePolynomial3):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)
        return 5 * input**3 - 3 * input


class LegendreIgnoresUpstream(LegendrePolynomial3):
    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        return 1.5 * (5 * input**2 - 1)


class LegendreWrongDerivative(LegendrePolynomial3):
    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        return grad_output * 0.5 * (5 * input**2 - 3)


class LegendreInPlace(LegendrePolynomial3):
    """Scales grad_output in place: fine for a fresh upstream tensor, an error for y.sum()'s."""

    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        return grad_output.mul_(1.5 * (5 * input**2 - 1))


class LegendreKeepdim(LegendrePolynomial3):
    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        return (grad_output * 1.5 * (5 * input**2 - 1)).unsqueeze(0)


@pytest.mark.parametrize(
    ("fn", "item", "says"),
    [
        (LegendreNoHalf, "y", "factor 0.5 is missing"),
        (LegendreIgnoresUpstream, "dx", "grad_output is ignored"),
        (LegendreWrongDerivative, "dx", "15x^2"),
        (LegendreKeepdim, "direct backward", "shape (1, 7)"),
        (LegendreInPlace, "dx of y.sum()", "more than one element"),
    ],
)
def test_legendre_wrong(fn, item, says):
    _assert_wrong(checks.LEGENDRE, fn, item=item, says=says)


def test_fit_reference_full(capfd):
    _assert_full(checks.FIT_LEGENDRE, fit_legendre, capfd=capfd)


def test_fit_blank_zero():
    assert grade(checks.FIT_LEGENDRE, blank_fit).score == 0.0


@pytest.mark.parametrize(
    ("fit", "item", "says"),
    [
        (lambda x, y: fit_legendre_with(x, y, mean=True), "reaches", "Likely mistake: the loss is the mean"),
        (
            lambda x, y: fit_legendre_with(x, y, steps=50),
            "reaches",
            "Likely mistake: the loop stops after 50 steps",
        ),
        (lambda x, y: fit_legendre_with(x, y, lr=-5e-6, steps=20), "loss went down", "p -= lr"),
        # three steps up the loss stay finite: the replayed ascent ends exactly there
        (
            lambda x, y: fit_legendre_with(x, y, lr=-5e-6, steps=3),
            "loss went down",
            "Likely mistake: gradient ascent, p += lr * p.grad (or a learning rate of the wrong sign), "
            "stopped after 3 steps",
        ),
        (lambda x, y: fit_legendre_with(x, y, lr=-5e-6), "returns", "diverged"),
        # gradients that accumulate diverge too: named, not only the sign and the learning rate as before
        (lambda x, y: fit_legendre_with(x, y, clear=False), "returns", "gradients never cleared"),
        (lambda x, y: fit_legendre_with(x, y, P3=LegendreWrongDerivative), "reaches", "tutorial"),
        (lambda x, y: (0.0, -1.0, 0.0), "returns", "Likely mistake: a parameter left out of the return"),
    ],
)
def test_fit_wrong(fit, item, says):
    _assert_wrong(checks.FIT_LEGENDRE, fit, item=item, says=says)


def test_a_fit_no_replayed_loop_explains_names_no_mistake():
    """A wrong derivative in the Function the fit uses is none of the replayed loops (stopped early, the
    mean, gradient ascent): the fit's feedback gives the recipe and names nothing."""
    report = grade(checks.FIT_LEGENDRE, lambda x, y: fit_legendre_with(x, y, P3=LegendreWrongDerivative))
    assert "reaches the tutorial's loss" in failed(report)
    assert "Likely mistake" not in report.render(), report.render()


def fit_on_the_tutorials_x(x, y):
    """Ignores x and rebuilds the tutorial's points: right on the visible call's data only."""
    return fit_legendre_with(torch.linspace(-math.pi, math.pi, 2000, dtype=torch.float64), y)


@pytest.mark.parametrize("seed", [3, 7])
def test_fit_that_ignores_x_passes_the_visible_call_and_fails_a_hidden_one_named(seed):
    assert grade(checks.FIT_LEGENDRE, fit_on_the_tutorials_x).score == checks.FIT_LEGENDRE.points
    report = grade(checks.FIT_LEGENDRE, fit_on_the_tutorials_x, seed=seed)
    failing = [i for i in report.items if not i.passed]
    assert "reaches the tutorial's loss" in [i.name for i in failing]
    assert all("ignores its x argument" in i.message and "p -= lr" not in i.message for i in failing)
    assert grade(checks.FIT_LEGENDRE, fit_legendre, seed=seed).score == checks.FIT_LEGENDRE.points
    # a loop stopped early on the right x is not blamed on x
    early = grade(checks.FIT_LEGENDRE, lambda x, y: fit_legendre_with(x, y, steps=50), seed=seed)
    assert "ignores its x" not in early.render()


def test_fit_target_is_the_tutorial_loss():
    """The stated target: the tutorial's loop on y = sin(x) reaches a sum of squared errors of about 8.94."""
    assert math.isclose(graders.legendre.reference_fit_loss(0), 8.943, rel_tol=1e-3)


def test_numbers_are_float64():
    assert np.asarray(checks.fit_legendre_data(0)[1]).dtype == np.float64


def test_reference_fit_matches_autograd():
    """The numpy reference loop takes the same steps as the tutorial's autograd loop."""
    from autograder.grading import reference

    x, y = checks.fit_legendre_data(3)
    ref = reference.legendre_fit(x, y, checks.FIT_INIT, checks.FIT_LR, 300)
    mine = fit_legendre_with(torch.from_numpy(x), torch.from_numpy(y), steps=300)
    np.testing.assert_allclose(ref["params"], mine, rtol=1e-9, atol=1e-12)


def test_each_ctx_lesson_costs_its_item_only():
    """Each of the three ctx features is graded by its own effect."""
    for classes, lost in (
        ((MaxNotMarked, InplaceReLU, SquareAndCube), "MaxWithIndex: indices not differentiable"),
        ((MaxWithIndex, ReLUNotDirty, SquareAndCube), "InplaceReLU: in place, marked dirty"),
        ((MaxWithIndex, InplaceReLU, SquareCubeMaterialized), "SquareAndCube: None for an unused output"),
    ):
        report = grade(checks.CTX_FEATURES, *classes)
        assert {i.name for i in report.items if not i.passed} == {lost}, report.render()


# ---------------------------------------------------------------------------------------------------
# Every return form PyTorch accepts keeps full points; each step blamed for its own failure
# ---------------------------------------------------------------------------------------------------


FuncTrailingNone = changed_backward(
    "FuncTrailingNone", LinearFunctionFunc, lambda *grads, grad_output: (*grads, None)
)


BatchedTrailingNone = changed_backward(
    "BatchedTrailingNone", LinearFunction, lambda *grads, grad_output: (*grads, None, None)
)


SceBareTrailing = changed_backward(
    "SceBareTrailing", SoftmaxCrossEntropy, lambda *grads, grad_output: (*grads, None)
)


LegendreOneTuple = changed_backward(
    "LegendreOneTuple", LegendrePolynomial3, lambda grad, grad_output: (grad, None)
)


MaxTrailingNone = changed_backward("MaxTrailingNone", MaxWithIndex, lambda grad, grad_output: (grad, None))


@pytest.mark.parametrize(
    ("check", "learner"),
    [
        (checks.LINEAR_FUNCTION_FUNC, (FuncTrailingNone,)),
        (checks.BATCHED_LINEAR, (BatchedTrailingNone,)),
        (checks.SOFTMAX_CROSS_ENTROPY_FUNCTION, (SceBareTrailing,)),
        (checks.LEGENDRE, (LegendreOneTuple,)),
        (checks.CTX_FEATURES, (MaxTrailingNone, InplaceReLU, SquareAndCube)),
    ],
    ids=lambda v: getattr(v, "name", ""),
)
def test_trailing_nones_keep_full_points(check, learner):
    report = grade(check, *learner)
    assert report.score == check.points, report.render()


class LegendreReturnsNothing(LegendrePolynomial3):
    @staticmethod
    def forward(ctx, input):
        ctx.save_for_backward(input)


class LegendreBackwardTypo(LegendrePolynomial3):
    @staticmethod
    def backward(ctx, grad_output):
        (input,) = ctx.saved_tensors
        return grad_output * 1.5 * (5 * inptu**2 - 1)  # noqa: F821 - the typo is the point


def test_a_forward_that_returns_none_is_blamed_on_forward():
    report = grade(checks.LEGENDRE, LegendreReturnsNothing)
    assert report.score == 0.0
    for i in report.items:
        assert "returned a NoneType, expected a tensor" in i.message or "not checked" in i.message, (
            report.render()
        )


def test_a_typo_in_backward_keeps_the_forward_values():
    report = grade(checks.LEGENDRE, LegendreBackwardTypo)
    items = {i.name: i for i in report.items}
    assert items["y"].passed
    assert "NameError" in items["dx"].message and not items["dx"].passed


# The older docs' ``grad_output.sum(0).squeeze(0)``: a 0-d bias gradient when out_features = 1.
FuncBiasSqueezed = changed_backward(
    "FuncBiasSqueezed",
    LinearFunctionFunc,
    lambda gi, gw, gb, grad_output: (gi, gw, None if gb is None else grad_output.sum(0).squeeze(0)),
)


def test_func_squeezed_bias_gradient_loses_the_size_one_item_with_the_squeeze_named():
    report = grade(checks.LINEAR_FUNCTION_FUNC, FuncBiasSqueezed)
    lost = [i for i in report.items if not i.passed]
    assert [i.name for i in lost] == ["in = 1, out = 1"], report.render()
    assert "when out=1" in lost[0].message and ".squeeze(0)" in lost[0].message
    assert "silently sums" not in lost[0].message


# ------------------------------------------------------------------------------------------------
# The one Function contract (docs/checks.md items 10, 11, 12, 30, 31, 32), as in notebook 04
# ------------------------------------------------------------------------------------------------


class FuncIgnoresNeeds(LinearFunctionFunc):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        return grad_output.mm(weight), grad_output.t().mm(input), grad_output.sum(0)


def _linear_grads_from(ctx, g):
    """LinearFunctionFunc's gradients from the upstream gradient ``g``, each only when it is needed."""
    input, weight, bias = ctx.saved_tensors
    grads = (g.mm(weight), g.t().mm(input), g.sum(0) if bias is not None else None)
    return tuple(gr if need else None for gr, need in zip(grads, ctx.needs_input_grad, strict=False))


class FuncViewsUpstream(LinearFunctionFunc):
    @staticmethod
    def backward(ctx, grad_output):
        return _linear_grads_from(ctx, grad_output.view(-1).view(grad_output.shape))


class FuncReshapesUpstream(LinearFunctionFunc):
    """The right fix of FuncViewsUpstream: .reshape copies when it must."""

    @staticmethod
    def backward(ctx, grad_output):
        return _linear_grads_from(ctx, grad_output.reshape(-1).reshape(grad_output.shape))


class FuncInPlaceBias(LinearFunctionFunc):
    @staticmethod
    def forward(input, weight, bias=None):
        output = input.mm(weight.t())
        if bias is not None:
            output += bias
        return output


class FuncCtxAttributes(LinearFunctionFunc):
    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = (*inputs, None)[:3]
        ctx.save_for_backward(input, weight, bias)
        ctx.x = input


class BatchedViewsUpstream(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        flat_grad = grad_output.view(-1, weight.shape[0])
        grad_input = grad_output.matmul(weight) if ctx.needs_input_grad[0] else None
        flat_input = input.reshape(-1, weight.shape[1])
        grad_weight = flat_grad.t().mm(flat_input) if ctx.needs_input_grad[1] else None
        grad_bias = flat_grad.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
        return grad_input, grad_weight, grad_bias


class BatchedIgnoresNeeds(LinearFunction):
    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        flat_grad = grad_output.reshape(-1, weight.shape[0])
        grad_weight = flat_grad.t().mm(input.reshape(-1, weight.shape[1]))
        return grad_output.matmul(weight), grad_weight, flat_grad.sum(0) if bias is not None else None


class SceGlobalShift(SoftmaxCrossEntropy):
    @staticmethod
    def forward(ctx, scores, targets):
        e = (scores - scores.max()).exp()
        probs = e / e.sum(dim=1, keepdim=True)
        ctx.save_for_backward(probs, targets)
        return -probs[torch.arange(scores.shape[0]), targets].log().mean()


class SceLogOfSoftmax(SoftmaxCrossEntropy):
    @staticmethod
    def forward(ctx, scores, targets):
        e = (scores - scores.max(dim=1, keepdim=True).values).exp()
        probs = e / e.sum(dim=1, keepdim=True)
        ctx.save_for_backward(probs, targets)
        return -probs.log()[torch.arange(scores.shape[0]), targets].mean()


class SceOneHotFromLabels(SoftmaxCrossEntropy):
    @staticmethod
    def backward(ctx, grad_output):
        probs, targets = ctx.saved_tensors
        one_hot = torch.nn.functional.one_hot(targets).to(probs.dtype)
        return (probs - one_hot) * (grad_output / probs.shape[0]), None


class SceProbsOnCtx(SoftmaxCrossEntropy):
    @staticmethod
    def forward(ctx, scores, targets):
        loss = SoftmaxCrossEntropy.forward(ctx, scores, targets)
        ctx.probs = ctx.to_save[0]
        return loss


class MaxMaskFromValues(MaxWithIndex):
    """Sends the gradient to every entry equal to the row's maximum: right without ties."""

    @staticmethod
    def forward(ctx, scores):
        values, indices = scores.max(dim=1)
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(scores, values)
        return values, indices

    @staticmethod
    def backward(ctx, grad_values, grad_indices):
        scores, values = ctx.saved_tensors
        return (scores == values.unsqueeze(1)) * grad_values.unsqueeze(1)


def test_a_tie_at_the_maximum_is_named():
    report = grade(checks.CTX_FEATURES, MaxMaskFromValues, InplaceReLU, SquareAndCube)
    assert {i.name for i in report.items if not i.passed} == {"MaxWithIndex: ties"}, report.render()
    assert "Likely mistake: the gradient goes to every entry equal to the maximum" in report.render()


class CubeOnCtx(Cube):
    @staticmethod
    def forward(ctx, x):
        ctx.x = x
        ctx.save_for_backward(x)
        return x**3


@pytest.mark.parametrize(
    ("check", "learner", "item", "says"),
    [
        ("LINEAR_FUNCTION_FUNC", (FuncIgnoresNeeds,), "needs_input_grad respected", "never consulted"),
        ("LINEAR_FUNCTION_FUNC", (FuncViewsUpstream,), "upstream gradient layouts", ".view on grad_output"),
        ("LINEAR_FUNCTION_FUNC", (FuncInPlaceBias,), "vmap over every argument", "output = output + bias"),
        ("LINEAR_FUNCTION_FUNC", (FuncCtxAttributes,), "save_for_backward", "ctx.x"),
        ("DOUBLE_BACKWARD", (CubeOnCtx, NumpyCube), "save_for_backward", "ctx.x"),
        ("BATCHED_LINEAR", (BatchedViewsUpstream,), "upstream gradient layouts", ".view on grad_output"),
        ("BATCHED_LINEAR", (BatchedIgnoresNeeds,), "needs_input_grad respected", "never consulted"),
        ("SOFTMAX_CROSS_ENTROPY_FUNCTION", (SceGlobalShift,), "rows far apart", "global maximum"),
        (
            "SOFTMAX_CROSS_ENTROPY_FUNCTION",
            (SceLogOfSoftmax,),
            "true class at the bottom",
            "underflowed to 0",
        ),
        ("SOFTMAX_CROSS_ENTROPY_FUNCTION", (SceOneHotFromLabels,), "a class left out", "one-hot sized from"),
        ("SOFTMAX_CROSS_ENTROPY_FUNCTION", (SceProbsOnCtx,), "save_for_backward", "ctx.probs"),
        ("LEGENDRE", (LegendreInPlace,), "inputs unchanged", "changed its argument grad_output"),
        ("LEGENDRE", (LegendreInPlace,), "upstream gradient layouts", "grad_output"),
    ],
)
def test_the_function_contract_rejects_and_names(check, learner, item, says):
    _assert_wrong(getattr(checks, check), *learner, item=item, says=says)


def test_the_function_contract_names_no_mistake_it_did_not_see():
    """A needs_input_grad mistake is not a layout or ctx mistake, and the reverse."""
    contract = {"needs_input_grad respected", "upstream gradient layouts", "vmap over every argument"}
    contract.add("tensors saved with save_for_backward")
    for learner, item in (
        (FuncIgnoresNeeds, "needs_input_grad respected"),
        (FuncViewsUpstream, "upstream gradient layouts"),
    ):
        report = grade(checks.LINEAR_FUNCTION_FUNC, learner)
        assert {i.name for i in report.items if not i.passed} & contract == {item}, report.render()


def test_the_function_contract_accepts_its_correct_variants(capfd):
    _assert_full(checks.LINEAR_FUNCTION_FUNC, FuncReshapesUpstream, capfd=capfd)
    _assert_full(checks.DOUBLE_BACKWARD, Cube, NumpyCube, capfd=capfd)


class CubeScalesUpstream(Cube):
    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        return grad_output.mul_(3 * x**2)


class SceScalesUpstream(SoftmaxCrossEntropy):
    @staticmethod
    def backward(ctx, grad_output):
        probs, targets = ctx.saved_tensors
        n = probs.shape[0]
        grad = probs.clone()
        grad[torch.arange(n), targets] -= 1.0
        return grad * grad_output.div_(n), None


@pytest.mark.parametrize(
    ("check", "learner"),
    [
        ("DOUBLE_BACKWARD", (CubeScalesUpstream, NumpyCube)),
        ("SOFTMAX_CROSS_ENTROPY_FUNCTION", (SceScalesUpstream,)),
    ],
)
def test_inputs_unchanged_watched_the_upstream_gradient(check, learner):
    report = grade(getattr(checks, check), *learner)
    lost = next(i for i in report.items if i.name == "inputs unchanged")
    assert not lost.passed and "changed its argument grad_output in place" in lost.message, report.render()


class FuncGradFromOutput(LinearFunctionFunc):
    """Saves the output where the input belongs: grad_weight comes out (M, M)."""

    @staticmethod
    def setup_context(ctx, inputs, output):
        input, weight, bias = (*inputs, None)[:3]
        ctx.save_for_backward(output, weight, bias)


@pytest.mark.parametrize(
    ("check", "learner", "says"),
    [
        ("LEGENDRE", LegendreKeepdim, "Likely mistake: an extra leading size-1 axis"),
        ("LINEAR_FUNCTION_FUNC", BiasNotReduced, "Likely mistake: not summed over the leading axes (4,)"),
        (
            "LINEAR_FUNCTION_FUNC",
            FuncGradFromOutput,
            "Likely mistake: the output saved where the input belongs",
        ),
    ],
)
def test_a_wrong_gradient_shape_is_explained_by_what_autograd_does_with_it(check, learner, says):
    report = grade(getattr(checks, check), learner)
    message = next(i.message for i in report.items if i.name == "direct backward")
    assert says in message, report.render()
    assert "silently sums" not in message or "Likely mistake: not summed" in message, report.render()


# ---------------------------------------------------------------------------------------------------
# Each recogniser names its own mistake only
# ---------------------------------------------------------------------------------------------------


def test_int64_indices_left_unmarked_are_not_called_floating_point():
    report = grade(checks.CTX_FEATURES, MaxNotMarked, InplaceReLU, SquareAndCube)
    message = next(i.message for i in report.items if i.name == "MaxWithIndex: indices not differentiable")
    assert "never called" in message and "floating point" not in message, message


class SquareCubeOtherTypeError(SquareAndCube):
    """A TypeError in backward that is not arithmetic on a None gradient."""

    @staticmethod
    def backward(ctx, grad_square, grad_cube):
        (x,) = ctx.saved_tensors
        return 2 * x * grad_square + "3"


def test_a_type_error_that_is_not_a_none_gradient_is_not_named_as_one():
    report = grade(checks.CTX_FEATURES, MaxWithIndex, InplaceReLU, SquareCubeOtherTypeError)
    assert "SquareAndCube: backward with None" in failed(report)
    assert "gradient that is None" not in report.render(), report.render()


def test_the_output_saved_for_the_input_is_named_in_notebook_05_as_in_04():
    """Exercise 1's direct call and in = 1 case both name it (the in = 1 shapes broadcast, so without the
    name the feedback would say autograd sums such a gradient, under autograd refusing it)."""
    report = grade(checks.LINEAR_FUNCTION_FUNC, FuncGradFromOutput)
    for name in ("direct backward", "in = 1, out = 1"):
        message = next(i.message for i in report.items if i.name == name)
        assert "Likely mistake: the output saved where the input belongs" in message, message
        assert "silently sums" not in message, message
