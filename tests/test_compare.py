"""The comparison primitive: every problem it reports and every likely mistake it claims to diagnose."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from autograder.checks.compare import PROBLEMS, Verdict, as_array, compare, with_common_factor
from autograder.checks.tolerances import FLOAT64

# Pairwise-distinct sizes, as in the checks, so that each shape mistake has its own shape.
N, D, M = 4, 3, 5


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    """A float64 array with no exact zeros and no symmetry, so no diagnosis fits it by accident."""
    return np.random.default_rng(seed).standard_normal(shape) + 0.1


# ----------------------------------------------------------------------------- ok


def test_ok_reports_shape_dtype_and_error() -> None:
    expected = rand(N, D)
    v = compare("dx", expected + 1e-12, expected)
    assert v.ok and v.problem is None and v.likely is None
    assert v.detail == f"dx: shape (4, 3) float64, max abs error {v.max_abs_err:.1e}."
    assert 0 < v.max_abs_err < 2e-12
    assert v.message() == v.detail
    assert v.shape_ok


def test_ok_for_one_dimensional_shape_has_trailing_comma() -> None:
    v = compare("db", rand(M), rand(M))
    assert v.detail.startswith("db: shape (5,) float64")


def test_empty_arrays_compare_equal() -> None:
    v = compare("e", np.zeros((0, 3)), np.zeros((0, 3)))
    assert v.ok and v.max_abs_err == 0.0


# ----------------------------------------------------------------------------- missing, type


def test_none_is_missing() -> None:
    v = compare("dW", None, rand(M, D))
    assert (v.ok, v.problem) == (False, "missing")
    assert v.detail == "dW is None: nothing was returned for it."
    assert not v.shape_ok


@pytest.mark.parametrize(
    ("value", "type_name"), [([1.0, 2.0, 3.0], "list"), ("1.0", "str"), (True, "bool"), (np.True_, "bool")]
)
def test_non_arrays_are_a_type_problem(value: object, type_name: str) -> None:
    v = compare("db", value, rand(3))
    assert (v.ok, v.problem) == (False, "type")
    assert v.detail == f"db is a {type_name}, expected an array of shape (3,)."
    assert not v.shape_ok


def test_list_type_names_the_fix() -> None:
    v = compare("db", [1.0, 2.0, 3.0], rand(3))
    assert v.likely == "a Python list: return a numpy array (np.array(...)) of the expected shape"


def test_type_name_recorded_in_evidence_is_used() -> None:
    from autograder.checks.evidence import NotAnArray

    v = compare("db", NotAnArray("dict"), rand(3))
    assert v.detail == "db is a dict, expected an array of shape (3,)."


def test_reference_that_is_not_array_like_is_a_check_bug() -> None:
    with pytest.raises(TypeError, match="reference for 'x'"):
        compare("x", rand(2), [1.0, 2.0])


# ----------------------------------------------------------------------------- shape


def test_shape_transposed() -> None:
    expected = rand(M, D)
    v = compare("dW", expected.T, expected)
    assert (v.problem, v.detail) == ("shape", "dW has shape (3, 5), expected (5, 3).")
    assert v.likely == "transposed (the values are right, the axes are swapped)"
    assert v.shape_ok is False


def test_shape_transposed_with_wrong_values() -> None:
    v = compare("dW", rand(D, M, seed=1), rand(M, D))
    assert v.likely == "the shape is the transpose of the expected one"


def test_shape_reshaped_to_the_transposed_shape() -> None:
    expected = rand(M, D)
    v = compare("dW", expected.reshape(D, M), expected)
    assert v.likely == "the right values reshaped to the transposed shape (a reshape where none belongs?)"


def test_shape_keepdims() -> None:
    expected = rand(M)
    v = compare("db", expected[None, :], expected)
    assert v.detail == "db has shape (1, 5), expected (5,)."
    assert v.likely == "an extra or missing axis of size 1 (keepdims=True, or a missing reshape/squeeze)"


def test_shape_missing_axis_of_size_one() -> None:
    expected = rand(N, 1)
    v = compare("loss_grad", expected[:, 0], expected)
    assert v.likely == "an extra or missing axis of size 1 (keepdims=True, or a missing reshape/squeeze)"


def test_shape_extra_axis_and_wrong_values() -> None:
    v = compare("db", rand(1, M, seed=1), rand(M))
    assert v.likely == "an extra or missing axis of size 1, and the values differ too"


def test_shape_not_reduced_names_the_axis() -> None:
    dout = rand(N, M)
    v = compare("db", dout, dout.sum(axis=0))
    assert v.detail == "db has shape (4, 5), expected (5,)."
    assert v.likely == "not reduced: summing it over axis 0 gives the expected values"
    per_row = rand(N, M)
    assert compare("s", per_row, per_row.sum(axis=1)).likely == (
        "not reduced: summing it over axis 1 gives the expected values"
    )


def test_shape_loss_not_averaged() -> None:
    per_sample = rand(N)
    v = compare("loss", per_sample, per_sample.mean())
    assert v.detail == "loss has shape (4,), expected ()."
    assert v.likely == "not reduced: averaging it over axis 0 gives the expected values"


def test_shape_not_reduced_over_two_axes() -> None:
    per_element = rand(N, M)
    v = compare("loss", per_element, per_element.sum())
    assert v.likely == "not reduced: summing it over axes (0, 1) gives the expected values"


def test_shape_reduced_where_the_axis_must_stay() -> None:
    expected = rand(N, M)
    v = compare("dout", expected.sum(axis=0), expected)
    assert v.likely == "summed over axis 0, which the expected value keeps"


def test_shape_with_the_right_size_and_unrelated_values_has_no_diagnosis() -> None:
    # the same number of elements alone says nothing about the mistake
    v = compare("x", rand(2, 6, seed=1), rand(3, 4))
    assert (v.problem, v.likely) == ("shape", None)


def test_shape_right_values_wrong_shape() -> None:
    expected = rand(3, 4)
    v = compare("x", expected.reshape(2, 6), expected)
    assert v.likely == "the right values in the wrong shape: a reshape is missing"


def test_shape_axes_permuted() -> None:
    expected = rand(N, D, M)
    v = compare("x", expected.transpose(2, 0, 1), expected)
    assert v.likely == "axes in the wrong order: transposing it with axes (1, 2, 0) gives the expected values"


def test_shape_named_mistake_with_a_different_shape() -> None:
    dout = rand(N, M)
    mistakes = {"dout was not summed over the batch axis 0": dout, "summed over axis 1": dout.sum(axis=1)}
    v = compare("db", dout.sum(axis=1), dout.sum(axis=0), mistakes=mistakes)
    assert v.detail == "db has shape (4,), expected (5,)."
    assert v.likely == "summed over axis 1"
    # a named mistake wins over the generic "not reduced" diagnosis
    assert compare("db", dout, dout.sum(axis=0), mistakes=mistakes).likely == (
        "dout was not summed over the batch axis 0"
    )


def test_shape_mismatch_of_0d_arrays_does_not_crash() -> None:
    assert compare("x", np.float64(3.0), rand(2, 3)).detail == "x has shape (), expected (2, 3)."
    assert compare("x", rand(2, 3), np.float64(3.0)).detail == "x has shape (2, 3), expected ()."
    assert compare("x", np.zeros(0), np.float64(0.0)).likely is None  # no "not reduced" over an empty axis


def test_shape_mismatch_of_non_numeric_arrays_has_no_diagnosis() -> None:
    v = compare("x", np.array(["a", "b"]), rand(3))
    assert (v.problem, v.likely) == ("shape", None)


# ----------------------------------------------------------------------------- dtype


def test_dtype_float32_with_hint() -> None:
    expected = rand(N, D)
    v = compare("dx", expected.astype(np.float32), expected)
    assert (v.problem, v.detail) == ("dtype", "dx has dtype float32, expected float64.")
    assert v.likely == "computed in single precision: an array or tensor created as float32 somewhere?"
    assert v.shape_ok


def test_dtype_int() -> None:
    v = compare("dx", np.ones((N, D), dtype=np.int64), rand(N, D))
    assert v.detail == "dx has dtype int64, expected float64."
    assert v.likely.startswith("an integer array: created with an integer dtype")


def test_dtype_bool() -> None:
    v = compare("mask", np.ones((N, D), dtype=bool), rand(N, D))
    assert v.detail == "mask has dtype bool, expected float64."
    assert v.likely == "a boolean array: a mask (e.g. x > 0) returned where the values it selects belong?"


def test_dtype_none_accepts_float32() -> None:
    expected = rand(N, D)
    v = compare("dx", expected.astype(np.float32), expected, dtype=None)
    assert v.ok
    assert v.detail.startswith("dx: shape (4, 3) float32")


def test_dtype_none_holds_float32_to_float32_precision() -> None:
    # computed in float32: rounding alone is ~1e-7 relative, above FLOAT64's rtol, and must pass
    x, w = rand(64, 32), rand(32, 8, seed=1)
    v = compare("y", x.astype(np.float32) @ w.astype(np.float32), x @ w, dtype=None)
    assert v.ok, v.message()
    assert not compare("y", (x @ w * 1.001).astype(np.float32), x @ w, dtype=None).ok


def test_dtype_none_rejects_int_and_complex() -> None:
    v = compare("dx", np.ones(3, dtype=np.int32), rand(3), dtype=None)
    assert v.detail == "dx has dtype int32, expected a floating dtype."
    v = compare("dx", rand(3) + 1j, rand(3), dtype=None)
    assert (v.ok, v.problem) == (False, "dtype")
    assert v.detail == "dx has dtype complex128, expected a floating dtype."
    assert v.likely.startswith("a complex array")


def test_dtype_object_array() -> None:
    v = compare("dx", np.array([1.0, None]), rand(2))
    assert v.detail == "dx has dtype object, expected float64."
    assert v.likely.startswith("an array of Python objects")


# ----------------------------------------------------------------------------- nonfinite


def test_nan_reports_count_and_first_index() -> None:
    expected = rand(N, D)
    actual = expected.copy()
    actual[1, 2] = actual[3, 0] = np.nan
    v = compare("probs", actual, expected)
    assert v.problem == "nonfinite"
    assert v.detail == (
        "probs has 2 NaN value(s) of 12 (first at [1, 2]), where every expected value is finite."
    )
    assert v.worst_index == (1, 2)
    assert (
        v.likely == "an overflow, e.g. exp of a large number, or 0/0: is the computation numerically stable?"
    )


def test_inf_is_named_inf() -> None:
    actual = np.array([1.0, np.inf, -np.inf])
    v = compare("z", actual, rand(3))
    assert v.detail == "z has 2 inf value(s) of 3 (first at [1]), where every expected value is finite."
    mixed = np.array([np.nan, np.inf, 1.0])
    assert "2 NaN or inf value(s)" in compare("z", mixed, rand(3)).detail


def test_nonfinite_scalar_has_no_index() -> None:
    v = compare("loss", float("nan"), 1.0)
    assert v.detail == "loss has 1 NaN value(s) of 1, where every expected value is finite."


def test_nonfinite_named_mistake_takes_precedence() -> None:
    logits = np.array([[1000.0, 0.0, -3.0], [1.0, 2.0, 3.0]])
    shifted = logits - logits.max(axis=1, keepdims=True)
    stable = np.exp(shifted) / np.exp(shifted).sum(axis=1, keepdims=True)
    with np.errstate(all="ignore"):  # NaN in row 0, right in row 1
        naive = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    v = compare("probs", naive, stable, mistakes={"exp of unshifted logits overflows": naive})
    assert v.problem == "nonfinite"
    assert v.likely == "exp of unshifted logits overflows"


def test_nonfinite_named_mistake_needs_more_than_the_overflow() -> None:
    # -log(p) with p underflowing gives loss = inf; a named wrong answer whose loss
    # overflows too (softmax over the batch axis) must not be claimed: only the overflow is known.
    v = compare("loss", np.inf, 2.5, mistakes={"softmax normalised over the batch (axis 0)": np.inf})
    assert v.problem == "nonfinite"
    assert v.likely.startswith("an overflow, e.g. exp of a large number")
    all_nan = np.full((N, D), np.nan)
    v = compare("probs", all_nan, rand(N, D), mistakes={"some named mistake": all_nan})
    assert v.likely.startswith("an overflow")
    # NaN in other places than the named answer's is another answer
    expected = rand(N, D)
    actual, elsewhere = expected.copy(), expected.copy()
    actual[0, 0], elsewhere[1, 1] = np.inf, np.inf
    assert compare("dx", actual, expected, mistakes={"x": elsewhere}).likely.startswith("an overflow")


# ----------------------------------------------------------------------------- values


def test_values_worst_element_count_and_errors() -> None:
    expected = rand(N, D)
    actual = expected.copy()
    actual[2, 1] += 0.5
    actual[0, 0] += 0.1
    v = compare("dx", actual, expected)
    assert (v.ok, v.problem) == (False, "values")
    got, exp = actual[2, 1], expected[2, 1]
    assert v.detail.startswith(
        f"dx values differ in 2 of 12 elements; worst at [2, 1]: got {got:.6g}, expected {exp:.6g}"
    )
    assert v.worst_index == (2, 1)
    assert v.max_abs_err == pytest.approx(0.5)
    assert v.max_rel_err == pytest.approx(
        np.max(np.abs(actual - expected) / (np.abs(actual) + np.abs(expected)))
    )
    assert f"(max abs error {v.max_abs_err:.3g}, max rel error {v.max_rel_err:.3g})." in v.detail
    assert v.likely is None
    assert v.shape_ok


def test_values_shows_enough_digits_to_tell_numbers_apart() -> None:
    v = compare("loss", 1.0 + 1e-6, 1.0)
    assert v.detail.startswith("loss values differ: got 1.000001, expected 1 ")


def test_values_scalar_detail_has_no_index() -> None:
    v = compare("loss", 3.7, 1.2)
    assert v.detail == "loss values differ: got 3.7, expected 1.2 (max abs error 2.5, max rel error 0.51)."
    assert v.worst_index == ()


def test_likely_all_zeros() -> None:
    v = compare("dx", np.zeros((N, D)), rand(N, D))
    assert v.likely == "all zeros: is the computation missing, or a placeholder left in?"


def test_likely_sign_flipped() -> None:
    expected = rand(N, D)
    assert compare("dx", -expected, expected).likely == "sign flipped"
    assert compare("loss", -2.5, 2.5).likely == "sign flipped"


def test_likely_transposed_square() -> None:
    expected = rand(D, D)
    v = compare("dW", expected.T, expected)
    assert v.problem == "values"
    assert v.likely == "transposed (the values are right, the axes are swapped)"


def test_likely_reshape_where_transpose_belongs() -> None:
    expected = rand(M, D)
    v = compare("dW", expected.T.reshape(M, D), expected)
    assert v.likely == "reshaped where a transpose belongs (the values are right, in the wrong order)"


def test_likely_factor_n_named_with_batch_size() -> None:
    expected = rand(N, D)
    v = compare("dx", N * expected, expected, batch_size=N)
    assert v.likely == (
        "4 times too large, a factor of the batch size N=4: a sum over the batch where the mean belongs "
        "(a missing 1/N)?"
    )
    assert v.message().endswith("(a missing 1/N)?")


def test_likely_factor_one_over_n_named_with_batch_size() -> None:
    expected = rand(N, D)
    v = compare("dx", expected / N, expected, batch_size=N)
    assert (
        v.likely
        == "4 times too small, a factor of 1/N with N=4: divided by N twice, or where no mean is taken?"
    )


def test_factor_n_is_written_alike_with_or_without_the_batch_size() -> None:
    # One mistake, one way to say it: "4 times too small", never "a factor of 0.25"; the reason is
    # specific (the batch size) only when the check passes N.
    expected = rand(N, D)
    without = compare("dx", expected / N, expected).likely
    with_n = compare("dx", expected / N, expected, batch_size=N).likely
    assert (
        without
        == "4 times too small, a constant factor of 1/4: a wrong numeric constant, or a scale applied twice?"
    )
    assert with_n.startswith("4 times too small, a factor of 1/N with N=4")
    assert compare("dx", N * expected, expected).likely.startswith("4 times too large, a constant factor:")


def test_factor_n_is_named_alike_for_every_value() -> None:
    # one mistake, one name: the same words for an input gradient, a weight gradient and a loss
    for expected in (rand(N, D), rand(M, D), np.float64(1.7)):
        assert compare("g", N * expected, expected, batch_size=N).likely.startswith(
            "4 times too large, a factor of the batch size N=4"
        )
        assert compare("g", expected / N, expected, batch_size=N).likely.startswith(
            "4 times too small, a factor of 1/N with N=4"
        )


def test_likely_factor_two_and_half() -> None:
    expected = rand(N, D)
    assert compare("dx", 2 * expected, expected, batch_size=N).likely == (
        "twice too large (a factor 2 too many, e.g. from the derivative of a square?)"
    )
    assert compare("dx", 0.5 * expected, expected, batch_size=N).likely == (
        "half the expected value (a missing factor 2, e.g. from the derivative of a square?)"
    )


def test_likely_factor_n_takes_precedence_over_two_when_n_is_two() -> None:
    expected = rand(2, D)
    assert compare("dx", 2 * expected, expected, batch_size=2).likely.startswith("2 times too large")


def test_a_simple_fraction_is_a_wrong_constant() -> None:
    # 3.0 * diff where 2.0 * diff belongs: a constant of the code, whatever the data
    expected = rand(N, D)
    assert compare("dx", 1.5 * expected, expected, batch_size=N).likely == (
        "1.5 times too large, a constant factor of 3/2: a wrong numeric constant, or a scale applied twice?"
    )
    assert compare("dx", -expected / 3, expected).likely.startswith(
        "sign flipped and 3 times too small, a constant factor of 1/3"
    )
    assert compare("dx", N * N * expected, expected, batch_size=N).likely.startswith(
        "16 times too large, a factor of N² with N=4: multiplied by N where 1/N belongs?"
    )


def test_other_constant_factor_is_not_named_from_one_case() -> None:
    # a factor that is no simple fraction may be a coincidence of this case's inputs
    expected = rand(N, D)
    v = compare("dx", np.pi * expected, expected, batch_size=N)
    assert (v.likely, v.factor) == (None, pytest.approx(np.pi))
    v = compare("dx", -np.pi * expected, expected)
    assert (v.likely, v.factor) == (None, pytest.approx(-np.pi))
    # a simple fraction from a single element proves nothing either
    assert compare("g", np.array([0.0, 0.0, 3.0]), np.array([0.0, 0.0, 2.0])).likely is None


def test_bias_gradient_from_the_input_at_n_1_is_not_a_factor() -> None:
    # with N = 1, a bias gradient computed as (dout * x.sum()).sum(0) is dout[0] times
    # sum(x), a constant multiple of the right one in that case only: no factor may be claimed.
    rng = np.random.default_rng(3)
    x, dout = rng.standard_normal((1, D)), rng.standard_normal((1, M))
    wrong, right = (dout * x.sum()).sum(axis=0), dout.sum(axis=0)
    v = compare("db", wrong, right, batch_size=1)
    assert v.problem == "values"
    assert v.likely is None
    assert "factor" not in v.message()


def test_common_factor_is_named_when_every_case_has_it() -> None:
    cases = [rand(N, D, seed=1), rand(1, D, seed=2), rand(N, D, seed=3)]
    verdicts = [compare("dx", np.pi * e, e, batch_size=len(e)) for e in cases]
    named = with_common_factor(verdicts)
    assert [v.likely for v in named] == ["off by a constant factor of 3.14159 in every case"] * 3
    assert named[0].message().endswith("Likely mistake: off by a constant factor of 3.14159 in every case.")
    flipped = with_common_factor([compare("dx", -np.pi * e, e) for e in cases])
    assert {v.likely for v in flipped} == {"sign flipped and scaled by 3.14159 in every case"}


def test_common_factor_is_not_named_when_the_cases_disagree_or_one_case_fails() -> None:
    a, b = rand(N, D, seed=1), rand(N, D, seed=2)
    # the N = 1 bias gradient computed from the input: a different "factor" in every case
    disagree = [compare("db", np.e * a, a), compare("db", 0.77 * b, b)]
    assert [v.likely for v in with_common_factor(disagree)] == [None, None]
    one_case = [compare("db", a, a), compare("db", np.e * b, b)]
    assert with_common_factor(one_case) == one_case
    # a case without a constant factor, or with a diagnosis of its own, rules the factor out
    mixed = [compare("db", np.e * a, a), compare("db", rand(N, D, seed=9), b)]
    assert [v.likely for v in with_common_factor(mixed)] == [None, None]
    with_other = [compare("db", np.e * a, a), compare("db", 2 * b, b)]
    assert with_common_factor(with_other) == with_other


def test_sign_flip_combines_with_every_recognised_factor() -> None:
    expected = rand(N, D)
    assert compare("dx", -expected / N, expected, batch_size=N).likely.startswith(
        "sign flipped and 4 times too small, a factor of 1/N with N=4"
    )
    assert compare("dx", -2 * expected, expected).likely.startswith("sign flipped and twice too large")
    assert compare("dx", -0.5 * expected, expected).likely.startswith(
        "sign flipped and half the expected value"
    )


def test_likely_sign_flipped_and_factor_n() -> None:
    expected = rand(N, D)
    v = compare("dx", -N * expected, expected, batch_size=N)
    assert v.likely.startswith("sign flipped and 4 times too large, a factor of the batch size N=4")


def test_likely_constant_offset() -> None:
    expected = rand(N, D)
    v = compare("out", expected + 0.25, expected)
    assert v.likely == "off by a constant 0.25 in every element"


def test_likely_named_mistake() -> None:
    W, dout = rand(M, D, seed=1), rand(N, M, seed=2)
    ignored = np.ones_like(dout) @ W
    v = compare("dx", ignored, dout @ W, mistakes={"the upstream gradient dout is ignored": ignored})
    assert v.likely == "the upstream gradient dout is ignored"
    assert v.message().endswith("Likely mistake: the upstream gradient dout is ignored.")


def test_named_mistake_given_as_tensor_that_requires_grad() -> None:
    expected = rand(N, D)
    wrong = torch.tensor(expected * 1.3, requires_grad=True) * 1.0
    v = compare("dx", expected * 1.3, expected, mistakes={"scaled": wrong, "ragged": [[1.0], [1.0, 2.0]]})
    assert v.likely == "scaled"


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("shape", [(), (1,), (2,), (N, D), (D, D), (N, D, M)])
def test_no_false_diagnosis_on_random_wrong_answer(seed: int, shape: tuple[int, ...]) -> None:
    expected = rand(*shape, seed=seed)
    actual = rand(*shape, seed=seed + 100)
    v = compare("x", actual, expected, batch_size=N)
    assert v.problem == "values"
    assert v.likely is None, v.likely


def test_no_constant_factor_claimed_for_a_wrong_scalar() -> None:
    # any wrong scalar is *some* multiple of the right one: only recognisable factors say anything
    assert compare("loss", 3.7, 1.2).likely is None
    assert compare("loss", -3.7, 1.2).likely is None
    assert compare("loss", 4 * 1.2, 1.2, batch_size=4).likely.startswith("4 times too large")


def test_no_constant_factor_claimed_when_one_element_carries_the_answer() -> None:
    expected = np.array([0.0, 0.0, 2.0])
    assert compare("g", np.array([0.0, 0.0, 5.0]), expected).likely is None


def test_no_false_offset_for_a_tiny_wrong_element() -> None:
    # the offsets (0, ~1e-9) vary by less than the array's scale, but no constant explains them
    v = compare("x", np.array([1.0, 1e-9]), np.array([1.0, 1e-12]))
    assert v.problem == "values"
    assert v.likely is None


def test_huge_values_do_not_overflow_or_warn(recwarn: pytest.WarningsRecorder) -> None:
    expected = np.array([1e300, -1e300, 1e300])
    v = compare("x", 3 * expected, expected)
    assert v.likely.startswith("3 times too large, a constant factor:")
    assert compare("x", np.pi * expected, expected).factor == pytest.approx(np.pi)
    assert compare("x", 2 * expected, expected).likely.startswith("twice too large")
    v = compare("x", np.full(3, 1e308), np.full(3, 1e-308))
    assert v.problem == "values"
    assert compare("x", np.array([1e308, -1e308]), np.array([-1e308, 1e308])).likely == "sign flipped"
    assert len(recwarn) == 0


# ----------------------------------------------------------------------------- inputs


def test_torch_tensor_accepted_including_requires_grad() -> None:
    expected = rand(N, D)
    leaf = torch.tensor(expected, requires_grad=True)
    assert compare("dx", leaf, expected).ok
    assert compare("dx", leaf * 1.0, expected).ok  # a non-leaf that requires grad
    v = compare("dx", torch.tensor(expected, dtype=torch.float32), expected)
    assert v.detail == "dx has dtype float32, expected float64."


def test_torch_tensor_with_conj_and_neg_bits() -> None:
    expected = rand(N, D)
    assert compare("dx", torch.tensor(-expected).neg(), expected).ok


def test_zero_dimensional_and_python_float_scalars() -> None:
    assert compare("loss", 1.5, 1.5).ok
    assert compare("loss", np.float64(1.5), np.array(1.5)).ok
    assert compare("loss", torch.tensor(1.5, dtype=torch.float64), 1.5).ok
    v = compare("loss", 2, 2.0)
    assert v.detail == "loss has dtype int64, expected float64."


def test_expected_given_as_torch_tensor() -> None:
    expected = torch.tensor(rand(N, D), requires_grad=True)
    assert compare("dx", expected.detach().numpy().copy(), expected).ok
    assert not compare("dx", 2 * expected.detach().numpy(), expected).ok


def test_float32_reference_is_compared_at_float32_precision() -> None:
    x, w = rand(64, 32), rand(32, 8, seed=1)
    ref = torch.tensor(x, dtype=torch.float32) @ torch.tensor(w, dtype=torch.float32)
    assert compare("y", x @ w, ref).ok


def test_exotic_tensors_are_a_type_problem_not_a_crash() -> None:
    meta = torch.ones(3, device="meta")
    assert compare("x", meta, rand(3)).problem == "type"
    sparse = torch.eye(3, dtype=torch.float64).to_sparse()
    assert compare("x", sparse, np.eye(3)).ok
    bf16 = torch.ones(3, dtype=torch.bfloat16)
    assert compare("x", bf16, np.ones(3)).problem == "dtype"


def test_as_array() -> None:
    assert as_array(None) is None
    assert as_array([1.0]) is None
    assert as_array(True) is None
    assert as_array(1.5).shape == ()
    assert as_array(torch.ones(2, requires_grad=True)).dtype == np.float32
    assert type(as_array(np.ma.masked_array([1.0, 2.0]))) is np.ndarray


def test_compare_never_writes_to_stderr(capfd: pytest.CaptureFixture[str]) -> None:
    with np.errstate(all="warn"):
        compare("x", np.array([1e308, np.inf, 0.0]), np.array([1.0, 2.0, 3.0]))
        compare("x", np.array([1e308, -1e308, 1e308]), np.array([1e-308, 2.0, 3.0]))
        compare("x", np.array([1 + 1j]), np.array([1.0]), dtype=None)
    out, err = capfd.readouterr()
    assert err == ""


def test_verdict_public_fields() -> None:
    v = compare("x", 2 * rand(3), rand(3))
    assert isinstance(v, Verdict)
    assert v.problem in PROBLEMS
    assert {
        "name",
        "ok",
        "problem",
        "detail",
        "likely",
        "max_abs_err",
        "max_rel_err",
        "worst_index",
        "factor",
    } <= set(v.__dataclass_fields__)
    assert compare("x", rand(3), rand(3), tol=FLOAT64).ok


def test_an_overflow_the_check_computed_on_purpose_is_named() -> None:
    from autograder.checks.values import Overflow

    # Both wrong answers are inf; only the one the check declared as an overflow may be named.
    mistakes = {
        "softmax normalised over the batch (axis 0)": np.inf,
        Overflow("-log(p) of a probability that underflows to 0"): np.inf,
    }
    v = compare("loss", np.inf, 2.5, mistakes=mistakes)
    assert v.likely == "-log(p) of a probability that underflows to 0"
    nan = compare("loss", np.nan, 2.5, mistakes=mistakes)
    assert nan.likely.startswith("an overflow, e.g. exp of a large number"), "NaN is not that inf"
