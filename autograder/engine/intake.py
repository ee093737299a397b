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
* **nbgrader's layout**: the student is the folder name, unchanged, as nbgrader and JupyterHub have
  it (``jane.doe@uni.edu``, ``a__b``, ``José``): nbgrader's own commands (``generate_feedback``,
  ``release_feedback``) find the student by it. A folder name that cannot be an id (not UTF-8, a
  control character) is rejected with the reason (:func:`~autograder.engine.names.unsafe_id`); one
  over :data:`~autograder.engine.names.MAX_ID` characters is bounded.
* **plain names** (``jane_01_linear_layer.ipynb``): the student is the whole text before the
  assignment's name (``kim-lee``), kept as it is when it is safe as a folder name, otherwise made
  safe and suffixed with a hash of the original, so that two different raw ids never become one.

Every input file ends up either as a :class:`Submission` or as a :class:`Rejected` with the reason:
not a regular file (a symbolic link, a device, a pipe), not a notebook, empty, not readable as a
notebook (with the exact reason), no known assignment in its name, a notebook of another assignment
of the course (set aside, not graded in a run of one assignment), not a notebook of that
assignment, no student id, or superseded by a later file of the same student and assignment.
Damaged but recoverable notebooks are read: a UTF-8 byte-order mark, UTF-16, Latin-1 and nbformat 3
files are converted (:func:`read_notebook`).

Everything here is untrusted: a notebook is bounded before it is parsed
(:mod:`autograder.engine.notebook_file`), a zip is extracted entry by entry, bounded while streaming,
under names the grader chooses (:mod:`autograder.engine.unzip`), and a file or folder name of any
bytes, length or Unicode form becomes a bounded id (:mod:`autograder.engine.names`). In Moodle's
"download in folders" export the participant folder owns every file in it: a file whose own name
claims another participant is rejected. Whatever goes wrong with one file is that file's outcome.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from autograder.course import grade_id
from autograder.engine import unzip
from autograder.engine.exchange import EXCHANGE_FILES
from autograder.engine.names import (
    CANVAS,
    MAX_ID,
    Identity,
    identify,
    identity,
    near_collisions,
    nfc,
    shown,
    stable_id,
    student_id,
    unsafe_id,
)
from autograder.engine.notebook_file import MAX_NOTEBOOK_BYTES, NotebookError, read_notebook, read_submission
from autograder.engine.unzip import MAX_TIMESTAMP_BYTES, TIMESTAMP_FILE

__all__ = [
    "MAX_NOTEBOOK_BYTES",
    "NotebookError",
    "Rejected",
    "Submission",
    "TIMESTAMP_FILE",
    "discover",
    "identify",
    "intake_warnings",
    "read_notebook",
    "stable_id",
    "student_id",
]


@dataclass(frozen=True)
class Submission:
    """One notebook to grade, and who submitted it."""

    student: str
    """The student's id in the gradebook, from the LMS's stable id (see the module's docstring)."""
    assignment: str
    path: Path
    origin: str
    """The input file as the instructor named it (relative path, or ``archive.zip:member``), as text
    any output can encode (:func:`~autograder.engine.names.shown`)."""
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
    sha256: str = field(default="", compare=False)
    """The SHA-256 of the bytes intake read and found a notebook of the assignment: what tells a re-run
    whether the submission changed (empty for a submission that came through no intake)."""


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


def _check_notebook(path: Path, answer_ids: set[str]) -> tuple[str | None, str]:
    """Why the file is not a notebook of the assignment (None when it is), and the SHA-256 of what was
    read (empty when nothing was)."""
    try:
        if path.stat().st_size == 0:
            return "empty file", ""
        nb, digest = read_submission(path)
    except NotebookError as exc:
        return str(exc), ""
    except OSError as exc:
        return f"not readable ({type(exc).__name__}: {exc.strerror or exc})", ""
    cells = nb.get("cells", [])
    ids = {grade_id(c) for c in cells} | {c.get("id") for c in cells if isinstance(c.get("id"), str)}
    if answer_ids and not (ids & answer_ids):
        return "not a notebook of this assignment: none of its answer cells are in it", digest
    return None, digest


def _match_assignment(name: str, assignments: list[str]) -> str | None:
    found = [a for a in assignments if a in name]
    return max(found, key=len) if found else None


@dataclass(frozen=True)
class _File:
    parts: tuple[str, ...]
    """Its path under the input, split into names (raw: not-UTF-8 bytes as lone surrogates)."""
    origin: str
    path: Path | None
    """Its bytes, or None for a file of a zip that is neither a notebook nor a time stamp."""
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
        return [], [Rejected(shown(inputs.name), "a symbolic link, not a regular file: not followed")]
    if inputs.is_file():
        if not unzip.zipfile.is_zipfile(inputs) and inputs.suffix.lower() != ".zip":
            single = _File((inputs.name,), shown(inputs.name), inputs)
            return _flat([single], assignments, course, answer_cells, rejected)
        entries, refused = unzip.extract(inputs, scratch / "unzipped")
        rejected += [Rejected(r.origin, r.reason) for r in refused]
        files = [_File(e.parts, e.origin, e.path, e.timestamp) for e in entries]
    elif inputs.is_dir():
        files = _walk(inputs, rejected)
    elif inputs.exists():
        return [], [Rejected(shown(inputs.name), "not a regular file or folder (a device, pipe or socket)")]
    else:
        raise FileNotFoundError(f"no such file or folder: {inputs}")
    tops = {f.parts[0] for f in files if len(f.parts) > 1} | {f.parts[0] for f in files if len(f.parts) == 1}
    if not _is_nbgrader_layout(files, course) and len(tops) == 1 and all(len(f.parts) > 1 for f in files):
        # the layout may sit in one folder, as ``zip -r export.zip submitted`` makes it
        inner = [_File(f.parts[1:], f.origin, f.path, f.timestamp) for f in files]
        if _is_nbgrader_layout(inner, course):
            files = inner
    if _is_nbgrader_layout(files, course):
        return _nbgrader(files, assignments, course, answer_cells, rejected)
    return _flat(files, assignments, course, answer_cells, rejected)


def _walk(folder: Path, rejected: list[Rejected]) -> list[_File]:
    """The regular files under ``folder``; symbolic links, devices, pipes, sockets and what cannot be
    read are rejected."""
    files = []

    def unreadable(exc: OSError) -> None:
        where = Path(exc.filename).relative_to(folder) if exc.filename else Path(".")
        rejected.append(Rejected(shown(str(where)), f"a folder that cannot be read ({exc.strerror})"))

    for dirpath, dirnames, filenames in os.walk(folder, onerror=unreadable):
        here = Path(dirpath)
        for name in sorted(dirnames):
            if (here / name).is_symlink():
                dirnames.remove(name)
                origin = shown(str((here / name).relative_to(folder)))
                rejected.append(
                    Rejected(origin, "a symbolic link to a folder, not a regular file: not followed")
                )
        dirnames.sort()
        for name in sorted(filenames):
            path = here / name
            parts = path.relative_to(folder).parts
            origin = shown("/".join(parts))
            try:
                mode = os.lstat(path).st_mode
            except OSError as exc:
                rejected.append(Rejected(origin, f"not readable ({exc.strerror})"))
                continue
            if stat.S_ISLNK(mode):
                rejected.append(Rejected(origin, "a symbolic link, not a regular file: not followed"))
            elif not stat.S_ISREG(mode):
                rejected.append(Rejected(origin, "not a regular file (a device, pipe or socket)"))
            else:
                files.append(_File(parts, origin, path))
    return files


def _is_nbgrader_layout(files: list[_File], assignments: list[str]) -> bool:
    return any(len(f.parts) >= 3 and f.parts[1] in assignments for f in files)


def _accept(
    f: _File, who: Identity, assignment: str, answer_cells: dict[str, set[str]]
) -> Submission | Rejected:
    if not f.parts[-1].endswith(".ipynb") or f.path is None:
        return Rejected(f.origin, "not a notebook (.ipynb) file", who.student, assignment)
    if not who.student:
        return Rejected(f.origin, "no student id in the file name", "", assignment)
    problem, digest = _check_notebook(f.path, answer_cells.get(assignment, set()))
    if problem:
        return Rejected(f.origin, problem, who.student, assignment)
    return Submission(
        who.student,
        assignment,
        f.path,
        f.origin,
        who.lms,
        who.lms_id,
        who.name,
        who.late,
        f.timestamp,
        digest,
    )


def _nbgrader_timestamp(path: Path | None) -> str:
    """nbgrader's ``timestamp.txt`` as ISO 8601 (UTC), or ``""`` when it is missing or unreadable."""
    from nbgrader.utils import parse_utc

    if path is None:
        return ""
    try:
        with path.open("rb") as f:
            text = f.read(MAX_TIMESTAMP_BYTES).decode("utf-8")
        return parse_utc(text.strip()).isoformat()
    except Exception:  # noqa: BLE001 - a learner's file: anything in it means "unknown"
        return ""


def _nbgrader(files: list[_File], assignments, course, answer_cells, rejected):
    found: list[Submission] = []
    present = {f.parts for f in files}
    stamps = {f.parts[:2]: f.path for f in files if len(f.parts) == 3 and f.parts[2] == TIMESTAMP_FILE}
    for f in files:
        rel = f.parts
        if len(rel) == 3 and rel[2] in EXCHANGE_FILES and rel[1] in course:
            continue  # read with the notebook beside it, carried with it (autograder.engine.exchange)
        if len(rel) != 3:
            rejected.append(Rejected(f.origin, "not in nbgrader's <student>/<assignment>/<notebook> layout"))
            continue
        folder, assignment, name = rel
        unsafe = unsafe_id(folder)
        if unsafe:
            rejected.append(Rejected(f.origin, f"its student folder cannot be a student id: {unsafe}"))
            continue
        # nbgrader's id, as its exchange and JupyterHub have it; only an over-long one is bounded
        who = identity(folder if len(folder) <= MAX_ID else stable_id(folder), "nbgrader", folder)
        if assignment not in course:
            rejected.append(
                Rejected(f.origin, f"{shown(assignment)!r} is not an assignment being graded", who.student)
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
        if name != expected and (folder, assignment, expected) in present:
            rejected.append(
                Rejected(
                    f.origin,
                    f"an extra file beside the assignment's notebook {expected}",
                    who.student,
                    assignment,
                )
            )
            continue
        stamp = _nbgrader_timestamp(stamps.get((folder, assignment))) or f.timestamp
        outcome = _accept(_File(f.parts, f.origin, f.path, stamp), who, assignment, answer_cells)
        (found if isinstance(outcome, Submission) else rejected).append(outcome)
    return _dedupe(found, rejected)


def _flat(files: list[_File], assignments, course, answer_cells, rejected):
    found: list[Submission] = []
    for f in files:
        name = nfc(f.parts[-1])
        assignment = _match_assignment(name, course)
        if assignment is None:
            reason = (
                "not a notebook (.ipynb) file"
                if not name.endswith(".ipynb")
                else ("its name contains no assignment being graded (" + ", ".join(assignments) + ")")
            )
            rejected.append(Rejected(f.origin, reason))
            continue
        who = identify(name, name[: name.index(assignment)], tuple(nfc(p) for p in f.parts[:-1]))
        if isinstance(who, str):
            rejected.append(Rejected(f.origin, who, "", assignment))
            continue
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


#: Where the time each assignment's release was first seen is kept, in the course directory.
RELEASED_FILE = Path("autograder") / "released.json"


def release_times(root: Path, assignments: list[str]) -> dict[str, dt.datetime]:
    """When each assignment was released, as far as the course directory knows (UTC): the time its
    student version was first seen in ``release/``, kept in :data:`RELEASED_FILE` from then on."""
    path = root / RELEASED_FILE
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    changed = False
    for name in assignments:
        release = root / "release" / name / f"{name}.ipynb"
        if name not in known and release.is_file():
            known[name] = (
                dt.datetime.fromtimestamp(release.stat().st_mtime, dt.UTC).replace(tzinfo=None).isoformat()
            )
            changed = True
    if changed:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(known, indent=1, sort_keys=True), encoding="utf-8")
    times = {}
    for name, text in known.items():
        try:
            times[name] = dt.datetime.fromisoformat(str(text))
        except ValueError:
            continue
    return times


def intake_warnings(
    submissions: list[Submission], released: dict[str, dt.datetime], now: dt.datetime
) -> list[str]:
    """What the instructor should look at that changes no score: names that may be one person's
    (:func:`~autograder.engine.names.near_collisions`), and submission times that cannot be true
    (before the assignment's release, or after ``now``; UTC, naive)."""
    people = {(s.student, s.lms_id) for s in submissions if s.lms in ("", "nbgrader")}
    warnings = near_collisions(sorted(people))
    slack = dt.timedelta(days=1)  # a zip entry's time is the exporting machine's local time
    for s in submissions:
        try:
            when = dt.datetime.fromisoformat(s.timestamp).replace(tzinfo=None) if s.timestamp else None
        except ValueError:
            when = None
        if when is None:
            continue
        start = released.get(s.assignment)
        if start is not None and when < start - slack:
            why = f"before {s.assignment} was released ({start.isoformat()})"
        elif when > now + slack:
            why = f"after this run ({now.replace(microsecond=0).isoformat()})"
        else:
            continue
        warnings.append(
            f"the submission time of {s.student} ({s.origin}) is {when.isoformat()}, {why}: it cannot be "
            "true. Under nbgrader's exchange, timestamp.txt is written by the learner's own `nbgrader "
            "submit`, so it can be forged"
        )
    return warnings
