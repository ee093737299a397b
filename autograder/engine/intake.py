"""Find the submissions in what an instructor hands the grader, and account for every file.

Three layouts are accepted:

* nbgrader's ``<folder>/<student>/<assignment>/<notebook>.ipynb``;
* a flat folder of files named as a learning-management system exports them, with the student id
  first and the notebook's name in the file name, e.g. ``doejane_12345_67890_01_linear_layer.ipynb``
  (Canvas), ``Jane Doe_12345_assignsubmission_file_01_linear_layer.ipynb`` (Moodle) or
  ``jane_01_linear_layer.ipynb``: the student id is the part before the first ``_`` (or ``-``);
* a ``.zip`` of either, extracted safely first.

Every input file ends up either as a :class:`Submission` or as a :class:`Rejected` with the reason:
not a notebook, empty, not valid notebook JSON, no known assignment in its name, not a notebook of
that assignment, no student id, or a duplicate of a later file for the same student and assignment.
"""

from __future__ import annotations

import re
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import nbformat

MAX_ZIP_BYTES = 2 * 1024**3
MAX_ZIP_FILES = 20_000
MAX_NOTEBOOK_BYTES = 50 * 1024**2


@dataclass(frozen=True)
class Submission:
    """One notebook to grade."""

    student: str
    assignment: str
    path: Path
    origin: str
    """The input file as the instructor named it (relative path, or ``archive.zip:member``)."""


@dataclass(frozen=True)
class Rejected:
    """An input file that will not be graded, and why."""

    origin: str
    reason: str


def student_id(text: str) -> str:
    """A student id usable as an nbgrader id and a folder name: other characters become ``_``."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", text.strip()).strip("._-")


def _answer_ids(source_cells: dict[str, set[str]], assignment: str) -> set[str]:
    return source_cells.get(assignment, set())


def _check_notebook(path: Path, answer_ids: set[str]) -> str | None:
    """Why the file is not a notebook of the assignment, or None when it is."""
    size = path.stat().st_size
    if size == 0:
        return "empty file"
    if size > MAX_NOTEBOOK_BYTES:
        return f"file of {size} bytes is over the {MAX_NOTEBOOK_BYTES} byte limit for a notebook"
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # noqa: BLE001 - any parse failure is a stated rejection
        first_line = str(exc).splitlines()[0][:120] if str(exc) else ""
        return f"not valid notebook JSON ({type(exc).__name__}: {first_line})"
    ids = {_grade_id(c) for c in nb.get("cells", [])} | {c.get("id") for c in nb.get("cells", [])}
    if answer_ids and not (ids & answer_ids):
        return "not a notebook of this assignment: none of its answer cells are in it"
    return None


def _grade_id(cell) -> str | None:
    # nbformat does not validate a cell's nbgrader metadata: a learner's edit can make it any JSON
    meta = cell.get("metadata", {}).get("nbgrader")
    return meta.get("grade_id") if isinstance(meta, dict) else None


def _match_assignment(name: str, assignments: list[str]) -> str | None:
    found = [a for a in assignments if a in name]
    return max(found, key=len) if found else None


def discover(
    inputs: Path, assignments: list[str], answer_cells: dict[str, set[str]], scratch: Path
) -> tuple[list[Submission], list[Rejected]]:
    """Find submissions for ``assignments`` in ``inputs`` (folder or zip); extract zips into ``scratch``.

    ``answer_cells`` maps each assignment to the grade ids of its answer cells: a notebook with none
    of them is rejected as belonging to another assignment.
    """
    rejected: list[Rejected] = []
    if inputs.is_file():
        if not zipfile.is_zipfile(inputs) and inputs.suffix.lower() != ".zip":
            return _flat([(inputs, inputs.name)], assignments, answer_cells, rejected)
        folder = scratch / "unzipped"
        # made even when nothing is extracted (an empty, corrupt, unsafe or oversized archive)
        folder.mkdir(parents=True, exist_ok=True)
        files = _extract(inputs, folder, rejected)
        root = folder
    elif inputs.is_dir():
        root = inputs
        files = [(p, str(p.relative_to(inputs))) for p in sorted(inputs.rglob("*")) if p.is_file()]
    else:
        raise FileNotFoundError(f"no such file or folder: {inputs}")

    top = list(root.iterdir())
    if not _is_nbgrader_layout(root, assignments) and len(top) == 1 and top[0].is_dir():
        root = top[0]  # the layout may sit in one folder, as ``zip -r export.zip submitted`` makes it
    if _is_nbgrader_layout(root, assignments):
        return _nbgrader(files, root, inputs, assignments, answer_cells, rejected)
    return _flat(files, assignments, answer_cells, rejected)


def _extract(archive: Path, folder: Path, rejected: list[Rejected]) -> list[tuple[Path, str]]:
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
                if Path(m.filename).is_absolute() or ".." in parts:
                    rejected.append(Rejected(origin, "unsafe path in zip archive"))
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
                target = folder / Path(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
                files.append((target, origin))
    except (zipfile.BadZipFile, OSError) as exc:
        rejected.append(Rejected(archive.name, f"not a readable zip archive ({exc})"))
    return files


def _is_nbgrader_layout(root: Path, assignments: list[str]) -> bool:
    return any(
        d.is_dir() and d.name in assignments for s in root.iterdir() if s.is_dir() for d in s.iterdir()
    )


def _accept(
    path: Path, origin: str, student: str, assignment: str, answer_cells: dict[str, set[str]]
) -> Submission | Rejected:
    if not path.name.endswith(".ipynb"):
        return Rejected(origin, "not a notebook (.ipynb) file")
    if not student:
        return Rejected(origin, "no student id in the file name")
    problem = _check_notebook(path, _answer_ids(answer_cells, assignment))
    if problem:
        return Rejected(origin, problem)
    return Submission(student, assignment, path, origin)


def _nbgrader(files, root, inputs, assignments, answer_cells, rejected):
    found: list[Submission] = []
    for path, origin in files:
        rel = path.relative_to(root).parts
        if len(rel) != 3:
            rejected.append(Rejected(origin, "not in nbgrader's <student>/<assignment>/<notebook> layout"))
            continue
        student, assignment, name = rel
        if assignment not in assignments:
            rejected.append(Rejected(origin, f"{assignment!r} is not an assignment being graded"))
            continue
        expected = f"{assignment}.ipynb"
        if name != expected and (path.parent / expected).is_file():
            rejected.append(Rejected(origin, f"an extra file beside the assignment's notebook {expected}"))
            continue
        outcome = _accept(path, origin, student_id(student), assignment, answer_cells)
        (found if isinstance(outcome, Submission) else rejected).append(outcome)
    return _dedupe(found, rejected)


def _flat(files, assignments, answer_cells, rejected):
    found: list[Submission] = []
    for path, origin in files:
        name = path.name
        assignment = _match_assignment(name, assignments)
        if assignment is None:
            reason = (
                "not a notebook (.ipynb) file"
                if not name.endswith(".ipynb")
                else ("its name contains no assignment being graded (" + ", ".join(assignments) + ")")
            )
            rejected.append(Rejected(origin, reason))
            continue
        prefix = name[: name.index(assignment)]
        student = (
            student_id(re.split(r"[_-]", prefix.strip(" _-"), maxsplit=1)[0]) if prefix.strip(" _-") else ""
        )
        outcome = _accept(path, origin, student, assignment, answer_cells)
        (found if isinstance(outcome, Submission) else rejected).append(outcome)
    return _dedupe(found, rejected)


def _resubmission(origin: str) -> tuple[str, int]:
    """Sort key of a file among its student's files: ``name-2.ipynb`` (a second resubmission, as
    learning-management systems name them) comes after ``name-1.ipynb``, after ``name.ipynb``."""
    match = re.fullmatch(r"(.*?)-(\d+)(\.ipynb)", origin)
    return (match.group(1) + match.group(3), int(match.group(2))) if match else (origin, 0)


def _dedupe(found: list[Submission], rejected: list[Rejected]) -> tuple[list[Submission], list[Rejected]]:
    """Keep the latest file for each student and assignment; reject the others, naming the one kept."""
    ordered = sorted(found, key=lambda s: _resubmission(s.origin))
    keep: dict[tuple[str, str], Submission] = {(s.student, s.assignment): s for s in ordered}
    for sub in ordered:
        kept = keep[(sub.student, sub.assignment)]
        if sub is not kept:
            rejected.append(
                Rejected(sub.origin, f"superseded by a later file for the same student: {kept.origin}")
            )
    return sorted(keep.values(), key=lambda s: (s.assignment, s.student)), rejected
