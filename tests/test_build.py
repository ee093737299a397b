"""The build: deterministic student versions that never contain solutions or hidden tests."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import nbformat
import pytest

from autograder.course.build import NOTEBOOKS, BuildError, assignments, source_notebook

ASSIGNMENTS = [a.name for a in assignments()]


def test_there_are_notebooks_to_build() -> None:
    assert ASSIGNMENTS[:2] == ["01_linear_layer", "02_two_layer_net"]


def test_committed_notebooks_are_exactly_a_fresh_build(built_course: Path) -> None:
    fresh = sorted(p.name for p in (built_course / "notebooks").glob("*.ipynb"))
    committed = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    assert committed == fresh, "notebooks/ holds other files than the build makes: run `make build`"
    for name in fresh:
        assert (NOTEBOOKS / name).read_bytes() == (built_course / "notebooks" / name).read_bytes(), (
            f"notebooks/{name} differs from a fresh build of solutions/: run `make build` and commit"
        )


def _code_only(source: str) -> str:
    """The code of a cell without its comments and string literals: a docstring may state the math
    an exercise implements (that is its contract); only code would give the answer away."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return source
    kept = [t for t in tokens if t.type not in (tokenize.COMMENT, tokenize.STRING)]
    return tokenize.untokenize(kept)


def _normalise(code: str) -> str:
    return re.sub(r"\s+", "", code)


def _blocks(source: str, begin: str, end: str) -> list[str]:
    pattern = re.compile(rf"^[ \t]*### {begin}\n(.*?)^[ \t]*### {end}", re.M | re.S)
    return pattern.findall(source)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_student_version_contains_no_solution_and_no_hidden_test(built_course: Path, name: str) -> None:
    source = nbformat.read(built_course / "source" / name / f"{name}.ipynb", as_version=4)
    student_text = (built_course / "notebooks" / f"{name}.ipynb").read_text()
    student = nbformat.read(built_course / "notebooks" / f"{name}.ipynb", as_version=4)
    student_code = _normalise("\n".join(_code_only(c.source) for c in student.cells if c.cell_type == "code"))
    hidden = [b for c in source.cells for b in _blocks(c.source, "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")]
    solutions = [b for c in source.cells for b in _blocks(c.source, "BEGIN SOLUTION", "END SOLUTION")]
    assert solutions, "every notebook has exercises"
    assert hidden, "every notebook has hidden tests"
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in student_text
    # Lines that also appear outside the blocks (e.g. `return out`) are no secret; every other
    # line of a solution or hidden test must be gone.
    outside = {
        line.strip()
        for c in source.cells
        for line in re.sub(
            r"### BEGIN (SOLUTION|HIDDEN TESTS).*?### END \1", "", c.source, flags=re.S
        ).splitlines()
    }
    for block in solutions + hidden:
        for line in block.splitlines():
            text = line.strip()
            if len(text) > 8 and text not in outside and not text.startswith("#"):
                assert _normalise(text) not in student_code, f"{name}: the student version leaks {text!r}"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_test_cell_opens_with_a_docstring_and_ends_with_a_score(built_course: Path, name: str) -> None:
    nb = nbformat.read(built_course / "source" / name / f"{name}.ipynb", as_version=4)
    tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert tests
    for cell in tests:
        assert cell.metadata.nbgrader["locked"] is True
        tree = ast.parse(cell.source)
        first, last = tree.body[0], tree.body[-1]
        assert isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant), cell.id
        doc = first.value.value
        assert isinstance(doc, str) and doc.strip().endswith(".") and doc.count(". ") == 0, cell.id
        calls = {
            n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }
        assert len({c for c in calls if c.startswith("check_")}) == 1, f"{cell.id} calls one check function"
        assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Name), (
            f"{cell.id} ends with the score"
        )


def test_every_grade_id_is_the_cell_id(built_course: Path) -> None:
    for name in ASSIGNMENTS:
        nb = nbformat.read(built_course / "notebooks" / f"{name}.ipynb", as_version=4)
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader")
            if meta:
                assert cell.id == meta["grade_id"]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "01_broken.py"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('# %% answer grade_id="a"\nx = 1\n', "unknown cell kind 'answer'"),
        ("# %% solution\nx = 1\n", "needs grade_id"),
        (
            "# %% solution grade_id=a\nx = 1\n",
            'cannot read .*grade_id=a.*strings quoted \\(grade_id="test_x"',
        ),
        ('# %% tests grade_id="t" points=two\nx = 1\n', "cannot read .*points=two"),
        ('# %% tests grade_id="t"\nx = 1\n', "needs points"),
        ('# %% solution grade_id="a"\nx = 1\n\n# %% solution grade_id="a"\ny = 2\n', "used twice"),
        ('# %% grade_id="a"\nx = 1\n', "without 'solution', 'tests' or 'locked'"),
    ],
)
def test_malformed_sources_are_rejected_with_the_cell_named(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(BuildError, match=message) as info:
        source_notebook(_write(tmp_path, text))
    assert "01_broken.py, cell" in str(info.value)


def test_a_locked_cell_is_read_only_and_not_graded(tmp_path: Path) -> None:
    nb = source_notebook(_write(tmp_path, '# %% locked grade_id="setup"\nimport numpy\n'))
    meta = nb.cells[0].metadata["nbgrader"]
    assert (meta["locked"], meta["grade"], meta["solution"], nb.cells[0].id) == (True, False, False, "setup")


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_setup_cell_of_every_notebook_is_locked(built_course: Path, name: str) -> None:
    """Test cells need the setup cell's imports: it is locked, so grading restores it if edited."""
    nb = nbformat.read(built_course / "notebooks" / f"{name}.ipynb", as_version=4)
    setup = next(c for c in nb.cells if c.cell_type == "code")
    assert setup.metadata["nbgrader"]["locked"] is True and "from autograder.checks import" in setup.source


def test_cell_ids_do_not_depend_on_the_run(tmp_path: Path) -> None:
    path = _write(tmp_path, '# %% [markdown]\n# Hi\n\n# %% solution grade_id="a"\nx = 1\n')
    first, second = source_notebook(path), source_notebook(path)
    assert [c.id for c in first.cells] == [c.id for c in second.cells]
    assert first.cells[1].id == "a" and first.cells[0].id.startswith("cell-")


def test_inserting_a_cell_changes_no_other_cell_id(tmp_path: Path) -> None:
    text = (
        '# %% [markdown]\n# Hi\n\n# %%\ny = 2\n\n# %% [markdown]\n# Hi\n\n# %% solution grade_id="a"\nx = 1\n'
    )
    before = [c.id for c in source_notebook(_write(tmp_path, text)).cells]
    inserted = text.replace("# %%\ny = 2\n", "# %% [markdown]\n# New\n\n# %%\ny = 2\n")
    after = [c.id for c in source_notebook(_write(tmp_path, inserted)).cells]
    assert after[:1] + after[2:] == before
    assert len(set(before)) == len(before)  # two cells with the same text get two ids
