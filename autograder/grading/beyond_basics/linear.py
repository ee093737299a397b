"""The graders of notebook 05's linear Functions: LinearFunctionFunc (exercise 1) and the batched
LinearFunction (exercise 2)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
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
from autograder.checks.functions import FunctionRecord, tensor
from autograder.checks.report import Item, Report
from autograder.grading import grader, reference
from autograder.grading.beyond_basics.items import Record, exact_shapes_item, recorded, verdict_item
from autograder.grading.function_contract import contract_of, unchanged_item
from autograder.grading.toolkit import (
    SAVED_OUTPUT,
    SQUEEZED_BIAS,
    ItemOf,
    explain_linear_forward_errors,
    judge,
)


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


@dataclass(frozen=True)
class _FuncRun:
    """What every item of LinearFunctionFunc reads: the recorded cases, their inputs remade from the seed,
    and the main case's reference."""

    cases: dict[str, FunctionRecord]
    datas: dict[str, dict[str, np.ndarray]]
    ref: dict[str, np.ndarray]

    @classmethod
    def of(cls, evidence: Evidence) -> _FuncRun:
        seed = evidence["seed"]
        datas = {
            label: func_inputs(case_seed(seed, i), *dims)
            for i, (label, dims) in enumerate(FUNC_CASES.items())
        }
        data = datas[MAIN]
        cases = explain_linear_forward_errors(evidence["cases"], datas)
        return cls(cases, datas, reference.linear(data["x"], data["W"], data["b"], data["g"]))

    @property
    def main(self) -> FunctionRecord:
        return self.cases[MAIN]

    @property
    def originals(self) -> dict[str, dict[str, np.ndarray]]:
        """Each case's tensors as they were given."""
        return {
            label: {k: d[k] for k in ("x", "W", "b")} | {"grad_output": d["g"]}
            for label, d in self.datas.items()
        }


MAIN, SINGLE, N = f"N={FUNC_SIZES['N']}", "N=1", FUNC_SIZES["N"]


def _func_value_items(run: _FuncRun) -> list[Item]:
    """out (1), then dx, dW and db through autograd (0.5 each)."""
    mistakes = _linear_mistakes(run.datas[MAIN])
    return [
        _linear_item(name, run.main, run.ref, weight, mistakes=mistakes[name], batch_size=N)
        for name, weight in (("out", 1.0), ("dx", 0.5), ("dW", 0.5), ("db", 0.5))
    ]


def _func_direct_item(run: _FuncRun) -> Item:
    """The exact shapes of backward called directly (0.5)."""
    d, m = FUNC_SIZES["D"], FUNC_SIZES["M"]
    shapes = {"dx": (N, d), "dW": (m, d), "db": (m,)}
    return exact_shapes_item("direct backward", run.main, shapes, 0.5, _saved_output(run.datas[MAIN]))


def _saved_output(data: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """dW computed from the output saved in place of the input (a shape mistake unless M = D)."""
    return {"dW": {SAVED_OUTPUT: data["g"].T @ (data["x"] @ data["W"].T + data["b"])}}


def _func_no_bias_item(run: _FuncRun) -> Item:
    """No bias both ways, and only the input or only the bias requiring grad (0.5)."""
    data, out, ref = run.datas[MAIN], run.main["outputs"], run.ref
    nobias = reference.linear(data["x"], data["W"], np.zeros(FUNC_SIZES["M"]), data["g"])
    return verdict_item(
        "no bias, mixed requires_grad",
        run.main,
        ("no_bias",),
        lambda: (
            _without_bias(out, "nobias", nobias, N)
            + [
                compare("out of apply(x, W, None)", out.get("none_out"), nobias["out"]),
                compare("dW of apply(x, W, None)", out.get("none_dW"), nobias["dW"], batch_size=N),
                compare("dx when only the input requires grad", out.get("input_only_dx"), ref["dx"]),
                compare(
                    "db when only the bias requires grad", out.get("bias_only_db"), ref["db"], batch_size=N
                ),
            ]
        ),
        0.5,
    )


def _func_single_item(run: _FuncRun) -> Item:
    """N = 1: out and every gradient through autograd (0.5)."""
    data, record = run.datas[SINGLE], run.cases[SINGLE]
    ref = reference.linear(data["x"], data["W"], data["b"], data["g"])
    return verdict_item(
        "N = 1", record, ("forward", "autograd"), partial(_out_and_grads, record, ref, 1), 0.5
    )


def _func_size_one_item(run: _FuncRun) -> Item:
    """in_features = 1 and out_features = 1: the exact shapes of a direct backward call (where a
    squeezed gradient shows), then out and every gradient through autograd (0.5)."""
    name, weight = "in = 1, out = 1", 0.5
    for label in ("in=1", "out=1"):
        data, record = run.datas[label], run.cases[label]
        (n, d), m = data["x"].shape, data["W"].shape[0]
        ref = reference.linear(data["x"], data["W"], data["b"], data["g"])
        mistakes = _saved_output(data) | (
            {"db": {SQUEEZED_BIAS: data["g"].sum(0).reshape(())}} if m == 1 else {}
        )
        item = exact_shapes_item(name, record, {"dx": (n, d), "dW": (m, d), "db": (m,)}, weight, mistakes)
        if item.passed:
            steps = ("forward", "autograd")
            item = verdict_item(name, record, steps, partial(_out_and_grads, record, ref, n), weight)
        if not item.passed:
            return Item(name, False, f"when {label}: {item.message}", weight)
    return Item(
        name, True, "exact shapes and values with one input feature and with one output feature", weight
    )


def _vmap_item(run: _FuncRun) -> Item:
    """vmap over stacked weights (1)."""
    data, out = run.datas[MAIN], run.main["outputs"]
    want = np.stack([data["x"] @ w.T + data["b"] for w in data["Ws"]])
    return verdict_item(
        "vmap over weights",
        run.main,
        ("vmap",),
        lambda: [compare("vmap output (B, N, M)", out.get("vmap_out"), want)],
        1.0,
    )


def _func_grad_item(run: _FuncRun) -> Item:
    """torch.func.grad of the weight (1)."""
    got = run.main["outputs"].get("func_grad_dW")
    return verdict_item(
        "torch.func.grad",
        run.main,
        ("func_grad",),
        lambda: [compare("torch.func.grad dW", got, run.ref["dW"], batch_size=N)],
        1.0,
    )


#: What is checked of LinearFunctionFunc, in order.
FUNC_ITEMS: tuple[ItemOf[_FuncRun], ...] = (
    _func_value_items,
    _func_direct_item,
    _func_no_bias_item,
    _func_single_item,
    _func_size_one_item,
    _vmap_item,
    _func_grad_item,
    unchanged_item,
    contract_of("LinearFunctionFunc", MAIN),
)


@grader(LINEAR_FUNCTION_FUNC)
def grade_linear_function_func(evidence: Evidence) -> Report:
    """Grade: out (1); dx, dW, db (0.5 each); exact shapes of a direct backward call (0.5); no bias
    and mixed requires_grad (only the weight, the input or the bias) (0.5); N = 1 (0.5); in = 1 and
    out = 1 (0.5); vmap over stacked weights (1); torch.func.grad (1); inputs unchanged (0.5); the
    Function contract."""
    run = _FuncRun.of(evidence)
    return judge(LINEAR_FUNCTION_FUNC, FUNC_ITEMS, run, run.cases.values())


def _batched_reference(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    xt, Wt, bt = (tensor(data[k], True) for k in ("x", "W", "b"))
    out = F.linear(xt, Wt, bt)
    out.backward(tensor(data["g"]))
    return {"out": out.detach().numpy(), "dx": xt.grad.numpy(), "dW": Wt.grad.numpy(), "db": bt.grad.numpy()}


@dataclass(frozen=True)
class _BatchedRun:
    """What every item of the batched LinearFunction reads: the recorded cases, their inputs remade from
    the seed and their references; the first case, the (2, 3, 4, D) input, is the main one."""

    cases: dict[str, FunctionRecord]
    datas: dict[str, dict[str, np.ndarray]]
    refs: dict[str, dict[str, np.ndarray]]

    @classmethod
    def of(cls, evidence: Evidence) -> _BatchedRun:
        seed = evidence["seed"]
        datas = {
            lab: batched_inputs(case_seed(seed, i), dims)
            for i, (lab, dims) in enumerate(BATCHED_CASES.items())
        }
        refs = {lab: _batched_reference(d) for lab, d in datas.items()}
        return cls(explain_linear_forward_errors(evidence["cases"], datas), datas, refs)

    @property
    def originals(self) -> dict[str, dict[str, np.ndarray]]:
        """Each case's tensors as they were given."""
        return {
            lab: {"x": d["x"], "W": d["W"], "b": d["b"], "grad_output": d["g"]}
            for lab, d in self.datas.items()
        }


BATCHED_MAIN = next(iter(BATCHED_CASES))


def _batched_value_items(run: _BatchedRun) -> list[Item]:
    """out (1), then dx, dW and db through autograd (0.5 each), on the (2, 3, 4, D) input."""
    data, record, ref = run.datas[BATCHED_MAIN], run.cases[BATCHED_MAIN], run.refs[BATCHED_MAIN]
    g2, x2 = data["g"].reshape(-1, BATCHED_M), data["x"].reshape(-1, BATCHED_D)
    rows, averaged = g2.shape[0], "averaged instead of summed over the leading axes"
    mistakes = {
        "out": {"the bias is missing": data["x"] @ data["W"].T},
        "dx": {},
        "dW": {averaged: g2.T @ x2 / rows},
        "db": {averaged: g2.mean(0)},
    }
    items = []
    for name, weight in (("out", 1.0), ("dx", 0.5), ("dW", 0.5), ("db", 0.5)):
        item = _linear_item(name, record, ref, weight, mistakes=mistakes[name], batch_size=rows)
        items.append(Item(f"{name}, input (2, 3, 4, D)", item.passed, item.message, weight))
    return items


def _batched_direct_item(run: _BatchedRun) -> Item:
    """The exact shapes of backward called directly (0.5)."""
    shapes = {
        "dx": (*BATCHED_CASES[BATCHED_MAIN], BATCHED_D),
        "dW": (BATCHED_M, BATCHED_D),
        "db": (BATCHED_M,),
    }
    return exact_shapes_item("direct backward", run.cases[BATCHED_MAIN], shapes, 0.5)


def _weight_only_item(run: _BatchedRun) -> Item:
    """Only the weight requiring grad, no bias (0.5)."""
    record = run.cases[BATCHED_MAIN]
    ref = _batched_reference({**run.datas[BATCHED_MAIN], "b": np.zeros(BATCHED_M)})
    rows = int(np.prod(BATCHED_CASES[BATCHED_MAIN]))
    verdicts = partial(_without_bias, record["outputs"], "weight_only", ref, rows)
    return verdict_item("weight only, no bias", record, ("weight_only",), verdicts, 0.5)


def _other_shapes_items(run: _BatchedRun) -> list[Item]:
    """An (N, D) input, N = 1 and a 1-D input: out and every gradient (0.5 each)."""
    items = []
    for lab, name in zip(list(BATCHED_CASES)[1:], ("(N, D) input", "N = 1", "1-D input (D,)"), strict=True):
        record, ref = run.cases[lab], run.refs[lab]
        n = int(np.prod(BATCHED_CASES[lab])) if BATCHED_CASES[lab] else 1
        steps = ("forward", "autograd")
        items.append(verdict_item(name, record, steps, partial(_out_and_grads, record, ref, n), 0.5))
    return items


#: What is checked of the batched LinearFunction, in order.
BATCHED_ITEMS: tuple[ItemOf[_BatchedRun], ...] = (
    _batched_value_items,
    _batched_direct_item,
    _weight_only_item,
    _other_shapes_items,
    unchanged_item,
    contract_of("LinearFunction", BATCHED_MAIN),
)


@grader(BATCHED_LINEAR)
def grade_batched_linear(evidence: Evidence) -> Report:
    """Grade: the (2, 3, 4, D) input: out (1), dx, dW, db (0.5 each); exact shapes of a direct backward
    call (0.5); weight only requiring grad, no bias (0.5); (N, D) input (0.5); N = 1 (0.5); a 1-D input
    (0.5); inputs unchanged (0.5); the Function contract."""
    run = _BatchedRun.of(evidence)
    return judge(BATCHED_LINEAR, BATCHED_ITEMS, run, run.cases.values())
