"""The course's grading engine as a Gradescope autograder.

``python -m autograder gradescope ASSIGNMENT`` writes the ``autograder.zip`` that Gradescope takes for
a programming assignment. What it relies on, from Gradescope's autograder documentation
("Autograder Specifications", "Base Images"), not from Gradescope's servers:

* the zip holds ``setup.sh`` and ``run_autograder`` at its root; Gradescope extracts it into
  ``/autograder/source``, runs ``setup.sh`` once, as root, when it builds the image (Ubuntu 22.04 by
  default), and copies ``run_autograder`` to ``/autograder/run_autograder``;
* for each submission it puts the learner's files in ``/autograder/submission``, runs
  ``run_autograder`` in ``/autograder``, and reads ``/autograder/results/results.json``: an object
  with an optional ``score`` (required when a test has none), ``execution_time``, ``output``,
  ``visibility``, ``stdout_visibility``, ``extra_data`` and ``tests``, each test an object with
  optional ``score``, ``max_score``, ``name``, ``number``, ``output``, ``tags``, ``visibility`` and
  ``extra_data``; a visibility is ``hidden``, ``after_due_date``, ``after_published`` or ``visible``
  (the default), and while a test is not visible the learner does not see the total score either;
* what ``run_autograder`` prints is shown to instructors only, unless ``stdout_visibility`` says
  otherwise.

The autograder grades the one notebook of the submission as ``grade`` does, hidden tests included
(:func:`autograder.engine.pipeline.grade_alone`), jailed where the container lets the engine make
namespaces. Each graded cell is a test worth its points, its output the cell's feedback, hidden (by
default) until the instructor publishes the grades, since every cell's score comes from its hidden
test. A submission that cannot be graded (no notebook, several, one that is not a notebook of the
assignment, an error of the grader itself) ends in a ``results.json`` saying why, shown at once.
``GRADESCOPE_AUTOGRADER_ROOT`` (or ``--root``) points the scripts at another folder laid out like
``/autograder`` and ``GRADESCOPE_AUTOGRADER_PYTHON`` at another Python with the course installed,
which is how the tests run them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autograder.course import REPO, SOLUTIONS, Assignment, CourseError, assignments

#: Gradescope's visibility settings, from its documentation.
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")
#: The environment variable that moves the ``/autograder`` root (tests; Gradescope never sets it).
ROOT_VARIABLE = "GRADESCOPE_AUTOGRADER_ROOT"
#: The environment variable that names the Python ``run_autograder`` runs (tests: the checkout's).
PYTHON_VARIABLE = "GRADESCOPE_AUTOGRADER_PYTHON"
DEFAULT_ROOT = Path("/autograder")
#: Folders of an upload that hold no submission: Jupyter's and macOS's own copies.
IGNORED_FOLDERS = {".ipynb_checkpoints", "__MACOSX"}
#: A zip entry's fixed time, so that the same course gives the same bytes.
ZIP_TIME = (2026, 1, 1, 0, 0, 0)

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (Ubuntu 22.04 by default):
# Python 3.11 or later, a virtual environment beside the course, the course's pinned requirements and
# the course itself. util-linux gives the engine unshare and setpriv, to jail each kernel where the
# container allows it.
set -euo pipefail
SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    apt-get install -y -qq python3-venv util-linux
    PYTHON=python3
else
    apt-get install -y -qq python3.11 python3.11-venv util-linux
    PYTHON=python3.11
fi
"$PYTHON" -m venv "$SOURCE/.venv"
"$SOURCE/.venv/bin/pip" install --quiet --upgrade pip
{torch}"$SOURCE/.venv/bin/pip" install --quiet -r "$SOURCE/requirements.txt"
"$SOURCE/.venv/bin/pip" install --quiet --no-deps --editable "$SOURCE"
"""

TORCH = """# PyTorch's CPU build (the course never uses a GPU), from the index given to --torch-index.
"$SOURCE/.venv/bin/pip" install --quiet "$(grep -E '^torch==' "$SOURCE/requirements.txt" | cut -d' ' -f1)" \\
    --index-url {index}
"""

RUN = """#!/usr/bin/env bash
# Gradescope runs this for every submission, as root, in /autograder. For tests, {variable} moves that
# root and {python} names the course's Python (default: the virtual environment setup.sh made).
# It always leaves a results.json: when the grader itself fails, one that says so.
ROOT="${{{variable}:-/autograder}}"
PYTHON="${{{python}:-$ROOT/source/.venv/bin/python}}"
mkdir -p "$ROOT/results"
rm -f "$ROOT/results/results.json"
"$PYTHON" -m autograder.engine.gradescope {assignment} --root "$ROOT" --visibility {visibility}
if [ ! -s "$ROOT/results/results.json" ]; then
    cat > "$ROOT/results/results.json" <<'RESULTS'
{failed}
RESULTS
fi
exit 0
"""

GRADER_FAILED = (
    "The autograder failed before it could grade this submission: this is a fault of the grader, not of "
    "your notebook. Tell your instructor; the details are in the autograder's output, which instructors see."
)


# -- the zip --------------------------------------------------------------------------------------


def _course_files(assignment: Assignment) -> list[tuple[str, Path]]:
    """What ``setup.sh`` installs: the package's sources and metadata, and this assignment's source only
    (the other assignments' hidden tests stay out of the image)."""
    files = [("pyproject.toml", REPO / "pyproject.toml"), ("requirements.txt", REPO / "requirements.txt")]
    for package in ("autograder", "utils"):
        for path in sorted((REPO / package).rglob("*.py")):
            if "__pycache__" not in path.parts:
                files.append((path.relative_to(REPO).as_posix(), path))
    files.append((f"solutions/{assignment.source.name}", assignment.source))
    return files


def _entry(archive: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    archive.writestr(info, data)


def autograder_zip(
    assignment: str,
    out: Path,
    solutions: Path = SOLUTIONS,
    visibility: str = "after_published",
    torch_index: str | None = None,
) -> Path:
    """Write Gradescope's ``autograder.zip`` for ``assignment`` to ``out``; return ``out``.

    ``visibility`` is every graded cell's test's (Gradescope's values); ``torch_index`` the package index
    ``setup.sh`` takes PyTorch from (e.g. PyTorch's CPU wheel index), by default requirements.txt's.
    """
    if visibility not in VISIBILITIES:
        raise CourseError(f"visibility {visibility!r} is not one of Gradescope's: {', '.join(VISIBILITIES)}")
    found = {a.name: a for a in assignments(solutions)}
    if assignment not in found:
        raise CourseError(f"unknown assignment {assignment!r}; the course has: {', '.join(found)}")
    torch = TORCH.format(index=torch_index) if torch_index else ""
    failed = json.dumps(stated(GRADER_FAILED, error="the grader did not run"))
    run = RUN.format(
        variable=ROOT_VARIABLE,
        python=PYTHON_VARIABLE,
        assignment=assignment,
        visibility=visibility,
        failed=failed,
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as archive:
        _entry(archive, "setup.sh", SETUP.replace("{torch}", torch).encode(), executable=True)
        _entry(archive, "run_autograder", run.encode(), executable=True)
        for name, path in _course_files(found[assignment]):
            _entry(archive, name, path.read_bytes())
    return out


# -- grading one submission -----------------------------------------------------------------------


@dataclass
class Choice:
    """The notebook of a submission to grade, or why there is none; ``note`` says what was left out."""

    notebook: Path | None
    reason: str = ""
    note: str = ""


def _files(submission: Path) -> tuple[list[Path], list[Path]]:
    """The regular files of the submission folder, and what is not one (links, devices): never followed."""
    regular, other = [], []
    for folder, dirs, names in os.walk(submission):
        dirs[:] = sorted(d for d in dirs if d not in IGNORED_FOLDERS)
        for name in sorted(names):
            path = Path(folder) / name
            (regular if path.is_file() and not path.is_symlink() else other).append(path)
    return regular, other


def choose_notebook(submission: Path, expected: str) -> Choice:
    """The one notebook in ``submission`` to grade (``expected`` is the assignment's notebook name)."""
    if not submission.is_dir():
        return Choice(None, f"There is no submission to grade: upload your notebook {expected}.")
    regular, other = _files(submission)
    notebooks = [p for p in regular if p.suffix.lower() == ".ipynb"]
    shown = [p.relative_to(submission).as_posix() for p in regular + other]
    if not notebooks:
        if not shown:
            return Choice(None, f"The submission is empty: upload your notebook {expected}.")
        listed = ", ".join(shown[:10]) + (", ..." if len(shown) > 10 else "")
        return Choice(None, f"The submission has no notebook (.ipynb) in it ({listed}): upload {expected}.")
    if len(notebooks) == 1:
        return Choice(notebooks[0])
    named = [p for p in notebooks if p.name == expected]
    others = ", ".join(p.relative_to(submission).as_posix() for p in notebooks if p not in named)
    if len(named) == 1:
        return Choice(named[0], note=f"Graded {expected}; the other notebooks were not graded: {others}.")
    return Choice(
        None,
        f"The submission has {len(notebooks)} notebooks and the grader cannot tell which one to grade "
        f"({', '.join(p.relative_to(submission).as_posix() for p in notebooks)}): upload only {expected}.",
    )


def stated(output: str, **extra: Any) -> dict[str, Any]:
    """The results of a submission that was not graded: score 0, the reason shown to the learner at once."""
    return {
        "score": 0.0,
        "output": output,
        "stdout_visibility": "hidden",
        "extra_data": {"graded": False, **extra},
        "tests": [],
    }


def _titles(source: Any) -> dict[str, str]:
    """Each graded cell's test name: its check's title, by the cell's grade id (``source``: the
    assignment's source notebook)."""
    from autograder.grading.prepare import grade_cells
    from autograder.grading.verdicts import check_for

    titles = {}
    for cell in grade_cells(source):
        check = check_for(cell.final_call.function) if cell.final_call else None
        titles[cell.grade_id] = check.title if check else cell.grade_id
    return titles


def results_for(outcome: Any, titles: dict[str, str], visibility: str, note: str = "") -> dict[str, Any]:
    """Gradescope's results of a graded notebook (:class:`~autograder.engine.outcome.Outcome`)."""
    tests = [
        {
            "name": titles.get(cell.grade_id, cell.grade_id),
            "number": str(number),
            "score": float(cell.score),
            "max_score": float(cell.points),
            "output": cell.feedback,
            "tags": [cell.grade_id],
            "visibility": visibility,
        }
        for number, cell in enumerate(outcome.cells, 1)
    ]
    lines = [note] if note else []
    if outcome.status == "failed":
        lines.append(f"Your notebook could not be graded: {outcome.reason}.")
    else:
        shown = (
            "appear here" if visibility == "visible" else "appear when your instructor publishes the grades"
        )
        lines.append(f"Your notebook was graded: your score and each exercise's feedback {shown}.")
        if outcome.reason:
            lines.append(f"It stopped early: {outcome.reason}.")
    lines += [f"Note: {text}" for text in outcome.restored + outcome.errors + outcome.flags]
    return {
        "score": float(outcome.score),
        "execution_time": round(outcome.seconds),
        "output": "\n".join(lines),
        "stdout_visibility": "hidden",
        "extra_data": {
            "graded": outcome.status != "failed",
            "status": outcome.status,
            "jailed": outcome.jailed,
            "seeds": outcome.seeds,
            "course_version": outcome.course_version,
        },
        "tests": tests,
    }


def _answer_cells(source: Any) -> set[str]:
    from autograder.course import grade_id, is_solution

    return {grade_id(c) for c in source.cells if is_solution(c)} - {None}


def grade_submission(root: Path, assignment: str, solutions: Path, visibility: str) -> dict[str, Any]:
    """The results of the submission in ``root/submission``: graded, or stated when it cannot be."""
    from autograder.engine.intake import MAX_NOTEBOOK_BYTES, discover
    from autograder.engine.pipeline import grade_alone

    a = {m.name: m for m in assignments(solutions)}[assignment]
    choice = choose_notebook(root / "submission", a.notebook)
    if choice.notebook is None:
        return stated(choice.reason)
    name = choice.notebook.relative_to(root / "submission").as_posix()
    if choice.notebook.stat().st_size > MAX_NOTEBOOK_BYTES:
        return stated(f"{name} is over the {MAX_NOTEBOOK_BYTES} byte limit for a notebook.")
    from autograder.course.build import source_notebook

    source = source_notebook(a.source)
    scratch = Path(tempfile.mkdtemp(prefix="gradescope-"))
    try:
        # The engine's intake decides whether the file is a readable notebook of this assignment, in
        # nbgrader's layout (the student's folder, the assignment's folder, the notebook).
        folder = scratch / "submitted" / "learner" / assignment
        folder.mkdir(parents=True)
        shutil.copyfile(choice.notebook, folder / a.notebook)
        found, rejected = discover(
            scratch / "submitted", [assignment], {assignment: _answer_cells(source)}, scratch
        )
        if not found:
            why = rejected[0].reason if rejected else "not a notebook of this assignment"
            return stated(f"{name} was not graded: {why}. Upload your notebook {a.notebook}.")
        outcome = grade_alone(found[0].path, assignment, solutions, sha256=found[0].sha256)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"graded {name}: {outcome.score:g}/{outcome.max_score:g}, {outcome.status}, jailed: {outcome.jailed}"
    )
    if not outcome.jailed:
        print("WARNING: the kernel ran without the jail (this container does not allow namespaces)")
    return results_for(outcome, _titles(source), visibility, choice.note)


def run(
    root: Path, assignment: str, solutions: Path | None = None, visibility: str = "after_published"
) -> dict:
    """Grade ``root/submission``, write ``root/results/results.json`` and return its results; never raises."""
    start = time.monotonic()
    try:
        results = grade_submission(root, assignment, solutions or root / "source" / "solutions", visibility)
    except (Exception, SystemExit):  # noqa: BLE001 - every failure of the grader is a stated result
        traceback.print_exc(file=sys.stdout)
        results = stated(GRADER_FAILED, error=traceback.format_exc(limit=1).strip().splitlines()[-1])
    results.setdefault("execution_time", round(time.monotonic() - start))
    out = root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(results, indent=1, ensure_ascii=False), encoding="utf-8")
    tmp.replace(out)
    return results


def main(argv: list[str] | None = None) -> int:
    """``python -m autograder.engine.gradescope ASSIGNMENT``: what ``run_autograder`` runs. Exit status 0
    always (a results.json says what happened)."""
    parser = argparse.ArgumentParser(
        prog="python -m autograder.engine.gradescope", description=__doc__.split("\n")[0]
    )
    parser.add_argument("assignment")
    parser.add_argument("--root", type=Path, default=Path(os.environ.get(ROOT_VARIABLE) or DEFAULT_ROOT))
    parser.add_argument("--solutions", type=Path, default=None, help="default: ROOT/source/solutions")
    parser.add_argument("--visibility", choices=VISIBILITIES, default="after_published")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MPLBACKEND", "Agg")
    from autograder.engine import light

    light.nbformat()  # before anything imports it: see autograder.engine.light
    results = run(args.root.resolve(), args.assignment, args.solutions, args.visibility)
    print(f"results.json: score {results['score']:g}, {len(results['tests'])} tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
