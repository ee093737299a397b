"""The items notebook 02's graders share (and notebook 03's, which grades the same network in PyTorch)."""

from __future__ import annotations

from typing import Any

from autograder.checks.compare import Verdict
from autograder.checks.report import Item

#: The name of the item of the size-1 edges, per check.
SIZE_ONE = {
    "activation": "size 1 (N = 1, D = 1)",
    "net": "size 1 (N = 1; D = H = 1)",
}


#: How a numpy floating-point warning (overflow in exp, log of 0) appears in a call's notes: ``call``
#: makes numpy warn on overflow, division by zero and invalid values, and records the warnings.
FP_WARNING = "RuntimeWarning"


def fp_warnings(record: dict[str, Any]) -> list[str]:
    return [note for note in record.get("notes", []) if FP_WARNING in note]


def stability_item(
    name: str,
    records: list[dict[str, Any]],
    failure: str | None,
    hint: str,
    passed: str,
    weight: float = 1.0,
    overflow: str = "",
) -> Item:
    """The item of a case that only a stable formula gets right: sunk by an error, a wrong value
    (``failure``, its message) or a floating-point warning. ``hint`` says how to be stable; it is
    empty when the ordinary cases fail (the formula itself is wrong, and the advice would mislead),
    and it is not repeated when the failure already names a stability mistake. ``overflow`` is what an
    overflow warning from exp, with right values, says the code did (where one thing does)."""
    for record in records:
        if record["error"]:
            return Item(name, False, record["error"], weight)
    if failure:
        named = any(marker in failure for marker in ("log-sum-exp", "row's maximum"))
        return Item(name, False, failure + ("" if named else hint), weight)
    warned = [note for record in records for note in fp_warnings(record)]
    if warned:
        named = overflow if "overflow encountered in exp" in warned[0] and hint else ""
        return Item(name, False, f"right values, but {warned[0]}.{named}{hint}", weight)
    return Item(name, True, passed, weight)


def first_failure(verdicts: list[Verdict]) -> str | None:
    """The message of the first verdict that failed, or None when all passed."""
    return next((v.message() for v in verdicts if not v.ok), None)
