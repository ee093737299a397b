"""Partial credit and feedback text: the score nbgrader reads and what the learner sees."""

from __future__ import annotations

import numpy as np
import pytest

from autograder.checks.compare import compare
from autograder.checks.report import Item, Report


def report(points: float, *items: tuple[bool, float]) -> Report:
    """A report with one item per (passed, weight)."""
    r = Report("exercise", points)
    for i, (passed, weight) in enumerate(items):
        r.add(Item(f"p{i}", passed, "msg", weight))
    return r


# ----------------------------------------------------------------------------- score


def test_all_passed_is_exactly_full_points() -> None:
    r = report(4, (True, 2.0), (True, 1.0), (True, 0.1), (True, 0.2))
    assert r.score == 4.0
    assert type(r.score) is float


def test_none_passed_is_exactly_zero() -> None:
    r = report(4, (False, 2.0), (False, 1.0))
    assert r.score == 0.0
    assert type(r.score) is float


def test_score_is_points_times_passed_weight_over_total_weight() -> None:
    r = report(4, (True, 2.0), (False, 1.0), (True, 1.0))
    assert r.score == 3.0
    r = report(6, (True, 1.0), (False, 0.5))
    assert r.score == 4.0


def test_score_rounds_to_hundredths() -> None:
    r = report(4, (True, 1.0), (False, 1.0), (False, 1.0))
    assert r.score == 1.33
    r = report(4, (True, 1.0), (True, 1.0), (False, 1.0))
    assert r.score == 2.67


def test_a_tiny_failed_weight_never_rounds_up_to_full_points() -> None:
    r = report(4, (True, 1000.0), (False, 0.001))
    assert r.score == 3.99


def test_score_is_a_plain_float_even_with_numpy_weights_and_points() -> None:
    r = Report("exercise", np.float64(2.0))
    r.add(Item("a", bool(np.True_), "ok", np.float64(1.0)))
    r.add(Item("b", False, "no", np.int64(1)))
    assert r.score == 1.0
    assert type(r.score) is float


def test_score_clamped_to_points_range() -> None:
    assert 0.0 <= report(3, (True, 0.3), (True, 0.3), (True, 0.4)).score <= 3.0
    assert report(3, (True, 0.3), (True, 0.3), (True, 0.4)).score == 3.0


def test_no_items_or_zero_weights_scores_zero() -> None:
    assert Report("empty", 4).score == 0.0
    assert report(4, (True, 0.0), (True, 0.0)).score == 0.0


def test_zero_weight_item_is_informational() -> None:
    assert report(4, (True, 1.0), (False, 0.0)).score == 4.0


@pytest.mark.parametrize("weight", [-1.0, float("nan"), float("inf"), "1"])
def test_invalid_weights_are_rejected(weight: object) -> None:
    with pytest.raises(ValueError, match="weight of item"):
        Item("a", True, "ok", weight)  # type: ignore[arg-type]


@pytest.mark.parametrize("points", [-1.0, float("nan")])
def test_invalid_points_are_rejected(points: float) -> None:
    with pytest.raises(ValueError, match="points of"):
        Report("exercise", points)


# ----------------------------------------------------------------------------- render


def test_render_marks_score_and_alignment() -> None:
    r = Report("linear_forward", 4)
    r.add(Item("out", True, "out: shape (4, 5) float64, max abs error 1e-16.", 2.0))
    r.add(Item("dW", False, "dW has shape (3, 5), expected (5, 3).", 1.0))
    assert r.render() == (
        "linear_forward: 2.67 / 4 points\n"
        "  [pass] out  out: shape (4, 5) float64, max abs error 1e-16.\n"
        "  [FAIL] dW   dW has shape (3, 5), expected (5, 3)."
    )


def test_render_collapses_repeated_failures() -> None:
    r = Report("ex", 3)
    error = "linear_forward raised ValueError: shapes (4,3) and (5,3) not aligned"
    for name in ("out", "dx", "dW"):
        r.add(Item(name, False, error))
    lines = r.render().splitlines()
    assert lines[1].endswith(error)
    assert lines[2] == "  [FAIL] dx   (same as above)"
    assert lines[3] == "  [FAIL] dW   (same as above)"


def test_render_does_not_collapse_into_a_passing_message() -> None:
    r = Report("ex", 2)
    r.add(Item("a", True, "same text"))
    r.add(Item("b", False, "same text"))
    r.add(Item("c", True, "same text"))
    lines = r.render().splitlines()
    assert lines[2] == "  [FAIL] b  same text"
    assert lines[3] == "  [pass] c  same text"


def test_render_notes_and_multiline_messages() -> None:
    r = Report("ex", 1)
    r.add(Item("out", False, "first line\nsecond line"))
    r.notes.append("linear_forward warned: RuntimeWarning: overflow encountered in exp")
    lines = r.render().splitlines()
    assert lines[1] == "  [FAIL] out  first line"
    assert lines[2] == "              second line"
    assert lines[3] == "  note: linear_forward warned: RuntimeWarning: overflow encountered in exp"


def test_render_of_fractional_points() -> None:
    r = report(2.5, (True, 1.0), (False, 1.0))
    assert r.render().startswith("exercise: 1.25 / 2.5 points\n")


# ----------------------------------------------------------------------------- from_verdicts


def test_from_verdicts_passes_with_first_detail() -> None:
    a, b = np.ones(3), np.arange(3.0)
    item = Item.from_verdicts("N = 1", [compare("out", a, a), compare("dx", b, b)], weight=0.5)
    assert item.passed and item.weight == 0.5
    assert item.message == "out: shape (3,) float64, max abs error 0.0e+00."


def test_from_verdicts_fails_with_first_failure_message_including_likely_mistake() -> None:
    a, b = np.ones(3), np.arange(3.0) + 1
    verdicts = [compare("out", a, a), compare("dx", -b, b), compare("dW", None, b)]
    item = Item.from_verdicts("N = 1", verdicts)
    assert not item.passed
    assert item.message == verdicts[1].message()
    assert item.message.endswith("Likely mistake: sign flipped.")


def test_from_verdicts_with_nothing_compared_fails() -> None:
    item = Item.from_verdicts("gradients", [])
    assert not item.passed
    assert item.message == "nothing was compared"
