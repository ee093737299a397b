"""Fresh seeds: every graded call meets inputs drawn for this grading run, and a recorded run reproduces."""

from __future__ import annotations

import nbformat
import pytest

from autograder.grading.prepare import CheckCall, GradeCell, Prepared
from autograder.grading.seeds import REDACTED, SEED_RANGE, draw, fresh, hidden_lines, redact, with_seed

HIDDEN = '''"""linear layer."""
score = check_linear_layer(linear_forward, linear_backward)
### BEGIN HIDDEN TESTS
score = check_linear_layer(linear_forward, linear_backward, seed=7)
### END HIDDEN TESTS
score'''


def test_the_final_call_gets_the_seed_and_nothing_else_changes() -> None:
    out = with_seed(HIDDEN, 123456)
    assert out == HIDDEN.replace("seed=7", "seed=123456")


def test_a_final_call_without_a_seed_gets_one() -> None:
    assert (
        with_seed("score = check_mse_loss(mse_loss)\nscore", 5)
        == "score = check_mse_loss(mse_loss, seed=5)\nscore"
    )
    assert with_seed("s = check_x()\n", 9) == "s = check_x(seed=9)\n"


def test_columns_are_counted_in_characters_not_bytes() -> None:
    source = 'é = "ü"; score = check_mse_loss(mse_loss, seed=7)'
    assert with_seed(source, 42) == 'é = "ü"; score = check_mse_loss(mse_loss, seed=42)'


def test_a_cell_without_a_check_call_is_left_alone() -> None:
    assert with_seed("x = 1\n", 3) == "x = 1\n"


def test_draws_are_in_range_and_not_the_same() -> None:
    seeds = {draw() for _ in range(200)}
    assert all(s in SEED_RANGE for s in seeds)
    assert len(seeds) > 190, "fresh seeds repeat far too often"
    # the largest case seed a check derives stays a valid seed for numpy's legacy generator
    assert 1000 * (SEED_RANGE.stop - 1) + 999 < 2**32


def _prepared() -> Prepared:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(HIDDEN)
    cell.metadata["nbgrader"] = {"grade": True, "grade_id": "test_linear_layer", "points": 4}
    nb.cells = [nbformat.v4.new_code_cell("x = 1"), cell]
    calls = (CheckCall("check_linear_layer", 0), CheckCall("check_linear_layer", 7))
    return Prepared(nb, [GradeCell("test_linear_layer", 4.0, calls)])


def test_fresh_rewrites_the_notebook_and_the_graded_call_together() -> None:
    prepared, seeds = fresh(_prepared())
    seed = seeds["test_linear_layer"]
    assert seed in SEED_RANGE
    assert f"seed={seed})" in prepared.notebook.cells[1].source
    assert "seed=7)" not in prepared.notebook.cells[1].source  # a drawn seed may begin with 7
    assert prepared.grade_cells[0].final_call == CheckCall("check_linear_layer", seed)
    assert prepared.grade_cells[0].calls[0] == CheckCall("check_linear_layer", 0), "visible call untouched"


def test_recorded_seeds_reproduce_a_run() -> None:
    _, seeds = fresh(_prepared())
    again, same = fresh(_prepared(), seeds)
    assert same == seeds
    assert again.grade_cells[0].final_call.seed == seeds["test_linear_layer"]


@pytest.mark.parametrize("runs", [20])
def test_two_runs_draw_different_inputs(runs: int) -> None:
    drawn = {fresh(_prepared())[1]["test_linear_layer"] for _ in range(runs)}
    assert len(drawn) == runs


def test_an_echo_of_a_hidden_test_is_removed_from_kernel_text() -> None:
    prepared, seeds = fresh(_prepared())
    hidden = hidden_lines(prepared.notebook)
    seed = seeds["test_linear_layer"]
    line = f"score = check_linear_layer(linear_forward, linear_backward, seed={seed})"
    assert line in hidden and str(seed) in hidden
    echo = f"RuntimeError: I saw {line} and the number {seed}; 1{seed}0 is another number"
    cleaned = redact(echo, hidden)
    assert line not in cleaned and f" {seed};" not in cleaned
    assert f"1{seed}0" in cleaned, "a seed is removed only where it stands as a number of its own"
    assert cleaned.count(REDACTED) == 2
    # the visible test is the learner's own to see, and is left alone
    assert redact("score = check_linear_layer(linear_forward, linear_backward)", hidden) == (
        "score = check_linear_layer(linear_forward, linear_backward)"
    )
