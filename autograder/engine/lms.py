"""Grades back to the learning-management system, and the LMS's file names.

* :func:`write_canvas_import`: a CSV for Canvas's "Grades" > "Import": the columns ``Student``,
  ``ID`` (the Canvas user id), ``SIS User ID``, ``SIS Login ID``, ``Section`` that Canvas's own
  gradebook export starts with, then one column per assignment, a "Points Possible" row, and
  ``Final Points`` (the per-student total; a read-only column that Canvas ignores on import). Canvas
  matches rows by ``ID`` and creates a gradebook column for an assignment name it does not know.
* :func:`write_moodle_worksheets`: for each assignment, a CSV for Moodle's "Upload grading
  worksheet" (the format its "Download grading worksheet" gives: ``Identifier`` "Participant N",
  ``Full name``, ``Email address``, ``Status``, ``Grade``, ``Maximum Grade``, ``Grade can be changed``,
  ``Last modified (submission)``, ``Last modified (grade)``, ``Feedback comments``); Moodle matches
  rows by ``Identifier``. A participant id belongs to one assignment, hence one file per assignment.
* :func:`write_moodle_gradebook`: when a roster gives emails, a CSV for Moodle's gradebook
  "Import" > "CSV file": ``First name``, ``Last name``, ``Email address`` (the field to map users by),
  a column per assignment and ``Total``.

:func:`write_import_files` writes those that apply to a course. All read final scores (manual
adjustments and late penalties included) from the gradebook, and write through
:class:`~autograder.engine.untrusted.CsvWriter`: a name that starts like a formula is text.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from autograder.engine.gradebook import Final
from autograder.engine.outcome import Outcome
from autograder.engine.untrusted import CsvWriter


def canvas_file_name(
    sortable_name: str,
    user_id: int,
    attachment_id: int,
    file_name: str,
    late: bool = False,
    resubmission: int = 0,
) -> str:
    """A file name as Canvas's "Download Submissions" writes it (see :mod:`autograder.engine.intake`)."""
    stem, dot, ext = file_name.rpartition(".")
    name = f"{stem}-{resubmission}.{ext}" if resubmission else file_name
    return "_".join([sortable_name, *(["LATE"] if late else []), str(user_id), str(attachment_id), name])


def moodle_file_name(full_name: str, participant_id: int, file_name: str) -> str:
    """A file name as Moodle's "Download all submissions" writes it (``_`` in the name become spaces)."""
    return f"{full_name.replace('_', ' ')}_{participant_id}_assignsubmission_file_{file_name}"


def write_canvas_import(path: Path, finals: list[Final], people: dict[str, dict[str, str]]) -> int:
    """Write Canvas's gradebook import CSV for the Canvas students among ``finals``; return the rows.

    ``people`` maps a student id to the roster's ``name``, ``sis_user_id``, ``sis_login_id``,
    ``section`` (empty when there is no roster)."""
    canvas = [f for f in finals if f.student.startswith("canvas-")]
    assignments = sorted({f.assignment for f in finals})
    maxima = {f.assignment: f.max_score for f in finals}
    rows: dict[str, dict[str, Final]] = defaultdict(dict)
    for f in canvas:
        rows[f.student][f.assignment] = f
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = CsvWriter(fh)
        w.writerow(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", *assignments, "Final Points"])
        w.writerow(["Points Possible", "", "", "", "", *(maxima[a] for a in assignments), ""])
        for student in sorted(rows, key=lambda s: int(s.split("-", 1)[1])):
            got = rows[student]
            p = people.get(student, {})
            any_f = next(iter(got.values()))
            name = p.get("name") or ", ".join(x for x in (any_f.last_name, any_f.first_name) if x)
            w.writerow(
                [
                    name,
                    student.split("-", 1)[1],
                    p.get("sis_user_id", ""),
                    p.get("sis_login_id", ""),
                    p.get("section", ""),
                    *((got[a].score) if a in got else "" for a in assignments),
                    (sum(f.score for f in got.values())),
                ]
            )
    return len(rows)


def write_moodle_worksheets(folder: Path, finals: list[Final]) -> list[Path]:
    """Write one Moodle grading worksheet per assignment with Moodle submissions; return the files."""
    moodle = [f for f in finals if f.student.startswith("moodle-")]
    written = []
    by_assignment: dict[str, list[Final]] = defaultdict(list)
    for f in moodle:
        by_assignment[f.assignment].append(f)
    for assignment, rows in sorted(by_assignment.items()):
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"moodle_worksheet_{assignment}.csv"
        with path.open("w", newline="", encoding="utf-8") as fh:
            w = CsvWriter(fh)
            w.writerow(
                [
                    "Identifier",
                    "Full name",
                    "Email address",
                    "Status",
                    "Grade",
                    "Maximum Grade",
                    "Grade can be changed",
                    "Last modified (submission)",
                    "Last modified (grade)",
                    "Feedback comments",
                ]
            )
            for f in sorted(rows, key=lambda f: int(f.student.split("-", 1)[1])):
                name = " ".join(x for x in (f.first_name, f.last_name) if x)
                w.writerow(
                    [
                        f"Participant {f.student.split('-', 1)[1]}",
                        name,
                        f.email,
                        "Submitted for grading",
                        (f.score),
                        (f.max_score),
                        "Yes",
                        f.timestamp,
                        "",
                        "",
                    ]
                )
        written.append(path)
    return written


def write_moodle_gradebook(path: Path, finals: list[Final]) -> int:
    """Write Moodle's gradebook import CSV (users mapped by email) for the Moodle submissions whose
    student has an email; return the rows (none written when no email is known)."""
    rows: dict[str, dict[str, Final]] = defaultdict(dict)
    names: dict[str, tuple[str, str]] = {}
    for f in finals:
        if f.student.startswith("moodle-") and f.email:
            rows[f.email][f.assignment] = f
            names[f.email] = (f.first_name, f.last_name)
    if not rows:
        return 0
    assignments = sorted({a for got in rows.values() for a in got})
    with path.open("w", newline="", encoding="utf-8") as fh:
        w = CsvWriter(fh)
        w.writerow(["First name", "Last name", "Email address", *assignments, "Total"])
        for email in sorted(rows):
            got = rows[email]
            w.writerow(
                [
                    *names[email],
                    email,
                    *((got[a].score) if a in got else "" for a in assignments),
                    (sum(f.score for f in got.values())),
                ]
            )
    return len(rows)


def write_import_files(
    out: Path, outcomes: list[Outcome], finals: dict, roster: Path, warnings: list[str]
) -> dict[str, Path]:
    """The files to import into Canvas and Moodle, from the gradebook's final scores (the SIS ids and
    sections Canvas's file carries come from the course's copy of the roster, ``roster``, when there is
    one); a roster that cannot be read is a warning. Returns the files written, by name."""
    files: dict[str, Path] = {}
    graded_finals = [
        finals[(o.student, o.assignment)] for o in outcomes if (o.student, o.assignment) in finals
    ]
    people = {
        o.student: {"name": ", ".join(x for x in (f.last_name, f.first_name) if x)}
        for o in outcomes
        for f in [finals.get((o.student, o.assignment))]
        if f is not None
    }
    if roster.exists():  # the SIS ids and sections Canvas's import file carries come from the roster
        from autograder.engine.roster import RosterError, load_roster

        try:
            for student, p in load_roster(roster).people.items():
                people.setdefault(student, {}).update(
                    sis_user_id=p.sis_user_id, sis_login_id=p.sis_login_id, section=p.section
                )
        except RosterError as exc:
            warnings.append(f"the course's roster could not be read again ({exc})")
    if any(f.student.startswith("canvas-") for f in graded_finals):
        files["canvas"] = out / "canvas_import.csv"
        write_canvas_import(files["canvas"], graded_finals, people)
    for path in write_moodle_worksheets(out, graded_finals):
        files[path.stem] = path
    if write_moodle_gradebook(out / "moodle_gradebook_import.csv", graded_finals):
        files["moodle"] = out / "moodle_gradebook_import.csv"
    return files
