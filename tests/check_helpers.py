"""Helpers the check tests share: grade through the engine's JSON round trip, find report items."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from autograder.checks import Check
from autograder.checks import evidence as evidence_json
from autograder.checks.report import Item, Report


def blank(*args: Any, **kwargs: Any) -> Any:
    """A learner's untouched stub."""
    raise NotImplementedError()


def grade(check: Check, *learner: Any, seed: int = 0) -> Report:
    """Collect and grade, passing the evidence through JSON as the grading engine does, and check
    that grading the decoded evidence gives the same report as grading the original."""
    evidence = check.collect(*learner, seed=seed)
    report = check.grade(evidence_json.loads(evidence_json.dumps(evidence)))
    assert report == check.grade(evidence)
    return report


def item(report: Report, name: str) -> Item:
    """The report's item called ``name``; fails the test when there is none."""
    matches = [i for i in report.items if i.name == name]
    assert matches, f"no item {name!r} in {[i.name for i in report.items]}"
    return matches[0]


def failed(report: Report) -> set[str]:
    """The names of the items that did not pass."""
    return {i.name for i in report.items if not i.passed}


def solution_cells(assignment: str, *helpers: str) -> dict[str, Any]:
    """The namespace left by running the set-up and answer cells of ``solutions/<assignment>.py``
    (no test cell, and no try-it cell but those that define one of the functions named in
    ``helpers``), so that tests take their references from the course's own solutions and a changed
    solution is re-run against the tests' wrong answers."""
    from autograder.course import grade_id, is_grade, is_locked, is_solution
    from autograder.course.build import SOLUTIONS, source_notebook

    path = SOLUTIONS / f"{assignment}.py"
    namespace: dict[str, Any] = {"__name__": f"solutions_{assignment}"}
    torch = sys.modules.get("torch")
    default_dtype = torch.get_default_dtype() if torch else None
    rng_state = torch.get_rng_state() if torch else None
    for cell in source_notebook(path).cells:
        answer_or_setup = is_solution(cell) or (is_locked(cell) and not is_grade(cell))
        helper = not (is_solution(cell) or is_locked(cell) or is_grade(cell)) and any(
            f"def {name}(" in cell.source for name in helpers
        )
        if cell.cell_type == "code" and (answer_or_setup or helper):
            name = f"{path.name}:{grade_id(cell) or cell.id}"
            exec(compile(cell.source, name, "exec"), namespace)  # noqa: S102
    # a set-up cell may change torch's global default dtype (notebook 03 makes it float64) or seed its
    # generator (notebook 04): that belongs to the notebook's kernel, not to this test session
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_default_dtype(default_dtype or torch.float32)
        if rng_state is not None:
            torch.set_rng_state(rng_state)
    return namespace


def changed_backward(name: str, reference: type, change: Callable[..., Any]) -> type:
    """A wrong answer made from the solution's ``torch.autograd.Function`` ``reference``: the same
    forward, and a backward that returns ``change(*gradients, grad_output=...)``, where gradients are
    what the reference's backward returns (one tensor counts as a tuple of one) and grad_output is
    the first gradient backward receives."""

    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        gradients = reference.backward(ctx, *grad_outputs)
        gradients = gradients if isinstance(gradients, tuple) else (gradients,)
        return change(*gradients, grad_output=grad_outputs[0])

    return type(name, (reference,), {"backward": staticmethod(backward), "__module__": reference.__module__})


def scores_silently(score: float, points: float, capfd: Any) -> None:
    """A test cell's score for a right answer: exactly ``points``, a float, with nothing on stderr
    and no note in the feedback it printed (``capfd`` is pytest's fixture)."""
    out, err = capfd.readouterr()
    assert type(score) is float and score == points, out
    assert err == ""
    assert "note:" not in out


def scores_zero_as_blank(score: float, capfd: Any) -> None:
    """A test cell's score for an untouched stub: exactly 0.0, a float, with nothing on stderr and
    feedback that says the exercise is not implemented yet."""
    out, err = capfd.readouterr()
    assert type(score) is float and score == 0.0, out
    assert err == ""
    assert "not implemented yet" in out
