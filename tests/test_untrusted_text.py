"""The escapes every output uses, the stored-outcome check and the systemic-failure guard, without a kernel
(the end-to-end attacks are in ``tests/test_untrusted.py``)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from autograder.engine import untrusted
from autograder.engine.contract import Stop, StopReason, parse_event
from autograder.engine.intake import Rejected
from autograder.engine.outcome import CellResult, Outcome
from autograder.engine.outputs import summary_text
from autograder.engine.systemic import systemic_failure


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("eve | 7 of 7 |\n| mallory", "eve &#124; 7 of 7 &#124; &#124; mallory"),
        ("# Heading", "&#35; Heading"),
        ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"),
        ("[click](javascript:alert(1))", "&#91;click&#93;(javascript:alert(1))"),
        ("`code`", "&#96;code&#96;"),
        ("- item\r\n> quote", "&#45; item &gt; quote"),
        ("Łukasz Żółw_01", "Łukasz Żółw_01"),
        ("a\x1b[2Jb\ud800", "a&#91;2Jb\ufffd"),
    ],
)
def test_markdown_text_is_one_line_with_no_markup(text: str, shown: str) -> None:
    assert untrusted.markdown(text) == shown


def test_terminal_text_has_no_escape_sequence_or_control_character() -> None:
    assert (
        untrusted.terminal("a\x1b]0;title\x07b\x1b[31mc\u202ed\ud800\ne\x9bf") == "a]0;titleb[31mcd\ufffd ef"
    )


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ('=HYPERLINK("x?leak="&C3)', '\'=HYPERLINK("x?leak="&C3)'),
        ("@SUM(1)", "'@SUM(1)"),
        ("-2+3", "'-2+3"),
        ("+44 20", "'+44 20"),
        ("\t=1", "'\t=1"),
        ("Ann", "Ann"),
        (-2.5, "-2.5"),
        (7, "7"),
        (None, ""),
    ],
)
def test_a_csv_cell_is_never_a_formula_and_numbers_stay_numbers(value, cell: str) -> None:
    assert untrusted.csv_cell(value) == cell


def outcome(student: str, score: float, **kw) -> Outcome:
    return Outcome(
        student, "01_tiny", f"{student}_01_tiny.ipynb", "0", kw.pop("status", "graded"), score, 7.0, **kw
    )


def test_a_name_cannot_forge_a_row_or_a_heading_in_the_summary() -> None:
    forged = outcome("x", 0.0, name="Eve | 7 of 7 | graded |\n## Heading <img src=x onerror=alert(1)>")
    rejected = Rejected("|\n# r.ipynb", "a [link](javascript:alert(1))", "eve", "01_tiny")
    text = summary_text([forged], [rejected], [])
    assert [line for line in text.splitlines() if line.startswith("#")] == [
        "# Grading summary",
        "## Scores",
        "## Pass rate per test",
        "## Problems",
    ]
    assert "<img" not in text and "](javascript" not in text
    (row,) = [line for line in text.splitlines() if line.startswith("| x |")]
    assert row.count("|") == 8


def test_nothing_is_stored_that_cannot_be_rendered_and_a_bad_stored_one_says_why() -> None:
    o = outcome("ghost", 4.0, errors=["cell 'x' raised RuntimeError: \ud800 \x1b[2J"])
    text = o.to_json()
    assert Outcome.from_json(text).errors == ["cell 'x' raised RuntimeError: \ufffd [2J"]
    old = json.dumps({**json.loads(text), "errors": ["\ud800"]})  # as the old code stored it
    with pytest.raises(ValueError, match=r"^it holds text no UTF-8 file can hold \(a lone surrogate\)$"):
        Outcome.from_json(old)
    for broken, why in [
        ("[]", "it holds a JSON list, not an object"),
        (json.dumps({**json.loads(text), "score": "7"}), "its field 'score' is a str, not float"),
        (json.dumps({**json.loads(text), "cells": [{"grade_id": "t"}]}), "its cells[0] has no 'points'"),
        (json.dumps({**json.loads(text), "evil": 1}), "fields ['evil'] are unknown and [] missing"),
    ]:
        with pytest.raises(ValueError) as info:
            Outcome.from_json(broken)
        assert str(info.value) == why


def test_the_guard_holds_back_only_environment_failures_and_never_points() -> None:
    broken = Stop(StopReason.KERNEL_FAILED, detail="jail: mount failed")
    env = [outcome(f"e{i}", 0.0, status="stopped", stop=broken) for i in range(4)]
    honest = [outcome("h0", 7.0), outcome("h1", 7.0)]
    found = systemic_failure(env + honest)
    assert found is not None and found.held_back == env
    assert found.sentence.startswith(
        "4 of the 6 notebooks graded in this run failed the same way (the kernel could not be started)."
    )
    assert "(the 2 other results were)" in found.sentence
    # the same stop with points earned before it, or four learners' identical bad evidence: no guard
    earned = [outcome(f"p{i}", 3.0, status="stopped", stop=broken) for i in range(4)]
    assert systemic_failure(earned + honest) is None
    why = "not graded: the evidence its check recorded is malformed (malformed array in evidence: ...)"
    malformed = CellResult("t", 4.0, 0.0, why)
    forgers = [outcome(f"f{i}", 0.0, cells=[malformed]) for i in range(4)]
    assert systemic_failure(forgers + honest) is None
    own = replace(malformed, feedback="not graded: the test cell raised ZeroDivisionError: division by zero")
    assert systemic_failure([outcome(f"z{i}", 0.0, cells=[own]) for i in range(4)]) is None


def test_kernel_text_in_events_is_cleaned_and_cut_where_it_crosses_into_the_grader() -> None:
    from autograder.grading.verdicts import clean_event

    end = parse_event(
        {"event": "end", "reason": "bad_message", "detail": "\x1b[2J\ud800" + "m" * 1000 + ": KeyError"}
    )
    cell = parse_event(
        {
            "event": "cell",
            "index": 1,
            "id": "x\x1b]0;t\x07",
            "status": "error",
            "error": "E: " + "\u202e" + "e" * 5000,
            "seconds": 1.0,
        }
    )
    cleaned_end, cleaned_cell = clean_event(end), clean_event(cell)
    assert cleaned_end.stop.detail == "[2J\ufffd" + "m" * 493 + "..."
    assert (cleaned_cell.id, len(cleaned_cell.error), cleaned_cell.seconds) == ("x]0;t", 2000, 1.0)
    assert cleaned_end.stop.sentence().startswith(
        "the notebook sent the grader a message it could not handle ([2J\ufffdmmm"
    )
