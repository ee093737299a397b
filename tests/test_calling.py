"""Calling learner code: errors become messages, warnings become notes, nothing reaches stderr."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from autograder.checks.calling import Call, call, describe_exception, snapshot, unchanged


def shapes_mismatch(x: np.ndarray) -> np.ndarray:
    """A learner mistake that numpy reports: W where W.T belongs."""
    W = np.ones((5, 3))
    return x @ W


def blank(x: np.ndarray) -> np.ndarray:
    """An untouched stub."""
    raise NotImplementedError()


def noisy(x: np.ndarray) -> np.ndarray:
    """Correct, but loud: a warning, a print to stderr, an overflow, and a write to descriptor 2."""
    warnings.warn("this is deprecated", DeprecationWarning, stacklevel=1)
    print("debugging output", file=sys.stderr)
    np.exp(np.array([1000.0]))
    os.write(2, b"C library message\n")
    return x * 2


def test_result_of_a_working_call() -> None:
    outcome = call(lambda x, y: x + y, 1, y=2)
    assert isinstance(outcome, Call)
    assert outcome.ok and outcome.result == 3 and outcome.error is None and outcome.notes == []


def test_exception_names_type_message_function_and_line() -> None:
    outcome = call(shapes_mismatch, np.ones((4, 3)))
    assert not outcome.ok and outcome.result is None
    line = shapes_mismatch.__code__.co_firstlineno + 3
    assert outcome.error.startswith("shapes_mismatch raised ValueError: matmul: Input operand 1")
    assert outcome.error.endswith(f"(in shapes_mismatch, line {line}: return x @ W)")


def test_error_is_located_in_learner_code_not_in_a_library() -> None:
    def uses_torch(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(x, (1, 1), mode="reflect", value=2.0)

    outcome = call(uses_torch, torch.ones(2, 3))
    # the innermost frame is in torch/nn/functional.py; the learner's line is the one to show
    assert outcome.error.startswith("uses_torch raised ")
    assert outcome.error.endswith('return torch.nn.functional.pad(x, (1, 1), mode="reflect", value=2.0))')
    assert "(in uses_torch, line" in outcome.error


def test_not_implemented_by_a_library_is_not_a_blank_answer() -> None:
    def uses_unsupported_mode(x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.pad(x, (1,), mode="nonsense")

    outcome = call(uses_unsupported_mode, torch.ones(2, 3))
    assert outcome.error.startswith("uses_unsupported_mode raised NotImplementedError: ")
    assert "(in uses_unsupported_mode, line" in outcome.error


def test_not_implemented_with_a_message_from_the_learner_is_a_blank_answer() -> None:
    def todo() -> None:
        raise NotImplementedError("TODO: finish me")

    assert call(todo).error == "todo is not implemented yet (it raises NotImplementedError)"


def test_custom_name_is_used() -> None:
    assert call(blank, 1, name="linear_backward").error.startswith("linear_backward ")


def test_not_implemented_message() -> None:
    outcome = call(blank, 1)
    assert outcome.error == "blank is not implemented yet (it raises NotImplementedError)"
    assert not outcome.ok


def test_non_callables_are_an_error() -> None:
    assert call(None).error == "expected a function, got NoneType"
    assert call(np.ones(3), name="linear_forward").error == "linear_forward is not a function (got ndarray)"


def test_partial_without_a_name_is_labelled() -> None:
    outcome = call(functools.partial(blank, 1))
    assert outcome.error == "the function is not implemented yet (it raises NotImplementedError)"


def test_warnings_stderr_and_overflow_become_notes_and_nothing_reaches_stderr(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with np.errstate(all="raise"):  # what the learner set globally does not turn the overflow into an error
        outcome = call(noisy, np.ones(2))
    out, err = capfd.readouterr()
    assert err == ""
    assert out == ""
    assert outcome.ok
    np.testing.assert_array_equal(outcome.result, [2.0, 2.0])
    assert outcome.notes == [
        "noisy warned: DeprecationWarning: this is deprecated",
        "noisy warned: RuntimeWarning: overflow encountered in exp",
        "noisy wrote to stderr: debugging output",
        "noisy wrote to stderr: C library message",
    ]


def test_subprocess_writing_to_stderr_is_captured(capfd: pytest.CaptureFixture[str]) -> None:
    def shell_out() -> int:
        return subprocess.run([sys.executable, "-c", "import sys; sys.stderr.write('child\\n')"]).returncode

    outcome = call(shell_out)
    assert capfd.readouterr().err == ""
    assert outcome.result == 0
    assert outcome.notes == ["shell_out wrote to stderr: child"]


def test_repeated_warnings_are_noted_once() -> None:
    def warns_in_a_loop() -> None:
        for _ in range(5):
            warnings.warn("again", UserWarning, stacklevel=1)

    assert call(warns_in_a_loop).notes == ["warns_in_a_loop warned: UserWarning: again"]


def test_stderr_is_restored_after_the_call(capfd: pytest.CaptureFixture[str]) -> None:
    call(noisy, np.ones(1))
    call(blank, 1)
    print("after", file=sys.stderr)
    os.write(2, b"fd after\n")
    assert capfd.readouterr().err == "after\nfd after\n"


def test_never_raises(capfd: pytest.CaptureFixture[str]) -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no")

    def raises_unprintable() -> None:
        raise Unprintable()

    def exits() -> None:
        sys.exit(3)

    def recurses(n: int) -> int:
        return recurses(n + 1)

    assert call(raises_unprintable).error.startswith(
        "raises_unprintable raised Unprintable: <Unprintable that cannot be printed>"
    )
    assert call(exits).error == "exits called sys.exit(3)"
    assert call(recurses, 0).error.startswith("recurses raised RecursionError: maximum recursion depth")
    assert call(lambda: 1 / 0).error.startswith("<lambda> raised ZeroDivisionError: division by zero")
    assert capfd.readouterr().err == ""


def test_keyboard_interrupt_passes_through() -> None:
    # a time limit interrupts the kernel: a check must not swallow that and keep running learner code
    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        call(interrupted)


def test_long_messages_are_shortened() -> None:
    def shouts() -> None:
        raise ValueError("x" * 5000)

    assert len(call(shouts).error) < 700


def test_describe_exception_without_learner_frames() -> None:
    assert describe_exception(ValueError("bad value")) == "ValueError: bad value"
    assert describe_exception(ValueError()) == "ValueError"


# ----------------------------------------------------------------------------- snapshot / unchanged


def test_unchanged_detects_in_place_edits() -> None:
    x, dout = np.arange(6.0).reshape(2, 3), np.ones(3)
    before = snapshot(x, dout)
    assert unchanged(before, [x, dout])
    dout[1] = 0.0
    assert not unchanged(before, [x, dout])


def test_unchanged_treats_nan_as_equal_and_checks_shape() -> None:
    x = np.array([np.nan, 1.0])
    before = snapshot(x)
    assert unchanged(before, [x])
    assert not unchanged(before, [x.reshape(2, 1)])
    assert not unchanged(before, [None])


def test_snapshot_is_a_copy() -> None:
    x = np.ones(3)
    (copy_of_x,) = snapshot(x)
    x += 1
    assert copy_of_x.tolist() == [1.0, 1.0, 1.0]


def test_snapshot_and_unchanged_with_tensors_that_require_grad() -> None:
    leaf = torch.ones(3, requires_grad=True)
    non_leaf = leaf * 2
    before = snapshot(leaf, non_leaf)
    assert unchanged(before, [leaf, non_leaf])
    with torch.no_grad():
        non_leaf.add_(1)
    assert not unchanged(before, [leaf, non_leaf])


def test_unchanged_ignores_values_that_are_not_arrays() -> None:
    before = snapshot("cache", {"x": 1}, np.array(["a", "b"]))
    assert unchanged(before, ["other", {"x": 2}, np.array(["a", "b"])])
