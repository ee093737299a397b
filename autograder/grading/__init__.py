"""The trusted half of every check: references and verdicts, run only where learner code does not.

For every check declared in :mod:`autograder.checks`, a module here registers a grader under the
check's name with :func:`grader`. A grader remakes the check's inputs from the evidence's seed,
computes the reference (:mod:`autograder.grading.reference`, PyTorch autograd in float64) and
compares, property by property. The grading engine runs graders in its own process; the jail of a
graded kernel does not contain this package, so nothing here can be run to forge evidence.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from autograder.checks.core import MODULES as COLLECT_MODULES
from autograder.checks.core import Check, Evidence, all_checks
from autograder.checks.report import Report

if TYPE_CHECKING:
    from autograder.grading.prepare import GradeCell

#: A check's trusted half: evidence in, report out (not the engine's worker pool, `engine.grade.Grader`).
GradeFunction = Callable[[Evidence], Report]

#: The grader of each check, by the check's name.
GRADERS: dict[str, GradeFunction] = {}

#: One grading package per notebook (a module per exercise), named like its collect package in
#: :mod:`autograder.checks`.
MODULES = COLLECT_MODULES


def grader(check: Check) -> Callable[[GradeFunction], GradeFunction]:
    """Register the decorated function as the grader of ``check``."""

    def register(function: GradeFunction) -> GradeFunction:
        if GRADERS.get(check.name, function) is not function:
            raise ValueError(f"two graders for check {check.name!r}")
        GRADERS[check.name] = function
        return function

    return register


def report_for(check: Check) -> Report:
    """An empty report with the check's own title and points: every grader starts from one."""
    return Report(check.title, check.points)


def load() -> dict[str, GradeFunction]:
    """Import every grading module (once), so that every declared check has its grader."""
    if not _LOADED:
        for module in MODULES:
            importlib.import_module(f"autograder.grading.{module}")
        missing = set(all_checks()) - set(GRADERS)
        if missing:  # a check declared without a grader is a bug in the course
            raise RuntimeError(f"checks without a grader: {sorted(missing)}")
        _LOADED.append(True)
    return GRADERS


_LOADED: list[bool] = []


#: The checks whose graders build a torch optimizer (the course's own training run): the first optimizer
#: a process builds imports TorchDynamo, about 0.5 s of CPU, which :func:`warm_up` pays for only when a
#: run grades one of these (``tests/test_speed_paths.py`` finds every grader that uses one).
OPTIMIZER_CHECKS = frozenset({"train_spiral"})


def warm_up(checks: Iterable[str] | None = None) -> None:
    """Load every grader and run, once, on fixed inputs, the library paths whose first call imports more of
    PyTorch: the first ``autograd.grad`` given a gradient imports its symbolic-shape module (and sympy), the
    first optimizer its compiler package (only when ``checks``, the names of the checks a run grades,
    include one of :data:`OPTIMIZER_CHECKS`; None: every check), about 1.5 s together. The engine calls it
    beside the first kernels of a run, so that grading the first notebook does not wait for those imports."""
    load()
    import torch

    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    torch.autograd.grad(x * 2.0, x, torch.ones_like(x))
    if checks is None or OPTIMIZER_CHECKS.intersection(checks):
        torch.optim.SGD([x], lr=0.1)


def checks_called(cells: Iterable[GradeCell]) -> set[str]:
    """The names of the checks that graded cells call (``check_NAME(...)``)."""
    return {call.function.removeprefix("check_") for cell in cells for call in cell.calls}


def grade(check: Check | str, evidence: Evidence) -> Report:
    """Grade ``evidence`` with the grader registered for ``check`` (a check or its name)."""
    name = check if isinstance(check, str) else check.name
    graders = load()
    if name not in graders:
        raise KeyError(f"no grader for check {name!r}")
    return graders[name](evidence)


__all__ = ["GRADERS", "OPTIMIZER_CHECKS", "checks_called", "grade", "grader", "load", "report_for", "warm_up"]
