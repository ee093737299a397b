"""The graders of notebook 05's linear Functions: LinearFunctionFunc (exercise 1) and the batched
LinearFunction (exercise 2)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch.nn.functional as F

from autograder.checks.beyond_basics.linear import (
    BATCHED_CASES,
    BATCHED_D,
    BATCHED_LINEAR,
    BATCHED_M,
    FUNC_CASES,
    FUNC_SIZES,
    LINEAR_FUNCTION_FUNC,
    batched_inputs,
    func_inputs,
)
from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence, case_seed
from autograder.checks.functions import tensor
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference, report_for
from autograder.grading.beyond_basics.items import Record, exact_shapes_item, recorded, verdict_item
from autograder.grading.function_contract import contract_items
from autograder.grading.toolkit import SQUEEZED_BIAS, add_notes, tensors_unchanged_item


def _linear_mistakes(data: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    ones = np.ones_like(data["g"])
    return {
        "out": {"the bias is missing": data["x"] @ data["W"].T},
        "dx": {"grad_output is ignored (computed as if it were all ones)": ones @ data["W"]},
        "dW": {"grad_output is ignored (computed as if it were all ones)": ones.T @ data["x"]},
        "db": {"grad_output is ignored (computed as if it were all ones)": ones.sum(0)},
    }


def _linear_item(name: str, record: Record, ref: dict[str, np.ndarray], weight: float, **kwargs: Any) -> Item:
    """``out`` judged on the forward alone, a gradient on the forward and its backward."""
    if name == "out":
        return verdict_item(
            name,
            record,
            ("forward",),
            lambda: [compare(name, record["outputs"].get("out"), ref["out"], **kwargs)],
            weight,
        )
    return verdict_item(
        name,
        record,
        ("forward", "autograd"),
        lambda: [compare(name, recorded(record, "autograd", name), ref[name], **kwargs)],
        weight,
    )


def _out_and_grads(record: Record, ref: dict[str, np.ndarray], batch_size: int) -> list[Verdict]:
    """A case's out and its three gradients through autograd against ``ref`` (a gradient off by a
    factor of ``batch_size`` is named as such)."""
    return [compare("out", record["outputs"].get("out"), ref["out"])] + [
        compare(k, recorded(record, "autograd", k), ref[k], batch_size=batch_size) for k in ("dx", "dW", "db")
    ]


def _without_bias(
    out: Record, recorded_as: str, ref: dict[str, np.ndarray], batch_size: int
) -> list[Verdict]:
    """out and dW of ``apply(x, W)``, recorded as ``<recorded_as>_out`` and ``<recorded_as>_dW``,
    against ``ref`` (the reference with a zero bias)."""
    return [
        compare("out of apply(x, W)", out.get(f"{recorded_as}_out"), ref["out"]),
        compare("dW of apply(x, W)", out.get(f"{recorded_as}_dW"), ref["dW"], batch_size=batch_size),
    ]


@grader(LINEAR_FUNCTION_FUNC)
def grade_linear_function_func(evidence: Evidence) -> Report:
    """Grade: out (1); dx, dW, db (0.5 each); exact shapes of a direct backward call (0.5); no bias
    and mixed requires_grad (only the weight, the input or the bias) (0.5); N = 1 (0.5); in = 1 and
    out = 1 (0.5); vmap over
    stacked weights (1); torch.func.grad (1); inputs unchanged (0.5)."""
    report = report_for(LINEAR_FUNCTION_FUNC)
    seed, cases = evidence["seed"], evidence["cases"]
    main_label, single_label = f"N={FUNC_SIZES['N']}", "N=1"
    main, single = cases[main_label], cases[single_label]
    data = func_inputs(case_seed(seed, 0), FUNC_SIZES["N"])
    ref = reference.linear(data["x"], data["W"], data["b"], data["g"])
    mistakes = _linear_mistakes(data)
    out = main["outputs"]
    n = FUNC_SIZES["N"]
    for name, weight in (("out", 1.0), ("dx", 0.5), ("dW", 0.5), ("db", 0.5)):
        report.add(_linear_item(name, main, ref, weight, mistakes=mistakes[name], batch_size=n))
    d, m = FUNC_SIZES["D"], FUNC_SIZES["M"]
    report.add(exact_shapes_item("direct backward", main, {"dx": (n, d), "dW": (m, d), "db": (m,)}, 0.5))
    nobias_ref = reference.linear(data["x"], data["W"], np.zeros(m), data["g"])
    report.add(
        verdict_item(
            "no bias, mixed requires_grad",
            main,
            ("no_bias",),
            lambda: (
                _without_bias(out, "nobias", nobias_ref, n)
                + [
                    compare("out of apply(x, W, None)", out.get("none_out"), nobias_ref["out"]),
                    compare("dW of apply(x, W, None)", out.get("none_dW"), nobias_ref["dW"], batch_size=n),
                    compare("dx when only the input requires grad", out.get("input_only_dx"), ref["dx"]),
                    compare(
                        "db when only the bias requires grad",
                        out.get("bias_only_db"),
                        ref["db"],
                        batch_size=n,
                    ),
                ]
            ),
            0.5,
        )
    )
    datas = {
        label: func_inputs(case_seed(seed, i), *dims) for i, (label, dims) in enumerate(FUNC_CASES.items())
    }
    sdata = datas[single_label]
    sref = reference.linear(sdata["x"], sdata["W"], sdata["b"], sdata["g"])
    report.add(
        verdict_item(
            "N = 1",
            single,
            ("forward", "autograd"),
            lambda: _out_and_grads(single, sref, 1),
            0.5,
        )
    )
    report.add(_func_size_one_item(cases, datas))
    vmap_ref = np.stack([data["x"] @ w.T + data["b"] for w in data["Ws"]])
    report.add(
        verdict_item(
            "vmap over weights",
            main,
            ("vmap",),
            lambda: [compare("vmap output (B, N, M)", out.get("vmap_out"), vmap_ref)],
            1.0,
        )
    )
    report.add(
        verdict_item(
            "torch.func.grad",
            main,
            ("func_grad",),
            lambda: [compare("torch.func.grad dW", out.get("func_grad_dW"), ref["dW"], batch_size=n)],
            1.0,
        )
    )
    originals = {
        label: {k: d[k] for k in ("x", "W", "b")} | {"grad_output": d["g"]} for label, d in datas.items()
    }
    report.add(tensors_unchanged_item(cases, originals))
    for item in contract_items(cases, "LinearFunctionFunc", {main_label: originals[main_label]}):
        report.add(item)
    add_notes(report, cases.values())
    return report


def _func_size_one_item(cases: dict[str, Record], datas: dict[str, dict[str, np.ndarray]]) -> Item:
    """in_features = 1 and out_features = 1: the exact shapes of a direct backward call (where a
    squeezed gradient shows), then out and every gradient through autograd."""
    name, weight = "in = 1, out = 1", 0.5
    for label in ("in=1", "out=1"):
        data, record = datas[label], cases[label]
        n, d = data["x"].shape
        m = data["W"].shape[0]
        ref = reference.linear(data["x"], data["W"], data["b"], data["g"])
        mistakes = {"db": {SQUEEZED_BIAS: data["g"].sum(0).reshape(())}} if m == 1 else None
        shapes = exact_shapes_item(name, record, {"dx": (n, d), "dW": (m, d), "db": (m,)}, weight, mistakes)
        if not shapes.passed:
            return Item(name, False, f"when {label}: {shapes.message}", weight)
        item = verdict_item(
            name,
            record,
            ("forward", "autograd"),
            lambda record=record, ref=ref, n=n: (
                [compare("out", record["outputs"].get("out"), ref["out"])]
                + [
                    compare(k, recorded(record, "autograd", k), ref[k], batch_size=n)
                    for k in ("dx", "dW", "db")
                ]
            ),
            weight,
        )
        if not item.passed:
            return Item(name, False, f"when {label}: {item.message}", weight)
    return Item(
        name, True, "exact shapes and values with one input feature and with one output feature", weight
    )


def _batched_reference(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    xt, Wt, bt = (tensor(data[k], True) for k in ("x", "W", "b"))
    out = F.linear(xt, Wt, bt)
    out.backward(tensor(data["g"]))
    return {"out": out.detach().numpy(), "dx": xt.grad.numpy(), "dW": Wt.grad.numpy(), "db": bt.grad.numpy()}


@grader(BATCHED_LINEAR)
def grade_batched_linear(evidence: Evidence) -> Report:
    """Grade: the (2, 3, 4, D) input: out (1), dx, dW, db (0.5 each); exact shapes of a direct backward
    call (0.5); weight only requiring grad, no bias (0.5); (N, D) input (0.5); N = 1 (0.5); a 1-D input
    (0.5); inputs unchanged (0.5)."""
    report = report_for(BATCHED_LINEAR)
    seed, cases = evidence["seed"], evidence["cases"]
    labels = list(BATCHED_CASES)
    datas = {lab: batched_inputs(case_seed(seed, i), BATCHED_CASES[lab]) for i, lab in enumerate(labels)}
    refs = {lab: _batched_reference(datas[lab]) for lab in labels}
    main = labels[0]
    rec, data, ref = cases[main], datas[main], refs[main]
    out = rec["outputs"]
    g2 = data["g"].reshape(-1, BATCHED_M)
    x2 = data["x"].reshape(-1, BATCHED_D)
    rows = g2.shape[0]
    mistakes = {
        "out": {"the bias is missing": data["x"] @ data["W"].T},
        "dx": {},
        "dW": {"averaged instead of summed over the leading axes": g2.T @ x2 / rows},
        "db": {"averaged instead of summed over the leading axes": g2.mean(0)},
    }
    for name, weight in (("out", 1.0), ("dx", 0.5), ("dW", 0.5), ("db", 0.5)):
        item = _linear_item(name, rec, ref, weight, mistakes=mistakes[name], batch_size=rows)
        report.add(Item(f"{name}, input (2, 3, 4, D)", item.passed, item.message, weight))
    lead = BATCHED_CASES[main]
    report.add(
        exact_shapes_item(
            "direct backward",
            rec,
            {"dx": (*lead, BATCHED_D), "dW": (BATCHED_M, BATCHED_D), "db": (BATCHED_M,)},
            0.5,
        )
    )
    wo_ref = _batched_reference({**data, "b": np.zeros(BATCHED_M)})
    report.add(
        verdict_item(
            "weight only, no bias",
            rec,
            ("weight_only",),
            lambda: _without_bias(out, "weight_only", wo_ref, rows),
            0.5,
        )
    )
    for lab, name in zip(labels[1:], ("(N, D) input", "N = 1", "1-D input (D,)"), strict=True):
        n = int(np.prod(BATCHED_CASES[lab])) if BATCHED_CASES[lab] else 1
        report.add(
            verdict_item(
                name,
                cases[lab],
                ("forward", "autograd"),
                lambda lab=lab, n=n: _out_and_grads(cases[lab], refs[lab], n),
                0.5,
            )
        )
    report.add(
        tensors_unchanged_item(
            cases,
            {lab: {"x": d["x"], "W": d["W"], "b": d["b"], "grad_output": d["g"]} for lab, d in datas.items()},
        )
    )
    main_inputs = {"x": data["x"], "W": data["W"], "b": data["b"], "grad_output": data["g"]}
    for item in contract_items(cases, "LinearFunction", {main: main_inputs}):
        report.add(item)
    add_notes(report, cases.values())
    return report
