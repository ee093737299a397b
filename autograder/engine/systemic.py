"""The guard against recording a broken grading environment as a class of zeros.

When most notebooks of a run fail the same way, and that way is one no notebook can cause (a kernel
that cannot start, the course's own imports failing in every kernel), the run says so, exits with
status 3, and holds those results back: not stored, not in the gradebook, graded again by the next run.
Identical outcomes that learners can cause (four learners sending the same bad evidence, the same
error in their own cells) are their results like any other, and every result that graded normally is
stored and written whatever the others did.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from autograder.engine.contract import StopReason
from autograder.engine.outcome import Outcome

#: Stops that come before any of the learner's code runs: no notebook can cause them.
_ENVIRONMENT_STOPS = (StopReason.KERNEL_FAILED, StopReason.RUNNER_FAILED)
#: What a missing or broken installation raises, in a test cell the course wrote (its checks' names
#: are gone when the set-up cell's imports failed) or in the grader itself.
_TEST_CELL_KINDS = {"NameError", "ImportError", "ModuleNotFoundError"}
_GRADER_KINDS = {"ImportError", "ModuleNotFoundError"}
_CELL_RAISED = re.compile(r"not graded: the test cell raised (\w+)")
_GRADER_RAISED = re.compile(r"not graded: unusable evidence \((\w+)\)")


def _numbers_as_n(text: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "N", text)


def failure_signature(o: Outcome) -> str | None:
    """What made a notebook score nothing when it is the grading environment's doing (as a class-level
    pattern), or None.

    Only what no notebook can cause counts: a kernel or runner that could not start, the grader itself
    failing to import, or every test cell of the course failing for want of its checks (the set-up
    cell's imports failed). A learner's own errors, bad evidence, time-outs or a dead kernel never count,
    and a notebook that earned any points never does."""
    if o.score > 0:
        return None
    if o.stop and o.stop.reason in _ENVIRONMENT_STOPS:
        # the detail (a log line, a temporary path) differs from one notebook to the next: the reason counts
        return o.stop.reason.gist
    if o.status == "failed":
        kind = re.search(r"\b(\w+(?:Error|Exception))\b", o.failure or "")
        return _numbers_as_n(o.failure or "") if kind and kind.group(1) in _GRADER_KINDS else None
    kinds = set()
    for cell in o.cells:
        raised, grader = _CELL_RAISED.match(cell.feedback), _GRADER_RAISED.match(cell.feedback)
        if raised and raised.group(1) in _TEST_CELL_KINDS:
            kinds.add(raised.group(1))
        elif grader and grader.group(1) in _GRADER_KINDS:
            kinds.add(f"{grader.group(1)} in the grader")
        else:
            return None
    return f"0 points: every test cell failed with {' and '.join(sorted(kinds))}" if kinds else None


@dataclass
class Systemic:
    """Most notebooks of a run failed the same way, as a broken environment makes them fail."""

    sentence: str
    held_back: list[Outcome]
    """The notebooks that failed that way: not stored, so that the next run grades them; every other
    result of the run is stored as usual."""


def systemic_failure(outcomes: list[Outcome], share: float = 0.6, minimum: int = 4) -> Systemic | None:
    """The notebooks of a run that failed the same way (:func:`failure_signature`), when at least
    ``minimum`` and ``share`` of them did, and why; else None."""
    if len(outcomes) < minimum:
        return None
    signatures = {id(o): failure_signature(o) for o in outcomes}
    counts = Counter(s for s in signatures.values() if s)
    if not counts:
        return None
    signature, count = counts.most_common(1)[0]
    if count < minimum or count < share * len(outcomes):
        return None
    held = [o for o in outcomes if signatures[id(o)] == signature]
    kept = len(outcomes) - count
    return Systemic(
        f"{count} of the {len(outcomes)} notebooks graded in this run failed the same way ({signature}). "
        "This looks like a problem of the grading environment, not of the class: those results were not "
        f"stored and not written to the gradebook (the {kept} other results were). Fix the cause and run "
        "the same command again.",
        held,
    )
