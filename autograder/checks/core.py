"""The collect side of every check: what may run in the learner's kernel.

A check has two halves, kept in two packages on either side of the line the grading engine draws:

* ``collect(*learner_functions, seed) -> Evidence`` (here, in :mod:`autograder.checks`) runs the
  learner's code on inputs made from ``seed`` and records what came back (outputs, gradients,
  errors, the inputs after the call) as plain data. It computes no expected answer, and the modules
  of the numpy notebooks import no PyTorch, so the graded kernel, which can import only this
  package, learns nothing from it that it could forge.
* ``grade(evidence) -> Report`` (in :mod:`autograder.grading`) remakes the inputs from the seed,
  computes the reference with PyTorch autograd in float64, and compares. The grading engine runs it
  in its own process; the kernel's jail does not contain that package.

A check is declared once, as a :class:`Check` here (name, title, points, collect); its grader is
registered under the same name on the trusted side. A test cell calls :func:`run_check` through a
``check_*`` function: in a learner's own JupyterLab it prints the feedback and returns the score; in
the graded kernel the grading half is absent, so it only publishes the evidence.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from autograder.checks.calling import Call, call
from autograder.checks.compare import as_array
from autograder.checks.evidence import NotAnArray, emit

Evidence = dict[str, Any]

__all__ = [
    "CHECKS",
    "Check",
    "all_checks",
    "Evidence",
    "NotAnArray",
    "case_seed",
    "freeze",
    "register",
    "run_check",
    "run_forward_backward",
    "unpack",
]


def freeze(value: Any) -> Any:
    """A plain-data copy of a learner value: a numpy array, None, or :class:`NotAnArray`."""
    if value is None:
        return None
    arr = as_array(value)
    if arr is None:
        return NotAnArray(type(value).__name__)
    return np.array(arr, copy=True)


def freeze_losses(losses: Any) -> Any:
    """A learner's list of losses as a float64 array, :class:`NotAnArray` when an item is not a number
    (or the list is of another type), and otherwise :func:`freeze`'s copy."""
    if isinstance(losses, (list, tuple)):
        try:
            return np.array([float(v) for v in losses], dtype=np.float64)
        except (TypeError, ValueError):
            return NotAnArray(type(losses).__name__)
    return freeze(losses)


def case_seed(seed: int, index: int) -> int:
    """The seed of a check's ``index``-th case: distinct for every case of every seed below 1000 cases."""
    return 1000 * seed + index


@dataclass(frozen=True)
class Check:
    """A check, declared once: its name (the evidence's ``check`` key), title, points and collect half.

    ``collect(*learner, seed=...)`` returns the evidence. The grading half is registered under the
    same name in :mod:`autograder.grading`; :meth:`grade` looks it up there.
    """

    name: str
    title: str
    points: float
    collect: Callable[..., Evidence]

    def grade(self, evidence: Evidence) -> Any:
        """The trusted grading half's report on ``evidence``, through :data:`TRUSTED_SIDE` (raises
        ImportError inside a graded kernel, where that package does not exist)."""
        return importlib.import_module(TRUSTED_SIDE).grade(self, evidence)


CHECKS: dict[str, Check] = {}

#: The one place this package names the trusted side: the learner's own lab (and ``check``) grade in
#: their process by importing it; a graded kernel cannot, because the jail mounts only this package.
#: ``tests/test_trust_line.py`` holds that nothing else here imports outside ``autograder.checks``.
TRUSTED_SIDE = "autograder.grading"


#: The collect module of each notebook, in course order.
MODULES = (
    "linear_layer",
    "two_layer_net",
    "autograd_graph",
    "custom_functions",
    "beyond_basics",
    "attention",
)


def all_checks() -> dict[str, Check]:
    """Every declared check, by name (importing every collect module: PyTorch included)."""
    import importlib

    for module in MODULES:
        importlib.import_module(f"autograder.checks.{module}")
    return CHECKS


def register(check: Check) -> Check:
    """Add a check to :data:`CHECKS`, the table the grader looks checks up in by name."""
    if CHECKS.get(check.name, check) is not check:
        raise ValueError(f"two checks are named {check.name!r}")
    CHECKS[check.name] = check
    return check


#: What a test cell prints in the graded kernel, where the grading half is not there to be run.
RECORDED = "{title}: recorded; the grading engine scores it outside your kernel."


def run_check(check: Check, *learner: Any, seed: int = 0) -> float:
    """Collect evidence from the learner's functions, grade it, print the feedback, return the score.

    Under the grading engine the evidence is published (see :func:`autograder.checks.evidence.emit`) and
    the engine grades it in its own process; the kernel there has no grading half, and the cell
    prints a line saying so and ends with 0.
    """
    evidence = check.collect(*learner, seed=seed)
    emit(evidence)
    try:
        report = check.grade(evidence)
    except ImportError:
        print(RECORDED.format(title=check.title))
        return 0.0
    print(report.render())
    return report.score


def unpack(outcome: Call, names: Sequence[str], label: str) -> tuple[dict[str, Any], str | None]:
    """Split a call's result into named values, or explain why it cannot be split.

    A function documented to return ``(out, cache)`` must return exactly two things; when it
    returns something else the error says what it returned.
    """
    if not outcome.ok:
        return {}, outcome.error
    result = outcome.result
    if len(names) == 1:
        return {names[0]: result}, None
    if not isinstance(result, (tuple, list)) or len(result) != len(names):
        got = f"a {type(result).__name__}"
        if isinstance(result, (tuple, list)):
            got += f" of length {len(result)}"
        return {}, f"{label} should return ({', '.join(names)}), but returned {got}"
    return dict(zip(names, result, strict=True)), None


def run_forward_backward(
    forward: Callable[..., Any],
    backward: Callable[..., Any],
    inputs: dict[str, np.ndarray],
    dout: np.ndarray,
    grad_names: Sequence[str],
) -> dict[str, Any]:
    """Run the ``forward(*inputs) -> (out, cache)`` / ``backward(dout, cache) -> grads`` interface.

    The learner's functions get copies of ``inputs`` and ``dout``; what those copies hold
    afterwards is recorded as ``inputs_after`` so that grading can tell whether they were changed.

    Returns a case record: ``outputs`` (``out`` and each gradient), ``error`` (the first error, or
    None), ``notes`` and ``inputs_after``.
    """
    args = {k: np.array(v, copy=True) for k, v in inputs.items()}
    dout_arg = np.array(dout, copy=True)
    fname = getattr(forward, "__name__", "forward")
    bname = getattr(backward, "__name__", "backward")
    record: dict[str, Any] = {"outputs": {}, "error": None, "notes": []}

    fwd = call(forward, *args.values(), name=fname)
    record["notes"] += fwd.notes
    values, error = unpack(fwd, ["out", "cache"], fname)
    if error is None:
        record["outputs"]["out"] = freeze(values["out"])
        bwd = call(backward, dout_arg, values["cache"], name=bname)
        record["notes"] += bwd.notes
        grads, error = unpack(bwd, grad_names, bname)
        record["outputs"].update({k: freeze(v) for k, v in grads.items()})
    record["error"] = error
    record["inputs_after"] = {**{k: freeze(v) for k, v in args.items()}, "dout": freeze(dout_arg)}
    return record
