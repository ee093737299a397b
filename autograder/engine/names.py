"""Names from outside (file and folder names, LMS display names) as ids, as text, and compared.

A file name can be any bytes but ``/`` and NUL (Python gives the bytes that are not UTF-8 as lone
surrogates), up to 255 bytes; a zip entry's name up to 65 535 bytes; the same name typed on macOS
arrives decomposed (NFD). Here:

* :func:`shown` is a name as text that any output can encode: bytes that are not UTF-8 become
  ``\\xNN``;
* :func:`unsafe_id` says why a folder name cannot be a student id as it is (nbgrader's layout keeps a
  student's folder name, as nbgrader and JupyterHub have it, unchanged as the id: ``jane.doe@uni.edu``,
  ``a__b``, ``José``);
* :func:`stable_id` is a student id made from a raw name: safe as a folder name and an nbgrader id,
  at most :data:`MAX_ID` characters, the same for a name in NFC and in NFD, and never the same for two
  different names (a hash of the raw name is added whenever the id is not the name itself);
* :func:`identify` is the student of a file of a flat export: Canvas's and Moodle's file names (and
  Moodle's participant folders) carry the LMS's stable id, a plain name the text before the assignment's
  name (the rules are in :mod:`autograder.engine.intake`);
* :func:`near_collisions` names the students whose ids differ but whose names differ only in case,
  compatibility form or punctuation (``Kim Lee`` and ``kim_lee``): perhaps one person, perhaps two.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

#: The longest student id (a result file is named after it; a file name has at most 255 bytes).
MAX_ID = 64


def shown(text: str) -> str:
    """``text`` as valid Unicode: lone surrogates (a file name's bytes that are not UTF-8) as ``\\xNN``."""
    return (
        text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        if _has_surrogates(text)
        else text
    )


def _has_surrogates(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def nfc(text: str) -> str:
    """``text`` in Unicode's composed form (NFC), which names are compared in."""
    return unicodedata.normalize("NFC", text)


def _digest(raw: str) -> str:
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def student_id(text: str) -> str:
    """A student id usable as an nbgrader id and a folder name: other characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text.strip()).strip("._-")


def unsafe_id(raw: str) -> str | None:
    """Why the folder name ``raw`` cannot be kept as a student id in every folder and database the
    grader writes it to, or None when it can: it must be a name a folder can have (no ``/``, no NUL, not
    ``.`` or ``..``) and text (UTF-8, no control characters). One over :data:`MAX_ID` characters is
    kept too, bounded by :func:`stable_id` (a result file is named after it)."""
    if raw in ("", ".", ".."):
        return f"{raw!r} cannot be a folder of its own"
    if "/" in raw or "\0" in raw:
        return "a '/' or a NUL cannot be in a folder name"
    if _has_surrogates(raw):
        return f"the folder name {shown(raw)!r} is not UTF-8 text, which a gradebook cannot hold"
    control = next((ch for ch in raw if _is_control(ch)), None)
    if control is not None:
        return f"the folder name {ascii(raw)} holds a control character (U+{ord(control):04X})"
    return None


def _is_control(ch: str) -> bool:
    """A character that is not text: C0/C1 controls, line and paragraph separators, and the
    bidirectional overrides that make a name read as another one."""
    return (
        unicodedata.category(ch) in ("Cc", "Zl", "Zp")
        or "\u202a" <= ch <= "\u202e"
        or ("\u2066" <= ch <= "\u2069")
    )


def stable_id(raw: str) -> str:
    """An id safe as a folder name that never maps two different raw ids to one: ``raw`` itself when
    it is safe and at most :data:`MAX_ID` long, else its safe form (cut) and a hash of ``raw`` in NFC
    (``""`` when nothing of it is usable)."""
    raw = nfc(raw)
    safe = student_id(raw)
    if not safe or (safe == raw and len(safe) <= MAX_ID):
        return safe
    return f"{safe[: MAX_ID - 7]}-{_digest(raw)[:6]}"


def bounded(student: str) -> str:
    """A student id made elsewhere (``moodle-<id>``) kept under :data:`MAX_ID` the same way."""
    if len(student) <= MAX_ID:
        return student
    return f"{student_id(student)[: MAX_ID - 7]}-{_digest(student)[:6]}"


def _fold(name: str) -> str:
    """What two names that may be one person's share: NFKC, case-folded, letters and digits only."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", name).casefold() if ch.isalnum())


def near_collisions(people: Iterable[tuple[str, str]]) -> list[str]:
    """A warning for each group of distinct students, given as ``(student, raw name)``, whose names
    differ only in case, compatibility form or punctuation."""
    groups: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for student, name in people:
        if _fold(name):
            groups[_fold(name)].add((student, shown(name)))
    warnings = []
    for found in groups.values():
        students = sorted({s for s, _ in found})
        if len(students) > 1:
            names = ", ".join(repr(n) for n in sorted({n for _, n in found}))
            warnings.append(
                f"the names {names} differ only in case, Unicode form or punctuation, and are graded as "
                f"{len(students)} students ({', '.join(students)}): check that they are not one person"
            )
    return warnings


# -- who a file of an LMS export belongs to ---------------------------------------------------------

CANVAS = re.compile(r"(?P<name>[^_]*)_(?:(?P<late>late)_)?(?P<id>\d+)_(?P<attachment>\d+)_(?P<file>.+)", re.I)
MOODLE = re.compile(r"(?P<name>[^_]+)_(?P<id>\d+)_assignsubmission_[a-z]+_(?P<file>.*)", re.S)
#: The longest display name kept (Canvas's sortable name, Moodle's full name).
MAX_NAME = 200


@dataclass(frozen=True)
class Identity:
    """Who a file belongs to, as its name or folder says."""

    student: str
    lms: str = ""
    lms_id: str = ""
    name: str = ""
    late: bool = False


def identity(student: str, lms: str, raw_id: str, name: str = "", late: bool = False) -> Identity:
    """An identity with every text from outside bounded and shown as text."""
    return Identity(bounded(student), lms, shown(nfc(raw_id))[:MAX_NAME], shown(nfc(name))[:MAX_NAME], late)


def identify(file_name: str, prefix: str, folders: tuple[str, ...] = ()) -> Identity | str:
    """The student of a flat export's file, or why it cannot be theirs.

    The outermost Moodle participant folder among ``folders`` owns the file (Moodle names that folder;
    the file's own name is what the participant uploaded): a file or folder inside it whose name
    claims another participant is refused. Else the Moodle or Canvas file name, or the text before
    the assignment's name (``prefix``)."""
    owner = next((m for m in (MOODLE.fullmatch(f + "_") for f in folders) if m), None)
    if owner:
        for text in (*folders, file_name):
            claim = MOODLE.fullmatch(text) or MOODLE.fullmatch(text + "_")
            if claim and claim["id"] != owner["id"]:
                who = shown(claim["name"].strip())
                return (
                    f"its name claims Moodle participant {claim['id']} ({who}), but it is in the folder of "
                    f"participant {owner['id']}, who owns every file in it: not graded"
                )
        return identity(f"moodle-{owner['id']}", "moodle", owner["id"], owner["name"].strip())
    m = MOODLE.fullmatch(file_name)
    if m:
        return identity(f"moodle-{m['id']}", "moodle", m["id"], m["name"].strip())
    m = CANVAS.fullmatch(file_name)
    if m:
        return identity(f"canvas-{m['id']}", "canvas", m["id"], m["name"], bool(m["late"]))
    raw = nfc(prefix.strip(" _-"))
    return identity(stable_id(raw), "", raw)
