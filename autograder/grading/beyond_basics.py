"""The graders of notebook 05's checks (see :mod:`autograder.checks.beyond_basics` for their inputs).

Each item reads the case records of :mod:`autograder.checks.functions` through
:func:`~autograder.grading.toolkit.step_error` (each step blamed for its own failure: the forward's
values are judged on the forward alone) and a backward's return value through
:func:`~autograder.grading.toolkit.backward_returns` (the one rule for what a correct answer is).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import torch.nn.functional as F

from autograder.checks.beyond_basics import (
    BATCHED_CASES,
    BATCHED_D,
    BATCHED_LINEAR,
    BATCHED_M,
    CTX_FEATURES,
    DOUBLE_BACKWARD,
    DOUBLE_SHAPE,
    FIT_INIT,
    FIT_LEGENDRE,
    FIT_LR,
    FIT_STEPS,
    FUNC_CASES,
    FUNC_SIZES,
    LEGENDRE,
    LEGENDRE_SHAPE,
    LINEAR_FUNCTION_FUNC,
    SCE_CASES,
    SOFTMAX_CROSS_ENTROPY_FUNCTION,
    all_sce_inputs,
    batched_inputs,
    ctx_inputs,
    double_inputs,
    fit_legendre_data,
    func_inputs,
    legendre_inputs,
)
from autograder.checks.compare import Verdict, compare
from autograder.checks.core import Evidence, case_seed
from autograder.checks.functions import tensor
from autograder.checks.report import Item, Report
from autograder.checks.tolerances import LOSS, TRAINING
from autograder.grading import grader, reference, report_for
from autograder.grading.function_contract import contract_items
from autograder.grading.hard_inputs import hard_inputs_item, ties_item
from autograder.grading.toolkit import (
    SQUEEZED_BIAS,
    add_notes,
    backward_returns,
    describe,
    error_or_verdicts,
    step_error,
    tensors_unchanged_item,
)

Record = dict[str, Any]

#: What torch says when a once_differentiable backward is differentiated.
ONCE_DIFFERENTIABLE_MESSAGE = "marked with @once_differentiable"


def _got(record: Record, step: str, name: str) -> Any:
    """The value ``name`` that ``step`` recorded (None when the step recorded nothing)."""
    return record["outputs"].get(step, {}).get(name)


def _verdict_item(
    name: str, record: Record, steps: tuple[str, ...], verdicts: Callable[[], list[Verdict]], weight: float
) -> Item:
    """An item that fails with a step's own error when one of ``steps`` failed, else passes when every
    verdict is ok (the verdicts are computed only when every step ran)."""
    error = step_error(record, *steps)
    return error_or_verdicts(name, error, [] if error else verdicts(), weight)


def _shape_mistake(got: tuple[int, ...], shape: tuple[int, ...]) -> str:
    """Why a gradient of shape ``got`` is wrong for an input of ``shape``: autograd sums it down
    silently only when ``shape`` broadcasts to ``got`` (docs/checks.md item 8), and refuses it
    otherwise; the mistake is named only when the extra axes lead and the rest is the input's shape."""
    lead, rest = got[: len(got) - len(shape)], got[len(got) - len(shape) :]
    if len(got) < len(shape):
        return " Autograd refuses a gradient with fewer axes than its input."
    if rest != shape:
        broadcast = all(s in (1, g) for s, g in zip(shape, rest, strict=True))
        if broadcast:
            return " Autograd silently sums such a gradient down to the input's shape; reduce it yourself."
        return " Autograd refuses it: the shapes do not broadcast."
    if all(n == 1 for n in lead):
        return (
            f" Likely mistake: an extra leading size-1 axis (keepdim=True, or unsqueeze): autograd silently "
            f"removes it, so .backward() and gradcheck pass; return shape {shape}."
        )
    return (
        f" Likely mistake: not summed over the leading axes {lead} (the batch): autograd silently sums "
        f"such a gradient, so .backward() and gradcheck pass; sum over every leading axis yourself."
    )


def _exact_shapes_item(
    name: str,
    record: Record,
    expected: dict[str, tuple[int, ...] | None],
    weight: float,
    mistakes: dict[str, dict[str, Any]] | None = None,
) -> Item:
    """Backward called directly returns, for every input of forward, a gradient of exactly its
    input's shape (or None), read as PyTorch reads a return value (trailing Nones accepted)."""
    error = step_error(record, "forward", "direct")
    if error:
        return Item(name, False, error, weight)
    names = list(expected)
    grads, problem = backward_returns(record["outputs"]["direct"], len(names), "backward", names)
    if problem:
        return Item(name, False, problem, weight)
    for (grad_name, shape), value in zip(expected.items(), grads, strict=True):
        if shape is None:
            if value is not None:
                return Item(
                    name, False, f"backward returned a tensor for {grad_name}; it must be None.", weight
                )
            continue
        if not isinstance(value, np.ndarray):
            got = "None" if value is None else describe(value)
            return Item(name, False, f"backward returned {got} for {grad_name}, expected a tensor.", weight)
        if tuple(value.shape) != shape:
            known = (mistakes or {}).get(grad_name, {})
            likely = compare(grad_name, value, np.zeros(shape), mistakes=known).likely
            why = (
                f" Likely mistake: {likely}."
                if likely in known
                else _shape_mistake(tuple(value.shape), shape)
            )
            return Item(
                name,
                False,
                f"backward returned {grad_name} of shape {tuple(value.shape)}, but its input has shape "
                f"{shape}.{why}",
                weight,
            )
        if value.dtype != np.float64:
            return Item(
                name, False, f"backward returned {grad_name} as {value.dtype}, expected float64.", weight
            )
    shapes = ", ".join(f"{k} {v}" if v is not None else f"{k} None" for k, v in expected.items())
    return Item(name, True, f"exact shapes: {shapes}", weight)


# --------------------------------------------------------------------------------------------
# Exercise 1: LinearFunctionFunc
# --------------------------------------------------------------------------------------------


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
        return _verdict_item(
            name,
            record,
            ("forward",),
            lambda: [compare(name, record["outputs"].get("out"), ref["out"], **kwargs)],
            weight,
        )
    return _verdict_item(
        name,
        record,
        ("forward", "autograd"),
        lambda: [compare(name, _got(record, "autograd", name), ref[name], **kwargs)],
        weight,
    )


def _out_and_grads(record: Record, ref: dict[str, np.ndarray], batch_size: int) -> list[Verdict]:
    """A case's out and its three gradients through autograd against ``ref`` (a gradient off by a
    factor of ``batch_size`` is named as such)."""
    return [compare("out", record["outputs"].get("out"), ref["out"])] + [
        compare(k, _got(record, "autograd", k), ref[k], batch_size=batch_size) for k in ("dx", "dW", "db")
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
    report.add(_exact_shapes_item("direct backward", main, {"dx": (n, d), "dW": (m, d), "db": (m,)}, 0.5))
    nobias_ref = reference.linear(data["x"], data["W"], np.zeros(m), data["g"])
    report.add(
        _verdict_item(
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
        _verdict_item(
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
        _verdict_item(
            "vmap over weights",
            main,
            ("vmap",),
            lambda: [compare("vmap output (B, N, M)", out.get("vmap_out"), vmap_ref)],
            1.0,
        )
    )
    report.add(
        _verdict_item(
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
        shapes = _exact_shapes_item(name, record, {"dx": (n, d), "dW": (m, d), "db": (m,)}, weight, mistakes)
        if not shapes.passed:
            return Item(name, False, f"when {label}: {shapes.message}", weight)
        item = _verdict_item(
            name,
            record,
            ("forward", "autograd"),
            lambda record=record, ref=ref, n=n: (
                [compare("out", record["outputs"].get("out"), ref["out"])]
                + [compare(k, _got(record, "autograd", k), ref[k], batch_size=n) for k in ("dx", "dW", "db")]
            ),
            weight,
        )
        if not item.passed:
            return Item(name, False, f"when {label}: {item.message}", weight)
    return Item(
        name, True, "exact shapes and values with one input feature and with one output feature", weight
    )


# --------------------------------------------------------------------------------------------
# Exercise 2: LinearFunction with any number of leading batch dimensions
# --------------------------------------------------------------------------------------------


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
        _exact_shapes_item(
            "direct backward",
            rec,
            {"dx": (*lead, BATCHED_D), "dW": (BATCHED_M, BATCHED_D), "db": (BATCHED_M,)},
            0.5,
        )
    )
    wo_ref = _batched_reference({**data, "b": np.zeros(BATCHED_M)})
    report.add(
        _verdict_item(
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
            _verdict_item(
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


# --------------------------------------------------------------------------------------------
# Exercise 3: double backward (Cube) and once_differentiable (NumpyCube)
# --------------------------------------------------------------------------------------------


@grader(DOUBLE_BACKWARD)
def grade_double_backward(evidence: Evidence) -> Report:
    """Grade: Cube's output and gradient (0.5), the exact shape of a direct backward call (0.5),
    the second derivative through x (1) and through grad_output (0.5); NumpyCube's output and
    gradient (1); differentiating NumpyCube twice raises torch's once_differentiable error (0.5: the
    stub carries the decorator, the item catches a learner who removes it or bypasses it);
    inputs unchanged (0.5)."""
    report = report_for(DOUBLE_BACKWARD)
    data = double_inputs(evidence["seed"])
    cube, npc = evidence["cases"]["Cube"], evidence["cases"]["NumpyCube"]
    ref = reference.cube_second_derivatives(data["x"], data["g"], data["v"])
    x, g, v = data["x"], data["g"], data["v"]
    co = cube["outputs"]
    report.add(
        _verdict_item(
            "Cube: y and dx",
            cube,
            ("forward", "autograd"),
            lambda: [
                compare("y", co.get("y"), ref["y"]),
                compare(
                    "dx",
                    _got(cube, "autograd", "dx"),
                    ref["dx"],
                    mistakes={"grad_output is ignored": 3 * x**2},
                ),
            ],
            0.5,
        )
    )
    report.add(_exact_shapes_item("Cube: direct backward", cube, {"dx": DOUBLE_SHAPE}, 0.5))
    second = {**cube, "errors": {**cube["errors"], "second": _second_hint(step_error(cube, "second"))}}
    hx_mistakes = {
        "the saved x was detached (or backward ran under no_grad): dx does not depend on x": np.zeros_like(x)
    }
    report.add(
        _verdict_item(
            "second derivative through x",
            second,
            ("second",),
            lambda: [compare("d<dx, v>/dx", _zero_if_none(co.get("hx"), x), ref["hx"], mistakes=hx_mistakes)],
            1.0,
        )
    )
    report.add(
        _verdict_item(
            "second derivative through grad_output",
            second,
            ("second",),
            lambda: [
                compare(
                    "d<dx, v>/dgrad_output",
                    _zero_if_none(co.get("hg"), g),
                    ref["hg"],
                    mistakes={
                        "backward does not use grad_output with differentiable operations": np.zeros_like(g)
                    },
                )
            ],
            0.5,
        )
    )
    report.add(
        _verdict_item(
            "NumpyCube: y and dx",
            npc,
            ("forward", "autograd"),
            lambda: [
                compare("y", npc["outputs"].get("y"), ref["y"]),
                compare("dx", _got(npc, "autograd", "dx"), ref["dx"]),
            ],
            1.0,
        )
    )
    report.add(_once_differentiable_item(npc, v))
    ran = {"x": x, "grad_output": g}
    report.add(tensors_unchanged_item(evidence["cases"], {"Cube": ran, "NumpyCube": ran}))
    for item in contract_items(evidence["cases"], "Cube", {"Cube": ran, "NumpyCube": ran}):
        report.add(item)
    add_notes(report, evidence["cases"].values())
    return report


def _second_hint(error: str | None) -> str | None:
    """Name the likely mistake when differentiating the learner's gradient found no graph."""
    if error and "does not require grad" in error:
        return (
            f"{error}. Likely mistake: backward is not built from differentiable torch operations "
            "(numpy, .detach() or torch.no_grad() cut the graph), so its result cannot be differentiated."
        )
    return error


def _zero_if_none(value: Any, like: np.ndarray) -> Any:
    """An unused input gets None from autograd.grad: its derivative is zero, which compare can name."""
    return np.zeros_like(like) if value is None else value


def _once_differentiable_item(record: Record, v: np.ndarray) -> Item:
    name, weight = "NumpyCube raises when differentiated twice", 0.5
    error = step_error(record, "twice")
    if error:
        return Item(name, False, error, weight)
    kind, message = record["outputs"].get("twice_error_type"), record["outputs"].get("twice_error")
    if kind is None:
        return Item(
            name,
            False,
            "differentiating NumpyCube's gradient raised nothing: decorate backward with "
            "@once_differentiable (below @staticmethod) so that a second derivative is refused.",
            weight,
        )
    if kind == "RuntimeError" and isinstance(message, str) and ONCE_DIFFERENTIABLE_MESSAGE in message:
        return Item(name, True, f"RuntimeError: {message}", weight)
    return Item(
        name,
        False,
        f"it raised {kind}: {message}. Torch says '{ONCE_DIFFERENTIABLE_MESSAGE}' only when backward is "
        "decorated with @once_differentiable: without it, the numpy backward silently cuts the graph.",
        weight,
    )


# --------------------------------------------------------------------------------------------
# Exercise 4: mark_non_differentiable, mark_dirty, set_materialize_grads
# --------------------------------------------------------------------------------------------


@grader(CTX_FEATURES)
def grade_ctx_features(evidence: Evidence) -> Report:
    """Grade each of the three lessons by its effect: MaxWithIndex values and indices (0.5), indices
    marked non-differentiable (0.5), its gradient with exact shape from a direct call (0.5), ties (0.5);
    InplaceReLU returns its input object, modified (0.5), with the right values and gradient (0.5);
    SquareAndCube outputs and gradients when one or both outputs are used (0.5), its backward called
    directly with a None gradient (0.5), and backward receiving None, not zeros, for the unused
    output (0.5: only ``set_materialize_grads(False)`` does that)."""
    report = report_for(CTX_FEATURES)
    data = ctx_inputs(evidence["seed"])
    cases = evidence["cases"]
    mx, rl, sc = cases["max"], cases["relu"], cases["square_cube"]
    ref = reference.ctx_features(data)

    mo = mx["outputs"]
    report.add(
        _verdict_item(
            "MaxWithIndex: values and indices",
            mx,
            ("forward",),
            lambda: [
                compare("values", mo.get("values"), ref["values"]),
                compare("indices", mo.get("indices"), ref["indices"], dtype=np.int64),
            ],
            0.5,
        )
    )
    report.add(
        _property_item(
            "MaxWithIndex: indices not differentiable",
            mx,
            ("forward",),
            _non_differentiable_problem,
            "the indices are marked non-differentiable (requires_grad False), the values require grad",
        )
    )
    report.add(
        _verdict_item(
            "MaxWithIndex: gradient",
            mx,
            ("forward", "autograd", "direct"),
            lambda: [
                compare("grad of scores", _got(mx, "autograd", "ds"), ref["ds"]),
                compare(
                    "grad of scores from a direct backward call",
                    _first(mx["outputs"]["direct"]),
                    ref["ds"],
                ),
            ],
            0.5,
        )
    )

    report.add(ties_item(mx, data["ties"], data["gv"]))

    ro = rl["outputs"]
    report.add(
        _property_item(
            "InplaceReLU: in place, marked dirty",
            rl,
            ("forward",),
            _dirty_problem,
            "returns its input, modified in place (version counter bumped)",
        )
    )
    report.add(
        _verdict_item(
            "InplaceReLU: values and gradient",
            rl,
            ("forward", "autograd"),
            lambda: [
                compare("out", ro.get("out"), ref["relu"]),
                compare("the input after the call", ro.get("h_after"), ref["relu"]),
                compare("grad of the input", _got(rl, "autograd", "da"), ref["da"]),
            ],
            0.5,
        )
    )

    so = sc["outputs"]
    report.add(
        _verdict_item(
            "SquareAndCube: outputs and gradients",
            sc,
            ("forward", "autograd"),
            lambda: [
                compare("square", so.get("sq"), ref["sq"]),
                compare("cube", so.get("cu"), ref["cu"]),
                compare("grad, both outputs used", so.get("d_both"), ref["d_both"]),
                compare("grad, only the square used", so.get("d_sq"), ref["d_sq"]),
                compare("grad, only the cube used", so.get("d_cu"), ref["d_cu"]),
            ],
            0.5,
        )
    )
    report.add(
        _verdict_item(
            "SquareAndCube: backward with None",
            sc,
            ("forward", "direct_sq", "direct_cu"),
            lambda: [
                compare("backward(ctx, g2, None)", _first(so["direct_sq"]), ref["d_sq"]),
                compare("backward(ctx, None, g3)", _first(so["direct_cu"]), ref["d_cu"]),
            ],
            0.5,
        )
    )
    report.add(
        _property_item(
            "SquareAndCube: None for an unused output",
            sc,
            ("forward", "autograd"),
            _materialize_problem,
            "with only the square used, backward received None for the cube's gradient, not zeros",
        )
    )
    add_notes(report, (mx, rl, sc))
    changed = tensors_unchanged_item(
        {"max": mx, "square_cube": sc}, {"max": {"s": data["s"]}, "square_cube": {"z": data["z"]}}
    )
    if not changed.passed and not changed.message.startswith("not checked"):
        report.notes.append(
            "MaxWithIndex or SquareAndCube changed its input in place (only InplaceReLU should)."
        )
    return report


def _first(returned: Record) -> Any:
    """The first gradient a recorded backward return value gives (PyTorch reads a lone tensor as one)."""
    grads, _ = backward_returns(returned, 1, "backward", ["grad"])
    return grads[0]


def _property_item(
    name: str, record: Record, steps: tuple[str, ...], problem: Callable[[Record], str | None], passed: str
) -> Item:
    """An item (0.5 points) on one property of a Function: the first failing step's own error, else what
    ``problem`` finds wrong in the recorded outputs, else it passes with ``passed``."""
    failure = step_error(record, *steps) or problem(record["outputs"])
    return Item(name, failure is None, failure or passed, 0.5)


def _non_differentiable_problem(out: Record) -> str | None:
    if out.get("indices_requires_grad") is not False:
        return "the indices require grad: mark them with ctx.mark_non_differentiable(indices) in forward."
    if out.get("values_requires_grad") is not True:
        return "the values do not require grad: only the indices are non-differentiable."
    marked = out.get("marked_non_differentiable") or []
    if marked == [False, True]:
        return None
    if any(marked):
        return (
            "forward marked the values as non-differentiable. Likely mistake: ctx.mark_non_differentiable "
            "given the values (or both outputs); mark only the indices."
        )
    return (
        "forward did not mark the indices. Likely mistake: ctx.mark_non_differentiable(indices) is never "
        "called in forward: int64 indices "
        "never require grad, so nothing fails today, but autograd is not told that this output has "
        "no gradient (a float mask or count returned the same way would require grad and get one)."
    )


def _dirty_problem(out: Record) -> str | None:
    if out.get("version_bumped") is not True:
        return (
            "the input was not modified in place (its version counter did not change). Likely mistake: "
            "the ReLU is computed out of place (clamp, torch.relu, x * mask) or on a copy of x; use "
            "clamp_ or an indexed assignment on the input itself."
        )
    if out.get("same_object") is not True:
        return (
            "the output is not the input object. Likely mistake: forward changes x in place but returns "
            "another tensor (a copy or a view of x); call ctx.mark_dirty(x) and return x itself."
        )
    return None


def _materialize_problem(out: Record) -> str | None:
    received = out.get("grads_none_square_only")
    if received == [False, True]:
        return None
    if received == [False, False]:
        return (
            "with only the square used, backward received a tensor of zeros for the cube's gradient. "
            "Likely mistake: forward never calls ctx.set_materialize_grads(False): autograd then "
            "materializes the missing gradient, and backward multiplies by zeros for nothing."
        )
    return f"backward received {received} (None or not, per output); expected [False, True]."


# --------------------------------------------------------------------------------------------
# Exercise 5: SoftmaxCrossEntropy, fused and stable
# --------------------------------------------------------------------------------------------


@grader(SOFTMAX_CROSS_ENTROPY_FUNCTION)
def grade_softmax_cross_entropy_function(evidence: Evidence) -> Report:
    """Grade: loss (1) and dscores for a random upstream scalar (1) for N=5, C=3; N = 1 (0.5); logits
    of magnitude 1000 (0.5); a direct backward call returns dscores (N, C) and None for the targets
    (0.5); rows far apart, the true class at the bottom of large scores, a class left out of the labels
    (0.5); inputs unchanged (0.5); the Function contract (tensors on ctx attributes, 0.5)."""
    report = report_for(SOFTMAX_CROSS_ENTROPY_FUNCTION)
    seed, cases = evidence["seed"], evidence["cases"]
    labels = list(SCE_CASES)
    datas = all_sce_inputs(seed)
    refs = {}
    for lab, data in datas.items():
        r = reference.softmax_cross_entropy(data["scores"], data["y"])
        refs[lab] = {"loss": r["loss"], "dscores": r["dscores"] * data["u"], "dscores_at_1": r["dscores"]}
    main = labels[0]
    rec, data, ref = cases[main], datas[main], refs[main]
    n = data["scores"].shape[0]
    report.add(
        _verdict_item(
            "loss",
            rec,
            ("forward",),
            lambda: [compare("loss", rec["outputs"].get("loss"), ref["loss"], tol=LOSS, batch_size=n)],
            1.0,
        )
    )
    report.add(
        _verdict_item(
            "dscores",
            rec,
            ("forward", "autograd"),
            lambda: [
                compare(
                    "dscores",
                    _got(rec, "autograd", "dscores"),
                    ref["dscores"],
                    batch_size=n,
                    mistakes={"grad_output is ignored (backward must multiply by it)": ref["dscores_at_1"]},
                )
            ],
            1.0,
        )
    )
    for lab, name in ((labels[1], "N = 1"), (labels[2], "logits of magnitude 1000")):
        size = datas[lab]["scores"].shape[0]
        report.add(
            _verdict_item(
                name,
                cases[lab],
                ("forward", "autograd"),
                lambda lab=lab, size=size: [
                    compare(
                        "loss",
                        cases[lab]["outputs"].get("loss"),
                        refs[lab]["loss"],
                        tol=LOSS,
                        batch_size=size,
                    ),
                    compare(
                        "dscores",
                        _got(cases[lab], "autograd", "dscores"),
                        refs[lab]["dscores"],
                        mistakes={"grad_output is ignored": refs[lab]["dscores_at_1"]},
                        batch_size=size,
                    ),
                ],
                0.5,
            )
        )
    report.add(
        _exact_shapes_item("direct backward", rec, {"dscores": data["scores"].shape, "dtargets": None}, 0.5)
    )
    report.add(hard_inputs_item(cases, datas, refs))
    originals = {lab: {"scores": d["scores"], "y": d["y"]} for lab, d in datas.items()}
    for lab, d in datas.items():
        originals[lab]["grad_output"] = np.asarray(d["u"])
    report.add(tensors_unchanged_item(cases, originals))
    ran = {"scores": data["scores"], "y": data["y"], "grad_output": np.asarray(data["u"])}
    for item in contract_items(cases, "SoftmaxCrossEntropy", {main: ran}):
        report.add(item)
    add_notes(report, cases.values())
    return report


# --------------------------------------------------------------------------------------------
# Exercise 6: LegendrePolynomial3 and the curve fit
# --------------------------------------------------------------------------------------------


@grader(LEGENDRE)
def grade_legendre(evidence: Evidence) -> Report:
    """Grade: P3(x) (1), its gradient for a random upstream gradient (1), the exact shape of a direct
    backward call (0.5), the gradient of y.sum(), whose upstream gradient is a stride-0 tensor that
    must not be written to (0.5), inputs unchanged (0.5)."""
    report = report_for(LEGENDRE)
    data = legendre_inputs(evidence["seed"])
    ((case, rec),) = evidence["cases"].items()
    ref = reference.legendre3(data["x"], data["g"])
    x, g = data["x"], data["g"]
    report.add(
        _verdict_item(
            "y",
            rec,
            ("forward",),
            lambda: [
                compare(
                    "y",
                    rec["outputs"].get("y"),
                    ref["y"],
                    mistakes={"the factor 0.5 is missing": 5 * x**3 - 3 * x},
                )
            ],
            1.0,
        )
    )
    report.add(
        _verdict_item(
            "dx",
            rec,
            ("forward", "autograd"),
            lambda: [
                compare(
                    "dx",
                    _got(rec, "autograd", "dx"),
                    ref["dx"],
                    mistakes={
                        "grad_output is ignored": 1.5 * (5 * x**2 - 1),
                        "the derivative of 5x^3 is 15x^2, so P3'(x) = 1.5 (5x^2 - 1), not 0.5 (5x^2 - 3)": 0.5
                        * (5 * x**2 - 3)
                        * g,
                    },
                )
            ],
            1.0,
        )
    )
    report.add(_exact_shapes_item("direct backward", rec, {"dx": LEGENDRE_SHAPE}, 0.5))
    ones_ref = reference.legendre3(x, np.ones_like(x))["dx"]
    report.add(
        _verdict_item(
            "dx of y.sum()",
            rec,
            ("forward", "sum"),
            lambda: [compare("dx of y.sum()", _got(rec, "sum", "dx"), ones_ref)],
            0.5,
        )
    )
    report.add(tensors_unchanged_item({case: rec}, {case: {"x": x, "grad_output": g}}))
    for item in contract_items({case: rec}, "LegendrePolynomial3", {case: {"x": x, "grad_output": g}}):
        report.add(item)
    add_notes(report, [rec])
    return report


@lru_cache(maxsize=4)
def _reference_fit_loss(seed: int) -> float:
    x, y = fit_legendre_data(seed)
    return float(reference.legendre_fit(x, y, FIT_INIT, FIT_LR, FIT_STEPS)["loss"])


def legendre_model_loss(params: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    """The tutorial's loss, the sum of squared errors of a + b P3(c + d x), recomputed in trusted code."""
    a, b, c, d = (float(p) for p in params)
    z = c + d * x
    with np.errstate(all="ignore"):
        return float(np.sum((a + b * 0.5 * (5 * z**3 - 3 * z) - y) ** 2))


IGNORED_X_LEGENDRE = (
    "Likely mistake: fit_legendre ignores its x argument. Your (a, b, c, d) are exactly what the "
    "tutorial's loop reaches on its own evenly spaced points torch.linspace(-pi, pi, 2000) for this y; the "
    "check passed other points: fit the x you are given."
)


def fitted_the_tutorials_x(params: np.ndarray, x: np.ndarray, y: np.ndarray) -> bool:
    """Whether ``params`` are the tutorial loop's result at evenly spaced points although x is others."""
    demo = np.linspace(-math.pi, math.pi, x.size)
    if np.allclose(x, demo):
        return False
    replay = reference.legendre_fit(demo, y, FIT_INIT, FIT_LR, FIT_STEPS)["params"]
    return bool(np.allclose(params, replay, rtol=1e-6, atol=1e-9))


@grader(FIT_LEGENDRE)
def grade_fit_legendre(evidence: Evidence) -> Report:
    """Grade: four finite numbers returned (0.5), a loss below the starting point's (0.5), and a loss
    within 5% of what the tutorial's loop reaches from the same start (1)."""
    report = report_for(FIT_LEGENDRE)
    seed = evidence["seed"]
    (rec,) = evidence["cases"].values()
    error = step_error(rec, "fit")
    names = ("returns (a, b, c, d)", "loss went down", "reaches the tutorial's loss")
    if error:
        for name, weight in zip(names, (0.5, 0.5, 1.0), strict=True):
            report.add(Item(name, False, error, weight))
        add_notes(report, [rec])
        return report
    params = rec["outputs"].get("params")
    x, y = fit_legendre_data(seed)
    if not isinstance(params, np.ndarray) or params.shape != (4,) or not np.all(np.isfinite(params)):
        message = f"the parameters are not four finite numbers: {params}"
        if isinstance(params, np.ndarray) and params.shape == (4,):
            message += (
                ": training diverged. Likely mistake: gradients never cleared after an update (they add up "
                "step after step: p.grad = None, or p.grad.zero_()), an update of the wrong sign "
                "(p -= lr * p.grad; a + climbs), or a learning rate other than 5e-6."
            )
        report.add(Item(names[0], False, message, 0.5))
        report.add(Item(names[1], False, "not checked: no usable parameters.", 0.5))
        report.add(Item(names[2], False, "not checked: no usable parameters.", 1.0))
        add_notes(report, [rec])
        return report
    report.add(Item(names[0], True, "a={:.4g}, b={:.4g}, c={:.4g}, d={:.4g}".format(*params), 0.5))
    loss = legendre_model_loss(params, x, y)
    start = legendre_model_loss(np.array(FIT_INIT), x, y)
    target = _reference_fit_loss(seed)
    went_down = np.isfinite(loss) and loss < start
    reached = bool(np.isfinite(loss) and loss <= target * (1 + TRAINING.rtol) + TRAINING.atol)
    ignored_x = not reached and fitted_the_tutorials_x(params, x, y)
    why_up = (
        f". {IGNORED_X_LEGENDRE}" if ignored_x else ": it should go down. Is the update p -= lr * p.grad?"
    )
    report.add(
        Item(
            names[1],
            bool(went_down),
            f"sum of squared errors {loss:.4g}, from {start:.4g} at the start"
            + ("" if went_down else why_up),
            0.5,
        )
    )
    message = f"sum of squared errors {loss:.4g}; the tutorial's loop reaches {target:.4g}"
    if ignored_x:
        message += f". {IGNORED_X_LEGENDRE}"
    elif not reached:
        message += (
            f" and a fit should be within {TRAINING.rtol:.0%} of it. Start from a=0, b=-1, c=0, d=0.3 with "
            f"lr={FIT_LR:g} for {FIT_STEPS} steps, the loss being the sum (not the mean) of squared errors."
        )
    report.add(Item(names[2], reached, message, 1.0))
    add_notes(report, [rec])
    return report
