"""Turn a submitted notebook into the notebook the engine runs: the learner's answers, the course's tests.

Every graded or locked cell comes from the course's source notebook (hidden tests included),
whatever the submission did to it: edited, deleted, moved or forged cells are put back as the
source has them. Everything else (answer cells, cells the learner added) is the learner's, with
outputs cleared and nbgrader metadata taken from the source, so a learner cannot declare their own
cell graded or locked. An answer cell whose nbgrader metadata was stripped is found by its cell id.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field

from nbformat import NotebookNode
from nbformat.v4 import new_notebook

from autograder.course import nbgrader_metadata


@dataclass(frozen=True)
class CheckCall:
    """A ``check_*`` call in a test cell: which check, with which seed."""

    function: str
    seed: int


@dataclass(frozen=True)
class GradeCell:
    """A graded cell of the source notebook and the check calls it makes, in order."""

    grade_id: str
    points: float
    calls: tuple[CheckCall, ...]

    @property
    def final_call(self) -> CheckCall | None:
        """The call whose result is the cell's score (the last one: hidden tests come last)."""
        return self.calls[-1] if self.calls else None


@dataclass
class Prepared:
    """The notebook to run, its graded cells, and what had to be restored."""

    notebook: NotebookNode
    grade_cells: list[GradeCell]
    restored: list[str] = field(default_factory=list)


def _meta(cell: NotebookNode) -> dict:
    return nbgrader_metadata(cell)


def _is_protected(cell: NotebookNode) -> bool:
    meta = _meta(cell)
    return bool(meta.get("grade") or meta.get("locked")) and not meta.get("solution")


def check_calls(source: str) -> tuple[CheckCall, ...]:
    """The ``check_*(...)`` calls in a test cell's source, in source order, with their seeds."""
    calls = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.startswith("check_")
        ):
            seed = 0
            for kw in node.keywords:
                if (
                    kw.arg == "seed"
                    and isinstance(kw.value, ast.Constant)
                    and isinstance(kw.value.value, int)
                ):
                    seed = kw.value.value
            calls.append((node.lineno, node.col_offset, CheckCall(node.func.id, seed)))
    return tuple(call for _, _, call in sorted(calls, key=lambda c: (c[0], c[1])))


def grade_cells(source: NotebookNode) -> list[GradeCell]:
    """The graded cells of a source notebook, in order."""
    return [
        GradeCell(_meta(c)["grade_id"], float(_meta(c)["points"]), check_calls(c.source))
        for c in source.cells
        if _meta(c).get("grade") and c.cell_type == "code"
    ]


def _key(cell: NotebookNode) -> str | None:
    return _meta(cell).get("grade_id") or cell.get("id")


@dataclass
class _Course:
    """What the course gives a submission: the cells it puts back, what the learner saw of them, the
    answer cells, and every cell's key in source order."""

    protected: dict[str | None, NotebookNode]
    visible: dict[str | None, str]
    """What the learner was given: a test cell is "edited" when it differs from this, not from the
    source (whose hidden tests the learner never saw)."""
    answers: dict[str, NotebookNode]
    order: list[str | None]

    def label(self, key: str | None) -> str:
        return "test cell" if _meta(self.protected[key]).get("grade") else "read-only cell"


@dataclass
class _Placement:
    """Where each cell of the notebook to run goes: (position, tie-break, cell), the learner's cells
    first, then restored cells in source order; and what had to be restored."""

    course: _Course
    length: int
    """How many cells the submission has: past its last cell."""
    placed: list[tuple[float, int, NotebookNode]] = field(default_factory=list)
    where: dict[str | None, float] = field(default_factory=dict)
    """The position of each of the learner's cells and test cells, by key."""
    seen_answers: set[str] = field(default_factory=set)
    restored: list[str] = field(default_factory=list)

    def before_successor(self, key: str, tests: dict[str, float] | None = None) -> float:
        """Just before the first cell that follows ``key`` in the source and is in the submission
        (with ``tests``, the positions of the test cells, or is a test cell)."""
        order = self.course.order
        for later in order[order.index(key) + 1 :]:
            if tests is not None and later in tests:
                return tests[later]
            if later in self.where and later not in self.course.protected:
                return self.where[later] - 0.5
        return float(self.length)


def prepare(submitted: NotebookNode, source: NotebookNode, release: NotebookNode) -> Prepared:
    """Build the notebook to run from a submission, the source notebook and the student version.

    The learner's cells keep their order, so helper cells they added before a test still run
    before it. A test cell stays where the learner has it when it still sits between the answer
    cells that surround it in the source; a deleted or moved one is put back just before the
    next cell that follows it in the source.
    """
    course = _Course(
        protected={_key(c): c for c in source.cells if _is_protected(c)},
        visible={_key(c): c.source for c in release.cells if _is_protected(c)},
        answers={_meta(c)["grade_id"]: c for c in release.cells if _meta(c).get("solution")},
        order=[_key(c) for c in source.cells],
    )
    layout = _Placement(course, len(submitted.cells))
    for index, cell in enumerate(submitted.cells):
        _take_learners_cell(layout, index, cell)
    tests, test_notes = _place_tests(layout)
    # Answer cells the learner deleted come back as the blank stub, before the cells that follow
    # them in the source, their own test cell included.
    rank = {k: i for i, k in enumerate(course.order)}
    for grade_id, stub in course.answers.items():
        if grade_id not in layout.seen_answers:
            layout.restored.append(f"answer cell {grade_id!r} was missing; it was graded as blank")
            layout.placed.append(
                (layout.before_successor(grade_id, tests), rank[grade_id], copy.deepcopy(stub))
            )
    layout.restored.extend(test_notes)
    layout.placed.extend(
        (position, rank[key], copy.deepcopy(course.protected[key])) for key, position in tests.items()
    )
    cells = [cell for _, _, cell in sorted(layout.placed, key=lambda p: (p[0], p[1]))]
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
    nb = new_notebook(cells=cells, metadata=copy.deepcopy(source.metadata))
    return Prepared(nb, grade_cells(source), layout.restored)


def _take_learners_cell(layout: _Placement, index: int, cell: NotebookNode) -> None:
    """Place one cell of the submission: the learner's own where they have it (nbgrader metadata from
    the course's answer cell, never their own), a test or read-only cell only noted (put back later)."""
    course, key = layout.course, _key(cell)
    layout.where.setdefault(key, float(index))
    if key in course.protected:
        if cell.get("source") != course.visible.get(key, course.protected[key].source):
            layout.restored.append(f"{course.label(key)} {key!r} was edited; the original was run")
        return
    if _meta(cell).get("grade") or _meta(cell).get("locked"):
        layout.restored.append(
            f"cell {key!r} claims to be a test cell of the course but is not; it ran as your code"
        )
    new = copy.deepcopy(cell)
    new.metadata.pop("nbgrader", None)
    grade_id = _meta(cell).get("grade_id")
    seen = layout.seen_answers
    if not _meta(cell) and cell.get("id") in course.answers and cell.get("id") not in seen:
        # nbgrader's metadata was stripped (by another editor or a tool); the cell id still names it
        grade_id = cell.get("id")
        layout.restored.append(
            f"answer cell {grade_id!r} had lost its nbgrader metadata; matched by its cell id"
        )
    if grade_id in course.answers and grade_id not in seen:
        new.metadata["nbgrader"] = copy.deepcopy(_meta(course.answers[grade_id]))
        seen.add(grade_id)
    layout.placed.append((float(index), -1, new))


def _place_tests(layout: _Placement) -> tuple[dict[str, float], list[str]]:
    """Where each test and read-only cell runs, and what was deleted or moved. It depends on the
    learner's answer cells only, not on restored stubs."""
    course = layout.course
    answer_positions = {k: layout.where[k] for k in layout.seen_answers}
    tests: dict[str, float] = {}
    notes: list[str] = []
    for key in (k for k in course.order if k in course.protected):
        position = layout.where.get(key)
        if position is None:
            notes.append(f"{course.label(key)} {key!r} was deleted; it was put back and run")
        elif not _between_its_answers(key, position, course.order, answer_positions):
            notes.append(f"{course.label(key)} {key!r} was moved; it ran in its original place")
            position = None
        tests[key] = layout.before_successor(key) if position is None else position
    return tests, notes


def _between_its_answers(key: str, position: float, order: list[str], answers: dict[str, float]) -> bool:
    """Whether a test cell sits after the answer cells before it in the source, and before those after."""
    index = order.index(key)
    before = [answers[k] for k in order[:index] if k in answers]
    after = [answers[k] for k in order[index + 1 :] if k in answers]
    return all(p < position for p in before) and all(position < p for p in after)
