"""Notebook 06 through the real grading engine, jailed: the solution earns full marks, the student
version zero, and a FlashAttention that calls PyTorch's own attention is flagged by the method check.

Its kernels import more of PyTorch than the other notebooks' (torch.library, torch.compile's front end),
and the checks call ``opcheck`` and ``torch.compile`` inside the jail, which has no C compiler: this is
the test that the ``aot_eager`` backend needs none.
"""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
import pytest
from notebook_helpers import solved_notebook, student_notebook

from autograder import course
from autograder.course import SOLUTIONS
from autograder.engine.grade import Limits
from autograder.engine.jail import jail_available
from autograder.engine.pipeline import ensure_course, grade_class

NAME = "06_memory_efficient_attention"
LIMITS = Limits(cell_seconds=120, notebook_seconds=900, memory_bytes=4 * 1024**3)

pytestmark = [
    pytest.mark.skipif(not (SOLUTIONS / f"{NAME}.py").exists(), reason="notebook 06 is not in this checkout"),
    pytest.mark.skipif(
        not jail_available(), reason="kernels can only be jailed as root with mount namespaces"
    ),
]

SDPA_FORWARD = """
import torch.nn.functional as F


class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)

    @staticmethod
    def backward(ctx, do):
        return do, do, do, None
"""


def _with_answer(nb: nbformat.NotebookNode, defines: str, source: str) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose answer cell defining ``defines`` is ``source``."""
    nb = copy.deepcopy(nb)
    cell = next(c for c in nb.cells if course.is_solution(c) and f"class {defines}(" in c.source)
    cell.source = source
    return nb


def test_notebook_06_is_graded_in_the_jail(tmp_path: Path) -> None:
    root, inbox = tmp_path / "course", tmp_path / "inbox"
    ensure_course(root, SOLUTIONS, only=[NAME])
    inbox.mkdir()
    solved = solved_notebook(NAME)
    nbformat.write(solved, inbox / f"ada_{NAME}.ipynb")
    nbformat.write(student_notebook(NAME), inbox / f"blank_{NAME}.ipynb")
    nbformat.write(_with_answer(solved, "FlashAttention", SDPA_FORWARD), inbox / f"sdpa_{NAME}.ipynb")
    result = grade_class(inbox, NAME, root, SOLUTIONS, workers=2, limits=LIMITS, progress=False)
    outcomes = {o.student: o for o in result.outcomes}
    ada = outcomes["ada"]
    assert (ada.status, ada.jailed, ada.score) == ("graded", True, ada.max_score), (ada.reason, ada.cells)
    assert outcomes["blank"].score == 0, outcomes["blank"].cells
    assert any("FlashAttention" in flag and "attention" in flag for flag in outcomes["sdpa"].flags), outcomes[
        "sdpa"
    ]
    assert outcomes["sdpa"].score < ada.score
