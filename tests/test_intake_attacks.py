"""Untrusted at every edge of intake: each attack through the real ``grade`` command.

Two classes are graded, each once, by ``python -m autograder grade``'s own ``main`` in a process of its
own that reports its peak memory: a flat Moodle-style folder and a zip of nbgrader's layout. Each holds
honest learners beside the attacks; every test asserts the exact outcome: what was graded and its
score, each attacking file with its stated reason, the victim's own marks, the process's peak.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from notebook_helpers import source_and_release
from test_engine import FIXTURE, LIMITS, solved
from zip_helpers import UTF8_FLAG, deflated, write_zip, zeros_bomb

from autograder.engine.jail import jail_available
from autograder.engine.names import stable_id
from autograder.engine.notebook_file import MAX_CELLS, MAX_DEPTH
from autograder.engine.pipeline import ensure_course, grade_class

TINY = "01_tiny"
#: The grader's own peak (resident set size) on the worst inputs below: docs/guarantees.md states it.
GRADER_PEAK_BYTES = 1024**3

pytestmark = pytest.mark.skipif(not jail_available(), reason="graded in the jail, as in CI")

MEASURE = """
import resource, sys
from autograder.__main__ import main
code = main(sys.argv[1:])
print("PEAK_KIB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
sys.exit(code)
"""


def grade(base: Path, inbox: Path) -> tuple[subprocess.CompletedProcess, int]:
    """``grade`` as an instructor runs it, in its own process; its exit, output and peak in bytes."""
    command = [sys.executable, "-c", MEASURE, "grade", TINY, str(inbox), "--course", str(base / "course"),
               "--solutions", str(FIXTURE), "--workers", "2", "--cell-timeout", "20"]  # fmt: skip
    proc = subprocess.run(command, cwd=base, capture_output=True, text=True, timeout=900)
    peak = [line for line in proc.stderr.splitlines() if line.startswith("PEAK_KIB ")]
    return proc, int(peak[-1].split()[1]) * 1024 if peak else -1


def rows(base: Path) -> dict[str, dict[str, str]]:
    """grades.csv's rows of graded (or failed) submissions, by student."""
    with (base / "course" / "grading" / "grades.csv").open(encoding="utf-8") as f:
        return {r["student"]: r for r in csv.DictReader(f) if r["status"] != "rejected"}


def last_run_rejections(base: Path) -> dict[str, str]:
    runs = (base / "course" / "autograder" / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    return {r["origin"]: r["reason"] for r in json.loads(runs[-1])["rejected"]}


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("build") / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, TINY)
    return json.loads(nbformat.writes(solved(source, release))), json.loads(nbformat.writes(release))


def with_metadata(nb: dict, **metadata) -> str:
    nb = json.loads(json.dumps(nb))
    nb["metadata"].update(metadata)
    return json.dumps(nb, separators=(",", ":"))


VICTIM = "Victim Person_502_assignsubmission_file_"
ATTACKER = "Attacker Person_777_assignsubmission_file_"
CLAIM = f"{ATTACKER}/Victim Person_502_assignsubmission_file_01_tiny-9.ipynb"
BYTES_NAME = b"\xff\xfe-bytes_01_tiny.ipynb"


@pytest.fixture(scope="module")
def flat(notebooks, tmp_path_factory: pytest.TempPathFactory):
    """Moodle's "download in folders" beside plain names: a victim and an attacker, notebooks over each
    bound, a name that is not UTF-8, one name in NFD and NFC, and a notebook at the bounds."""
    good, blank = notebooks
    base = tmp_path_factory.mktemp("flat")
    inbox = base / "inbox"
    (inbox / VICTIM).mkdir(parents=True)
    (inbox / ATTACKER).mkdir()
    (inbox / VICTIM / "01_tiny.ipynb").write_text(json.dumps(good))
    (inbox / CLAIM).write_text(json.dumps(blank))
    deep = json.dumps(blank)[:-1] + ',"deep":' + "[" * 200_000 + "]" * 200_000 + "}"
    (inbox / "deep_01_tiny.ipynb").write_text(deep)  # the issue's: its 200 000 lists are too many
    (inbox / "nested_01_tiny.ipynb").write_text(
        deep.replace("[" * 200_000 + "]" * 200_000, "[" * 70 + "]" * 70)
    )
    objects = "[" + ",".join(["{}"] * 16_000_000) + "]"  # 48 MB, under the size limit
    (inbox / "objects_01_tiny.ipynb").write_text(with_metadata(blank, junk="JUNK").replace('"JUNK"', objects))
    empty = '{"cell_type":"raw","metadata":{},"source":""}'
    million = json.dumps(blank).replace('"cells": [', '"cells": [' + ",".join([empty] * 1_000_000) + ",", 1)
    (inbox / "million_01_tiny.ipynb").write_text(million)
    many = json.loads(json.dumps(blank))
    many["cells"] += [json.loads(empty)] * (MAX_CELLS + 1)
    (inbox / "many_01_tiny.ipynb").write_text(json.dumps(many))
    (inbox / os.fsdecode(BYTES_NAME)).write_text(json.dumps(good))
    (inbox / "zoe\u0308_01_tiny.ipynb").write_text(json.dumps(blank))  # NFD, as macOS names it
    (inbox / "zo\u00eb_01_tiny-1.ipynb").write_text(json.dumps(good))  # NFC: the same student, later
    # At the bounds and graded: near the most arrays and objects, a near-million-line output.
    heavy = json.loads(json.dumps(good))
    lines = [f"{i}\n" for i in range(850_000)]
    output = {"output_type": "stream", "name": "stdout", "text": lines}
    heavy["cells"].append({"cell_type": "code", "metadata": {"junk": [{}] * 95_000}, "source": "",
                           "execution_count": 1, "id": "heavy", "outputs": [output]})  # fmt: skip
    (inbox / "heavy_01_tiny.ipynb").write_text(json.dumps(heavy))
    proc, peak = grade(base, inbox)
    return base, proc, peak


def test_the_flat_class_is_graded_and_every_attack_is_a_stated_rejection(flat) -> None:
    base, proc, _ = flat
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    bytes_student = stable_id(os.fsdecode(BYTES_NAME)[: -len("_01_tiny.ipynb")])
    zoe = stable_id("zo\u00eb")
    assert {s: (r["score"], r["status"]) for s, r in rows(base).items()} == {
        "moodle-502": ("7", "graded"),
        bytes_student: ("7", "graded"),
        zoe: ("7", "graded"),
        "heavy": ("7", "graded"),
    }
    reasons = last_run_rejections(base)
    cells = len(json.loads((base / "inbox" / "many_01_tiny.ipynb").read_text())["cells"])
    objects = reasons.pop("objects_01_tiny.ipynb")
    million = reasons.pop("million_01_tiny.ipynb")
    deep = reasons.pop("deep_01_tiny.ipynb")
    assert reasons == {
        CLAIM: "its name claims Moodle participant 502 (Victim Person), but it is in the folder of "
        "participant 777, who owns every file in it: not graded",
        "nested_01_tiny.ipynb": f"too deeply nested a notebook: JSON nested over {MAX_DEPTH} levels deep",
        "many_01_tiny.ipynb": f"too many cells: {cells}, over the limit of {MAX_CELLS}",
        "zoe\u0308_01_tiny.ipynb": "superseded by a later file for the same student: "
        "zo\u00eb_01_tiny-1.ipynb",
    }
    assert objects.startswith("too large a notebook: 160") and "clear its outputs" in objects
    assert million.startswith("too large a notebook: 4000")
    assert deep.startswith("too large a notebook: 200") and "(2000" in deep


def test_a_name_that_is_not_utf8_is_graded_and_shown_escaped(flat) -> None:
    base, _, _ = flat
    origin = "\\xff\\xfe-bytes_01_tiny.ipynb"
    row = rows(base)[stable_id(os.fsdecode(BYTES_NAME)[: -len("_01_tiny.ipynb")])]
    assert (row["lms_id"], row["file"]) == ("\\xff\\xfe-bytes", origin)


def test_the_grader_stays_under_its_stated_memory_bound(flat) -> None:
    _, _, peak = flat
    assert 0 < peak < GRADER_PEAK_BYTES, f"the grader peaked at {peak / 1024**2:.0f} MiB"
    print(f"grader peak: {peak / 1024**2:.0f} MiB")


@pytest.fixture(scope="module")
def zipped(notebooks, tmp_path_factory: pytest.TempPathFactory):
    """A zip of nbgrader's layout: a 255-character student folder, a forged time stamp, a zip bomb, a
    declared size that lies and a name flagged UTF-8 that is not."""
    good, _ = notebooks
    base = tmp_path_factory.mktemp("zipped")
    entries = []
    for name, content in [
        ("a" * 255 + "/01_tiny/01_tiny.ipynb", json.dumps(good).encode()),
        ("ann/01_tiny/01_tiny.ipynb", json.dumps(good).encode()),
        ("ann/01_tiny/timestamp.txt", b"2000-01-01 00:00:00.000000 UTC"),
    ]:
        entry = deflated(content)
        entry.name = name.encode()
        entries.append(entry)
    bomb = zeros_bomb(2000)
    bomb.name = b"bob/01_tiny/01_tiny.ipynb"
    liar = zeros_bomb(100)
    liar.name, liar.size = b"liar/01_tiny/01_tiny.ipynb", 1000
    bad = deflated(json.dumps(good).encode())
    bad.name, bad.flags = b"cy\xff/01_tiny/01_tiny.ipynb", UTF8_FLAG
    archive = write_zip(base / "submitted.zip", [*entries, bomb, liar, bad])
    first = grade(base, archive)
    again = grade(base, archive)
    return base, first, again


def test_the_zipped_class_is_graded_and_each_bad_entry_is_its_own_outcome(zipped) -> None:
    base, (proc, peak), _ = zipped
    assert proc.returncode == 0, proc.stderr[-3000:]
    long_id = stable_id("a" * 255)
    assert len(long_id) == 64
    assert {s: (r["score"], r["status"]) for s, r in rows(base).items()} == {
        "ann": ("7", "graded"),
        long_id: ("7", "graded"),
    }
    assert last_run_rejections(base) == {
        "submitted.zip:bob/01_tiny/01_tiny.ipynb": "declares 2097152000 bytes, over the 52428800 byte "
        "limit of an entry",
        "submitted.zip:liar/01_tiny/01_tiny.ipynb": "not readable from the zip archive (Bad CRC-32 for "
        "file 'liar/01_tiny/01_tiny.ipynb')",
        "submitted.zip:cy\\xff/01_tiny/01_tiny.ipynb": "its name in the zip archive is flagged as UTF-8 "
        "but is not UTF-8",
    }
    assert 0 < peak < GRADER_PEAK_BYTES


def test_a_255_character_student_folder_is_graded_and_a_rerun_skips_it(zipped) -> None:
    base, _, (again, _) = zipped
    assert again.returncode == 0, again.stderr[-3000:]
    assert again.stderr.count("already graded") == 2
    names = sorted(p.name for p in (base / "course" / "autograder" / "results" / TINY).iterdir())
    assert names == sorted(["ann.json", stable_id("a" * 255) + ".json"])


def test_an_impossible_submission_time_is_flagged_in_the_summary(zipped) -> None:
    base, _, _ = zipped
    summary = (base / "course" / "grading" / "summary.md").read_text(encoding="utf-8")
    origin = "submitted.zip:ann/01_tiny/01_tiny.ipynb"
    assert (
        f"the submission time of ann ({origin}) is 2000-01-01T00:00:00, before 01_tiny was released"
        in summary
    )
    assert "timestamp.txt is written by the learner's own &#96;nbgrader submit&#96;" in summary  # escaped


def test_a_result_that_cannot_be_stored_is_that_submissions_outcome(notebooks, tmp_path: Path) -> None:
    """A real fault in the results store (a folder where bob's result is written first): bob's outcome
    is failed with the reason, in the outputs; ann is graded, stored and written; nothing stops."""
    good, _ = notebooks
    root = tmp_path / "course"
    ensure_course(root, FIXTURE)
    (root / "autograder" / "results" / TINY / "bob.tmp" / "in-the-way").mkdir(parents=True)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for student in ("ann", "bob"):
        (inbox / f"{student}_{TINY}.ipynb").write_text(json.dumps(good))
    result = grade_class(inbox, TINY, root, FIXTURE, workers=2, limits=LIMITS, progress=False)
    assert result.ok, result.warnings
    by = {o.student: o for o in result.outcomes}
    assert (by["ann"].score, by["ann"].status) == (7, "graded")
    assert (by["bob"].score, by["bob"].status) == (0, "failed")
    assert by["bob"].reason.startswith(
        "the grader could not store this notebook's result: IsADirectoryError: [Errno 21] Is a directory"
    )
    assert (root / "autograder" / "results" / TINY / "ann.json").is_file()
    with (root / "grading" / "grades.csv").open(encoding="utf-8") as f:
        statuses = {r["student"]: (r["score"], r["status"]) for r in csv.DictReader(f)}
    assert statuses == {"ann": ("7", "graded"), "bob": ("0", "failed")}
