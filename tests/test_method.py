"""Method checks: answers that skip their exercise are flagged, the course's own answers never are."""

from __future__ import annotations

import nbformat
import pytest

from autograder.build import assignments, source_notebook
from autograder.course import NOTEBOOKS, grade_id, is_solution
from autograder.engine.grade import kernel_kind
from autograder.engine.method import flags, flags_for, graded_names

COURSE = {a.name: a for a in assignments()}


def _answers(name: str) -> list[dict[str, str]]:
    nb = source_notebook(COURSE[name].source)
    return [{"id": grade_id(c), "source": c.source} for c in nb.cells if is_solution(c)]


@pytest.mark.parametrize("name", sorted(COURSE))
def test_the_reference_answers_are_never_flagged(name: str) -> None:
    numpy_only = kernel_kind(source_notebook(COURSE[name].source)) == "numpy"
    assert flags(_answers(name), numpy_only) == []


@pytest.mark.parametrize("name", sorted(COURSE))
def test_the_blank_student_versions_are_never_flagged(name: str) -> None:
    """A stub left as handed out (``raise NotImplementedError``) is unanswered, not answered by a shortcut:
    the feedback says it scored nothing, and the summary's problems do not list every blank notebook."""
    student = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    answers = [{"id": grade_id(c), "source": c.source} for c in student.cells if is_solution(c)]
    numpy_only = kernel_kind(source_notebook(COURSE[name].source)) == "numpy"
    assert answers and flags(answers, numpy_only) == []


def test_the_numpy_notebooks_are_graded_without_torch() -> None:
    assert kernel_kind(source_notebook(COURSE["01_linear_layer"].source)) == "numpy"
    assert kernel_kind(source_notebook(COURSE["02_two_layer_net"].source)) == "numpy"
    assert kernel_kind(source_notebook(COURSE["04_custom_functions"].source)) == "torch"


NUMPY_WITH_TORCH = [
    "import torch\ndef relu_forward(x):\n    return torch.relu(torch.from_numpy(x)).numpy(), x",
    "def relu_forward(x):\n    import torch.nn.functional as F\n    return F.relu(x), x",
    "def sigmoid_forward(x):\n    t = __import__('torch')\n    return t.sigmoid(t.tensor(x)).numpy(), x",
]


@pytest.mark.parametrize("source", NUMPY_WITH_TORCH)
def test_a_numpy_answer_that_uses_torch_is_flagged(source: str) -> None:
    (flag,) = flags_for("relu", source, numpy_only=True)
    assert "PyTorch" in flag.reason and flag.cell == "relu"


AUTOGRAD_BACKWARDS = {
    "autograd.grad": """
class LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        return input @ weight.T + (bias if bias is not None else 0)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        with torch.enable_grad():
            x, w = input.detach().requires_grad_(), weight.detach().requires_grad_()
            out = x @ w.T
        return (*torch.autograd.grad(out, (x, w), grad_output), grad_output.sum(0))
""",
    ".backward()": """
class MyReLU(Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(min=0)

    @staticmethod
    def backward(ctx, grad_output):
        (x,) = ctx.saved_tensors
        with torch.enable_grad():
            y = x.detach().requires_grad_()
            y.clamp(min=0).backward(grad_output)
        return y.grad
""",
    "torch.func": """
class Exp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return torch.func.vjp(torch.exp, x)[1](g)[0]
""",
    "ignores grad_output": """
class MulConstant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, tensor, constant):
        ctx.constant = constant
        return tensor * constant

    @staticmethod
    def backward(ctx, grad_output):
        return torch.full((4, 5), ctx.constant), None
""",
}


@pytest.mark.parametrize("kind", sorted(AUTOGRAD_BACKWARDS))
def test_a_backward_that_asks_autograd_or_ignores_its_gradient_is_flagged(kind: str) -> None:
    found = flags_for("cell", AUTOGRAD_BACKWARDS[kind], numpy_only=False)
    assert len(found) == 1, found
    assert "backward" in found[0].reason


def test_a_test_cell_grades_the_names_it_hands_to_its_checks() -> None:
    source = "score = check_linear_function(LinearFunction)\nscore = check_train_spiral(train_spiral, Linear)"
    assert graded_names(source) == {"LinearFunction", "train_spiral", "Linear"}
