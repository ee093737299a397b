"""Intake of untrusted bytes, fast: the pre-scan against the parser, names of any form, Moodle folder
ownership, impossible times, and a seeded fuzz test (random files, names and zip entries in: one
stated outcome each, never an exception)."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
from pathlib import Path

import nbformat
import pytest
from zip_helpers import UTF8_FLAG, deflated, write_zip

from autograder.course.build import source_notebook
from autograder.engine.intake import Submission, discover, intake_warnings
from autograder.engine.names import MAX_ID, stable_id
from autograder.engine.notebook_file import NotebookError, json_shape, parse_notebook

FIXTURE = Path(__file__).parent / "fixtures" / "solutions" / "01_tiny.py"
TINY = "01_tiny"
ANSWERS = {TINY: {"linear_layer", "mse_loss"}}


@pytest.fixture(scope="module")
def text() -> str:
    return nbformat.writes(source_notebook(FIXTURE))


def _shape(value, depth: int = 1) -> tuple[int, int, int]:
    """The reference: values, containers and depth of parsed JSON."""
    if isinstance(value, (list, dict)):
        children = value.values() if isinstance(value, dict) else value
        counts = [_shape(v, depth + 1) for v in children]
        return (
            1 + sum(c[0] for c in counts),
            1 + sum(c[1] for c in counts),
            max([depth, *(c[2] for c in counts)]),
        )
    return 1, 0, 0


def _random_json(rng: random.Random, depth: int = 0):
    kind = rng.choice(["list", "dict", "str", "num", "lit"] if depth < 6 else ["str", "num", "lit"])
    if kind == "list":
        return [_random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == "dict":
        return {_random_text(rng): _random_json(rng, depth + 1) for _ in range(rng.randrange(4))}
    if kind == "str":
        return _random_text(rng)
    return rng.choice([0, -1.5e300, 12, True, False, None]) if kind == "lit" else rng.random()


def _random_text(rng: random.Random) -> str:
    return "".join(rng.choice('ab"\\[]{},: \n\t\u00e9\U0001f600') for _ in range(rng.randrange(6)))


def test_the_prescan_counts_what_the_parser_builds() -> None:
    """json_shape on the bytes agrees with a walk of json.loads, on random JSON full of quotes,
    backslashes and brackets inside strings, in both of json.dumps' spacings."""
    rng = random.Random(1616)
    for _ in range(400):
        value = _random_json(rng)
        values, containers, depth = _shape(value)
        for compact in (True, False):
            data = json.dumps(
                value, ensure_ascii=rng.random() < 0.5, separators=(",", ":") if compact else None
            )
            assert json_shape(data.encode()) == (values, containers, depth), data


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"[" * 65 + b"]" * 65, "too deeply nested a notebook: JSON nested over 64 levels deep"),
        (
            b"[" * 200_000 + b"]" * 200_000,
            "too large a notebook: 200000 JSON values (200000 arrays and objects)",
        ),
        (
            b'{"nbformat": 4, "cells": [' + b",".join([b"{}"] * 100_001) + b"]}",
            "too large a notebook: 100004",
        ),
    ],
    ids=["65-deep", "200000-deep", "100001-objects"],
)
def test_a_notebook_over_a_bound_is_refused_before_it_is_parsed(data: bytes, reason: str) -> None:
    with pytest.raises(NotebookError) as refused:
        parse_notebook(data)
    assert str(refused.value).startswith(reason)


def test_names_in_nfc_and_nfd_are_one_student_and_ids_are_bounded() -> None:
    assert stable_id("zo\u00eb") == stable_id("zoe\u0308")
    assert stable_id("jane") == "jane"
    long = stable_id("a" * 255)
    assert len(long) == MAX_ID and long.startswith("a" * 57 + "-")
    assert stable_id("a" * 255) != stable_id("a" * 254)
    odd = os.fsdecode(b"\xff\xfe")  # bytes that are not UTF-8, as os.listdir gives them
    assert stable_id(odd) == "" and stable_id(odd + "x") != stable_id("\\xff\\xfex")


def test_near_collisions_are_a_warning_not_a_merge(tmp_path: Path, text: str) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for name in ("Kim Lee_01_tiny.ipynb", "kim_lee_01_tiny.ipynb", "ann_01_tiny.ipynb"):
        (inbox / name).write_text(text)
    subs, rejected = discover(inbox, [TINY], ANSWERS, tmp_path / "s")
    assert rejected == [] and len(subs) == 3
    now = dt.datetime(2026, 12, 1)
    (warning,) = intake_warnings(subs, {}, now)
    kim = stable_id("Kim Lee")
    assert warning == (
        "the names 'Kim Lee', 'kim_lee' differ only in case, Unicode form or punctuation, and are graded "
        f"as 2 students ({kim}, kim_lee): check that they are not one person"
    )


def test_a_moodle_folder_owns_every_file_in_it_however_deep(tmp_path: Path, text: str) -> None:
    inbox = tmp_path / "inbox"
    own = inbox / "Eve Attacker_777_assignsubmission_file_"
    (own / "Victim Person_502_assignsubmission_file_").mkdir(parents=True)
    (own / "Victim Person_502_assignsubmission_file_" / "01_tiny.ipynb").write_text(text)
    (own / "Eve Attacker_777_assignsubmission_file_01_tiny.ipynb").write_text(text)
    subs, rejected = discover(inbox, [TINY], ANSWERS, tmp_path / "s")
    assert [(s.student, s.name) for s in subs] == [("moodle-777", "Eve Attacker")]
    assert [r.reason for r in rejected] == [
        "its name claims Moodle participant 502 (Victim Person), but it is in the folder of participant "
        "777, who owns every file in it: not graded"
    ]


def test_submission_times_that_cannot_be_true_are_flagged(tmp_path: Path) -> None:
    released = {TINY: dt.datetime(2026, 9, 1)}
    now = dt.datetime(2026, 12, 1, 12)
    subs = [
        Submission(s, TINY, tmp_path, f"{s}/{TINY}/{TINY}.ipynb", "nbgrader", s, timestamp=t)
        for s, t in [
            ("ok", "2026-10-01T00:00:00"),
            ("early", "2000-01-01T00:00:00"),
            ("late", "2027-01-01T00:00:00"),
        ]
    ]
    warnings = intake_warnings(subs, released, now)
    assert [w.split(": it cannot be true")[0] for w in warnings] == [
        "the submission time of early (early/01_tiny/01_tiny.ipynb) is 2000-01-01T00:00:00, before 01_tiny "
        "was released (2026-09-01T00:00:00)",
        "the submission time of late (late/01_tiny/01_tiny.ipynb) is 2027-01-01T00:00:00, after this run "
        "(2026-12-01T12:00:00)",
    ]


def _random_name(rng: random.Random) -> bytes:
    pieces = [b"ann", b"_", b"01_tiny", b".ipynb", b"\xff", b"\xc3\xa9", b"e\xcc\x88", b" ", b"-1", b"..",
              b"Victim Person_502_assignsubmission_file_", b"x" * rng.randrange(1, 120)]  # fmt: skip
    name = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 6)))[:250]
    name = name.replace(b"/", b"_").replace(b"\0", b"_")
    return name if name.strip(b".") else b"x"  # not empty, not "." or ".."


def _random_content(rng: random.Random, text: str) -> bytes:
    good = text.encode()
    choices = [
        good,
        good[: rng.randrange(len(good))],
        bytes(rng.randrange(256) for _ in range(rng.randrange(200))),
        b"[" * rng.randrange(100) + b"]" * rng.randrange(100),
        good.replace(b'"metadata": {', b'"metadata": {"x": ' + b"[" * 70 + b"]" * 70 + b",", 1),
        b"",
    ]
    return rng.choice(choices)


def _accounted(subs, rejected, files: int) -> None:
    origins = [s.origin for s in subs] + [r.origin for r in rejected]
    assert len(origins) == files, (subs, rejected)
    for origin in origins + [r.reason for r in rejected]:
        origin.encode("utf-8")  # every name and reason can be written out
    assert all(0 < len(s.student) <= MAX_ID for s in subs)


@pytest.mark.parametrize("seed", range(6))
def test_fuzz_any_files_any_names_one_stated_outcome_each(tmp_path: Path, text: str, seed: int) -> None:
    rng = random.Random(seed)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    names: set[bytes] = set()
    for _ in range(40):
        folder = inbox
        if rng.random() < 0.3:
            folder = inbox / os.fsdecode(_random_name(rng))
            if folder.is_file():
                continue
            folder.mkdir(exist_ok=True)
        path = folder / os.fsdecode(_random_name(rng))
        if not path.exists() and not path.is_dir():
            path.write_bytes(_random_content(rng, text))
            names.add(os.fsencode(path))
    subs, rejected = discover(inbox, [TINY], ANSWERS, tmp_path / "s")
    _accounted(subs, rejected, len(names))


@pytest.mark.parametrize("seed", range(6))
def test_fuzz_any_zip_entries_one_stated_outcome_each(tmp_path: Path, text: str, seed: int) -> None:
    rng = random.Random(seed)
    entries = []
    for _ in range(30):
        entry = deflated(_random_content(rng, text))
        entry.name = b"/".join(_random_name(rng) for _ in range(rng.randrange(1, 4)))
        entry.flags = UTF8_FLAG if rng.random() < 0.5 else 0
        if rng.random() < 0.1:
            entry.size = rng.randrange(2**31)  # a declared size that lies
        entries.append(entry)
    archive = write_zip(tmp_path / "export.zip", entries)
    subs, rejected = discover(archive, [TINY], ANSWERS, tmp_path / "s")
    members = 1 if [r for r in rejected if r.origin == "export.zip"] else len(entries)
    _accounted(subs, rejected, members)
