"""Intake: every layout, every rejection reason, and every input file accounted for exactly once."""

from __future__ import annotations

import copy
import datetime as dt
import hashlib
import io
import json
import os
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.course.build import source_notebook
from autograder.engine import notebook_file, unzip
from autograder.engine.intake import Rejected, Submission, discover, intake_warnings, student_id
from autograder.engine.names import unsafe_id

FIXTURE = Path(__file__).parent / "fixtures" / "solutions" / "01_tiny.py"
TINY = "01_tiny"
ASSIGNMENTS = [TINY]
ANSWERS = {TINY: {"linear_layer", "mse_loss"}}


@pytest.fixture(scope="module")
def notebook_text() -> str:
    """A notebook of the tiny assignment, as nbformat writes it."""
    return nbformat.writes(source_notebook(FIXTURE))


@pytest.fixture(scope="module")
def stranger_text() -> str:
    """A valid notebook that holds none of the tiny assignment's answer cells."""
    nb = copy.deepcopy(source_notebook(FIXTURE))
    for cell in nb.cells:
        cell.metadata.pop("nbgrader", None)
        cell.id = f"x-{cell.id}"
    return nbformat.writes(nb)


def write(folder: Path, files: dict[str, str | bytes]) -> Path:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


def make_zip(path: Path, members: dict[str, str | bytes], directories: tuple[str, ...] = ()) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in directories:
            zf.writestr(zipfile.ZipInfo(name), b"")
        for name, content in members.items():
            zf.writestr(name, content)
    return path


def run(inputs: Path, tmp_path: Path, assignments=None, answers=None, *, files: int):
    """discover(), with the accounting every call must satisfy: each input file once, and only once."""
    subs, rejected = discover(inputs, assignments or ASSIGNMENTS, answers or ANSWERS, tmp_path / "scratch")
    origins = [s.origin for s in subs] + [r.origin for r in rejected]
    assert len(subs) + len(rejected) == files, (subs, rejected)
    assert len(set(origins)) == len(origins), origins
    return subs, rejected


def reasons(rejected: list[Rejected]) -> dict[str, str]:
    return {r.origin: r.reason for r in rejected}


def students(subs: list[Submission]) -> dict[str, str]:
    return {s.origin: s.student for s in subs}


# ---------------------------------------------------------------------------------------------
# Flat (LMS-style) folders
# ---------------------------------------------------------------------------------------------


def test_flat_folder_student_ids_from_file_names(tmp_path: Path, notebook_text: str) -> None:
    inbox = write(
        tmp_path / "inbox",
        {
            "jane_01_tiny.ipynb": notebook_text,
            "doejohn_12345_67890_01_tiny.ipynb": notebook_text,  # Canvas
            "doeann_LATE_12346_67891_01_tiny.ipynb": notebook_text,  # Canvas, late
            "Jane Doe_123_assignsubmission_file_01_tiny.ipynb": notebook_text,  # Moodle
            "Zoë O'Neil_77_assignsubmission_file_01_tiny.ipynb": notebook_text,  # Moodle, odd characters
            "kim-lee_01_tiny.ipynb": notebook_text,  # a hyphenated name stays whole
            "Kim Lee_01_tiny.ipynb": notebook_text,  # a raw id that is not safe as a folder name
            "sub/folder/max_01_tiny.ipynb": notebook_text,  # nested files of a flat export
        },
    )
    subs, rejected = run(inbox, tmp_path, files=8)
    assert rejected == []
    kim = "Kim_Lee-" + hashlib.sha256(b"Kim Lee").hexdigest()[:6]
    assert {s.origin: (s.student, s.lms, s.lms_id, s.name, s.late) for s in subs} == {
        "jane_01_tiny.ipynb": ("jane", "", "jane", "", False),
        "doejohn_12345_67890_01_tiny.ipynb": ("canvas-12345", "canvas", "12345", "doejohn", False),
        "doeann_LATE_12346_67891_01_tiny.ipynb": ("canvas-12346", "canvas", "12346", "doeann", True),
        "Jane Doe_123_assignsubmission_file_01_tiny.ipynb": ("moodle-123", "moodle", "123", "Jane Doe", 0),
        "Zoë O'Neil_77_assignsubmission_file_01_tiny.ipynb": ("moodle-77", "moodle", "77", "Zoë O'Neil", 0),
        "kim-lee_01_tiny.ipynb": ("kim-lee", "", "kim-lee", "", False),
        "Kim Lee_01_tiny.ipynb": (kim, "", "Kim Lee", "", False),
        "sub/folder/max_01_tiny.ipynb": ("max", "", "max", "", False),
    }
    assert all(s.assignment == TINY for s in subs)
    assert {s.path for s in subs} == {inbox / s.origin for s in subs}
    # sorted by assignment, then student
    assert [s.student for s in subs] == sorted(s.student for s in subs)


def test_flat_folder_every_rejection_reason(tmp_path: Path, notebook_text: str, stranger_text: str) -> None:
    inbox = write(
        tmp_path / "inbox",
        {
            "ok_01_tiny.ipynb": notebook_text,
            "empty_01_tiny.ipynb": b"",
            "corrupt_01_tiny.ipynb": '{"cells": [{"cell_type": "code"',
            "list_01_tiny.ipynb": "[1, 2]",
            "binary_01_tiny.ipynb": b"\xff\xfe\x00garbage",
            "utils.py": "def compare(*a, **k):\n    return True\n",
            "notes.txt": "hello",
            "jane_01_tiny.py": "print(1)",
            "frank_99_other.ipynb": notebook_text,
            "stranger_01_tiny.ipynb": stranger_text,
            "01_tiny.ipynb": notebook_text,
            "_-_01_tiny.ipynb": notebook_text,
        },
    )
    subs, rejected = run(inbox, tmp_path, files=12)
    assert students(subs) == {"ok_01_tiny.ipynb": "ok"}
    assert reasons(rejected) == {
        "empty_01_tiny.ipynb": "empty file",
        "corrupt_01_tiny.ipynb": "not valid notebook JSON (JSONDecodeError: "
        "Expecting ',' delimiter: line 1 column 32 (char 31))",
        "list_01_tiny.ipynb": "not a notebook: the file holds a JSON list, not an object",
        "binary_01_tiny.ipynb": "not valid notebook JSON (JSONDecodeError: "
        "Expecting value: line 1 column 1 (char 0))",
        "utils.py": "not a notebook (.ipynb) file",
        "notes.txt": "not a notebook (.ipynb) file",
        "jane_01_tiny.py": "not a notebook (.ipynb) file",
        "frank_99_other.ipynb": "its name contains no assignment being graded (01_tiny)",
        "stranger_01_tiny.ipynb": "not a notebook of this assignment: none of its answer cells are in it",
        "01_tiny.ipynb": "no student id in the file name",
        "_-_01_tiny.ipynb": "no student id in the file name",
    }


def test_a_notebook_of_another_assignment_is_rejected(tmp_path: Path, notebook_text: str) -> None:
    inbox = write(
        tmp_path / "inbox", {"jane_02_small.ipynb": notebook_text, "jane_01_tiny.ipynb": notebook_text}
    )
    subs, rejected = run(
        inbox, tmp_path, [TINY, "02_small"], {**ANSWERS, "02_small": {"relu", "sigmoid"}}, files=2
    )
    assert [(s.student, s.assignment) for s in subs] == [("jane", TINY)]
    assert reasons(rejected) == {
        "jane_02_small.ipynb": "not a notebook of this assignment: none of its answer cells are in it"
    }


def test_the_longest_assignment_name_in_a_file_name_wins(tmp_path: Path, notebook_text: str) -> None:
    inbox = write(
        tmp_path / "inbox", {"jane_01_tiny_extra.ipynb": notebook_text, "bob_01_tiny.ipynb": notebook_text}
    )
    subs, rejected = run(
        inbox, tmp_path, [TINY, "01_tiny_extra"], {**ANSWERS, "01_tiny_extra": {"linear_layer"}}, files=2
    )
    assert rejected == []
    assert [(s.assignment, s.student) for s in subs] == [(TINY, "bob"), ("01_tiny_extra", "jane")]


def test_a_single_notebook_file(tmp_path: Path, notebook_text: str) -> None:
    path = write(tmp_path, {"jane_01_tiny.ipynb": notebook_text}) / "jane_01_tiny.ipynb"
    subs, rejected = run(path, tmp_path, files=1)
    assert subs == [Submission("jane", TINY, path, "jane_01_tiny.ipynb", "", "jane")]
    assert rejected == []


def test_a_single_file_that_is_not_a_notebook(tmp_path: Path) -> None:
    path = write(tmp_path, {"grades.csv": "a,b\n"}) / "grades.csv"
    assert run(path, tmp_path, files=1) == ([], [Rejected("grades.csv", "not a notebook (.ipynb) file")])


def test_a_missing_input_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        discover(tmp_path / "nothing", ASSIGNMENTS, ANSWERS, tmp_path / "scratch")


def test_an_oversized_notebook_is_rejected(tmp_path: Path, notebook_text: str, monkeypatch) -> None:
    monkeypatch.setattr(notebook_file, "MAX_NOTEBOOK_BYTES", 100)
    inbox = write(tmp_path / "inbox", {"jane_01_tiny.ipynb": notebook_text})
    size = (inbox / "jane_01_tiny.ipynb").stat().st_size
    subs, rejected = run(inbox, tmp_path, files=1)
    assert subs == []
    assert reasons(rejected) == {
        "jane_01_tiny.ipynb": f"file of {size} bytes is over the 100 byte limit for a notebook"
    }


def test_a_notebook_with_malformed_nbgrader_metadata_is_read_not_crashed_on(
    tmp_path: Path, notebook_text: str, stranger_text: str
) -> None:
    """nbformat accepts any cell metadata: a learner's ``"nbgrader": "x"`` must not stop the intake."""
    nb = json.loads(notebook_text)
    for cell in nb["cells"]:
        cell["metadata"]["nbgrader"] = "x"
    other = json.loads(stranger_text)
    other["cells"][0]["metadata"]["nbgrader"] = ["not", "a", "dict"]
    inbox = write(
        tmp_path / "inbox", {"jane_01_tiny.ipynb": json.dumps(nb), "bob_01_tiny.ipynb": json.dumps(other)}
    )
    subs, rejected = run(inbox, tmp_path, files=2)
    # the answer cells' ids still name them
    assert students(subs) == {"jane_01_tiny.ipynb": "jane"}
    assert reasons(rejected) == {
        "bob_01_tiny.ipynb": "not a notebook of this assignment: none of its answer cells are in it"
    }


# ---------------------------------------------------------------------------------------------
# Resubmissions
# ---------------------------------------------------------------------------------------------


def test_the_latest_resubmission_is_kept_in_numeric_order(tmp_path: Path, notebook_text: str) -> None:
    names = ["jane_01_tiny-2.ipynb", "jane_01_tiny-10.ipynb", "jane_01_tiny.ipynb", "jane_01_tiny-1.ipynb"]
    inbox = write(tmp_path / "inbox", dict.fromkeys(names, notebook_text))
    subs, rejected = run(inbox, tmp_path, files=4)
    assert [s.origin for s in subs] == ["jane_01_tiny-10.ipynb"]
    kept = "superseded by a later file for the same student: jane_01_tiny-10.ipynb"
    # name.ipynb < name-1.ipynb < name-2.ipynb < name-10.ipynb, each naming the file that was kept
    assert [(r.origin, r.reason) for r in rejected] == [
        ("jane_01_tiny.ipynb", kept),
        ("jane_01_tiny-1.ipynb", kept),
        ("jane_01_tiny-2.ipynb", kept),
    ]


def test_a_canvas_resubmission_replaces_the_first(tmp_path: Path, notebook_text: str) -> None:
    inbox = write(
        tmp_path / "inbox",
        {
            "doejane_12345_67890_01_tiny-1.ipynb": notebook_text,
            "doejane_12345_67890_01_tiny.ipynb": notebook_text,
            "doejohn_12346_67891_01_tiny.ipynb": notebook_text,
        },
    )
    subs, rejected = run(inbox, tmp_path, files=3)
    assert students(subs) == {
        "doejane_12345_67890_01_tiny-1.ipynb": "canvas-12345",
        "doejohn_12346_67891_01_tiny.ipynb": "canvas-12346",
    }
    assert reasons(rejected) == {
        "doejane_12345_67890_01_tiny.ipynb": "superseded by a later file for the same student: "
        "doejane_12345_67890_01_tiny-1.ipynb"
    }


def test_a_rejected_resubmission_does_not_supersede_a_valid_one(tmp_path: Path, notebook_text: str) -> None:
    inbox = write(tmp_path / "inbox", {"jane_01_tiny.ipynb": notebook_text, "jane_01_tiny-1.ipynb": b""})
    subs, rejected = run(inbox, tmp_path, files=2)
    assert students(subs) == {"jane_01_tiny.ipynb": "jane"}
    assert reasons(rejected) == {"jane_01_tiny-1.ipynb": "empty file"}


# ---------------------------------------------------------------------------------------------
# nbgrader layout
# ---------------------------------------------------------------------------------------------


def test_nbgrader_layout(tmp_path: Path, notebook_text: str, stranger_text: str) -> None:
    inbox = write(
        tmp_path / "submitted",
        {
            "jane/01_tiny/01_tiny.ipynb": notebook_text,
            "Bob Smith/01_tiny/01_tiny.ipynb": notebook_text,
            "bob/02_unknown/02_unknown.ipynb": notebook_text,
            "carl/01_tiny/.ipynb_checkpoints/01_tiny-checkpoint.ipynb": notebook_text,
            "dan/01_tiny/01_tiny.ipynb": b"",
            "eve/01_tiny/notes.txt": "notes",
            "fay/01_tiny/01_tiny.ipynb": stranger_text,
            "README.md": "the class",
            "gus/01_tiny.ipynb": notebook_text,
        },
    )
    subs, rejected = run(inbox, tmp_path, files=9)
    assert [(s.student, s.assignment, s.origin) for s in subs] == [
        ("Bob Smith", TINY, "Bob Smith/01_tiny/01_tiny.ipynb"),
        ("jane", TINY, "jane/01_tiny/01_tiny.ipynb"),
    ]
    layout = "not in nbgrader's <student>/<assignment>/<notebook> layout"
    assert reasons(rejected) == {
        "bob/02_unknown/02_unknown.ipynb": "'02_unknown' is not an assignment being graded",
        "carl/01_tiny/.ipynb_checkpoints/01_tiny-checkpoint.ipynb": layout,
        "dan/01_tiny/01_tiny.ipynb": "empty file",
        "eve/01_tiny/notes.txt": "not a notebook (.ipynb) file",
        "fay/01_tiny/01_tiny.ipynb": "not a notebook of this assignment: none of its answer cells are in it",
        "README.md": layout,
        "gus/01_tiny.ipynb": layout,
    }


def test_nbgrader_layout_with_two_assignments(tmp_path: Path, notebook_text: str) -> None:
    inbox = write(
        tmp_path / "submitted",
        {"jane/01_tiny/01_tiny.ipynb": notebook_text, "jane/02_small/02_small.ipynb": notebook_text},
    )
    subs, rejected = run(inbox, tmp_path, [TINY, "02_small"], {**ANSWERS, "02_small": set()}, files=2)
    assert [(s.assignment, s.student) for s in subs] == [(TINY, "jane"), ("02_small", "jane")]
    assert rejected == []


def test_nbgrader_layout_of_one_student(tmp_path: Path, notebook_text: str) -> None:
    inbox = write(tmp_path / "submitted", {"jane/01_tiny/01_tiny.ipynb": notebook_text})
    subs, rejected = run(inbox, tmp_path, files=1)
    assert [(s.student, s.origin) for s in subs] == [("jane", "jane/01_tiny/01_tiny.ipynb")]
    assert rejected == []


def test_a_folder_holding_the_submitted_folder(tmp_path: Path, notebook_text: str) -> None:
    inbox = write(
        tmp_path / "export",
        {"submitted/jane/01_tiny/01_tiny.ipynb": notebook_text, "submitted/bob/01_tiny/notes.md": "x"},
    )
    subs, rejected = run(inbox, tmp_path, files=2)
    assert [(s.student, s.origin) for s in subs] == [("jane", "submitted/jane/01_tiny/01_tiny.ipynb")]
    assert reasons(rejected) == {"submitted/bob/01_tiny/notes.md": "not a notebook (.ipynb) file"}


# ---------------------------------------------------------------------------------------------
# Zip archives
# ---------------------------------------------------------------------------------------------


def test_zip_of_a_flat_export(tmp_path: Path, notebook_text: str) -> None:
    archive = make_zip(
        tmp_path / "export.zip",
        {
            "ann_01_tiny.ipynb": notebook_text,
            "doebob_1_2_01_tiny.ipynb": notebook_text,
            "doebob_1_2_01_tiny-1.ipynb": notebook_text,
            "sub/cy_01_tiny.ipynb": notebook_text,
            "readme.txt": "hi",
        },
        directories=("sub/", "empty/"),
    )
    subs, rejected = run(archive, tmp_path, files=5)
    assert students(subs) == {
        "export.zip:ann_01_tiny.ipynb": "ann",
        "export.zip:doebob_1_2_01_tiny-1.ipynb": "canvas-1",
        "export.zip:sub/cy_01_tiny.ipynb": "cy",
    }
    assert reasons(rejected) == {
        "export.zip:readme.txt": "not a notebook (.ipynb) file",
        "export.zip:doebob_1_2_01_tiny.ipynb": "superseded by a later file for the same student: "
        "export.zip:doebob_1_2_01_tiny-1.ipynb",
    }
    unzipped = tmp_path / "scratch" / "unzipped"
    # extracted under numbers (the entry's index), never under a name from the archive
    assert {s.path for s in subs} == {
        unzipped / "00000.ipynb",
        unzipped / "00002.ipynb",
        unzipped / "00003.ipynb",
    }
    assert all(s.path.read_text(encoding="utf-8") == notebook_text for s in subs)


def test_zip_of_an_nbgrader_layout(tmp_path: Path, notebook_text: str) -> None:
    archive = make_zip(
        tmp_path / "submitted.zip",
        {
            "ann/01_tiny/01_tiny.ipynb": notebook_text,
            "bob/01_tiny/01_tiny.ipynb": notebook_text,
            "bob/01_tiny/.ipynb_checkpoints/01_tiny-checkpoint.ipynb": notebook_text,
        },
        directories=("ann/", "ann/01_tiny/", "bob/", "bob/01_tiny/"),
    )
    subs, rejected = run(archive, tmp_path, files=3)
    assert [(s.student, s.origin) for s in subs] == [
        ("ann", "submitted.zip:ann/01_tiny/01_tiny.ipynb"),
        ("bob", "submitted.zip:bob/01_tiny/01_tiny.ipynb"),
    ]
    assert reasons(rejected) == {
        "submitted.zip:bob/01_tiny/.ipynb_checkpoints/01_tiny-checkpoint.ipynb": (
            "not in nbgrader's <student>/<assignment>/<notebook> layout"
        )
    }


def test_zip_of_the_submitted_folder_itself(tmp_path: Path, notebook_text: str) -> None:
    """``zip -r export.zip submitted``: the layout sits under one top-level folder."""
    archive = make_zip(
        tmp_path / "export.zip",
        {"submitted/ann/01_tiny/01_tiny.ipynb": notebook_text, "submitted/bob/01_tiny/01_tiny.ipynb": b""},
    )
    subs, rejected = run(archive, tmp_path, files=2)
    assert [(s.student, s.assignment, s.origin) for s in subs] == [
        ("ann", TINY, "export.zip:submitted/ann/01_tiny/01_tiny.ipynb")
    ]
    assert reasons(rejected) == {"export.zip:submitted/bob/01_tiny/01_tiny.ipynb": "empty file"}


def test_zip_members_with_unsafe_paths_are_rejected_and_not_written(
    tmp_path: Path, notebook_text: str
) -> None:
    archive = make_zip(
        tmp_path / "export.zip",
        {
            "ann_01_tiny.ipynb": notebook_text,
            "../evil_01_tiny.ipynb": notebook_text,
            "sub/../../evil2_01_tiny.ipynb": notebook_text,
            "/tmp/abs_01_tiny.ipynb": notebook_text,
        },
    )
    before = set(tmp_path.rglob("*"))
    subs, rejected = run(archive, tmp_path, files=4)
    assert students(subs) == {"export.zip:ann_01_tiny.ipynb": "ann"}
    assert reasons(rejected) == {
        "export.zip:../evil_01_tiny.ipynb": "unsafe path in zip archive",
        "export.zip:sub/../../evil2_01_tiny.ipynb": "unsafe path in zip archive",
        "export.zip:/tmp/abs_01_tiny.ipynb": "unsafe path in zip archive",
    }
    written = set(tmp_path.rglob("*")) - before
    unzipped = tmp_path / "scratch" / "unzipped"
    assert written == {tmp_path / "scratch", unzipped, unzipped / "00000.ipynb"}
    assert not Path("/tmp/abs_01_tiny.ipynb").exists()


def test_zip_of_only_unsafe_members(tmp_path: Path, notebook_text: str) -> None:
    archive = make_zip(tmp_path / "export.zip", {"../evil_01_tiny.ipynb": notebook_text})
    subs, rejected = run(archive, tmp_path, files=1)
    assert subs == []
    assert rejected == [Rejected("export.zip:../evil_01_tiny.ipynb", "unsafe path in zip archive")]


def test_an_empty_zip(tmp_path: Path) -> None:
    archive = make_zip(tmp_path / "export.zip", {})
    assert discover(archive, ASSIGNMENTS, ANSWERS, tmp_path / "scratch") == ([], [])


def test_a_zip_too_large_to_extract(tmp_path: Path, notebook_text: str, monkeypatch) -> None:
    monkeypatch.setattr(unzip, "MAX_ZIP_FILES", 1)
    archive = make_zip(
        tmp_path / "export.zip", {"ann_01_tiny.ipynb": notebook_text, "bob_01_tiny.ipynb": notebook_text}
    )
    subs, rejected = run(archive, tmp_path, files=1)
    assert subs == []
    assert rejected == [Rejected("export.zip", "zip archive too large to extract safely")]
    assert not list((tmp_path / "scratch").rglob("*.ipynb"))


def test_a_zip_whose_members_are_too_large_in_total(tmp_path: Path, notebook_text: str, monkeypatch) -> None:
    monkeypatch.setattr(unzip, "MAX_ZIP_BYTES", len(notebook_text.encode()) + 10)
    archive = make_zip(
        tmp_path / "export.zip", {"ann_01_tiny.ipynb": notebook_text, "bob_01_tiny.ipynb": notebook_text}
    )
    subs, rejected = run(archive, tmp_path, files=1)
    assert (subs, rejected) == ([], [Rejected("export.zip", "zip archive too large to extract safely")])


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("truncated", "File is not a zip file"),
        (b"PK\x03\x04 not really a zip", "File is not a zip file"),
        (b"", "File is not a zip file"),
    ],
    ids=["truncated", "junk", "empty"],
)
def test_a_corrupt_zip_is_rejected_as_a_zip(tmp_path: Path, notebook_text: str, content, why: str) -> None:
    if content == "truncated":
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as zf:
            zf.writestr("ann_01_tiny.ipynb", notebook_text)
            zf.writestr("bob_01_tiny.ipynb", notebook_text)
        content = buffer.getvalue()[: len(buffer.getvalue()) // 2]
    archive = tmp_path / "export.zip"
    archive.write_bytes(content)
    subs, rejected = run(archive, tmp_path, files=1)
    assert (subs, rejected) == ([], [Rejected("export.zip", f"not a readable zip archive ({why})")])


def test_a_corrupt_member_is_rejected_and_the_others_still_graded(tmp_path: Path, notebook_text: str) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in ("ann_01_tiny.ipynb", "bob_01_tiny.ipynb", "cy_01_tiny.ipynb"):
            zf.writestr(name, notebook_text)
        bob = zf.getinfo("bob_01_tiny.ipynb")
    data = bytearray(archive.read_bytes())
    # the stored bytes of bob's notebook start after its local header (30 bytes, its name, no extra)
    start = bob.header_offset + 30 + len(bob.filename)
    data[start + 100] ^= 0xFF
    archive.write_bytes(bytes(data))
    subs, rejected = run(archive, tmp_path, files=3)
    assert students(subs) == {"export.zip:ann_01_tiny.ipynb": "ann", "export.zip:cy_01_tiny.ipynb": "cy"}
    assert reasons(rejected) == {
        "export.zip:bob_01_tiny.ipynb": "not readable from the zip archive "
        "(Bad CRC-32 for file 'bob_01_tiny.ipynb')"
    }


def test_an_nbgrader_folder_name_is_the_student_id_unchanged(tmp_path: Path, notebook_text: str) -> None:
    """The ids an email or OAuth JupyterHub gives are nbgrader's ids as they are; a name in NFD (as
    macOS types it) is another folder, so another student, and the two are flagged, never merged."""
    nfc, nfd = "Jos\u00e9", "Jose\u0301"
    kept = ["jane.doe@uni.edu", "a__b", "Bob Smith", "x+y", nfc, nfd, "-dash"]
    inbox = write(tmp_path / "submitted", {f"{s}/01_tiny/01_tiny.ipynb": notebook_text for s in kept})
    subs, rejected = run(inbox, tmp_path, files=len(kept))
    assert rejected == [] and sorted(s.student for s in subs) == sorted(kept)
    (warning,) = intake_warnings(subs, {}, dt.datetime(2026, 12, 1))
    assert "graded as 2 students" in warning


def test_an_nbgrader_folder_name_that_cannot_be_an_id_is_rejected_with_the_reason(
    tmp_path: Path, notebook_text: str
) -> None:
    bell, bidi = "ann\x07", "eve\u202egnp.exe"
    inbox = write(tmp_path / "submitted", {f"{s}/01_tiny/01_tiny.ipynb": notebook_text for s in (bell, bidi)})
    (inbox / os.fsdecode(b"cy\xff") / "01_tiny").mkdir(parents=True)
    (inbox / os.fsdecode(b"cy\xff") / "01_tiny" / "01_tiny.ipynb").write_text(notebook_text)
    subs, rejected = run(inbox, tmp_path, files=3)
    prefix = "its student folder cannot be a student id: "
    assert subs == [] and reasons(rejected) == {
        "ann\x07/01_tiny/01_tiny.ipynb": prefix
        + "the folder name 'ann\\x07' holds a control character (U+0007)",
        f"{bidi}/01_tiny/01_tiny.ipynb": prefix
        + "the folder name 'eve\\u202egnp.exe' holds a control character (U+202E)",
        "cy\\xff/01_tiny/01_tiny.ipynb": prefix
        + "the folder name 'cy\\\\xff' is not UTF-8 text, which a gradebook cannot hold",
    }


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("..", "'..' cannot be a folder of its own"),
        (".", "'.' cannot be a folder of its own"),
        ("", "'' cannot be a folder of its own"),
        ("a/b", "a '/' or a NUL cannot be in a folder name"),
        ("a\0b", "a '/' or a NUL cannot be in a folder name"),
        ("a\nb", "the folder name 'a\\nb' holds a control character (U+000A)"),
        ("jane.doe@uni.edu", None),
        ("Jos\u00e9", None),
        ("a" * 255, None),
    ],
)
def test_unsafe_ids_say_why(name: str, reason: str | None) -> None:
    assert unsafe_id(name) == reason


# ---------------------------------------------------------------------------------------------
# student_id
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("jane", "jane"),
        ("Jane Doe", "Jane_Doe"),
        ("  jane.doe-2 ", "jane.doe-2"),
        ("Zoë", "Zo"),
        ("../../etc", "etc"),
        ("a/b\\c", "a_b_c"),
        ("___", ""),
        ("...", ""),
    ],
)
def test_student_id_is_safe_as_a_folder_name(text: str, expected: str) -> None:
    assert student_id(text) == expected


def patch_central_entry(archive: Path, name: str, offset: int, value: int) -> None:
    """Overwrite a 2-byte field of ``name``'s central directory entry (where zipfile reads a member's flags
    at offset 8 and its compression method at offset 10)."""
    data = bytearray(archive.read_bytes())
    entry = data.index(b"PK\x01\x02")
    while data[entry + 46 : entry + 46 + len(name)] != name.encode():
        entry = data.index(b"PK\x01\x02", entry + 4)
    data[entry + offset : entry + offset + 2] = value.to_bytes(2, "little")
    archive.write_bytes(bytes(data))


@pytest.mark.parametrize(
    ("offset", "value", "why"),
    [
        (8, 0x1, "it is encrypted"),
        (10, 9, "That compression method is not supported"),
    ],
    ids=["encrypted", "deflate64"],
)
def test_a_member_zipfile_cannot_read_is_rejected_and_the_others_still_graded(
    tmp_path: Path, notebook_text: str, offset: int, value: int, why: str
) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in ("ann_01_tiny.ipynb", "bob_01_tiny.ipynb", "cy_01_tiny.ipynb"):
            zf.writestr(name, notebook_text)
    patch_central_entry(archive, "bob_01_tiny.ipynb", offset, value)
    subs, rejected = run(archive, tmp_path, files=3)
    assert students(subs) == {"export.zip:ann_01_tiny.ipynb": "ann", "export.zip:cy_01_tiny.ipynb": "cy"}
    assert reasons(rejected) == {"export.zip:bob_01_tiny.ipynb": f"not readable from the zip archive ({why})"}


def test_an_extra_notebook_beside_the_assignment_notebook_is_not_graded(tmp_path: Path) -> None:
    """nbgrader grades the notebook named after the assignment; an Untitled.ipynb beside it is rejected."""
    folder = tmp_path / "in" / "alice" / "01_tiny"
    folder.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nb.cells[0].metadata["nbgrader"] = {"grade_id": "linear_layer", "solution": True}
    nbformat.write(nb, folder / "01_tiny.ipynb")
    nbformat.write(nb, folder / "Untitled.ipynb")
    subs, rejected = discover(
        tmp_path / "in", ["01_tiny"], {"01_tiny": {"linear_layer"}}, tmp_path / "scratch"
    )
    assert [s.path.name for s in subs] == ["01_tiny.ipynb"]
    assert [r.reason for r in rejected] == ["an extra file beside the assignment's notebook 01_tiny.ipynb"]
