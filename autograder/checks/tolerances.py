"""Every tolerance the checks use, in one place, each with the reason for its size.

A value passes when ``|actual - expected| <= atol + rtol * |expected|`` holds for every element,
the rule of ``numpy.isclose``. All comparisons are made in float64.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    """An elementwise closeness rule and the reason it is this size."""

    rtol: float
    atol: float
    reason: str


FLOAT64 = Tolerance(
    rtol=1e-7,
    atol=1e-10,
    reason=(
        "The learner and PyTorch evaluate the same float64 formula in a different order, which "
        "changes results by ~1e-15 relative. 1e-7 leaves eight orders of margin over rounding, while "
        "every real mistake (transpose, sign, missing 1/N, wrong mask) is wrong by O(1) relative."
    ),
)

LOSS = Tolerance(
    rtol=1e-6,
    atol=1e-9,
    reason=(
        "Losses written as log(p + eps) with a small eps (up to ~1e-7) differ from the exact value by "
        "about 1e-7 relative; that is a stylistic choice, not a mistake, so it must pass."
    ),
)

FINITE_DIFFERENCE = Tolerance(
    rtol=1e-7,
    atol=1e-8,
    reason=(
        "Centred differences with h=1e-5 on the check's smooth test functions are accurate to ~1e-10 "
        "(truncation h^2/6 * f''' plus rounding eps * |f| / h). Forward differences are off by "
        "~h/2 * f'' ~ 1e-5 and must fail, so the bound sits between the two, 100x from each."
    ),
)

TRAINING = Tolerance(
    rtol=0.05,
    atol=0.0,
    reason=(
        "A fitted model is graded on its loss relative to the best achievable (least squares): "
        "gradient descent that has converged gets within a few percent of it."
    ),
)

FLOAT32 = Tolerance(
    rtol=1.3e-6,
    atol=1e-5,
    reason=(
        "Only where a float32 value is accepted (the try-it tables, which take any floating dtype, or a "
        "float32 reference): one float32 rounding is ~6e-8 relative and a sum of a few dozen terms "
        "accumulates ~1e-6, so the bound is PyTorch's own default for float32 in "
        "torch.testing.assert_close. The graded checks require float64 and never use it."
    ),
)

FLOAT16 = Tolerance(
    rtol=1e-3,
    atol=1e-5,
    reason=(
        "Where a float16 value is accepted: one float16 rounding is ~5e-4 relative; PyTorch's default "
        "for float16 in torch.testing.assert_close."
    ),
)

REPORTED_LOSS = Tolerance(
    rtol=0.05,
    atol=1e-12,
    reason=(
        "A training loop usually records each step's loss before that step's update, so the last "
        "recorded loss belongs to the parameters one step before the returned ones. In the runs we "
        "measured (lr 0.01 to 0.5) one step changed the loss by under 0.2%; a short run changes it "
        "more. 5% accepts that and still rejects a loss recorded on another scale (a sum instead of "
        "a mean, a missing factor) or one that does not belong to the returned parameters."
    ),
)

JACOBIAN_FLOAT64 = Tolerance(
    rtol=0.0,
    atol=1e-8,
    reason=(
        "The largest |analytical - numerical| Jacobian entry in float64 with centred differences "
        "(eps = 1e-6, gradcheck's default) on the check's tanh(linear) layer is ~1e-10 (rounding "
        "1e-16 / 1e-6); forward differences give ~1e-6 (truncation eps/2 * f''). 1e-8 sits 100x from both."
    ),
)

JACOBIAN_FLOAT32 = Tolerance(
    rtol=10.0,
    atol=1e-3,
    reason=(
        "In float32 the same centred differences are dominated by rounding, 6e-8 * |f| / 1e-6 ~ 0.04 on "
        "the check's layer, and the exact value depends on the order of operations: a learner's error "
        "must be above 1e-3 (far above gradcheck's atol 1e-5, which is why gradcheck fails in float32) "
        "and within a factor rtol = 10 of the course's own float32 error."
    ),
)

ATTENTION_FLOAT32 = Tolerance(
    rtol=1e-4,
    atol=2e-5,
    reason=(
        "A float32 attention (notebook 06) sums Nk products per score and per output, and a tiled one "
        "rescales its accumulator once per key tile: a correct float32 FlashAttention differs from the "
        "float64 reference by ~1e-6 relative on the check's sizes (up to 71 keys), more where a "
        "gradient is a difference of near-equal terms. 1e-4 leaves that margin twice over; every "
        "mistake the checks name (a missing scale, a shifted mask, a term left out) is wrong by O(1)."
    ),
)
