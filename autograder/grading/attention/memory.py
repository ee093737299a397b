"""The grader of ``check_flash_memory``: what FlashAttention saves for backward, as the hooks saw it."""

from __future__ import annotations

from autograder.checks.attention import FLASH_MEMORY, MEMORY_D, memory_lengths
from autograder.checks.core import Evidence
from autograder.checks.report import Item, Report
from autograder.grading import grader, report_for
from autograder.grading.function_contract import ctx_attributes_message
from autograder.grading.toolkit import Record, add_notes, step_error

#: The most a FlashAttention may save, as a multiple of what the contract saves (q, k, v, o and L):
#: room for a running maximum and sum kept beside L, or a copy of an input, never for an (N, N) tensor.
BUDGET_FACTOR = 2.0
FLOAT32_BYTES = 4


def contract_bytes(n: int) -> int:
    """The bytes of q, k, v, o (n, d) and L (n,) in float32: what the contract saves."""
    return FLOAT32_BYTES * (4 * n * MEMORY_D + n)


def _cases(seed: int) -> list[tuple[int, str]]:
    """(N, the case's label) for each length the check ran with ``seed``."""
    return [(n, f"N = {n}") for n in memory_lengths(seed)]


def _first_error(records: dict[str, Record], seed: int) -> str | None:
    for _, label in _cases(seed):
        if label not in records:
            return f"the evidence has no case {label}, which this run's seed asks for"
        error = step_error(records[label], "forward")
        if error:
            return f"{label}: {error}"
    return None


def quadratic_item(records: dict[str, Record], seed: int) -> Item:
    """No saved tensor has N * N elements or more (the scores or the probabilities)."""
    name = "no (Nq, Nk) tensor saved"
    error = _first_error(records, seed)
    if error:
        return Item(name, False, error, 1.0)
    for n, label in _cases(seed):
        for entry in records[label]["outputs"]["hooks"]:
            numel = 1
            for s in entry["shape"]:
                numel *= s
            if numel >= n * n:
                return Item(
                    name,
                    False,
                    f"{label}: forward saved a tensor of shape {tuple(entry['shape'])}, with Nq * Nk "
                    "elements or more. Likely mistake: the score or probability matrix is saved for "
                    "backward; save q, k, v, o and L only, and recompute P tile by tile in backward",
                    1.0,
                )
    return Item(name, True, "no saved tensor has Nq * Nk elements", 1.0)


def budget_item(records: dict[str, Record], seed: int) -> Item:
    """The saved bytes stay within a budget linear in N."""
    name = "saved bytes linear in N"
    error = _first_error(records, seed)
    if error:
        return Item(name, False, error, 1.0)
    totals = {}
    for n, label in _cases(seed):
        total = sum(e["nbytes"] for e in records[label]["outputs"]["hooks"])
        totals[n] = total
        budget = BUDGET_FACTOR * contract_bytes(n)
        if total > budget:
            return Item(
                name,
                False,
                f"{label}: {total} bytes saved, more than {budget:.0f} ({BUDGET_FACTOR:g} times what q, k, "
                f"v, o and L take, {contract_bytes(n)} bytes); by N: {totals}",
                1.0,
            )
    if not totals or not any(totals.values()):
        return Item(
            name, False, "nothing was saved with save_for_backward: backward needs q, k, v, o and L", 1.0
        )
    shown = ", ".join(f"{t} at N = {n}" for n, t in totals.items())
    return Item(name, True, f"bytes saved: {shown}", 1.0)


def ctx_item(records: dict[str, Record], seed: int) -> Item:
    """No tensor kept on a ctx attribute (the hooks cannot see those)."""
    name = "tensors saved with save_for_backward"
    error = _first_error(records, seed)
    if error:
        return Item(name, False, error, 0.5)
    kept = records[_cases(seed)[0][1]]["outputs"].get("ctx", {})
    if kept:
        sizes = ", ".join(f"{k} ({sum(t['nbytes'] for t in v)} bytes)" for k, v in kept.items())
        return Item(name, False, f"{ctx_attributes_message(sorted(kept))}. What they hold: {sizes}", 0.5)
    return Item(name, True, "no tensor kept on a ctx attribute", 0.5)


@grader(FLASH_MEMORY)
def grade_flash_memory(evidence: Evidence) -> Report:
    """Grade: no (Nq, Nk) tensor saved (1); bytes within a budget linear in N (1); no tensor on a ctx
    attribute (0.5)."""
    report = report_for(FLASH_MEMORY)
    records, seed = evidence["cases"], evidence["seed"]
    for item in (quadratic_item(records, seed), budget_item(records, seed), ctx_item(records, seed)):
        report.add(item)
    add_notes(report, records.values())
    return report
