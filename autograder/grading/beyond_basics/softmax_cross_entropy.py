"""The grader of notebook 05's exercise 5: SoftmaxCrossEntropy, fused and stable."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from autograder.checks.beyond_basics.softmax_cross_entropy import (
    SCE_CASES,
    SOFTMAX_CROSS_ENTROPY_FUNCTION,
    all_sce_inputs,
)
from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence
from autograder.checks.functions import FunctionRecord
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import LOSS
from autograder.grading import grader, reference
from autograder.grading.beyond_basics.items import exact_shapes_item, recorded, verdict_item
from autograder.grading.function_contract import contract_of, unchanged_item
from autograder.grading.hard_inputs import hard_inputs_item
from autograder.grading.toolkit import ItemOf, judge


@dataclass(frozen=True)
class _Run:
    """What every item reads: the recorded cases, their inputs remade from the seed, and their references
    (the loss, dscores for the case's upstream scalar ``u``, and dscores for an upstream of 1)."""

    cases: dict[str, FunctionRecord]
    datas: dict[str, dict[str, Any]]
    refs: dict[str, dict[str, Any]]

    @classmethod
    def of(cls, evidence: Evidence) -> _Run:
        datas = all_sce_inputs(evidence["seed"])
        refs = {}
        for lab, data in datas.items():
            r = reference.softmax_cross_entropy(data["scores"], data["y"])
            refs[lab] = {"loss": r["loss"], "dscores": r["dscores"] * data["u"], "dscores_at_1": r["dscores"]}
        return cls(evidence["cases"], datas, refs)

    @property
    def originals(self) -> dict[str, dict[str, Any]]:
        """Each case's tensors as they were given, its upstream scalar as ``grad_output``."""
        return {
            lab: {"scores": d["scores"], "y": d["y"], "grad_output": np.asarray(d["u"])}
            for lab, d in self.datas.items()
        }


MAIN, SINGLE, LARGE = list(SCE_CASES)[:3]


def _loss_item(run: _Run) -> Item:
    """The loss for N=5, C=3 (1)."""
    record, ref, n = run.cases[MAIN], run.refs[MAIN], run.datas[MAIN]["scores"].shape[0]
    return verdict_item(
        "loss",
        record,
        ("forward",),
        lambda: [compare("loss", record["outputs"].get("loss"), ref["loss"], tol=LOSS, batch_size=n)],
        1.0,
    )


def _dscores_item(run: _Run) -> Item:
    """dscores for a random upstream scalar (1)."""
    record, ref, n = run.cases[MAIN], run.refs[MAIN], run.datas[MAIN]["scores"].shape[0]
    ignored = {"grad_output is ignored (backward must multiply by it)": ref["dscores_at_1"]}
    got = recorded(record, "autograd", "dscores")
    return verdict_item(
        "dscores",
        record,
        ("forward", "autograd"),
        lambda: [compare("dscores", got, ref["dscores"], batch_size=n, mistakes=ignored)],
        1.0,
    )


def _case_verdicts(run: _Run, label: str) -> list[Verdict]:
    """The loss and dscores of one case."""
    record, ref, size = run.cases[label], run.refs[label], run.datas[label]["scores"].shape[0]
    ignored = {"grad_output is ignored": ref["dscores_at_1"]}
    return [
        compare("loss", record["outputs"].get("loss"), ref["loss"], tol=LOSS, batch_size=size),
        compare(
            "dscores",
            recorded(record, "autograd", "dscores"),
            ref["dscores"],
            mistakes=ignored,
            batch_size=size,
        ),
    ]


def _case_items(run: _Run) -> list[Item]:
    """N = 1, and logits of magnitude 1000: loss and dscores (0.5 each)."""
    return [
        verdict_item(
            name, run.cases[label], ("forward", "autograd"), partial(_case_verdicts, run, label), 0.5
        )
        for label, name in ((SINGLE, "N = 1"), (LARGE, "logits of magnitude 1000"))
    ]


def _direct_item(run: _Run) -> Item:
    """backward called directly returns dscores (N, C) and None for the targets (0.5)."""
    shapes = {"dscores": run.datas[MAIN]["scores"].shape, "dtargets": None}
    return exact_shapes_item("direct backward", run.cases[MAIN], shapes, 0.5)


def _hard_inputs_item(run: _Run) -> Item:
    """Rows far apart, the true class at the bottom of large scores, a class left out of the labels (0.5)."""
    return hard_inputs_item(run.cases, run.datas, run.refs)


#: What is checked, in order.
ITEMS: tuple[ItemOf[_Run], ...] = (
    _loss_item,
    _dscores_item,
    _case_items,
    _direct_item,
    _hard_inputs_item,
    unchanged_item,
    contract_of("SoftmaxCrossEntropy", MAIN),
)


@grader(SOFTMAX_CROSS_ENTROPY_FUNCTION)
def grade_softmax_cross_entropy_function(evidence: Evidence) -> Report:
    """Grade: loss (1) and dscores for a random upstream scalar (1) for N=5, C=3; N = 1 (0.5); logits
    of magnitude 1000 (0.5); a direct backward call returns dscores (N, C) and None for the targets
    (0.5); rows far apart, the true class at the bottom of large scores, a class left out of the labels
    (0.5); inputs unchanged (0.5); the Function contract (tensors on ctx attributes, 0.5)."""
    run = _Run.of(evidence)
    return judge(SOFTMAX_CROSS_ENTROPY_FUNCTION, ITEMS, run, run.cases.values())
