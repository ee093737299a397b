"""The checks of notebook 06 give full points to right answers in every form (other tile sizes, einsum,
the setup_context form), zero to a blank answer, and fewer points, with feedback that names the mistake,
to each wrong answer learners write here (tests/attention_impls.py)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from attention_impls import (
    Mistakes,
    attention,
    attention_einsum,
    attention_with_item,
    flash_function,
    make_op,
)
from check_helpers import blank, grade

from autograder.checks import attention as checks
from autograder.checks.report import Report


def _messages(report: Report) -> str:
    return "\n".join(i.message for i in report.items if not i.passed)


def _assert_full(report: Report) -> None:
    assert report.score == report.points, report.render()


def _assert_named(report: Report, says: str) -> None:
    assert report.score < report.points, report.render()
    assert says in _messages(report), report.render()


# ---------------------------------------------------------------------------------------------------
# Exercise 1: plain attention
# ---------------------------------------------------------------------------------------------------


def _plain(scale: float | None = None, diagonal: int = 0, bottom_right: bool = False, no_mask: bool = False):
    def wrong(q: Any, k: Any, v: Any, is_causal: bool = False) -> Any:
        s = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(q.shape[-1]) if scale is None else scale)
        if is_causal and not no_mask:
            nq, nk = q.shape[-2], k.shape[-2]
            shift = diagonal + (nk - nq if bottom_right else 0)
            mask = torch.ones(nq, nk, dtype=torch.bool).tril(shift)
            s = s.masked_fill(~mask, float("-inf"))
        return torch.softmax(s, -1) @ v

    return wrong


@pytest.mark.parametrize("fn", [attention, attention_einsum], ids=["matmul", "einsum"])
def test_attention_right_forms_full(fn):
    _assert_full(grade(checks.ATTENTION, fn, seed=3))


def test_attention_blank_zero():
    assert grade(checks.ATTENTION, blank).score == 0.0


PLAIN_WRONG = {
    "missing scale": (_plain(scale=1.0), "scale 1/sqrt(d) is missing"),
    "one key too many": (_plain(diagonal=1), "lets query i see key i + 1"),
    "diagonal masked": (_plain(diagonal=-1), "hides the diagonal"),
    "bottom-right": (_plain(bottom_right=True), "aligned bottom-right"),
    "mask ignored": (_plain(no_mask=True), "is_causal is ignored"),
}


@pytest.mark.parametrize("name", list(PLAIN_WRONG))
def test_attention_wrong_named(name):
    fn, says = PLAIN_WRONG[name]
    _assert_named(grade(checks.ATTENTION, fn, seed=5), says)


# ---------------------------------------------------------------------------------------------------
# Exercise 2: saved_tensors
# ---------------------------------------------------------------------------------------------------


#: What the pack hook returns (the unpack hook returning its argument): the tensor, nothing (a return
#: forgotten), its shape (unpack then makes zeros of it: the meter right, backward wrong).
PACKED = {"tensor": lambda t: t, "nothing": lambda t: None, "shape": lambda t: t.shape}
UNPACKED = {"tensor": lambda t: t, "nothing": lambda t: t, "shape": lambda shape: torch.zeros(shape)}


def _saved(size: str = "right", dedupe: bool = False, hooks: bool = True, packs: str = "tensor"):
    def saved_tensors(fn: Any, *args: Any) -> list[tuple[tuple[int, ...], int]]:
        found: list[tuple[tuple[int, ...], int]] = []
        seen: set[int] = set()

        def pack(t: torch.Tensor) -> Any:
            if dedupe and id(t) in seen:
                return t
            seen.add(id(t))
            per = {"right": t.element_size(), "numel": 1, "four": 4}[size]
            found.append((tuple(t.shape), t.numel() * per))
            return PACKED[packs](t)

        if hooks:
            with torch.autograd.graph.saved_tensors_hooks(pack, UNPACKED[packs]):
                fn(*args)
        else:
            fn(*args)
        return found

    return saved_tensors


def test_saved_tensors_right_full():
    _assert_full(grade(checks.SAVED_TENSORS, _saved(), seed=2))


def test_saved_tensors_blank_zero():
    assert grade(checks.SAVED_TENSORS, blank).score == 0.0


SAVED_WRONG = {
    "bytes are numel": (_saved(size="numel"), "multiply by t.element_size()"),
    "four bytes always": (_saved(size="four"), "the element size is fixed"),
    "one tensor twice listed once": (_saved(dedupe=True), "a tensor saved twice is listed once"),
    "no hooks": (_saved(hooks=False), "no tensor was recorded"),
    "pack returns nothing": (_saved(packs="nothing"), "the unpack hook must return the tensor the pack hook"),
    "pack keeps the shape only": (_saved(packs="shape"), "Backward used what your unpack hook returned"),
}


@pytest.mark.parametrize("name", list(SAVED_WRONG))
def test_saved_tensors_wrong_named(name):
    fn, says = SAVED_WRONG[name]
    _assert_named(grade(checks.SAVED_TENSORS, fn, seed=4), says)


# ---------------------------------------------------------------------------------------------------
# Exercises 3 and 4: FlashAttention and what it saves
# ---------------------------------------------------------------------------------------------------

RIGHT_FLASH = {
    "tiles 16 x 16": flash_function(),
    "tiles 7 x 5": flash_function(7, 5),
    "tiles 64 x 32": flash_function(64, 32),
    "setup_context form": flash_function(setup_context=True),
}


@pytest.mark.parametrize("name", list(RIGHT_FLASH))
def test_flash_right_forms_full(name):
    _assert_full(grade(checks.FLASH_ATTENTION, RIGHT_FLASH[name], seed=7))
    _assert_full(grade(checks.FLASH_MEMORY, RIGHT_FLASH[name], seed=7))


class BlankFlash(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, q: Any, k: Any, v: Any, is_causal: bool = False) -> Any:
        raise NotImplementedError()

    @staticmethod
    def backward(ctx: Any, do: Any) -> Any:
        raise NotImplementedError()


def test_flash_blank_zero():
    assert grade(checks.FLASH_ATTENTION, BlankFlash).score == 0.0
    assert grade(checks.FLASH_MEMORY, BlankFlash).score == 0.0


def test_trailing_nones_full():
    base = flash_function()

    class TrailingNones(base):
        @staticmethod
        def backward(ctx: Any, do: Any) -> Any:
            return (*base.backward(ctx, do), None, None)

    _assert_full(grade(checks.FLASH_ATTENTION, TrailingNones, seed=1))


#: Each wrong FlashAttention, the check it must lose points in, and the words that name its mistake.
FLASH_WRONG: dict[str, tuple[Mistakes, Any, str]] = {
    "missing scale": (Mistakes(no_scale=True), checks.FLASH_ATTENTION, "scale 1/sqrt(d) is missing"),
    "mask lets one key too many": (Mistakes(mask_diagonal=1), checks.FLASH_ATTENTION, "see key i + 1"),
    "mask hides the diagonal": (Mistakes(mask_diagonal=-1), checks.FLASH_ATTENTION, "hides the diagonal"),
    "mask bottom-right": (Mistakes(bottom_right=True), checks.FLASH_ATTENTION, "aligned bottom-right"),
    "accumulator not rescaled": (
        Mistakes(acc_not_rescaled=True),
        checks.FLASH_ATTENTION,
        "the accumulator is not rescaled",
    ),
    "running sum not rescaled": (
        Mistakes(sum_not_rescaled=True),
        checks.FLASH_ATTENTION,
        "the running sum is not rescaled",
    ),
    "L saved as the max": (Mistakes(save_l_as="max"), checks.FLASH_ATTENTION, "as the running maximum"),
    "L saved as the sum": (Mistakes(save_l_as="sum"), checks.FLASH_ATTENTION, "L saved as the running sum"),
    "dS without D": (Mistakes(no_d=True), checks.FLASH_ATTENTION, "without D"),
    "D from dO and Q": (Mistakes(d_from="q"), checks.FLASH_ATTENTION, "D computed from dO and Q"),
    "transposes in dq and dk": (
        Mistakes(transposed_dq_dk=True),
        checks.FLASH_ATTENTION,
        "the transposes of dq and dk swapped",
    ),
    "last partial tile dropped": (
        Mistakes(drop_last_tile=True),
        checks.FLASH_ATTENTION,
        "the last key tile is dropped",
    ),
    "Nk taken from q": (Mistakes(nk_from_q=True), checks.FLASH_ATTENTION, "stops at Nq, q's length"),
    ".view on grad_output": (Mistakes(view_grad=True), checks.FLASH_ATTENTION, ".view on grad_output"),
    "gradient for is_causal": (
        Mistakes(grad_for_causal=True),
        checks.FLASH_ATTENTION,
        "returns a gradient for is_causal",
    ),
    "tensors on ctx attributes": (Mistakes(save_on_ctx=True), checks.FLASH_MEMORY, "ctx.save_for_backward"),
    "P saved": (Mistakes(save_p=True), checks.FLASH_MEMORY, "score or probability matrix is saved"),
}


@pytest.mark.parametrize("name", list(FLASH_WRONG))
def test_flash_wrong_named(name):
    mistakes, check, says = FLASH_WRONG[name]
    # one tile over each whole sequence for the transposes: with smaller tiles they mix tiles up as well
    tile = 128 if mistakes.transposed_dq_dk else 16
    _assert_named(grade(check, flash_function(tile, tile, mistakes), seed=11), says)


def test_flash_tiled_mistake_named_with_an_odd_tile():
    report = grade(checks.FLASH_ATTENTION, flash_function(5, 3, Mistakes(sum_not_rescaled=True)), seed=2)
    _assert_named(report, "with key tiles of 3")


def test_flash_sizes_are_fresh_primes():
    seen = set()
    for seed in range(6):
        cases = checks.flash_cases(seed)
        seen.add(tuple((c.nq, c.nk) for c in cases.values()))
        for label, case in cases.items():
            if label != "Nq = Nk = 64":
                assert case.nq % 16 and case.nk % 16, label
    assert len(seen) > 1


# ---------------------------------------------------------------------------------------------------
# Exercise 5: attention_op
# ---------------------------------------------------------------------------------------------------

OPS: dict[str, Any] = {}


def _op(name: str, **kwargs: Any) -> Any:
    if name not in OPS:  # an operator's name can be registered once per process
        OPS[name] = make_op(name, **kwargs)
    return OPS[name]


def test_op_right_full():
    _assert_full(grade(checks.ATTENTION_OP, _op("right"), seed=1))


def test_op_blank_zero():
    assert grade(checks.ATTENTION_OP, blank).score == 0.0


OP_WRONG = {
    "fake of wrong shape": ({"fake": "shape"}, "the fake kernel's output has shape"),
    "fake of wrong dtype": ({"fake": "dtype"}, "the fake kernel's output has dtype"),
    "fake of wrong strides": ({"fake": "strides"}, "the fake kernel's output has strides"),
    "dv doubled": ({"wrong_dv": True}, "dv values differ"),
}


@pytest.mark.parametrize("name", list(OP_WRONG))
def test_op_wrong_named(name):
    kwargs, says = OP_WRONG[name]
    _assert_named(grade(checks.ATTENTION_OP, _op(name.replace(" ", "_"), **kwargs), seed=2), says)


def test_op_graph_break_named_with_its_cause():
    report = grade(checks.ATTENTION_OP, attention_with_item, seed=1)
    message = next(i.message for i in report.items if i.name == "torch.compile(fullgraph=True)")
    assert "item" in message.lower(), message
    assert "Likely mistake: attention_with_item is a function, not the operator" in message, message
    assert report.score < report.points


def test_op_a_learners_names_are_bounded_in_the_feedback():
    """A callable whose class and name are a megabyte of markup: the check's feedback repeats at most 100
    characters of each (the evidence channel drops control characters, and the outputs escape what is
    left: tests/test_untrusted.py)."""
    hostile = "<script>alert(1)</script>| 7 / 7 |\n# Heading" * 20_000
    callable_class = type(
        hostile,
        (),
        {"__call__": lambda self, q, k, v, is_causal=False: attention_with_item(q, k, v, is_causal)},
    )
    op = callable_class()
    op.__name__ = hostile
    report = grade(checks.ATTENTION_OP, op, seed=1)
    assert report.score < report.points
    message = next(i.message for i in report.items if i.name == "torch.compile(fullgraph=True)")
    assert "Likely mistake: <script>alert(1)</script>" in message, message[:300]
    assert len(report.render()) < 20_000 and hostile[:200] not in report.render()


def test_op_fake_kernel_mistake_is_named_only_for_the_fake():
    """The fake kernel's wrong layout is the likely mistake; an operator whose values are wrong but whose
    fake is right gets no fake-kernel diagnosis, and no "not an operator" one."""
    wrong_fake = grade(checks.ATTENTION_OP, _op("fake_of_wrong_shape", fake="shape"), seed=2)
    fake = next(i.message for i in wrong_fake.items if i.name == "fake kernel")
    assert "Likely mistake: the function given to register_fake makes its output with the wrong shape" in fake
    doubled = grade(checks.ATTENTION_OP, _op("dv_doubled", wrong_dv=True), seed=2)
    assert next(i for i in doubled.items if i.name == "fake kernel").passed, doubled.render()
    assert "not the operator torch.library.custom_op returns" not in _messages(doubled)


# ---------------------------------------------------------------------------------------------------
# CUDA
# ---------------------------------------------------------------------------------------------------


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_checks_run_on_cuda():
    flash = flash_function()
    for check, learner in (
        (checks.ATTENTION, attention),
        (checks.FLASH_ATTENTION, flash),
        (checks.FLASH_MEMORY, flash),
        (checks.ATTENTION_OP, _op("cuda")),
    ):
        evidence = check.collect(learner, seed=3, device="cuda")
        assert evidence["device"] == "cuda"
        _assert_full(check.grade(evidence))


@pytest.mark.parametrize(
    "mistakes",
    [Mistakes(mask_diagonal=-1), Mistakes(save_l_as="sum")],
    ids=["diagonal masked", "L as the sum"],
)
def test_values_computed_from_a_wrong_one_carry_its_mistake_not_a_generic_overflow(mistakes):
    """A fully masked row gives 0/0 and a wrong L gives exp overflows downstream: the feedback names the
    mistake that caused them (docs/checks.md item 28), not "is the computation numerically stable?"."""
    report = grade(checks.FLASH_ATTENTION, flash_function(16, 16, mistakes), seed=11)
    assert "an overflow, e.g." not in _messages(report), report.render()
    assert "named for" in _messages(report), report.render()
