"""Evidence as JSON: every allowed value survives the trip, anything else is refused with EvidenceError.

The text :func:`autograder.checks.evidence.loads` reads comes from the learner's kernel, so for any string it
must either return plain data or raise :class:`EvidenceError`; the grader ignores evidence on that error
only, so any other exception would crash the grading of the whole notebook.
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest
from check_helpers import solution_cells

from autograder.checks.evidence import (
    MAX_EVIDENCE_BYTES,
    MAX_TEXT,
    EvidenceError,
    NotAnArray,
    decode,
    dumps,
    encode,
    loads,
)
from autograder.checks.linear_layer import collect_linear_layer
from autograder.grading.linear_layer import grade_linear_layer


def roundtrip(value):
    return loads(dumps(value))


def assert_same_array(got, expected: np.ndarray) -> None:
    assert isinstance(got, np.ndarray)
    assert got.dtype == expected.dtype
    assert got.shape == expected.shape
    assert np.array_equal(got, expected, equal_nan=expected.dtype.kind == "f")
    assert got.flags.writeable and got.flags.c_contiguous


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------

BASE = np.arange(24, dtype=np.float64).reshape(4, 6) * 0.37 - 2.0

ARRAYS = {
    "0-d float64 (a loss)": np.array(1.25),
    "0-d int64": np.array(-7, dtype=np.int64),
    "0-d bool": np.array(True),
    "empty (0,)": np.zeros((0,)),
    "empty (0, 3)": np.zeros((0, 3), dtype=np.float32),
    "empty (3, 0, 2) int": np.zeros((3, 0, 2), dtype=np.int32),
    "2-d float64": BASE,
    "transposed": BASE.T,
    "every other column": BASE[:, ::2],
    "reversed rows": BASE[::-1],
    "fortran order": np.asfortranarray(BASE),
    "broadcast view (stride 0)": np.broadcast_to(np.arange(3.0), (4, 3)),
    "float16": BASE.astype(np.float16),
    "float32": BASE.astype(np.float32),
    "big-endian float64": BASE.astype(">f8"),
    "int8": np.array([-128, 0, 127], dtype=np.int8),
    "int64": np.array([-(2**63), 2**63 - 1], dtype=np.int64),
    "uint8": np.array([0, 255], dtype=np.uint8),
    "uint64": np.array([0, 2**64 - 1], dtype=np.uint64),
    "bool": np.array([[True, False], [False, True]]),
    "nan and inf": np.array([np.nan, np.inf, -np.inf, 0.0, -0.0]),
    "3-d": np.arange(60, dtype=np.float64).reshape(3, 4, 5),
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_arrays_round_trip_exactly(name: str) -> None:
    value = ARRAYS[name]
    got = roundtrip(value)
    assert_same_array(got, np.array(value, order="C"))


def test_a_non_contiguous_array_is_encoded_in_logical_order() -> None:
    data = encode(BASE.T)
    assert data["shape"] == [6, 4]
    assert data["dtype"] == "<f8"
    raw = base64.b64decode(data["__ndarray__"])
    assert raw == np.ascontiguousarray(BASE.T).tobytes()


def test_a_zero_d_array_keeps_its_shape() -> None:
    data = encode(np.array(3.5))
    assert data["shape"] == []
    got = roundtrip(np.array(3.5))
    assert got.shape == () and got.item() == 3.5


def test_a_decoded_array_owns_its_memory() -> None:
    got = roundtrip(np.arange(4.0))
    got[0] = 100.0
    assert got.tolist() == [100.0, 1.0, 2.0, 3.0]


def test_plain_values_round_trip() -> None:
    value = {
        "none": None,
        "true": True,
        "false": False,
        "int": -3,
        "big int": 2**70,
        "float": 0.1,
        "text": "naïve ∂L/∂x",
        "empty list": [],
        "empty dict": {},
    }
    assert roundtrip(value) == value


def test_nan_and_inf_as_python_floats_round_trip() -> None:
    got = roundtrip({"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "list": [math.nan, 1.0]})
    assert math.isnan(got["nan"]) and math.isnan(got["list"][0])
    assert got["inf"] == math.inf and got["-inf"] == -math.inf and got["list"][1] == 1.0


def test_numpy_scalars_become_python_numbers() -> None:
    got = roundtrip([np.float64(1.5), np.float32(0.5), np.int64(-2), np.uint8(7), np.bool_(True)])
    assert got == [1.5, 0.5, -2, 7, True]
    assert [type(v) for v in got] == [float, float, int, int, bool]


def test_not_an_array_round_trips() -> None:
    assert roundtrip(NotAnArray("list")) == NotAnArray("list")
    assert encode(NotAnArray("str")) == {"__not_an_array__": "str"}


def test_nested_evidence_round_trips() -> None:
    value = {
        "check": "linear_layer",
        "seed": 7,
        "cases": {
            "N=4": {
                "outputs": {"out": BASE, "dx": NotAnArray("list"), "db": None},
                "error": None,
                "notes": ["a warning", "another"],
                "inputs_after": {"x": BASE.T, "flags": np.array([True, False])},
            },
            "N=1": {"outputs": {}, "error": "NotImplementedError", "notes": [], "inputs_after": {}},
        },
        "deep": [[[{"a": [np.array(2.0)]}]]],
    }
    got = roundtrip(value)
    case = got["cases"]["N=4"]
    assert got["check"] == "linear_layer" and got["seed"] == 7
    assert_same_array(case["outputs"]["out"], BASE)
    assert case["outputs"]["dx"] == NotAnArray("list")
    assert case["outputs"]["db"] is None
    assert case["error"] is None and case["notes"] == ["a warning", "another"]
    assert_same_array(case["inputs_after"]["x"], np.ascontiguousarray(BASE.T))
    assert_same_array(case["inputs_after"]["flags"], np.array([True, False]))
    assert got["cases"]["N=1"] == value["cases"]["N=1"]
    assert_same_array(got["deep"][0][0][0]["a"][0], np.array(2.0))


def test_tuples_become_lists_and_keys_become_strings() -> None:
    assert roundtrip({1: (1, 2), "t": ((3,), [4])}) == {"1": [1, 2], "t": [[3], [4]]}


def test_dumps_is_compact_json_text() -> None:
    text = dumps({"a": [1, None, True]})
    assert text == '{"a":[1,null,true]}'


# ---------------------------------------------------------------------------------------------
# Values that are not plain data are encoded as NotAnArray, never a failure
# ---------------------------------------------------------------------------------------------


class Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "marker"),
    [
        (np.array([1, "a"], dtype=object), "ndarray of dtype object"),
        (np.array([None, None]), "ndarray of dtype object"),
        (np.array(["a", "b"]), "ndarray of dtype <U1"),
        (np.array([1 + 2j]), "ndarray of dtype complex128"),
        (np.array(["2024-01-01"], dtype="datetime64[D]"), "ndarray of dtype datetime64[D]"),
        (np.zeros(2, dtype=[("a", "<f8")]), "ndarray of dtype [('a', '<f8')]"),
        (Opaque(), "Opaque"),
        (object(), "object"),
        ({1, 2}, "set"),
        (b"bytes", "bytes"),
        (1 + 2j, "complex"),
        (np.complex128(1j), "complex128"),
        (len, "builtin_function_or_method"),
    ],
)
def test_values_that_are_not_plain_data_become_not_an_array(value, marker: str) -> None:
    assert encode(value) == {"__not_an_array__": marker}
    assert roundtrip(value) == NotAnArray(marker)
    assert roundtrip({"outputs": {"out": value}}) == {"outputs": {"out": NotAnArray(marker)}}


# ---------------------------------------------------------------------------------------------
# Rejections
# ---------------------------------------------------------------------------------------------


def array_text(raw: bytes = b"\0" * 16, dtype="<f8", shape=(2,), b64: str | None = None) -> str:
    data = {"__ndarray__": b64 if b64 is not None else base64.b64encode(raw).decode(), "dtype": dtype}
    data["shape"] = list(shape) if isinstance(shape, tuple) else shape
    return json.dumps({"out": data})


def test_array_text_helper_is_valid_when_left_alone() -> None:
    assert_same_array(loads(array_text())["out"], np.zeros(2))


@pytest.mark.parametrize(
    ("dtype", "message"),
    [
        ("|O", "array of dtype object is not allowed in evidence"),
        ("<U1", "array of dtype <U1 is not allowed in evidence"),
        ("|S8", "array of dtype |S8 is not allowed in evidence"),
        ("<c16", "array of dtype complex128 is not allowed in evidence"),
        ("<M8[D]", "array of dtype datetime64[D] is not allowed in evidence"),
        ("|V16", "array of dtype |V16 is not allowed in evidence"),
        ("f8,i8", "array of dtype [('f0', '<f8'), ('f1', '<i8')] is not allowed in evidence"),
    ],
)
def test_arrays_of_other_dtypes_are_refused(dtype: str, message: str) -> None:
    with pytest.raises(EvidenceError) as info:
        loads(array_text(b"\0" * 16, dtype=dtype, shape=(1,)))
    assert str(info.value) == message


def test_an_object_array_is_never_unpickled() -> None:
    import pickle

    payload = pickle.dumps(np.array([Opaque()], dtype=object))
    with pytest.raises(EvidenceError, match="dtype object is not allowed"):
        loads(array_text(payload, dtype="|O", shape=(1,)))


@pytest.mark.parametrize(
    "b64",
    ["not base64!", "AAAA=AAA", "A", "AAAAAAAAAAA\nAAAAAAAAAAA="],
)
def test_bad_base64_is_refused(b64: str) -> None:
    with pytest.raises(EvidenceError, match="^malformed array in evidence: "):
        loads(array_text(b64=b64))


@pytest.mark.parametrize(
    ("raw", "dtype", "shape"),
    [
        (b"\0" * 15, "<f8", (2,)),
        (b"\0" * 17, "<f8", (2,)),
        (b"\0" * 16, "<f8", (3,)),
        (b"\0" * 16, "<f4", (2,)),
        (b"\0" * 16, "<f8", ()),
        (b"", "<f8", ()),
        (b"\0" * 8, "<f8", (0,)),
        (b"\0" * 16, "<f8", (4, 0)),
    ],
)
def test_bytes_that_do_not_match_shape_and_dtype_are_refused(raw: bytes, dtype: str, shape) -> None:
    with pytest.raises(EvidenceError) as info:
        loads(array_text(raw, dtype, shape))
    assert str(info.value) == "array bytes do not match its shape and dtype"


@pytest.mark.parametrize("shape", [(-2,), (-1, -2), (2, -1, -1), (-4, -4)])
def test_negative_shapes_are_refused(shape) -> None:
    # (-1, -2) and (2, -1, -1) have a product that matches the 16 bytes: only the sign gives them away
    with pytest.raises(EvidenceError) as info:
        loads(array_text(b"\0" * 16, "<f8", shape))
    negative = next(s for s in shape if s < 0)
    assert str(info.value) == (
        f"malformed array in evidence: its shape holds {negative}, not a size from 0 to 2147483648"
    )


@pytest.mark.parametrize(
    "shape",
    [[0] * 70, [0, 10**30], [10**30, 0]],
    ids=["more dimensions than numpy allows", "a dimension too large", "a dimension too large first"],
)
def test_shapes_numpy_cannot_make_are_refused(shape) -> None:
    with pytest.raises(EvidenceError, match="^malformed array in evidence"):
        loads(array_text(b"", "<f8", shape))


@pytest.mark.parametrize(
    "data",
    [
        {"__ndarray__": "AAAAAAAAAAA=", "shape": [1]},
        {"__ndarray__": "AAAAAAAAAAA=", "dtype": "<f8"},
        {"__ndarray__": "AAAAAAAAAAA=", "dtype": "<f8", "shape": 1},
        {"__ndarray__": "AAAAAAAAAAA=", "dtype": "<f8", "shape": None},
        {"__ndarray__": "AAAAAAAAAAA=", "dtype": "<f8", "shape": ["one"]},
        {"__ndarray__": "AAAAAAAAAAA=", "dtype": "not a dtype", "shape": [1]},
        {"__ndarray__": "AAAAAAAAAAA=", "dtype": ["<f8"], "shape": [1]},
        {"__ndarray__": "AAAAAAAAAAA=", "dtype": "<f8" + "0" * 12, "shape": [1]},
    ],
    ids=[
        "no dtype",
        "no shape",
        "shape not a list",
        "shape null",
        "shape of words",
        "unknown dtype",
        "dtype a list",
        "absurd itemsize",
    ],
)
def test_malformed_array_records_are_refused(data) -> None:
    with pytest.raises(EvidenceError, match="^malformed array in evidence: "):
        loads(json.dumps({"out": data}))


def test_oversized_text_is_refused_before_parsing() -> None:
    text = " " * (MAX_EVIDENCE_BYTES + 1)
    with pytest.raises(EvidenceError) as info:
        loads(text)
    assert str(info.value) == (
        f"evidence of {MAX_EVIDENCE_BYTES + 1} bytes is over the {MAX_EVIDENCE_BYTES} byte limit"
    )


def test_text_at_the_size_limit_is_accepted() -> None:
    text = json.dumps("a" * (MAX_EVIDENCE_BYTES - 2))
    assert len(text) == MAX_EVIDENCE_BYTES
    # accepted, and its one string cut to the longest string evidence may hold
    assert loads(text) == "a" * (MAX_TEXT - 3) + "..."


def nested(depth: int, kind: str) -> str:
    """JSON text of ``depth`` nested lists or dicts."""
    if kind == "list":
        return "[" * depth + "]" * depth
    return '{"a":' * (depth - 1) + "{}" + "}" * (depth - 1)


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_nesting_up_to_33_levels_is_accepted(kind: str) -> None:
    got = loads(nested(33, kind))
    for _ in range(32):
        got = got[0] if kind == "list" else got["a"]
    assert got == ([] if kind == "list" else {})


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_deeper_nesting_is_refused(kind: str) -> None:
    with pytest.raises(EvidenceError) as info:
        loads(nested(34, kind))
    assert str(info.value) == "evidence nested too deeply"


@pytest.mark.parametrize("kind", ["list", "dict"])
def test_nesting_too_deep_for_the_json_parser_is_refused(kind: str) -> None:
    """Deep enough that Python's own JSON parser runs out of stack: still an EvidenceError."""
    with pytest.raises(EvidenceError):
        loads(nested(200_000, kind))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not json",
        "{'single': 'quotes'}",
        '{"a": 1',
        '{"a": 1} trailing',
        "[1, 2,]",
        "{1: 2}",
        "1" * 5000,
        '{"big": ' + "9" * 4301 + "}",
    ],
    ids=[
        "empty",
        "words",
        "python dict",
        "unclosed",
        "trailing",
        "trailing comma",
        "number keys",
        "integer too long",
        "nested integer too long",
    ],
)
def test_text_that_is_not_json_is_refused(text: str) -> None:
    with pytest.raises(EvidenceError, match="^evidence is not valid JSON: "):
        loads(text)


@pytest.mark.parametrize("value", [b"bytes", {1, 2}, (1, 2), object(), np.zeros(2), 1j])
def test_decode_refuses_what_json_never_produces(value) -> None:
    with pytest.raises(EvidenceError) as info:
        decode(value)
    assert str(info.value) == f"unexpected {type(value).__name__} in evidence"


def test_a_not_an_array_marker_with_a_non_string_name_is_made_a_string() -> None:
    assert loads('{"__not_an_array__": 5}') == NotAnArray("5")


# ---------------------------------------------------------------------------------------------
# Real evidence: the verdict recomputed from the JSON is the verdict of the original
# ---------------------------------------------------------------------------------------------


SOLUTION = solution_cells("01_linear_layer")  # the references: the course's own solutions
linear_forward, linear_backward = SOLUTION["linear_forward"], SOLUTION["linear_backward"]


def backward_wrong_axis(dout, cache):
    x, W = cache
    return dout @ W, dout.T @ x, dout.sum(axis=1)


def forward_list(x, W, b):
    return (x @ W.T + b).tolist(), (x, W)


def forward_float32(x, W, b):
    return (x @ W.T + b).astype(np.float32), (x, W)


def forward_not_implemented(x, W, b):
    raise NotImplementedError()


def backward_in_place(dout, cache):
    x, W = cache
    x[0, 0] = 99.0
    return dout @ W, dout.T @ x, dout.sum(axis=0)


@pytest.mark.parametrize(
    ("forward", "backward", "score"),
    [
        (linear_forward, linear_backward, 4.0),
        (linear_forward, backward_wrong_axis, 2.77),
        (forward_list, linear_backward, 2.15),
        (forward_float32, linear_backward, 2.15),
        (forward_not_implemented, linear_backward, 0.0),
        (linear_forward, backward_in_place, 2.46),
    ],
)
@pytest.mark.parametrize("seed", [0, 7])
def test_real_evidence_regrades_identically_after_the_json_trip(forward, backward, score, seed) -> None:
    evidence = collect_linear_layer(forward, backward, seed=seed)
    direct = grade_linear_layer(evidence)
    text = dumps(evidence)
    json.loads(text)  # plain JSON, readable by any JSON parser
    regraded = grade_linear_layer(loads(text))
    assert direct.score == regraded.score == score
    assert regraded.render() == direct.render()
    assert [(i.name, i.passed, i.message, i.weight) for i in regraded.items] == [
        (i.name, i.passed, i.message, i.weight) for i in direct.items
    ]
    assert regraded.notes == direct.notes


def test_the_json_of_real_evidence_holds_no_pickle_or_python_repr() -> None:
    text = dumps(collect_linear_layer(forward_list, linear_backward, seed=0))
    data = json.loads(text)
    out = data["cases"]["N=4, D=3, M=5"]["outputs"]["out"]
    assert out == {"__not_an_array__": "list"}
    dx = data["cases"]["N=4, D=3, M=5"]["outputs"]["dx"]
    assert set(dx) == {"__ndarray__", "dtype", "shape"} and dx["dtype"] == "<f8" and dx["shape"] == [4, 3]


# ---------------------------------------------------------------------------------------------
# Hostile evidence: any JSON a kernel can send is a value or an EvidenceError
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape_json", "holds"),
    [
        ("[Infinity]", "inf"),
        ("[-Infinity, 2]", "-inf"),
        ("[NaN]", "nan"),
        ("[2.0]", "2.0"),
        ("[1.5]", "1.5"),
        ("[true, 2]", "True"),
        ('["2"]', "'2'"),
        ("[null]", "None"),
        ("[[2]]", "[2]"),
        (f"[{2**31 + 1}]", str(2**31 + 1)),
        (f"[0, {10**400}]", None),
    ],
)
def test_a_shape_that_is_not_a_list_of_sizes_is_an_evidence_error(shape_json: str, holds) -> None:
    """``"shape": [Infinity]`` raised OverflowError, which failed the whole notebook."""
    text = '{"out": {"__ndarray__": "AAAAAAAAAAA=", "dtype": "<f8", "shape": ' + shape_json + "}}"
    with pytest.raises(EvidenceError) as info:
        loads(text)
    message = str(info.value)
    assert message.startswith("malformed array in evidence: its shape holds ")
    if holds is not None:
        assert (
            message
            == f"malformed array in evidence: its shape holds {holds}, not a size from 0 to 2147483648"
        )


@pytest.mark.parametrize("shape", [{"a": 1}, "2,2", 2.0, [0] * 33])
def test_a_shape_of_another_type_or_too_many_axes_is_an_evidence_error(shape) -> None:
    with pytest.raises(EvidenceError) as info:
        loads(array_text(b"", "<f8", shape))
    assert str(info.value) == "malformed array in evidence: its shape is not a list of at most 32 sizes"


@pytest.mark.parametrize(
    "data",
    [
        {"__ndarray__": 5, "dtype": "<f8", "shape": [1]},
        {"__ndarray__": "AAAAAAAAAAA=", "dtype": {"names": ["a"]}, "shape": [1]},
        {"__ndarray__": ["AAAA"], "dtype": "<f8", "shape": [1]},
    ],
)
def test_array_fields_of_the_wrong_type_are_an_evidence_error(data) -> None:
    with pytest.raises(
        EvidenceError, match="^malformed array in evidence: its dtype and its bytes must be strings$"
    ):
        loads(json.dumps({"out": data}))


def test_strings_of_evidence_come_back_renderable() -> None:
    """A lone surrogate in a note was stored with the outcome and crashed every later report."""
    text = json.dumps({"note\ud800": "bad \udcff byte \x1b[2J\x1b]0;title\x07 \u202eevil", "ok": "a\tb\nc"})
    got = loads(text)
    assert got == {"note\ufffd": "bad \ufffd byte [2J]0;title evil", "ok": "a\tb\nc"}
    for key, value in got.items():
        (key + value).encode("utf-8")  # no UnicodeEncodeError


def test_a_not_an_array_name_is_cleaned_and_cut() -> None:
    assert loads(json.dumps({"__not_an_array__": "x\ud800" * 500})) == NotAnArray(
        ("x\ufffd" * 100)[:197] + "..."
    )
    assert loads(json.dumps({"__not_an_array__": [[[1]]]})) == NotAnArray("list")


def _random_json(rng: np.random.Generator, depth: int = 0):
    """A random JSON-like value, biased towards what the decoder looks at (array records, odd numbers)."""
    atoms = [
        None, True, False, 0, -1, 2**31, 2**63, 10**30, 0.5, math.inf, -math.inf, math.nan, "",
        "\ud800", "\x1b[31m", "<f8", "|O", "f8,i8", "AAAAAAAAAAA=", "A", "x" * 40,
    ]  # fmt: skip
    roll = rng.integers(0, 10)
    if depth > 4 or roll < 4:
        return atoms[rng.integers(0, len(atoms))]
    if roll < 6:
        return [_random_json(rng, depth + 1) for _ in range(rng.integers(0, 4))]
    if roll < 8:
        record = {"__ndarray__": _random_json(rng, 5), "dtype": _random_json(rng, 5)}
        record["shape"] = (
            [_random_json(rng, 5) for _ in range(rng.integers(0, 4))]
            if rng.random() < 0.7
            else (_random_json(rng, depth + 1))
        )
        if rng.random() < 0.2:
            record["__not_an_array__"] = _random_json(rng, depth + 1)
        return record
    keys = ["check", "seed", "__not_an_array__", "x\ud800", "shape", "dtype"]
    return {keys[rng.integers(0, len(keys))]: _random_json(rng, depth + 1) for _ in range(rng.integers(0, 4))}


def test_fuzz_any_json_is_a_value_or_an_evidence_error() -> None:
    """Seeded: random JSON-like values, and real evidence with random bytes changed, never raise anything
    but EvidenceError from the decoder, and what comes back is renderable."""
    rng = np.random.default_rng(16)
    real = dumps({"check": "linear_layer", "seed": 3, "out": np.arange(6.0).reshape(2, 3), "note": "ok"})
    texts = [json.dumps(_random_json(rng), allow_nan=True) for _ in range(3000)]
    alphabet = list('0123456789-.eE[]{}",:INaf \\u')
    for _ in range(3000):
        chars = list(real)
        for _ in range(rng.integers(1, 4)):
            chars[rng.integers(0, len(chars))] = alphabet[rng.integers(0, len(alphabet))]
        texts.append("".join(chars))
    outcomes = {"value": 0, "error": 0}
    for text in texts:
        try:
            value = loads(text)
        except EvidenceError:
            outcomes["error"] += 1
            continue
        outcomes["value"] += 1
        json.dumps(encode(value)).encode("utf-8")
        assert "\ud800" not in repr(value) and "\x1b" not in repr(value)
    assert outcomes["value"] > 500 and outcomes["error"] > 500, outcomes
