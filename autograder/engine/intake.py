"""Find the submissions in what an instructor hands the grader, and account for every file.

Three layouts are accepted:

* nbgrader's ``<folder>/<student>/<assignment>/<notebook>.ipynb`` (the student id is the folder name;
  nbgrader's ``timestamp.txt`` beside the notebook gives the submission time);
* a flat folder of files named as a learning-management system exports them;
* a ``.zip`` of either, extracted safely first (regular files only).

Identity comes from the learning-management system's stable id, never from a display name, so two
students with one name never merge:

* **Canvas** ("Download Submissions" gives ``submissions.zip``) names each file
  ``<sortablename>_[LATE_]<userid>_<attachmentid>_<filename>[-N].<ext>``: the sortable name is the
  surname and given names run together, lower-case (``wangwei``), ``LATE`` (any case) marks a file
  submitted after the due date, then the Canvas user id, the attachment id, and the file name the
  learner uploaded, ``-N`` added by Canvas to a resubmission. The student is the Canvas user id
  (``canvas-<userid>``). Relied on: the files of real exports, as shown in public tools that unpack
  them (e.g. ``smithbob_340934_208490284_BobsWork.zip`` in mikewesthad/canvas-unzipper's README).
* **Moodle** ("Download all submissions") names each file
  ``<Full Name>_<participantid>_assignsubmission_file_<filename>`` (or puts it in a folder of that
  name): Moodle's ``mod/assign`` builds the prefix as the full name with every ``_`` replaced by a
  space, ``_``, then ``get_uniqueid_for_user`` (the participant id), through ``clean_filename``. The
  student is ``moodle-<participantid>``. A participant id is Moodle's per-assignment id of a user
  (its ``assign_user_mapping`` table), so a roster joins one person's assignments.
* **nbgrader's layout** and **plain names** (``jane_01_linear_layer.ipynb``): the student is the
  folder name, or the whole text before the assignment's name (``kim-lee``), kept as it is when it
  is safe as a folder name, otherwise made safe and suffixed with a hash of the original, so that
  two different raw ids never become one.

Every input file ends up either as a :class:`Submission` or as a :class:`Rejected` with the reason:
not a regular file (a symbolic link, a device, a pipe), not a notebook, empty, not readable as a
notebook (with the exact reason), no known assignment in its name, a notebook of another assignment
of the course (set aside, not graded in a run of one assignment), not a notebook of that
assignment, no student id, or superseded by a later file of the same student and assignment.
Damaged but recoverable notebooks are read: a UTF-8 byte-order mark, UTF-16, Latin-1 and nbformat 3
files are converted (:func:`read_notebook`).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat import NotebookNode

from autograder.course import grade_id

MAX_ZIP_BYTES = 2 * 1024**3
MAX_ZIP_FILES = 20_000
MAX_NOTEBOOK_BYTES = 50 * 1024**2

#: The file nbgrader's ``collect`` and exchange put beside a submitted notebook: its submission time.
TIMESTAMP_FILE = "timestamp.txt"

CANVAS = re.compile(r"(?P<name>[^_]*)_(?:(?P<late>late)_)?(?P<id>\d+)_(?P<attachment>\d+)_(?P<file>.+)", re.I)
MOODLE = re.compile(r"(?P<name>[^_]+)_(?P<id>\d+)_assignsubmission_[a-z]+_(?P<file>.*)", re.S)


@dataclass(frozen=True)
class Submission:
    """One notebook to grade, and who submitted it."""

    student: str
    """The student's id in the gradebook, from the LMS's stable id (see the module's docstring)."""
    assignment: str
    path: Path
    origin: str
    """The input file as the instructor named it (relative path, or ``archive.zip:member``)."""
    lms: str = ""
    """``canvas``, ``moodle``, ``nbgrader`` or ``""`` (plain names): where the id comes from."""
    lms_id: str = ""
    """The raw id in that system: the Canvas user id, the Moodle participant id, the folder name."""
    name: str = ""
    """The display name the file name carries (Canvas's sortable name, Moodle's full name)."""
    late: bool = False
    """The LMS marked the file late (Canvas's ``LATE``)."""
    timestamp: str = ""
    """When it was submitted (ISO 8601, UTC), when the export says: nbgrader's ``timestamp.txt`` or
    the zip entry's time; empty when unknown."""


@dataclass(frozen=True)
class Rejected:
    """An input file that will not be graded, and why."""

    origin: str
    reason: str
    student: str = ""
    """Whose file it is, when that could be made out."""
    assignment: str = ""
    other_assignment: bool = False
    """A notebook of another assignment of the course, set aside in a run that grades one assignment."""


def student_id(text: str) -> str:
    """A student id usable as an nbgrader id and a folder name: other characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text.strip()).strip("._-")


def stable_id(raw: str) -> str:
    """An id safe as a folder name that never maps two different raw ids to one: ``raw`` itself when
    it is safe, else its safe form and a hash of ``raw`` (``""`` when nothing of it is usable)."""
    safe = student_id(raw)
    if not safe or safe == raw:
        return safe
    return f"{safe}-{hashlib.sha256(raw.encode()).hexdigest()[:6]}"


@dataclass(frozen=True)
class Identity:
    """Who a file belongs to, as its name or folder says."""

    student: str
    lms: str = ""
    lms_id: str = ""
    name: str = ""
    late: bool = False


def identify(file_name: str, prefix: str, folder: str = "") -> Identity:
    """The student of a flat export's file: from its Canvas or Moodle name, the Moodle folder holding
    it, or else the text before the assignment's name (``prefix``)."""
    for text in (file_name, folder + "_"):
        m = MOODLE.fullmatch(text)
        if m:
            return Identity(f"moodle-{m['id']}", "moodle", m["id"], m["name"].strip())
    m = CANVAS.fullmatch(file_name)
    if m:
        return Identity(f"canvas-{m['id']}", "canvas", m["id"], m["name"], bool(m["late"]))
    raw = prefix.strip(" _-")
    return Identity(stable_id(raw), "", raw)


class NotebookError(ValueError):
    """A file that cannot be read as a notebook; the message is the exact reason."""


def _decode(data: bytes) -> str:
    """The text of a notebook file in whatever encoding an editor saved it."""
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8")
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16")
    if len(data) >= 2 and (data[0] == 0) != (data[1] == 0):  # UTF-16 without a byte-order mark
        return data.decode("utf-16-be" if data[0] == 0 else "utf-16-le")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("latin-1")
        try:
            json.loads(text)
        except ValueError:
            raise NotebookError(f"not UTF-8 text ({exc}), nor Latin-1 notebook JSON") from None
        return text


def read_notebook(path: Path) -> NotebookNode:
    """Read a notebook as nbformat 4, converting what is recoverable (UTF-8 with a byte-order mark,
    UTF-16, Latin-1, nbformat 3); raise :class:`NotebookError` naming the exact reason otherwise."""
    try:
        text = _decode(path.read_bytes())
    except UnicodeDecodeError as exc:
        raise NotebookError(f"not readable text ({exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise NotebookError(f"not valid notebook JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(data, dict):
        raise NotebookError(f"not a notebook: the file holds a JSON {type(data).__name__}, not an object")
    major = data.get("nbformat")
    if major not in (3, 4):
        raise NotebookError(f"not a notebook: nbformat version {major!r}, expected 4 (or 3)")
    try:
        return nbformat.reads(json.dumps(data), as_version=4)
    except Exception as exc:  # noqa: BLE001 - any conversion failure is a stated rejection
        first_line = str(exc).splitlines()[0][:160] if str(exc) else ""
        raise NotebookError(f"not a readable notebook ({type(exc).__name__}: {first_line})") from None


def _check_notebook(path: Path, answer_ids: set[str]) -> str | None:
    """Why the file is not a notebook of the assignment, or None when it is."""
    size = path.stat().st_size
    if size == 0:
        return "empty file"
    if size > MAX_NOTEBOOK_BYTES:
        return f"file of {size} bytes is over the {MAX_NOTEBOOK_BYTES} byte limit for a notebook"
    try:
        nb = read_notebook(path)
    except NotebookError as exc:
        return str(exc)
    cells = nb.get("cells", [])
    ids = {grade_id(c) for c in cells} | {c.get("id") for c in cells}
    if answer_ids and not (ids & answer_ids):
        return "not a notebook of this assignment: none of its answer cells are in it"
    return None


def _match_assignment(name: str, assignments: list[str]) -> str | None:
    found = [a for a in assignments if a in name]
    return max(found, key=len) if found else None


@dataclass(frozen=True)
class _File:
    path: Path
    origin: str
    timestamp: str = ""


def discover(
    inputs: Path,
    assignments: list[str],
    answer_cells: dict[str, set[str]],
    scratch: Path,
    course: list[str] | None = None,
) -> tuple[list[Submission], list[Rejected]]:
    """Find submissions for ``assignments`` in ``inputs`` (folder or zip); extract zips into ``scratch``.

    ``answer_cells`` maps each assignment to the grade ids of its answer cells: a notebook with none
    of them is rejected as belonging to another assignment. ``course`` names every assignment of the
    course: files of those not being graded are set aside (``Rejected.other_assignment``).
    """
    rejected: list[Rejected] = []
    course = sorted(set(course or []) | set(assignments))
    if inputs.is_symlink():
        return [], [Rejected(inputs.name, "a symbolic link, not a regular file: not followed")]
    if inputs.is_file():
        if not zipfile.is_zipfile(inputs) and inputs.suffix.lower() != ".zip":
            return _flat([_File(inputs, inputs.name)], assignments, course, answer_cells, rejected)
        folder = scratch / "unzipped"
        # made even when nothing is extracted (an empty, corrupt, unsafe or oversized archive)
        folder.mkdir(parents=True, exist_ok=True)
        files = _extract(inputs, folder, rejected)
        root = folder
    elif inputs.is_dir():
        root = inputs
        files = _walk(inputs, rejected)
    elif inputs.exists():
        return [], [Rejected(inputs.name, "not a regular file or folder (a device, pipe or socket)")]
    else:
        raise FileNotFoundError(f"no such file or folder: {inputs}")

    top = [p for p in root.iterdir() if not p.is_symlink()]
    if not _is_nbgrader_layout(root, course) and len(top) == 1 and top[0].is_dir():
        root = top[0]  # the layout may sit in one folder, as ``zip -r export.zip submitted`` makes it
    if _is_nbgrader_layout(root, course):
        return _nbgrader(files, root, assignments, course, answer_cells, rejected)
    return _flat(files, assignments, course, answer_cells, rejected)


def _walk(folder: Path, rejected: list[Rejected]) -> list[_File]:
    """The regular files under ``folder``; symbolic links, devices, pipes and sockets are rejected."""
    files = []
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if (here / name).is_symlink():
                dirnames.remove(name)
                origin = str((here / name).relative_to(folder))
                rejected.append(
                    Rejected(origin, "a symbolic link to a folder, not a regular file: not followed")
                )
        dirnames.sort()
        for name in sorted(filenames):
            path = here / name
            origin = str(path.relative_to(folder))
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                rejected.append(Rejected(origin, "a symbolic link, not a regular file: not followed"))
            elif not stat.S_ISREG(mode):
                rejected.append(Rejected(origin, "not a regular file (a device, pipe or socket)"))
            else:
                files.append(_File(path, origin))
    return files


def _zip_time(m: zipfile.ZipInfo) -> str:
    try:
        return dt.datetime(*m.date_time).isoformat()
    except ValueError:
        return ""


def _extract(archive: Path, folder: Path, rejected: list[Rejected]) -> list[_File]:
    files = []
    try:
        with zipfile.ZipFile(archive) as zf:
            members = [m for m in zf.infolist() if not m.is_dir()]
            if len(members) > MAX_ZIP_FILES or sum(m.file_size for m in members) > MAX_ZIP_BYTES:
                rejected.append(Rejected(archive.name, "zip archive too large to extract safely"))
                return []
            for m in members:
                origin = f"{archive.name}:{m.filename}"
                parts = Path(m.filename).parts
                target = folder / Path(*parts) if parts else folder
                if (
                    Path(m.filename).is_absolute()
                    or ".." in parts
                    or not target.resolve().is_relative_to(folder.resolve())
                ):
                    rejected.append(Rejected(origin, "unsafe path in zip archive"))
                    continue
                mode = m.external_attr >> 16
                if stat.S_ISLNK(mode):
                    rejected.append(
                        Rejected(origin, "a symbolic link in the zip archive, not a regular file")
                    )
                    continue
                if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
                    rejected.append(Rejected(origin, "not a regular file in the zip archive"))
                    continue
                # A damaged, encrypted or oddly compressed member is rejected alone: the others are graded.
                if m.flag_bits & 0x1:
                    rejected.append(Rejected(origin, "not readable from the zip archive (it is encrypted)"))
                    continue
                try:
                    with zf.open(m) as src:
                        content = src.read()
                except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError) as exc:
                    rejected.append(Rejected(origin, f"not readable from the zip archive ({exc})"))
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
                files.append(_File(target, origin, _zip_time(m)))
    except (zipfile.BadZipFile, OSError) as exc:
        rejected.append(Rejected(archive.name, f"not a readable zip archive ({exc})"))
    return files


def _is_nbgrader_layout(root: Path, assignments: list[str]) -> bool:
    return any(
        d.is_dir() and d.name in assignments
        for s in root.iterdir()
        if s.is_dir() and not s.is_symlink()
        for d in s.iterdir()
    )


def _accept(
    f: _File, who: Identity, assignment: str, answer_cells: dict[str, set[str]]
) -> Submission | Rejected:
    if not f.path.name.endswith(".ipynb"):
        return Rejected(f.origin, "not a notebook (.ipynb) file", who.student, assignment)
    if not who.student:
        return Rejected(f.origin, "no student id in the file name", "", assignment)
    problem = _check_notebook(f.path, answer_cells.get(assignment, set()))
    if problem:
        return Rejected(f.origin, problem, who.student, assignment)
    return Submission(
        who.student, assignment, f.path, f.origin, who.lms, who.lms_id, who.name, who.late, f.timestamp
    )


def _nbgrader_timestamp(path: Path) -> str:
    """nbgrader's ``timestamp.txt`` as ISO 8601 (UTC), or ``""`` when it is missing or unreadable."""
    from nbgrader.utils import parse_utc

    try:
        return parse_utc(path.read_text(encoding="utf-8").strip()).isoformat()
    except (OSError, ValueError, TypeError, OverflowError):
        return ""


def _nbgrader(files: list[_File], root: Path, assignments, course, answer_cells, rejected):
    found: list[Submission] = []
    for f in files:
        rel = f.path.relative_to(root).parts
        if len(rel) == 3 and rel[2] == TIMESTAMP_FILE and rel[1] in course:
            continue  # read with the notebook beside it
        if len(rel) != 3:
            rejected.append(Rejected(f.origin, "not in nbgrader's <student>/<assignment>/<notebook> layout"))
            continue
        folder, assignment, name = rel
        who = Identity(stable_id(folder), "nbgrader", folder)
        if assignment not in course:
            rejected.append(
                Rejected(f.origin, f"{assignment!r} is not an assignment being graded", who.student)
            )
            continue
        if assignment not in assignments:
            rejected.append(
                Rejected(
                    f.origin, f"a file of {assignment}, not graded in this run", who.student, assignment, True
                )
            )
            continue
        expected = f"{assignment}.ipynb"
        if name != expected and (f.path.parent / expected).is_file():
            rejected.append(
                Rejected(
                    f.origin,
                    f"an extra file beside the assignment's notebook {expected}",
                    who.student,
                    assignment,
                )
            )
            continue
        stamp = _nbgrader_timestamp(f.path.parent / TIMESTAMP_FILE) or f.timestamp
        outcome = _accept(_File(f.path, f.origin, stamp), who, assignment, answer_cells)
        (found if isinstance(outcome, Submission) else rejected).append(outcome)
    return _dedupe(found, rejected)


def _flat(files: list[_File], assignments, course, answer_cells, rejected):
    found: list[Submission] = []
    for f in files:
        name = f.path.name
        assignment = _match_assignment(name, course)
        if assignment is None:
            reason = (
                "not a notebook (.ipynb) file"
                if not name.endswith(".ipynb")
                else ("its name contains no assignment being graded (" + ", ".join(assignments) + ")")
            )
            rejected.append(Rejected(f.origin, reason))
            continue
        who = identify(name, name[: name.index(assignment)], f.path.parent.name)
        if assignment not in assignments:
            rejected.append(
                Rejected(
                    f.origin, f"a file of {assignment}, not graded in this run", who.student, assignment, True
                )
            )
            continue
        outcome = _accept(f, who, assignment, answer_cells)
        (found if isinstance(outcome, Submission) else rejected).append(outcome)
    return _dedupe(found, rejected)


def _resubmission(sub: Submission) -> tuple:
    """Sort key of a file among its student's files: a later Canvas attachment id comes later, and
    ``name-2.ipynb`` (a second resubmission, as learning-management systems name them) comes after
    ``name-1.ipynb``, after ``name.ipynb``."""
    m = CANVAS.fullmatch(Path(sub.origin.split(":")[-1]).name) if sub.lms == "canvas" else None
    attachment = int(m["attachment"]) if m else 0
    match = re.fullmatch(r"(.*?)-(\d+)(\.ipynb)", sub.origin)
    number = int(match.group(2)) if match else 0
    return (attachment, number, sub.timestamp, sub.origin)


def _dedupe(found: list[Submission], rejected: list[Rejected]) -> tuple[list[Submission], list[Rejected]]:
    """Keep the latest file for each student and assignment; reject the others, naming the one kept.

    Two files whose raw ids differ never merge, even should their ids in the gradebook coincide."""
    owner: dict[str, tuple[str, str]] = {}
    distinct: list[Submission] = []
    for sub in sorted(found, key=lambda s: s.origin):
        raw = (sub.lms, sub.lms_id)
        if owner.setdefault(sub.student, raw) != raw:
            lms, other = owner[sub.student]
            rejected.append(
                Rejected(
                    sub.origin,
                    f"its student id {sub.student!r} is already that of another student "
                    f"({lms or 'file name'} id {other!r}); not merged",
                    "",
                    sub.assignment,
                )
            )
            continue
        distinct.append(sub)
    ordered = sorted(distinct, key=_resubmission)
    keep: dict[tuple[str, str], Submission] = {(s.student, s.assignment): s for s in ordered}
    for sub in ordered:
        kept = keep[(sub.student, sub.assignment)]
        if sub is not kept:
            rejected.append(
                Rejected(
                    sub.origin,
                    f"superseded by a later file for the same student: {kept.origin}",
                    sub.student,
                    sub.assignment,
                )
            )
    return sorted(keep.values(), key=lambda s: (s.assignment, s.student)), rejected
