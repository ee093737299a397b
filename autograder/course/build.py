"""Build the course: ``solutions/*.py`` -> nbgrader source notebooks -> student versions in ``notebooks/``.

The hand-edited sources are jupytext percent-format ``.py`` files. A cell header names the
nbgrader role of a cell::

    # %% solution grade_id="linear_forward"            an autograded answer cell
    # %% tests grade_id="test_linear_layer" points=4   a locked, graded test cell
    # %% locked grade_id="setup"                       a read-only cell: the imports the tests use

Every other cell is an ordinary cell. The build turns each source into an nbgrader source notebook
in ``<course>/source/<assignment>/`` (outside ``solutions/``, because nbgrader releases every file
in an assignment's source folder), runs nbgrader's ``generate_assignment``, and copies the student
version to ``notebooks/``. Cell ids are fixed (the grade id, or the cell's position), so building
twice gives identical bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import nbformat
from nbformat import NotebookNode

# The course's paths and assignments live in autograder.course; they are named here too, for the
# build's callers.
from autograder.course import COURSE as COURSE
from autograder.course import COURSE_ID as COURSE_ID
from autograder.course import NOTEBOOKS as NOTEBOOKS
from autograder.course import REPO as REPO
from autograder.course import SOLUTIONS as SOLUTIONS
from autograder.course import Assignment as Assignment
from autograder.course import assignments as assignments

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"
#: jupytext keeps layout hints in cell metadata; they mean nothing in the built notebook.
LAYOUT_KEYS = ("lines_to_next_cell", "lines_to_end_of_cell_marker", "cell_marker")


class BuildError(Exception):
    """A source notebook that cannot be built, with the file and cell that is wrong."""


def ensure_tools_on_path() -> None:
    """Put this interpreter's scripts folder on PATH: nbgrader runs ``alembic`` (gradebook
    migrations) as a command, which fails when the virtual environment is used without activation."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")


def nbgrader_config(root: Path = COURSE, db_url: str | None = None):
    """The nbgrader configuration of a course directory; ``nbgrader_config.py`` uses it too."""
    from traitlets.config import Config

    c = Config()
    c.CourseDirectory.root = str(root)
    if db_url:
        c.CourseDirectory.db_url = db_url
    c.CourseDirectory.course_id = COURSE_ID
    c.ClearSolutions.code_stub = {"python": STUB}
    c.Execute.timeout = 300
    # ipykernel logs a transport warning at every start; only the kernel's errors are worth showing.
    c.Execute.extra_arguments = ["--IPKernelApp.log_level=ERROR"]
    return c


def _nbgrader_metadata(kind: str, grade_id: str, points: float | None) -> dict:
    if kind == "solution":
        return {"grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3, "solution": True}
    if kind == "locked":
        return {"grade": False, "grade_id": grade_id, "locked": True, "schema_version": 3, "solution": False}
    if points is None:
        raise ValueError("a tests cell needs points=")
    return {
        "grade": True,
        "grade_id": grade_id,
        "locked": True,
        "points": points,
        "schema_version": 3,
        "solution": False,
    }


def _content_id(cell: NotebookNode, seen: set[str]) -> str:
    """A cell id made from the cell's kind and text, so that inserting a cell renumbers nothing; a
    cell whose text repeats an earlier one's gets the next free suffix."""
    digest = hashlib.sha256(f"{cell.cell_type}\n{cell.source}".encode()).hexdigest()[:10]
    cell_id, n = f"cell-{digest}", 1
    while cell_id in seen:
        n += 1
        cell_id = f"cell-{digest}-{n}"
    seen.add(cell_id)
    return cell_id


def source_notebook(source: Path) -> NotebookNode:
    """Read a jupytext source and return the nbgrader source notebook, with fixed cell ids."""
    import jupytext  # building only: grading reads the built notebooks, and jupytext costs ~2 s to import

    nb = jupytext.read(source, fmt="py:percent")
    seen: set[str] = set()
    for index, cell in enumerate(nb.cells):
        meta = cell.metadata
        for key in LAYOUT_KEYS:
            meta.pop(key, None)
        kind = meta.pop("title", None)
        garbled = meta.pop("incorrectly_encoded_metadata", None)
        where = f"{source.name}, cell {index + 1}"
        if garbled is not None:
            # jupytext keeps a header it cannot read as key=value pairs under this key, and the cell
            # would otherwise be reported as lacking the grade_id it does carry
            raise BuildError(
                f"{where}: cannot read the cell header's {garbled!r}: write each value as JSON, "
                'strings quoted (grade_id="test_x" points=2)'
            )
        grade_id = meta.pop("grade_id", None)
        points = meta.pop("points", None)
        if kind is None:
            if grade_id is not None or points is not None:
                raise BuildError(f"{where}: grade_id/points given without 'solution', 'tests' or 'locked'")
            cell.id = _content_id(cell, seen)
        elif kind in ("solution", "tests", "locked"):
            if not grade_id:
                raise BuildError(f'{where}: a {kind} cell needs grade_id="..." in its header')
            if grade_id in seen:
                raise BuildError(f"{where}: grade_id {grade_id!r} is used twice")
            seen.add(grade_id)
            try:
                meta["nbgrader"] = _nbgrader_metadata(kind, grade_id, points)
            except ValueError as exc:
                raise BuildError(f"{where}: {exc}") from None
            cell.id = grade_id
        else:
            raise BuildError(f"{where}: unknown cell kind {kind!r} (use 'solution', 'tests' or 'locked')")
        unexpected = sorted(set(meta) - {"nbgrader"})
        if unexpected:
            raise BuildError(f"{where}: unexpected cell metadata {unexpected}")
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb.metadata = {"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}}
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    return nb


def write_sources(root: Path = COURSE, solutions: Path = SOLUTIONS) -> list[Assignment]:
    """Write every assignment's nbgrader source notebook into ``<root>/source/<assignment>/``."""
    course, _ = sync_sources(root, solutions)
    return course


#: Where a course directory records what each source notebook was built from (outside ``source/``,
#: whose assignment folders nbgrader releases whole).
BUILT = Path("autograder") / "built-sources.json"


def _built_from(source: Path) -> str:
    """What a source notebook depends on: the ``.py`` source, this module's code, jupytext's version."""
    from importlib.metadata import version

    digest = hashlib.sha256(source.read_bytes())
    digest.update(Path(__file__).read_bytes())
    digest.update(f"jupytext {version('jupytext')} nbformat {nbformat.__version__}".encode())
    return digest.hexdigest()


def _read_built(root: Path) -> dict:
    try:
        data = json.loads((root / BUILT).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def sync_sources(
    root: Path = COURSE, solutions: Path = SOLUTIONS, only: list[str] | None = None
) -> tuple[list[Assignment], list[str]]:
    """Bring ``<root>/source/`` up to date; return the assignments and the names of those that changed.

    An unchanged source is not rewritten, so a course directory with graded submissions is only
    regenerated where the course itself changed. ``only`` limits the work to those assignments.
    A source notebook whose ``.py`` source, build code and the notebook's own bytes are those
    recorded in ``<root>/autograder/built-sources.json`` is known unchanged without reading the
    source (and so without importing jupytext: the grading commands never do).
    """
    found = [a for a in assignments(solutions) if only is None or a.name in only]
    if not found:
        raise BuildError(f"no sources found in {solutions}")
    built = _read_built(root)
    recorded = dict(built)
    changed = []
    for a in found:
        folder = root / "source" / a.name
        target = folder / a.notebook
        release = root / "release" / a.name / a.notebook
        key = _built_from(a.source)
        known = built.get(a.name)
        if (
            isinstance(known, dict)
            and known.get("from") == key
            and target.exists()
            and release.exists()
            and known.get("notebook") == hashlib.sha256(target.read_bytes()).hexdigest()
        ):
            continue
        text = nbformat.writes(source_notebook(a.source)) + "\n"
        recorded[a.name] = {"from": key, "notebook": hashlib.sha256(text.encode()).hexdigest()}
        if target.exists() and target.read_text(encoding="utf-8") == text and release.exists():
            continue
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        target.write_text(text, encoding="utf-8")
        changed.append(a.name)
    if recorded != built:
        (root / BUILT).parent.mkdir(parents=True, exist_ok=True)
        tmp = (root / BUILT).with_suffix(".tmp")
        tmp.write_text(json.dumps(recorded, indent=1, sort_keys=True))
        tmp.replace(root / BUILT)
    return found, changed


def generate(root: Path, names: list[str], db_url: str | None = None) -> None:
    """Run nbgrader's ``generate_assignment`` for each assignment in the course at ``root``."""
    from nbgrader.apps import NbGraderAPI

    ensure_tools_on_path()
    api = NbGraderAPI(config=nbgrader_config(root, db_url))
    for name in names:
        result = api.generate_assignment(name, force=True)
        if not result["success"]:
            raise BuildError(
                f"nbgrader generate_assignment {name} failed:\n{result['error']}\n{result['log']}"
            )


def build(root: Path = COURSE, out: Path = NOTEBOOKS, solutions: Path = SOLUTIONS) -> list[Path]:
    """Build the course at ``root`` and copy the student versions into ``out``; return their paths."""
    found = write_sources(root, solutions)
    generate(root, [a.name for a in found])
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for a in found:
        target = out / a.notebook
        shutil.copyfile(root / "release" / a.name / a.notebook, target)
        written.append(target)
    return written
