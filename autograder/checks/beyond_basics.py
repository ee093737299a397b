"""Checks for notebook 05, beyond the basics of custom autograd Functions.

``LinearFunctionFunc`` (forward without ctx plus ``setup_context``: torch.func.vmap and grad),
``LinearFunction`` for any number of leading batch dimensions, double backward (``Cube`` built from
torch operations, ``NumpyCube`` marked ``once_differentiable``), the ctx features
(``MaxWithIndex``, ``InplaceReLU``, ``SquareAndCube``), a fused ``SoftmaxCrossEntropy`` and
PyTorch's ``LegendrePolynomial3`` with the curve fit of "Learning PyTorch with Examples".

Every collect step runs the learner's Function through :func:`autograder.calling.call` and records
raw numbers (outputs, gradients for random upstream gradients, gradients returned by a direct call
of ``backward``, second derivatives) and raw observations (whether an output requires grad, whether
the output is the input object, the type and message of an exception). Grading compares them with
PyTorch's own operations in float64 in the trusted process: no verdict computed in the learner's
kernel earns points.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from autograder.calling import call
from autograder.checks.core import Check, Evidence, freeze, register, run_check
from autograder.compare import Verdict, compare
from autograder.grading import reference
from autograder.report import Item, Report
from autograder.tolerances import LOSS, TRAINING

DTYPE = torch.float64


def _t(a: np.ndarray, requires_grad: bool = False) -> torch.Tensor:
    """A fresh float64 (or int64) tensor holding a copy of ``a``."""
    arr = np.array(a, copy=True)
    t = torch.from_numpy(arr)
    return t.requires_grad_(True) if requires_grad else t


def _seed(seed: int, index: int) -> int:
    return 1000 * seed + index


def _new_record() -> dict[str, Any]:
    return {"outputs": {}, "errors": {}, "notes": []}


def _step(record: dict[str, Any], step: str, fn: Callable[[], dict[str, Any]], label: str) -> None:
    """Run one step of a collect through :func:`call`; its outputs go into the record, its error too."""
    outcome = call(fn, name=label)
    record["notes"] += [n for n in outcome.notes if n not in record["notes"]]
    if outcome.ok and isinstance(outcome.result, dict):
        record["outputs"].update(outcome.result)
        record["errors"][step] = None
    else:
        record["errors"][step] = outcome.error or f"{label} returned nothing"


def _grads(out: Any, inputs: list[torch.Tensor], grad_output: Any, names: list[str]) -> dict[str, Any]:
    """Gradients of ``out`` with respect to ``inputs`` for ``grad_output``; unused inputs give None."""
    grads = torch.autograd.grad(out, inputs, grad_output, allow_unused=True)
    return {name: freeze(g) for name, g in zip(names, grads, strict=True)}


def _direct(fn_cls: Any, out: Any, *grad_outputs: Any, names: list[str]) -> dict[str, Any]:
    """Call ``fn_cls.backward`` directly with the output's ctx, so that no wrong shape gets repaired.

    Records every returned gradient (autograd would sum-reduce a broadcastable wrong shape) and how
    many values came back.
    """
    ctx = out.grad_fn
    if ctx is None:
        raise RuntimeError("the output has no grad_fn: was the Function applied with .apply(...)?")
    with torch.no_grad():
        result = fn_cls.backward(ctx, *grad_outputs)
    if not isinstance(result, (tuple, list)):
        result = (result,)
    record: dict[str, Any] = {"direct_count": len(result)}
    for name, value in zip(names, result, strict=False):
        record[f"direct_{name}"] = freeze(value)
    return record


def _failed(record: dict[str, Any], *steps: str) -> str | None:
    for step in steps:
        error = record["errors"].get(step, f"step {step} did not run")
        if error:
            return error
    return None


def _verdict_item(
    name: str,
    record: dict[str, Any],
    steps: tuple[str, ...],
    verdicts: Callable[[], list[Verdict]],
    weight: float,
) -> Item:
    """An item that fails with the step's error when a step raised, else passes when every verdict is ok."""
    error = _failed(record, *steps)
    if error:
        return Item(name, False, error, weight)
    return Item.from_verdicts(name, verdicts(), weight)


def _exact_shapes_item(
    name: str, record: dict[str, Any], expected: dict[str, tuple[int, ...] | None], weight: float
) -> Item:
    """Every gradient returned by the direct backward call has exactly its input's shape (or is None)."""
    error = _failed(record, "direct")
    if error:
        return Item(name, False, error, weight)
    out = record["outputs"]
    count = out.get("direct_count")
    if count != len(expected):
        return Item(
            name,
            False,
            f"backward returned {count} value(s); it must return one per input of forward ({len(expected)}), "
            "None for an input that gets no gradient.",
            weight,
        )
    for grad_name, shape in expected.items():
        value = out.get(f"direct_{grad_name}")
        if shape is None:
            if value is not None:
                return Item(
                    name, False, f"backward returned a tensor for {grad_name}; it must be None.", weight
                )
            continue
        if not isinstance(value, np.ndarray):
            got = "None" if value is None else getattr(value, "type_name", type(value).__name__)
            return Item(name, False, f"backward returned {got} for {grad_name}, expected a tensor.", weight)
        if tuple(value.shape) != shape:
            return Item(
                name,
                False,
                f"backward returned {grad_name} of shape {tuple(value.shape)}, but its input has shape "
                f"{shape}. "
                "Autograd silently sums such a gradient down to the right shape; reduce it yourself "
                "(e.g. sum over every leading axis).",
                weight,
            )
        if value.dtype != np.float64:
            return Item(
                name, False, f"backward returned {grad_name} as {value.dtype}, expected float64.", weight
            )
    shapes = ", ".join(f"{k} {v}" if v is not None else f"{k} None" for k, v in expected.items())
    return Item(name, True, f"exact shapes: {shapes}", weight)


def _unchanged_item(
    record_inputs: dict[str, tuple[Any, np.ndarray]], *records: dict[str, Any], weight: float = 0.5
) -> Item:
    """Pass when every recorded input after the calls equals the original data.

    It cannot pass while a record's main step failed: code that raises changes nothing, and must not
    earn points for it.
    """
    for record in records:
        error = _failed(record, "autograd")
        if error:
            return Item("inputs unchanged", False, "not checked: your Function did not run", weight)
    for name, (after, before) in record_inputs.items():
        if not isinstance(after, np.ndarray):
            return Item(
                "inputs unchanged", False, f"not checked: {name} was not recorded (a step failed)", weight
            )
        if after.shape != before.shape or not np.array_equal(after, before, equal_nan=True):
            return Item(
                "inputs unchanged",
                False,
                f"your Function changed its argument {name} in place; work on new tensors (clone first).",
                weight,
            )
    return Item("inputs unchanged", True, "no argument was modified", weight)


def _notes(report: Report, *records: dict[str, Any]) -> None:
    for record in records:
        for note in record["notes"]:
            if note not in report.notes:
                report.notes.append(note)


# --------------------------------------------------------------------------------------------
# Exercise 1: LinearFunctionFunc, forward without ctx + setup_context, with torch.func
# --------------------------------------------------------------------------------------------

FUNC_POINTS = 4.0
#: N, D_in, D_out pairwise distinct; B is the number of stacked weights for vmap.
FUNC_SIZES = {"N": 4, "D": 3, "M": 5, "B": 2}


def func_inputs(seed: int, n: int) -> dict[str, np.ndarray]:
    """x (n, D), W (M, D), b (M,), upstream g (n, M) and a stack of weights Ws (B, M, D)."""
    rng = np.random.default_rng(seed)
    d, m, b = FUNC_SIZES["D"], FUNC_SIZES["M"], FUNC_SIZES["B"]
    return {
        "x": rng.standard_normal((n, d)),
        "W": rng.standard_normal((m, d)) + 0.5,
        "b": rng.standard_normal(m),
        "g": rng.standard_normal((n, m)),
        "Ws": rng.standard_normal((b, m, d)),
    }


def collect_linear_function_func(fn_cls: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``LinearFunctionFunc`` with autograd, a direct backward call, vmap and grad."""
    label = getattr(fn_cls, "__name__", "LinearFunctionFunc")
    cases = {}
    for index, n in enumerate((FUNC_SIZES["N"], 1)):
        data = func_inputs(_seed(seed, index), n)
        record = _new_record()
        x, W, b = _t(data["x"], True), _t(data["W"], True), _t(data["b"], True)

        def autograd_step(x=x, W=W, b=b, data=data) -> dict[str, Any]:
            out = fn_cls.apply(x, W, b)
            return {"out": freeze(out), **_grads(out, [x, W, b], _t(data["g"]), ["dx", "dW", "db"])}

        _step(record, "autograd", autograd_step, f"{label}.apply")
        if index == 0:

            def direct_step(x=x, W=W, b=b, data=data) -> dict[str, Any]:
                out = fn_cls.apply(x, W, b)
                return _direct(fn_cls, out, _t(data["g"]), names=["dx", "dW", "db"])

            def no_bias_step(data=data) -> dict[str, Any]:
                # weight only requires grad, bias omitted both ways
                xs, Ws = _t(data["x"]), _t(data["W"], True)
                out = fn_cls.apply(xs, Ws)
                (dW,) = torch.autograd.grad(out, [Ws], _t(data["g"]))
                out2 = fn_cls.apply(xs, Ws, None)
                (dW2,) = torch.autograd.grad(out2, [Ws], _t(data["g"]))
                # input only, then bias only: a needs_input_grad index mix-up shows in one of them
                xr = _t(data["x"], True)
                (dx_only,) = torch.autograd.grad(
                    fn_cls.apply(xr, _t(data["W"]), _t(data["b"])), [xr], _t(data["g"])
                )
                br = _t(data["b"], True)
                (db_only,) = torch.autograd.grad(fn_cls.apply(xs, _t(data["W"]), br), [br], _t(data["g"]))
                return {
                    "nobias_out": freeze(out),
                    "nobias_dW": freeze(dW),
                    "none_out": freeze(out2),
                    "none_dW": freeze(dW2),
                    "input_only_dx": freeze(dx_only),
                    "bias_only_db": freeze(db_only),
                }

            def vmap_step(data=data) -> dict[str, Any]:
                xs, bs = _t(data["x"]), _t(data["b"])
                out = torch.func.vmap(lambda w: fn_cls.apply(xs, w, bs))(_t(data["Ws"]))
                return {"vmap_out": freeze(out)}

            def func_grad_step(data=data) -> dict[str, Any]:
                xs, bs, gs = _t(data["x"]), _t(data["b"]), _t(data["g"])
                dW = torch.func.grad(lambda w: (fn_cls.apply(xs, w, bs) * gs).sum())(_t(data["W"]))
                return {"func_grad_dW": freeze(dW)}

            _step(record, "direct", direct_step, f"{label}.backward")
            _step(record, "no_bias", no_bias_step, f"{label}.apply without bias")
            _step(record, "vmap", vmap_step, f"torch.func.vmap over {label}")
            _step(record, "func_grad", func_grad_step, f"torch.func.grad of {label}")
        record["inputs_after"] = {"x": freeze(x), "W": freeze(W), "b": freeze(b)}
        cases[f"N={n}"] = record
    return {"check": "linear_function_func", "seed": seed, "cases": cases}


def _linear_mistakes(data: dict[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    ones = np.ones_like(data["g"])
    return {
        "out": {"the bias is missing": data["x"] @ data["W"].T},
        "dx": {"grad_output is ignored (computed as if it were all ones)": ones @ data["W"]},
        "dW": {"grad_output is ignored (computed as if it were all ones)": ones.T @ data["x"]},
        "db": {"grad_output is ignored (computed as if it were all ones)": ones.sum(0)},
    }


def grade_linear_function_func(evidence: Evidence) -> Report:
    """Grade: out (1); dx, dW, db (0.5 each); exact shapes of a direct backward call (0.5); no bias
    and mixed requires_grad (only the weight, the input or the bias) (0.5); N = 1 (0.5); vmap over
    stacked weights (1); torch.func.grad (1); inputs unchanged (0.5)."""
    report = Report("LinearFunctionFunc", FUNC_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    main_label, single_label = f"N={FUNC_SIZES['N']}", "N=1"
    main, single = cases[main_label], cases[single_label]
    data = func_inputs(_seed(seed, 0), FUNC_SIZES["N"])
    ref = reference.linear(data["x"], data["W"], data["b"], data["g"])
    mistakes = _linear_mistakes(data)
    out = main["outputs"]
    n = FUNC_SIZES["N"]
    for name, weight in (("out", 1.0), ("dx", 0.5), ("dW", 0.5), ("db", 0.5)):
        report.add(
            _verdict_item(
                name,
                main,
                ("autograd",),
                lambda name=name: [
                    compare(name, out.get(name), ref[name], mistakes=mistakes[name], batch_size=n)
                ],
                weight,
            )
        )
    d, m = FUNC_SIZES["D"], FUNC_SIZES["M"]
    report.add(_exact_shapes_item("direct backward", main, {"dx": (n, d), "dW": (m, d), "db": (m,)}, 0.5))
    nobias_ref = reference.linear(data["x"], data["W"], np.zeros(m), data["g"])
    report.add(
        _verdict_item(
            "no bias, mixed requires_grad",
            main,
            ("no_bias",),
            lambda: [
                compare("out of apply(x, W)", out.get("nobias_out"), nobias_ref["out"]),
                compare("dW of apply(x, W)", out.get("nobias_dW"), nobias_ref["dW"]),
                compare("out of apply(x, W, None)", out.get("none_out"), nobias_ref["out"]),
                compare("dW of apply(x, W, None)", out.get("none_dW"), nobias_ref["dW"]),
                compare("dx when only the input requires grad", out.get("input_only_dx"), ref["dx"]),
                compare("db when only the bias requires grad", out.get("bias_only_db"), ref["db"]),
            ],
            0.5,
        )
    )
    sdata = func_inputs(_seed(seed, 1), 1)
    sref = reference.linear(sdata["x"], sdata["W"], sdata["b"], sdata["g"])
    report.add(
        _verdict_item(
            "N = 1",
            single,
            ("autograd",),
            lambda: [
                compare(k, single["outputs"].get(k), sref[k], batch_size=1) for k in ("out", "dx", "dW", "db")
            ],
            0.5,
        )
    )
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
            lambda: [compare("torch.func.grad dW", out.get("func_grad_dW"), ref["dW"])],
            1.0,
        )
    )
    after = main.get("inputs_after", {})
    report.add(_unchanged_item({k: (after.get(k), data[k]) for k in ("x", "W", "b")}, main, single))
    _notes(report, main, single)
    return report


LINEAR_FUNCTION_FUNC = register(
    Check("linear_function_func", "LinearFunctionFunc", FUNC_POINTS, collect_linear_function_func)
)


def check_linear_function_func(fn_cls: Any, *, seed: int = 0) -> float:
    """Grade ``LinearFunctionFunc`` (autograd, direct backward, vmap, torch.func.grad); return points."""
    return run_check(LINEAR_FUNCTION_FUNC, fn_cls, seed=seed)


# --------------------------------------------------------------------------------------------
# Exercise 2: LinearFunction with any number of leading batch dimensions
# --------------------------------------------------------------------------------------------

BATCHED_POINTS = 3.0
BATCHED_D, BATCHED_M = 5, 6
#: Leading shapes: pairwise distinct and distinct from D and M; a 1-D input has no leading axis.
BATCHED_CASES: dict[str, tuple[int, ...]] = {
    "input (2, 3, 4, D)": (2, 3, 4),
    "input (N=7, D)": (7,),
    "input (N=1, D)": (1,),
    "input (D,)": (),
}


def batched_inputs(seed: int, lead: tuple[int, ...]) -> dict[str, np.ndarray]:
    """x (*lead, D), W (M, D), b (M,) and an upstream g (*lead, M)."""
    rng = np.random.default_rng(seed)
    return {
        "x": rng.standard_normal((*lead, BATCHED_D)),
        "W": rng.standard_normal((BATCHED_M, BATCHED_D)) + 0.5,
        "b": rng.standard_normal(BATCHED_M),
        "g": rng.standard_normal((*lead, BATCHED_M)),
    }


def collect_batched_linear(fn_cls: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``LinearFunction`` on inputs with 0 to 3 leading axes."""
    label = getattr(fn_cls, "__name__", "LinearFunction")
    cases = {}
    for index, (case, lead) in enumerate(BATCHED_CASES.items()):
        data = batched_inputs(_seed(seed, index), lead)
        record = _new_record()
        x, W, b = _t(data["x"], True), _t(data["W"], True), _t(data["b"], True)

        def autograd_step(x=x, W=W, b=b, data=data) -> dict[str, Any]:
            out = fn_cls.apply(x, W, b)
            return {"out": freeze(out), **_grads(out, [x, W, b], _t(data["g"]), ["dx", "dW", "db"])}

        _step(record, "autograd", autograd_step, f"{label}.apply")
        if index == 0:

            def direct_step(x=x, W=W, b=b, data=data) -> dict[str, Any]:
                return _direct(fn_cls, fn_cls.apply(x, W, b), _t(data["g"]), names=["dx", "dW", "db"])

            def weight_only_step(data=data) -> dict[str, Any]:
                Ws = _t(data["W"], True)
                out = fn_cls.apply(_t(data["x"]), Ws)
                (dW,) = torch.autograd.grad(out, [Ws], _t(data["g"]))
                return {"weight_only_out": freeze(out), "weight_only_dW": freeze(dW)}

            _step(record, "direct", direct_step, f"{label}.backward")
            _step(record, "weight_only", weight_only_step, f"{label}.apply(x, W)")
        record["inputs_after"] = {"x": freeze(x), "W": freeze(W), "b": freeze(b)}
        cases[case] = record
    return {"check": "batched_linear", "seed": seed, "cases": cases}


def _batched_reference(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    xt, Wt, bt = (_t(data[k], True) for k in ("x", "W", "b"))
    out = F.linear(xt, Wt, bt)
    out.backward(_t(data["g"]))
    return {"out": freeze(out), "dx": freeze(xt.grad), "dW": freeze(Wt.grad), "db": freeze(bt.grad)}


def grade_batched_linear(evidence: Evidence) -> Report:
    """Grade: the (2, 3, 4, D) input: out (1), dx, dW, db (0.5 each); exact shapes of a direct backward
    call (0.5); weight only requiring grad, no bias (0.5); (N, D) input (0.5); N = 1 (0.5); a 1-D input
    (0.5); inputs unchanged (0.5)."""
    report = Report("LinearFunction with leading batch dimensions", BATCHED_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    labels = list(BATCHED_CASES)
    datas = {lab: batched_inputs(_seed(seed, i), BATCHED_CASES[lab]) for i, lab in enumerate(labels)}
    refs = {lab: _batched_reference(datas[lab]) for lab in labels}
    main = labels[0]
    rec, data, ref = cases[main], datas[main], refs[main]
    out = rec["outputs"]
    g2 = data["g"].reshape(-1, BATCHED_M)
    x2 = data["x"].reshape(-1, BATCHED_D)
    mistakes = {
        "out": {"the bias is missing": data["x"] @ data["W"].T},
        "dx": {},
        "dW": {"averaged instead of summed over the leading axes": g2.T @ x2 / g2.shape[0]},
        "db": {"averaged instead of summed over the leading axes": g2.mean(0)},
    }
    for name, weight in (("out", 1.0), ("dx", 0.5), ("dW", 0.5), ("db", 0.5)):
        report.add(
            _verdict_item(
                f"{name}, input (2, 3, 4, D)",
                rec,
                ("autograd",),
                lambda name=name: [compare(name, out.get(name), ref[name], mistakes=mistakes[name])],
                weight,
            )
        )
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
            lambda: [
                compare("out of apply(x, W)", out.get("weight_only_out"), wo_ref["out"]),
                compare("dW of apply(x, W)", out.get("weight_only_dW"), wo_ref["dW"]),
            ],
            0.5,
        )
    )
    for lab, name in zip(labels[1:], ("(N, D) input", "N = 1", "1-D input (D,)"), strict=True):
        report.add(
            _verdict_item(
                name,
                cases[lab],
                ("autograd",),
                lambda lab=lab: [
                    compare(k, cases[lab]["outputs"].get(k), refs[lab][k]) for k in ("out", "dx", "dW", "db")
                ],
                0.5,
            )
        )
    report.add(_all_unchanged_item(cases, datas))
    _notes(report, *cases.values())
    return report


def _all_unchanged_item(cases: dict[str, dict[str, Any]], datas: dict[str, dict[str, np.ndarray]]) -> Item:
    pairs = {}
    for lab, record in cases.items():
        after = record.get("inputs_after", {})
        pairs.update({f"{k} (case {lab})": (after.get(k), datas[lab][k]) for k in ("x", "W", "b")})
    return _unchanged_item(pairs, *cases.values())


BATCHED_LINEAR = register(
    Check(
        "batched_linear",
        "LinearFunction with leading batch dimensions",
        BATCHED_POINTS,
        collect_batched_linear,
    )
)


def check_batched_linear(fn_cls: Any, *, seed: int = 0) -> float:
    """Grade a ``LinearFunction`` on inputs (..., D) with 0 to 3 leading axes; return points."""
    return run_check(BATCHED_LINEAR, fn_cls, seed=seed)


# --------------------------------------------------------------------------------------------
# Exercise 3: double backward (Cube) and once_differentiable (NumpyCube)
# --------------------------------------------------------------------------------------------

DOUBLE_POINTS = 3.0
DOUBLE_SHAPE = (4, 3)
#: What torch says when a once_differentiable backward is differentiated.
ONCE_DIFFERENTIABLE_MESSAGE = "marked with @once_differentiable"


def double_inputs(seed: int) -> dict[str, np.ndarray]:
    """x, an upstream gradient g and a direction v, all (4, 3)."""
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(DOUBLE_SHAPE) for k in ("x", "g", "v")}


def collect_double_backward(cube_cls: Any, numpy_cube_cls: Any, *, seed: int = 0) -> Evidence:
    """Second derivatives of the learner's ``Cube``; first derivative and the error of ``NumpyCube``."""
    data = double_inputs(seed)
    cube, npc = _new_record(), _new_record()
    x = _t(data["x"], True)

    def cube_step() -> dict[str, Any]:
        y = cube_cls.apply(x)
        (dx,) = torch.autograd.grad(y, [x], _t(data["g"]))
        return {"y": freeze(y), "dx": freeze(dx)}

    def cube_second_step() -> dict[str, Any]:
        g = _t(data["g"], True)
        (dx,) = torch.autograd.grad(cube_cls.apply(x), [x], g, create_graph=True)
        # d/dx and d/dg of <dx, v>: the two halves of what gradgradcheck checks
        hx, hg = torch.autograd.grad(dx, [x, g], _t(data["v"]), allow_unused=True)
        return {"hx": freeze(hx), "hg": freeze(hg)}

    def cube_direct() -> dict[str, Any]:
        return _direct(cube_cls, cube_cls.apply(x), _t(data["g"]), names=["dx"])

    _step(cube, "autograd", cube_step, f"{getattr(cube_cls, '__name__', 'Cube')}")
    _step(
        cube, "second", cube_second_step, f"the second derivative of {getattr(cube_cls, '__name__', 'Cube')}"
    )
    _step(cube, "direct", cube_direct, f"{getattr(cube_cls, '__name__', 'Cube')}.backward")
    cube["inputs_after"] = {"x": freeze(x)}

    xn = _t(data["x"], True)

    def numpy_step() -> dict[str, Any]:
        y = numpy_cube_cls.apply(xn)
        (dx,) = torch.autograd.grad(y, [xn], _t(data["g"]))
        return {"y": freeze(y), "dx": freeze(dx)}

    def twice_step() -> dict[str, Any]:
        # the upstream gradient requires grad, so a second derivative is asked for through backward
        g = _t(data["g"], True)
        y = numpy_cube_cls.apply(xn)
        (dx,) = torch.autograd.grad(y, [xn], g, create_graph=True)
        try:
            (dx * _t(data["v"])).sum().backward()
        except Exception as exc:  # noqa: BLE001 - the exception is the evidence
            return {"twice_error_type": type(exc).__name__, "twice_error": str(exc)[:300]}
        return {"twice_error_type": None, "twice_error": None}

    _step(npc, "autograd", numpy_step, f"{getattr(numpy_cube_cls, '__name__', 'NumpyCube')}")
    _step(
        npc, "twice", twice_step, f"differentiating {getattr(numpy_cube_cls, '__name__', 'NumpyCube')} twice"
    )
    npc["inputs_after"] = {"x": freeze(xn)}
    return {"check": "double_backward", "seed": seed, "cases": {"Cube": cube, "NumpyCube": npc}}


def grade_double_backward(evidence: Evidence) -> Report:
    """Grade: Cube's output and gradient (0.5), the exact shape of a direct backward call (0.5),
    the second derivative through x (1) and through grad_output (0.5); NumpyCube's output and
    gradient (1); differentiating NumpyCube twice raises torch's once_differentiable error (0.5: the
    stub carries the decorator, the item catches a learner who removes it or bypasses it);
    inputs unchanged (0.5)."""
    report = Report("Cube and NumpyCube", DOUBLE_POINTS)
    data = double_inputs(evidence["seed"])
    cube, npc = evidence["cases"]["Cube"], evidence["cases"]["NumpyCube"]
    ref = reference.cube_second_derivatives(data["x"], data["g"], data["v"])
    x, g, v = data["x"], data["g"], data["v"]
    co, no = cube["outputs"], npc["outputs"]
    report.add(
        _verdict_item(
            "Cube: y and dx",
            cube,
            ("autograd",),
            lambda: [
                compare("y", co.get("y"), ref["y"]),
                compare("dx", co.get("dx"), ref["dx"], mistakes={"grad_output is ignored": 3 * x**2}),
            ],
            0.5,
        )
    )
    report.add(_exact_shapes_item("Cube: direct backward", cube, {"dx": DOUBLE_SHAPE}, 0.5))
    second = {
        **cube,
        "errors": {**cube["errors"], "second": _second_hint(cube["errors"].get("second", "not run"))},
    }
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
            ("autograd",),
            lambda: [compare("y", no.get("y"), ref["y"]), compare("dx", no.get("dx"), ref["dx"])],
            1.0,
        )
    )
    report.add(_once_differentiable_item(npc, v))
    report.add(
        _unchanged_item(
            {
                "x (Cube)": (cube.get("inputs_after", {}).get("x"), x),
                "x (NumpyCube)": (npc.get("inputs_after", {}).get("x"), x),
            },
            cube,
            npc,
        )
    )
    _notes(report, cube, npc)
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


def _once_differentiable_item(record: dict[str, Any], v: np.ndarray) -> Item:
    name, weight = "NumpyCube raises when differentiated twice", 0.5
    error = _failed(record, "twice")
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


DOUBLE_BACKWARD = register(
    Check("double_backward", "Cube and NumpyCube", DOUBLE_POINTS, collect_double_backward)
)


def check_double_backward(cube_cls: Any, numpy_cube_cls: Any, *, seed: int = 0) -> float:
    """Grade ``Cube``'s second derivatives and ``NumpyCube``'s once_differentiable error; return points."""
    return run_check(DOUBLE_BACKWARD, cube_cls, numpy_cube_cls, seed=seed)


# --------------------------------------------------------------------------------------------
# Exercise 4: mark_non_differentiable, mark_dirty, set_materialize_grads
# --------------------------------------------------------------------------------------------

CTX_POINTS = 3.0
CTX_N, CTX_C = 4, 5


def ctx_inputs(seed: int) -> dict[str, np.ndarray]:
    """Scores (4, 5) for MaxWithIndex with an upstream (4,); a (4, 5) input with exact zeros for the
    in-place ReLU with an upstream; a (6,) input for SquareAndCube with two upstreams."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((CTX_N, CTX_C))
    a[0, :2] = 0.0
    return {
        "s": rng.standard_normal((CTX_N, CTX_C)),
        "gv": rng.standard_normal(CTX_N),
        "a": a,
        "ga": rng.standard_normal((CTX_N, CTX_C)),
        "z": rng.standard_normal(6),
        "g2": rng.standard_normal(6),
        "g3": rng.standard_normal(6),
    }


def collect_ctx_features(max_cls: Any, relu_cls: Any, sc_cls: Any, *, seed: int = 0) -> Evidence:
    """Run ``MaxWithIndex``, ``InplaceReLU`` and ``SquareAndCube``; record outputs, gradients and flags."""
    data = ctx_inputs(seed)
    mx, rl, sc = _new_record(), _new_record(), _new_record()
    s = _t(data["s"], True)

    def max_step() -> dict[str, Any]:
        values, indices = max_cls.apply(s)
        (ds,) = torch.autograd.grad(values, [s], _t(data["gv"]))
        return {
            "values": freeze(values),
            "indices": freeze(indices),
            "indices_requires_grad": bool(getattr(indices, "requires_grad", True)),
            "values_requires_grad": bool(getattr(values, "requires_grad", False)),
            "ds": freeze(ds),
        }

    def max_direct() -> dict[str, Any]:
        values, indices = max_cls.apply(s)
        return _direct(max_cls, values, _t(data["gv"]), torch.zeros_like(indices), names=["ds"])

    _step(mx, "autograd", max_step, getattr(max_cls, "__name__", "MaxWithIndex"))
    _step(mx, "direct", max_direct, f"{getattr(max_cls, '__name__', 'MaxWithIndex')}.backward")
    mx["inputs_after"] = {"s": freeze(s)}

    def relu_step() -> dict[str, Any]:
        a = _t(data["a"], True)
        h = a * 1.0  # a non-leaf: an in-place operation on a leaf that requires grad is refused
        version = h._version
        out = relu_cls.apply(h)
        same = out is h
        bumped = h._version > version
        (da,) = torch.autograd.grad(out, [a], _t(data["ga"]))
        return {
            "same_object": same,
            "version_bumped": bumped,
            "out": freeze(out),
            "h_after": freeze(h),
            "da": freeze(da),
        }

    _step(rl, "autograd", relu_step, getattr(relu_cls, "__name__", "InplaceReLU"))

    z = _t(data["z"], True)

    def sc_step() -> dict[str, Any]:
        sq, cu = sc_cls.apply(z)
        (d_both,) = torch.autograd.grad([sq, cu], [z], [_t(data["g2"]), _t(data["g3"])])
        sq, cu = sc_cls.apply(z)
        (d_sq,) = torch.autograd.grad(sq, [z], _t(data["g2"]))
        sq, cu = sc_cls.apply(z)
        (d_cu,) = torch.autograd.grad(cu, [z], _t(data["g3"]))
        return {
            "sq": freeze(sq),
            "cu": freeze(cu),
            "d_both": freeze(d_both),
            "d_sq": freeze(d_sq),
            "d_cu": freeze(d_cu),
        }

    def sc_direct() -> dict[str, Any]:
        sq, _ = sc_cls.apply(z)
        with torch.no_grad():
            only_sq = sc_cls.backward(sq.grad_fn, _t(data["g2"]), None)
            only_cu = sc_cls.backward(sq.grad_fn, None, _t(data["g3"]))
        first = only_sq[0] if isinstance(only_sq, (tuple, list)) else only_sq
        second = only_cu[0] if isinstance(only_cu, (tuple, list)) else only_cu
        return {"direct_only_sq": freeze(first), "direct_only_cu": freeze(second)}

    _step(sc, "autograd", sc_step, getattr(sc_cls, "__name__", "SquareAndCube"))
    _step(
        sc,
        "direct",
        sc_direct,
        f"{getattr(sc_cls, '__name__', 'SquareAndCube')}.backward with a None gradient",
    )
    sc["inputs_after"] = {"z": freeze(z)}
    return {"check": "ctx_features", "seed": seed, "cases": {"max": mx, "relu": rl, "square_cube": sc}}


def grade_ctx_features(evidence: Evidence) -> Report:
    """Grade: MaxWithIndex values and indices (0.5), indices non-differentiable (0.5), its gradient
    with exact shape from a direct call (0.5); InplaceReLU returns its input object, modified (0.5),
    with the right values and gradient (0.5); SquareAndCube outputs and gradients when one or both
    outputs are used (0.5), and its backward called directly with a None gradient (0.5)."""
    report = Report("MaxWithIndex, InplaceReLU and SquareAndCube", CTX_POINTS)
    data = ctx_inputs(evidence["seed"])
    cases = evidence["cases"]
    mx, rl, sc = cases["max"], cases["relu"], cases["square_cube"]
    ref = reference.ctx_features(data)

    mo = mx["outputs"]
    report.add(
        _verdict_item(
            "MaxWithIndex: values and indices",
            mx,
            ("autograd",),
            lambda: [
                compare("values", mo.get("values"), ref["values"]),
                compare("indices", mo.get("indices"), ref["indices"], dtype=np.int64),
            ],
            0.5,
        )
    )
    report.add(_non_differentiable_item(mx))
    report.add(
        _verdict_item(
            "MaxWithIndex: gradient",
            mx,
            ("autograd", "direct"),
            lambda: [
                compare("grad of scores", mo.get("ds"), ref["ds"]),
                compare("grad of scores from a direct backward call", mo.get("direct_ds"), ref["ds"]),
            ],
            0.5,
        )
    )

    ro = rl["outputs"]
    report.add(_dirty_item(rl))
    report.add(
        _verdict_item(
            "InplaceReLU: values and gradient",
            rl,
            ("autograd",),
            lambda: [
                compare("out", ro.get("out"), ref["relu"]),
                compare("the input after the call", ro.get("h_after"), ref["relu"]),
                compare("grad of the input", ro.get("da"), ref["da"]),
            ],
            0.5,
        )
    )

    so = sc["outputs"]
    report.add(
        _verdict_item(
            "SquareAndCube: outputs and gradients",
            sc,
            ("autograd",),
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
            ("direct",),
            lambda: [
                compare("backward(ctx, g2, None)", so.get("direct_only_sq"), ref["d_sq"]),
                compare("backward(ctx, None, g3)", so.get("direct_only_cu"), ref["d_cu"]),
            ],
            0.5,
        )
    )
    _notes(report, mx, rl, sc)
    if not (
        _unchanged_item({"scores": (mx.get("inputs_after", {}).get("s"), data["s"])}).passed
        and _unchanged_item({"z": (sc.get("inputs_after", {}).get("z"), data["z"])}).passed
    ):
        report.notes.append(
            "MaxWithIndex or SquareAndCube changed its input in place (only InplaceReLU should)."
        )
    return report


def _non_differentiable_item(record: dict[str, Any]) -> Item:
    name, weight = "MaxWithIndex: indices not differentiable", 0.5
    error = _failed(record, "autograd")
    if error:
        return Item(name, False, error, weight)
    out = record["outputs"]
    if out.get("indices_requires_grad") is not False:
        return Item(
            name,
            False,
            "the indices require grad: mark them with ctx.mark_non_differentiable(indices) in forward.",
            weight,
        )
    if out.get("values_requires_grad") is not True:
        return Item(
            name, False, "the values do not require grad: only the indices are non-differentiable.", weight
        )
    return Item(name, True, "indices.requires_grad is False, values.requires_grad is True", weight)


def _dirty_item(record: dict[str, Any]) -> Item:
    name, weight = "InplaceReLU: in place, marked dirty", 0.5
    error = _failed(record, "autograd")
    if error:
        return Item(name, False, error, weight)
    out = record["outputs"]
    if out.get("version_bumped") is not True:
        return Item(
            name,
            False,
            "the input was not modified in place (its version counter did not change): use clamp_ "
            "or an indexed assignment on the input itself.",
            weight,
        )
    if out.get("same_object") is not True:
        return Item(
            name,
            False,
            "the output is not the input object: call ctx.mark_dirty(x) and return x itself.",
            weight,
        )
    return Item(name, True, "returns its input, modified in place (version counter bumped)", weight)


CTX_FEATURES = register(
    Check("ctx_features", "MaxWithIndex, InplaceReLU and SquareAndCube", CTX_POINTS, collect_ctx_features)
)


def check_ctx_features(max_cls: Any, relu_cls: Any, sc_cls: Any, *, seed: int = 0) -> float:
    """Grade ``MaxWithIndex``, ``InplaceReLU`` and ``SquareAndCube``; print feedback; return points."""
    return run_check(CTX_FEATURES, max_cls, relu_cls, sc_cls, seed=seed)


# --------------------------------------------------------------------------------------------
# Exercise 5: SoftmaxCrossEntropy, fused and stable
# --------------------------------------------------------------------------------------------

SCE_POINTS = 3.0
SCE_CASES: dict[str, tuple[int, int, float]] = {
    "N=5, C=3": (5, 3, 1.0),
    "N=1, C=3": (1, 3, 1.0),
    "logits ~1000, N=4, C=6": (4, 6, 1000.0),
}


def sce_inputs(seed: int, n: int, c: int, scale: float) -> dict[str, Any]:
    """Scores (n, c) times ``scale``, integer targets (n,), and a random upstream scalar in [0.5, 2]."""
    rng = np.random.default_rng(seed)
    return {
        "scores": rng.standard_normal((n, c)) * scale,
        "y": rng.integers(0, c, n).astype(np.int64),
        "u": float(rng.uniform(0.5, 2.0)) * float(rng.choice([-1.0, 1.0])),
    }


def collect_softmax_cross_entropy_function(fn_cls: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``SoftmaxCrossEntropy`` on each case: loss, gradient, a direct backward call."""
    label = getattr(fn_cls, "__name__", "SoftmaxCrossEntropy")
    cases = {}
    for index, (case, dims) in enumerate(SCE_CASES.items()):
        data = sce_inputs(_seed(seed, index), *dims)
        record = _new_record()
        scores, y = _t(data["scores"], True), _t(data["y"])
        upstream = torch.tensor(data["u"], dtype=DTYPE)

        def autograd_step(scores=scores, y=y, upstream=upstream) -> dict[str, Any]:
            loss = fn_cls.apply(scores, y)
            (ds,) = torch.autograd.grad(loss, [scores], upstream)
            return {"loss": freeze(loss), "dscores": freeze(ds)}

        def direct_step(scores=scores, y=y, upstream=upstream) -> dict[str, Any]:
            return _direct(fn_cls, fn_cls.apply(scores, y), upstream, names=["dscores", "dtargets"])

        _step(record, "autograd", autograd_step, f"{label}.apply")
        _step(record, "direct", direct_step, f"{label}.backward")
        record["inputs_after"] = {"scores": freeze(scores), "y": freeze(y)}
        cases[case] = record
    return {"check": "softmax_cross_entropy_function", "seed": seed, "cases": cases}


def grade_softmax_cross_entropy_function(evidence: Evidence) -> Report:
    """Grade: loss (1) and dscores for a random upstream scalar (1) for N=5, C=3; N = 1 (0.5); logits
    of magnitude 1000 (0.5); a direct backward call returns dscores (N, C) and None for the targets
    (0.5); inputs unchanged (0.5)."""
    report = Report("SoftmaxCrossEntropy", SCE_POINTS)
    seed, cases = evidence["seed"], evidence["cases"]
    labels = list(SCE_CASES)
    datas = {lab: sce_inputs(_seed(seed, i), *SCE_CASES[lab]) for i, lab in enumerate(labels)}
    refs = {}
    for lab, data in datas.items():
        r = reference.softmax_cross_entropy(data["scores"], data["y"])
        refs[lab] = {"loss": r["loss"], "dscores": r["dscores"] * data["u"], "dscores_at_1": r["dscores"]}
    main = labels[0]
    rec, data, ref = cases[main], datas[main], refs[main]
    n = data["scores"].shape[0]
    out = rec["outputs"]
    report.add(
        _verdict_item(
            "loss",
            rec,
            ("autograd",),
            lambda: [compare("loss", out.get("loss"), ref["loss"], tol=LOSS, batch_size=n)],
            1.0,
        )
    )
    report.add(
        _verdict_item(
            "dscores",
            rec,
            ("autograd",),
            lambda: [
                compare(
                    "dscores",
                    out.get("dscores"),
                    ref["dscores"],
                    batch_size=n,
                    mistakes={"grad_output is ignored (backward must multiply by it)": ref["dscores_at_1"]},
                )
            ],
            1.0,
        )
    )
    for lab, name in ((labels[1], "N = 1"), (labels[2], "logits of magnitude 1000")):
        report.add(
            _verdict_item(
                name,
                cases[lab],
                ("autograd",),
                lambda lab=lab: [
                    compare(
                        "loss",
                        cases[lab]["outputs"].get("loss"),
                        refs[lab]["loss"],
                        tol=LOSS,
                        batch_size=datas[lab]["scores"].shape[0],
                    ),
                    compare(
                        "dscores",
                        cases[lab]["outputs"].get("dscores"),
                        refs[lab]["dscores"],
                        mistakes={"grad_output is ignored": refs[lab]["dscores_at_1"]},
                        batch_size=datas[lab]["scores"].shape[0],
                    ),
                ],
                0.5,
            )
        )
    report.add(
        _exact_shapes_item("direct backward", rec, {"dscores": data["scores"].shape, "dtargets": None}, 0.5)
    )
    pairs = {}
    for lab, record in cases.items():
        after = record.get("inputs_after", {})
        pairs[f"scores ({lab})"] = (after.get("scores"), datas[lab]["scores"])
        pairs[f"targets ({lab})"] = (after.get("y"), datas[lab]["y"])
    report.add(_unchanged_item(pairs, *cases.values()))
    _notes(report, *cases.values())
    return report


SOFTMAX_CROSS_ENTROPY_FUNCTION = register(
    Check(
        "softmax_cross_entropy_function",
        "SoftmaxCrossEntropy",
        SCE_POINTS,
        collect_softmax_cross_entropy_function,
    )
)


def check_softmax_cross_entropy_function(fn_cls: Any, *, seed: int = 0) -> float:
    """Grade ``SoftmaxCrossEntropy`` against ``F.cross_entropy`` in float64; return points."""
    return run_check(SOFTMAX_CROSS_ENTROPY_FUNCTION, fn_cls, seed=seed)


# --------------------------------------------------------------------------------------------
# Exercise 6: LegendrePolynomial3 and the curve fit
# --------------------------------------------------------------------------------------------

LEGENDRE_POINTS = 1.5
LEGENDRE_SHAPE = (7,)


def legendre_inputs(seed: int) -> dict[str, np.ndarray]:
    """x (7,) in [-2, 2] and an upstream gradient (7,)."""
    rng = np.random.default_rng(seed)
    return {"x": rng.uniform(-2.0, 2.0, LEGENDRE_SHAPE), "g": rng.standard_normal(LEGENDRE_SHAPE)}


def collect_legendre(fn_cls: Any, *, seed: int = 0) -> Evidence:
    """Run the learner's ``LegendrePolynomial3``: output, gradient, a direct backward call."""
    label = getattr(fn_cls, "__name__", "LegendrePolynomial3")
    data = legendre_inputs(seed)
    record = _new_record()
    x = _t(data["x"], True)

    def autograd_step() -> dict[str, Any]:
        y = fn_cls.apply(x)
        (dx,) = torch.autograd.grad(y, [x], _t(data["g"]))
        return {"y": freeze(y), "dx": freeze(dx)}

    def direct_step() -> dict[str, Any]:
        return _direct(fn_cls, fn_cls.apply(x), _t(data["g"]), names=["dx"])

    def sum_step() -> dict[str, Any]:
        # y.sum() hands backward an expanded, stride-0 tensor of ones: writing into it raises
        (dx,) = torch.autograd.grad(fn_cls.apply(x).sum(), [x])
        return {"dx_sum": freeze(dx)}

    _step(record, "autograd", autograd_step, f"{label}.apply")
    _step(record, "sum", sum_step, f"{label}.apply(x).sum() backward")
    _step(record, "direct", direct_step, f"{label}.backward")
    record["inputs_after"] = {"x": freeze(x)}
    return {"check": "legendre", "seed": seed, "cases": {"x (7,)": record}}


def grade_legendre(evidence: Evidence) -> Report:
    """Grade: P3(x) (1), its gradient for a random upstream gradient (1), the exact shape of a direct
    backward call (0.5), the gradient of y.sum(), whose upstream gradient is a stride-0 tensor that
    must not be written to (0.5), inputs unchanged (0.5)."""
    report = Report("LegendrePolynomial3", LEGENDRE_POINTS)
    data = legendre_inputs(evidence["seed"])
    (rec,) = evidence["cases"].values()
    ref = reference.legendre3(data["x"], data["g"])
    x, g = data["x"], data["g"]
    out = rec["outputs"]
    report.add(
        _verdict_item(
            "y",
            rec,
            ("autograd",),
            lambda: [
                compare("y", out.get("y"), ref["y"], mistakes={"the factor 0.5 is missing": 5 * x**3 - 3 * x})
            ],
            1.0,
        )
    )
    report.add(
        _verdict_item(
            "dx",
            rec,
            ("autograd",),
            lambda: [
                compare(
                    "dx",
                    out.get("dx"),
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
            ("sum",),
            lambda: [compare("dx of y.sum()", out.get("dx_sum"), ones_ref)],
            0.5,
        )
    )
    report.add(_unchanged_item({"x": (rec.get("inputs_after", {}).get("x"), x)}, rec))
    _notes(report, rec)
    return report


LEGENDRE = register(Check("legendre", "LegendrePolynomial3", LEGENDRE_POINTS, collect_legendre))


def check_legendre(fn_cls: Any, *, seed: int = 0) -> float:
    """Grade ``LegendrePolynomial3`` (values, gradient, direct backward); return points."""
    return run_check(LEGENDRE, fn_cls, seed=seed)


FIT_LEGENDRE_POINTS = 2.0
#: The tutorial's setup: 2000 points on [-pi, pi], start a=0, b=-1, c=0, d=0.3, lr 5e-6, 2000 steps.
FIT_POINTS_N = 2000
FIT_INIT = (0.0, -1.0, 0.0, 0.3)
FIT_LR = 5e-6
FIT_STEPS = 2000


def fit_legendre_data(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """x on [-pi, pi] and y = A sin(x); A = 1 for seed 0 (the tutorial), in [0.8, 1.2] otherwise."""
    x = np.linspace(-math.pi, math.pi, FIT_POINTS_N)
    amplitude = 1.0 if seed == 0 else float(np.random.default_rng(seed).uniform(0.8, 1.2))
    return x, amplitude * np.sin(x)


def _as_float(value: Any) -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"a tensor of shape {tuple(value.shape)}, expected one number")
        return float(value.detach().reshape(()).item())
    if isinstance(value, np.ndarray) and value.size != 1:
        raise ValueError(f"an array of shape {value.shape}, expected one number")
    return float(value)


def collect_fit_legendre(fit_legendre: Any, *, seed: int = 0) -> Evidence:
    """Call the learner's ``fit_legendre(x, y)`` and record the four numbers it returns."""
    x, y = fit_legendre_data(seed)
    record = _new_record()

    def fit_step() -> dict[str, Any]:
        result = fit_legendre(_t(x), _t(y))
        if not isinstance(result, (tuple, list)) or len(result) != 4:
            kind = type(result).__name__
            raise TypeError(f"fit_legendre should return (a, b, c, d), but returned a {kind}")
        return {"params": np.array([_as_float(v) for v in result], dtype=np.float64)}

    _step(record, "fit", fit_step, "fit_legendre")
    return {"check": "fit_legendre", "seed": seed, "cases": {"fit": record}}


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


def grade_fit_legendre(evidence: Evidence) -> Report:
    """Grade: four finite numbers returned (0.5), a loss below the starting point's (0.5), and a loss
    within 5% of what the tutorial's loop reaches from the same start (1)."""
    report = Report("fit_legendre", FIT_LEGENDRE_POINTS)
    seed = evidence["seed"]
    (rec,) = evidence["cases"].values()
    error = _failed(rec, "fit")
    names = ("returns (a, b, c, d)", "loss went down", "reaches the tutorial's loss")
    if error:
        for name, weight in zip(names, (0.5, 0.5, 1.0), strict=True):
            report.add(Item(name, False, error, weight))
        _notes(report, rec)
        return report
    params = rec["outputs"].get("params")
    x, y = fit_legendre_data(seed)
    if not isinstance(params, np.ndarray) or params.shape != (4,) or not np.all(np.isfinite(params)):
        message = f"the parameters are not four finite numbers: {params}"
        if isinstance(params, np.ndarray) and params.shape == (4,):
            message += ": training diverged. Is the update p -= lr * p.grad (a + climbs), with lr 5e-6?"
        report.add(Item(names[0], False, message, 0.5))
        report.add(Item(names[1], False, "not checked: no usable parameters.", 0.5))
        report.add(Item(names[2], False, "not checked: no usable parameters.", 1.0))
        _notes(report, rec)
        return report
    report.add(Item(names[0], True, "a={:.4g}, b={:.4g}, c={:.4g}, d={:.4g}".format(*params), 0.5))
    loss = legendre_model_loss(params, x, y)
    start = legendre_model_loss(np.array(FIT_INIT), x, y)
    target = _reference_fit_loss(seed)
    went_down = np.isfinite(loss) and loss < start
    report.add(
        Item(
            names[1],
            bool(went_down),
            f"sum of squared errors {loss:.4g}, from {start:.4g} at the start"
            + ("" if went_down else ": it should go down. Is the update p -= lr * p.grad?"),
            0.5,
        )
    )
    reached = bool(np.isfinite(loss) and loss <= target * (1 + TRAINING.rtol) + TRAINING.atol)
    message = f"sum of squared errors {loss:.4g}; the tutorial's loop reaches {target:.4g}"
    if not reached:
        message += (
            f" and a fit should be within {TRAINING.rtol:.0%} of it. Start from a=0, b=-1, c=0, d=0.3 with "
            f"lr={FIT_LR:g} for {FIT_STEPS} steps, the loss being the sum (not the mean) of squared errors."
        )
    report.add(Item(names[2], reached, message, 1.0))
    _notes(report, rec)
    return report


FIT_LEGENDRE = register(Check("fit_legendre", "fit_legendre", FIT_LEGENDRE_POINTS, collect_fit_legendre))


def check_fit_legendre(fit_legendre: Any, *, seed: int = 0) -> float:
    """Run ``fit_legendre(x, y)``; recompute its loss from the returned (a, b, c, d); return points."""
    return run_check(FIT_LEGENDRE, fit_legendre, seed=seed)


__all__ = [
    "check_batched_linear",
    "check_ctx_features",
    "check_double_backward",
    "check_fit_legendre",
    "check_legendre",
    "check_linear_function_func",
    "check_softmax_cross_entropy_function",
]
