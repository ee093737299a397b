"""The demo class: made-up students, graded by the engine exactly as a real class would be.

``python -m autograder demo`` builds the course in ``build/demo/course``, writes one notebook per
student and assignment into ``build/demo/inbox`` as a learning-management system exports them
(``<student>_<assignment>.ipynb``, plus two broken files), grades the inbox with
:func:`autograder.engine.pipeline.grade_class`, and prints the scores and where the feedback is.

* ``ada`` submits the reference solutions: full marks;
* ``blake`` submits the untouched student versions: zero;
* ``casey`` makes realistic mistakes (a transposed weight gradient, a sum where the mean belongs,
  the ReLU gradient at 0, an unstable softmax, a ``LinearFunction`` bias gradient left unsummed,
  which ``.backward()`` and ``gradcheck`` would both let through, attention without its 1/sqrt(d)
  scale): partial credit, with feedback naming each;
* ``dana`` leaves a loop that ignores interrupts in her notebook: the cells before it keep their points;
* ``eve`` crashes her kernel with a segmentation fault: likewise;
* ``mallory`` submits blank answers and replaces the comparison functions and the checkers with
  always-true fakes: zero;
* ``frank``'s file is empty and ``gina``'s is not JSON: both rejected, with the reason.
"""

from __future__ import annotations

import copy
import shutil
from collections.abc import Callable
from pathlib import Path

import nbformat
from nbformat import NotebookNode
from nbformat.v4 import new_code_cell

from autograder.course import grade_id, is_solution
from autograder.course.build import REPO, SOLUTIONS
from autograder.engine import outputs
from autograder.engine.grade import Limits
from autograder.engine.pipeline import ClassResult, ensure_course, grade_class

DEMO_ROOT = REPO / "build" / "demo"

#: Realistic mistakes: code run right after an answer cell, redefining what the learner wrote.
MISTAKES: dict[str, str] = {
    "linear_layer": (
        "def linear_backward(dout, cache):\n"
        "    x, W = cache[0], cache[1]\n"
        "    return dout @ W, x.T @ dout, dout.sum(axis=1)  # dW transposed, db over the wrong axis\n"
    ),
    "mse_loss": (
        "def mse_loss(pred, target):\n"
        "    diff = pred - target\n"
        "    return float((diff**2).sum()), 2 * diff  # a sum where the mean belongs\n"
    ),
    "relu": (
        "def relu_backward(dout, cache):\n"
        "    x = cache\n"
        "    return dout * (x >= 0)  # gradient 1 at exactly 0\n"
    ),
    "linear_function": (
        "import torch\n"
        "class LinearFunction(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, input, weight, bias=None):\n"
        "        ctx.save_for_backward(input, weight, bias)\n"
        "        output = input.mm(weight.t())\n"
        "        return output if bias is None else output + bias\n"
        "\n"
        "    @staticmethod\n"
        "    def backward(ctx, grad_output):\n"
        "        input, weight, bias = ctx.saved_tensors\n"
        "        # not summed over the batch: .backward() and gradcheck hide it, the check does not\n"
        "        grad_bias = grad_output if bias is not None else None\n"
        "        return grad_output.mm(weight), grad_output.t().mm(input), grad_bias\n"
    ),
    "attention": (
        "import torch\n"
        "def attention(q, k, v, is_causal=False):\n"
        "    scores = q @ k.transpose(-2, -1)  # the 1/sqrt(d) scale left out\n"
        "    if is_causal:\n"
        "        allowed = torch.ones(scores.shape[-2:], dtype=torch.bool, device=scores.device).tril()\n"
        "        scores = scores.masked_fill(~allowed, float('-inf'))\n"
        "    return torch.softmax(scores, dim=-1) @ v\n"
    ),
    "softmax_cross_entropy": (
        "import numpy as np\n"
        "def softmax_cross_entropy(scores, y):\n"
        "    e = np.exp(scores)  # no max subtraction: overflows for large logits\n"
        "    p = e / e.sum(axis=1, keepdims=True)\n"
        "    n = scores.shape[0]\n"
        "    dscores = p.copy()\n"
        "    dscores[np.arange(n), y] -= 1\n"
        "    return float(-np.log(p[np.arange(n), y]).mean()), dscores / n\n"
    ),
}

HANG = (
    "import signal\n"
    "signal.signal(signal.SIGINT, signal.SIG_IGN)  # ignore the interrupt\n"
    "while True:\n"
    "    pass\n"
)
CRASH = "import ctypes\nctypes.string_at(0)  # reads address 0: a segmentation fault\n"
CHEAT = (
    "import builtins, numpy as np, torch, autograder.checks as checks\n"
    "np.allclose = torch.allclose = lambda *a, **k: True\n"
    "torch.testing.assert_close = lambda *a, **k: None\n"
    "torch.autograd.gradcheck = lambda *a, **k: True\n"
    "for name in dir(checks):\n"
    "    if name.startswith('check_'):\n"
    "        setattr(checks, name, lambda *a, **k: 100.0)\n"
    "        globals()[name] = lambda *a, **k: 100.0\n"
    "builtins.all = builtins.any = lambda *a: True\n"
)


def _answers(nb: NotebookNode) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if is_solution(c)]


def _insert_after_answers(nb: NotebookNode, code_for: Callable[[str | None], str | None]) -> NotebookNode:
    nb = copy.deepcopy(nb)
    for index in reversed(_answers(nb)):
        code = code_for(grade_id(nb.cells[index]))
        if code:
            cell = new_code_cell(code)
            cell.id = f"added-{index}"
            nb.cells.insert(index + 1, cell)
    return nb


def solved(source: NotebookNode, release: NotebookNode) -> NotebookNode:
    """The student version with the reference answers typed in: what a learner who solved it submits.
    The one copy: the tests and the benchmarks make their solved submissions with it too."""
    nb = copy.deepcopy(release)
    answers = {c.id: c.source for c in source.cells if is_solution(c)}
    for cell in nb.cells:
        if cell.id in answers:
            cell.source = answers[cell.id]
    return nb


def _after_second_answer(code: str) -> Callable[[NotebookNode, NotebookNode], NotebookNode]:
    def make(source: NotebookNode, release: NotebookNode) -> NotebookNode:
        nb = solved(source, release)
        target = grade_id(nb.cells[_answers(nb)[1]])
        return _insert_after_answers(nb, lambda answer: code if answer == target else None)

    return make


def _cheat(source: NotebookNode, release: NotebookNode) -> NotebookNode:
    first = grade_id(release.cells[_answers(release)[0]])
    return _insert_after_answers(release, lambda answer: CHEAT if answer == first else None)


STUDENTS: dict[str, Callable[[NotebookNode, NotebookNode], NotebookNode]] = {
    "ada": solved,
    "blake": lambda source, release: release,
    "casey": lambda source, release: _insert_after_answers(solved(source, release), MISTAKES.get),
    "dana": _after_second_answer(HANG),
    "eve": _after_second_answer(CRASH),
    "mallory": _cheat,
}


def make_inbox(course_root: Path, inbox: Path) -> None:
    """Write the demo class's files into ``inbox``, named as a learning-management system names them."""
    if inbox.exists():
        shutil.rmtree(inbox)
    inbox.mkdir(parents=True)
    names = sorted(p.name for p in (course_root / "source").iterdir())
    for name in names:
        source = nbformat.read(course_root / "source" / name / f"{name}.ipynb", as_version=4)
        release = nbformat.read(course_root / "release" / name / f"{name}.ipynb", as_version=4)
        for student, make in STUDENTS.items():
            nbformat.write(make(source, release), inbox / f"{student}_{name}.ipynb")
    (inbox / f"frank_{names[0]}.ipynb").write_bytes(b"")
    (inbox / f"gina_{names[-1]}.ipynb").write_text('{"cells": [', encoding="utf-8")


def run_demo(root: Path = DEMO_ROOT, workers: int | None = None) -> ClassResult:
    """Build the demo class under ``root``, grade it, print the scores; return the result."""
    course_root = root / "course"
    if root.exists():
        shutil.rmtree(root)
    ensure_course(course_root, SOLUTIONS)
    make_inbox(course_root, root / "inbox")
    limits = Limits(cell_seconds=30, notebook_seconds=180, memory_bytes=4 * 1024**3)
    result = grade_class(
        root / "inbox", "all", course_root, SOLUTIONS, workers=workers, limits=limits, force=True
    )
    print()
    print(outputs.table(result.outcomes))
    print()
    for r in result.rejected:
        print(f"rejected {r.origin}: {r.reason}")
    print(f"\nSummary:  {result.summary}")
    print(f"Grades:   {result.grades_csv}")
    print(f"Feedback: {course_root / 'feedback'}/<student>/<assignment>/<assignment>.html")
    return result
