"""A class roster: who may submit, and their names and emails, from the LMS's own export.

Read from a CSV in any of these formats (recognised by its header):

* **Canvas's gradebook export** ("Grades" > "Export"): ``Student`` ("Last, First"), ``ID`` (the Canvas
  user id that submission file names carry), ``SIS User ID``, ``SIS Login ID``, ``Section``, then a
  column per assignment; its "Points Possible" row is skipped.
* **Moodle's grading worksheet** (an assignment's "Download grading worksheet"): ``Identifier``
  ("Participant 123", the participant id that submission file names carry), ``Full name``,
  ``Email address``.
* **Moodle's gradebook export** ("Grades" > "Export" > "Plain text file"): ``First name``,
  ``Last name`` (or ``Surname``), ``ID number``, ``Email address``. It has no participant id, so a file
  is matched by its full name, and only when exactly one person on the roster has it.
* **nbgrader's student list** (``nbgrader db student import``): ``id``, ``first_name``, ``last_name``,
  ``email`` and optionally ``lms_user_id``.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path


class RosterError(ValueError):
    """The roster file cannot be read; the message says why."""


@dataclass(frozen=True)
class Person:
    """One student on the roster."""

    student: str
    """The id their files get (``canvas-<id>``, ``moodle-<participant id>``, or nbgrader's id); empty
    for a Moodle gradebook row, matched by name."""
    first_name: str = ""
    last_name: str = ""
    email: str = ""
    lms_user_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    section: str = ""

    @property
    def full_name(self) -> str:
        """First name then last name."""
        return " ".join(p for p in (self.first_name, self.last_name) if p)


@dataclass
class Roster:
    """Everyone on the roster, by student id and by full name."""

    source: str
    kind: str
    people: dict[str, Person] = field(default_factory=dict)
    by_name: dict[str, list[Person]] = field(default_factory=dict)

    def find(self, student: str, lms: str = "", lms_id: str = "", name: str = "") -> Person | None:
        """The person a file belongs to, or None when they are not on the roster (or, matched by
        name, when several people share the name)."""
        if student in self.people:
            return self.people[student]
        if self.by_name and name:
            found = self.by_name.get(_name_key(name), [])
            return found[0] if len(found) == 1 else None
        return None

    def why_not(self, student: str, name: str = "") -> str:
        """Why a file's student was not found on the roster."""
        who = f"{student} ({name})" if name else student
        if self.by_name and name and len(self.by_name.get(_name_key(name), [])) > 1:
            return f"student {who}: several people on the roster {self.source} have this name"
        return f"student {who} is not on the roster {self.source}"


def _name_key(name: str) -> str:
    return " ".join(name.casefold().split())


def _cell(row: dict, *names: str) -> str:
    """The first of ``names`` the row has a value for, stripped (empty when none)."""
    return next((row[n] for n in names if row.get(n)), "").strip()


def _canvas(row: dict) -> Person | None:
    uid = _cell(row, "ID")
    if not uid.isdigit():  # "Points Possible" and other non-student rows
        return None
    last, _, first = (row.get("Student") or "").partition(",")
    login = _cell(row, "SIS Login ID")
    email = login if "@" in login else ""
    sis, section = _cell(row, "SIS User ID"), _cell(row, "Section")
    return Person(f"canvas-{uid}", first.strip(), last.strip(), email, uid, sis, login, section)


def _moodle(row: dict) -> Person | None:
    m = re.search(r"(\d+)\s*$", row.get("Identifier") or "")
    if not m:
        return None
    first, _, last = _cell(row, "Full name").rpartition(" ")
    return Person(f"moodle-{m[1]}", first, last, _cell(row, "Email address"), m[1])


def _moodle_gradebook(row: dict) -> Person | None:
    last = _cell(row, "Last name", "Surname")
    first, email, sis = _cell(row, "First name"), _cell(row, "Email address"), _cell(row, "ID number")
    return Person("", first, last, email, sis_user_id=sis)


def _nbgrader(row: dict) -> Person | None:
    sid = _cell(row, "id")
    if not sid:
        return None
    names = _cell(row, "first_name"), _cell(row, "last_name")
    return Person(sid, *names, _cell(row, "email"), _cell(row, "lms_user_id"))


#: Each format: the columns that tell it, its kind, and how a row becomes a person (None: no student).
_FORMATS = (
    ({"Student", "ID"}, "canvas", _canvas),
    ({"Identifier", "Full name"}, "moodle", _moodle),
    ({"First name", "Email address"}, "moodle-gradebook", _moodle_gradebook),
    ({"id"}, "nbgrader", _nbgrader),
)


def load_roster(path: Path) -> Roster:
    """Read a roster CSV (see the module's docstring for the formats)."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise RosterError(f"cannot read the roster {path}: {exc}") from None
    lines = text.splitlines()
    header = {h.strip() for h in next(csv.reader(lines[:1]), [])}
    known = next(((kind, person) for columns, kind, person in _FORMATS if columns <= header), None)
    if known is None:
        raise RosterError(
            f"the roster {path} is not a Canvas gradebook export (Student, ID, ...), a Moodle grading "
            "worksheet (Identifier, Full name, ...), a Moodle gradebook export (First name, Email address, "
            "...) or nbgrader's student list (id, first_name, last_name, email)"
        )
    roster = Roster(path.name, known[0])
    for person in filter(None, map(known[1], csv.DictReader(lines))):
        if person.student:
            roster.people[person.student] = person
        else:  # a Moodle gradebook row: matched by name
            roster.by_name.setdefault(_name_key(person.full_name), []).append(person)
    if not roster.people and not roster.by_name:
        raise RosterError(f"the roster {path} lists no students")
    return roster
