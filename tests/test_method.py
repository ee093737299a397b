"""Method checks: answers that skip their exercise are flagged, the course's own answers never are."""

from __future__ import annotations

import nbformat
import pytest

from autograder.course import NOTEBOOKS, grade_id, is_solution
from autograder.course.build import assignments, source_notebook
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


def _linear_function(backward_line: str, prelude: str = "", base: str = "torch.autograd.Function") -> str:
    """LinearFunction, whose backward returns ``backward_line`` after ``prelude`` (module level)."""
    return f"""
import torch
{prelude}

class LinearFunction({base}):
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
        return {backward_line}
"""


GRADS = "(*{}(out, (x, w), grad_output), grad_output.sum(0))"
AUTOGRAD_BACKWARDS = {
    "autograd.grad": _linear_function(GRADS.format("torch.autograd.grad")),
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


HELPER = "def gradients(out, inputs, upstream):\n    return {}(out, inputs, upstream)\n"
#: Ways of writing ``torch.autograd.grad`` or ``torch.func.vjp`` that the method check follows.
EVASIONS = {
    "an alias of the module": _linear_function(GRADS.format("ag.grad"), "ag = torch.autograd"),
    "from torch import autograd as A": _linear_function(
        GRADS.format("A.grad"), "from torch import autograd as A"
    ),
    "import torch.autograd as ag": _linear_function(GRADS.format("ag.grad"), "import torch.autograd as ag"),
    "from torch.autograd import grad as g": _linear_function(
        GRADS.format("g"), "from torch.autograd import grad as g"
    ),
    "an alias of the function": _linear_function(GRADS.format("g"), "g = torch.autograd.grad"),
    "getattr with a constant": _linear_function(GRADS.format('getattr(torch.autograd, "grad")')),
    "getattr twice": _linear_function(GRADS.format('getattr(getattr(torch, "autograd"), "grad")')),
    "importlib": _linear_function(
        '(*importlib.import_module("torch.func").vjp(lambda a, b: a @ b.T, x, w)[1](grad_output), None)',
        "import importlib",
    ),
    "import_module under an alias": _linear_function(
        GRADS.format('load("torch.autograd").grad'), "from importlib import import_module as load"
    ),
    "__import__ with a fromlist": _linear_function(
        '(*__import__("torch.func", fromlist=["vjp"]).vjp(lambda a, b: a @ b.T, x, w)[1](grad_output), None)'
    ),
    "__import__ of the package": _linear_function(
        '(*__import__("torch").func.vjp(lambda a, b: a @ b.T, x, w)[1](grad_output), None)'
    ),
    "sys.modules": _linear_function(GRADS.format('sys.modules["torch.autograd"].grad'), "import sys"),
    "a module's __dict__": _linear_function(GRADS.format('vars(torch.autograd)["grad"]')),
    "a helper in the same cell": _linear_function(
        GRADS.format("gradients"), HELPER.format("torch.autograd.grad")
    ),
    "a helper of a helper": _linear_function(
        GRADS.format("outer"),
        HELPER.format("torch.autograd.grad") + "def outer(*a):\n    return gradients(*a)\n",
    ),
    "a lambda helper": _linear_function(GRADS.format("pull"), "pull = lambda *a: torch.autograd.grad(*a)"),
    "an aliased Function base": _linear_function(
        GRADS.format("torch.autograd.grad"), "Fn = torch.autograd.Function", base="Fn"
    ),
    "a subclass of a Function subclass": _linear_function(
        GRADS.format("torch.autograd.grad"), "class Base(torch.autograd.Function):\n    pass", base="Base"
    ),
    "an attribute set in forward": _linear_function(GRADS.format("ctx.pull")).replace(
        "ctx.save_for_backward(input, weight, bias)",
        "ctx.save_for_backward(input, weight, bias)\n        ctx.pull = torch.autograd.grad",
    ),
    "type(...)": """
import torch

def forward(ctx, input, weight, bias=None):
    ctx.save_for_backward(input, weight)
    return input @ weight.T

def backward(ctx, grad_output):
    input, weight = ctx.saved_tensors
    with torch.enable_grad():
        x, w = input.detach().requires_grad_(), weight.detach().requires_grad_()
        return (*torch.autograd.grad(x @ w.T, (x, w), grad_output), None)

LinearFunction = type(
    "LinearFunction",
    (torch.autograd.Function,),
    {"forward": staticmethod(forward), "backward": staticmethod(backward)},
)
""",
    "backward assigned in the class body": """
import torch

def vjp_backward(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return torch.func.vjp(torch.exp, x)[1](grad_output)[0]

class LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    backward = staticmethod(vjp_backward)
""",
    "backward assigned after the class": """
import torch

class LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

def later(ctx, grad_output):
    (x,) = ctx.saved_tensors
    return torch.func.vjp(torch.exp, x)[1](grad_output)[0]

LinearFunction.backward = staticmethod(later)
""",
    "a method of the class": _linear_function(GRADS.format("LinearFunction._grads"), "").replace(
        "    @staticmethod\n    def backward",
        "    @staticmethod\n    def _grads(*a):\n        return torch.autograd.grad(*a)\n\n"
        "    @staticmethod\n    def backward",
    ),
}


@pytest.mark.parametrize("kind", sorted(EVASIONS))
def test_a_backward_that_asks_autograd_under_another_name_is_flagged(kind: str) -> None:
    found = flags_for("linear_function", EVASIONS[kind], numpy_only=False)
    assert [f.name for f in found] == ["LinearFunction"], found
    assert found[0].reason.startswith("its backward calls") and found[0].cell == "linear_function"


def test_a_helper_in_another_answer_cell_is_followed() -> None:
    helper = {"id": "helpers", "source": "import torch as t\nag = t.autograd\n" + HELPER.format("ag.grad")}
    answer = {"id": "linear_function", "source": _linear_function(GRADS.format("gradients"))}
    (flag,) = flags([helper, answer], numpy_only=False)
    assert (flag.name, flag.cell) == ("LinearFunction", "linear_function")
    assert "gradients(...), which calls ag.grad(...), which is torch.autograd.grad" in flag.reason
    # read alone, the answer cell names a function it does not define: nothing to follow
    assert flags([answer], numpy_only=False) == []


LEGITIMATE = {
    "autograd used outside backward": _linear_function(
        "grad_output @ weight, grad_output.T @ input, grad_output.sum(0)",
        "ag = torch.autograd\ndef check(f, x):\n    return ag.gradcheck(f, x)",
    ),
    "a helper that computes": _linear_function(
        "gradients(input, weight, grad_output)",
        "def gradients(x, w, g):\n    return g @ w, g.T @ x, g.sum(0)",
    ),
    "getattr of something else": _linear_function(
        'getattr(torch, "mm")(grad_output, weight), grad_output.T @ input, grad_output.sum(0)'
    ),
}


@pytest.mark.parametrize("kind", sorted(LEGITIMATE))
def test_a_backward_that_computes_its_gradient_is_not_flagged(kind: str) -> None:
    assert flags_for("linear_function", LEGITIMATE[kind], numpy_only=False) == []


#: An evasion that earned 5.68 of 6 with --withhold-flagged: the backward asks autograd through a helper
#: defined in another answer cell, under an alias of torch.autograd; needs_input_grad is honoured.
HELPER_CELL = """
ag = torch.autograd


def gradients(out, inputs, upstream):
    return ag.grad(out, inputs, upstream)
"""
EVADING_LINEAR_FUNCTION = """
class LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias=None):
        ctx.save_for_backward(input, weight, bias)
        output = input.mm(weight.t())
        return output + bias if bias is not None else output

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        with torch.enable_grad():
            x, w = input.detach().requires_grad_(), weight.detach().requires_grad_()
            gx, gw = gradients(x.mm(w.t()), (x, w), grad_output)
        needs = ctx.needs_input_grad
        gb = grad_output.sum(0) if bias is not None and needs[2] else None
        return (gx if needs[0] else None), (gw if needs[1] else None), gb
"""


def test_withhold_flagged_sets_the_evading_exercises_test_cell_to_zero(tmp_path) -> None:
    from notebook_helpers import solved_notebook

    from autograder.course import SOLUTIONS
    from autograder.engine.pipeline import ensure_course, grade_class

    name = "04_custom_functions"
    root = tmp_path / "course"
    ensure_course(root, SOLUTIONS, only=[name])
    nb = solved_notebook(name)
    answers = {grade_id(c): c for c in nb.cells if is_solution(c)}
    answers["mul_constant"].source += HELPER_CELL
    answers["linear_function"].source = EVADING_LINEAR_FUNCTION
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(nb, inbox / f"evader_{name}.ipynb")
    result = grade_class(inbox, name, root, SOLUTIONS, workers=1, progress=False, withhold_flagged=True)
    (outcome,) = result.outcomes
    assert outcome.status == "graded", outcome.reason
    (flag,) = outcome.flags
    assert flag.startswith("LinearFunction (in cell ") and "torch.autograd.grad" in flag
    scores = {c.grade_id: c for c in outcome.cells}
    withheld = scores["test_linear_function"]
    assert withheld.score == 0.0 and withheld.feedback.startswith("points withheld")
    assert "needs_input_grad" in withheld.feedback, "the check's own report follows the reason"
    # the other exercises keep their points: MulConstant (whose cell holds the helper) is not flagged
    assert scores["test_mul_constant"].score == 1.0
    assert outcome.score == outcome.max_score - withheld.points


def test_what_the_guarantees_say_still_evades_is_not_flagged() -> None:
    """A static look: a name computed at run time, exec, a function in a container (docs/guarantees.md)."""
    for line in (
        'getattr(torch.autograd, "gr" + "ad")',
        'eval("torch.autograd.grad")',
        "[torch.autograd.grad][0]",
    ):
        assert flags_for("linear_function", _linear_function(GRADS.format(line)), numpy_only=False) == []


def test_answers_written_to_stall_the_look_are_read_in_bounded_time() -> None:
    """Long chains of aliases, helpers and classes, a name assigned thousands of times, expressions too
    deep to parse or to print: every answer gets a stated outcome, in about a second, never an exception."""
    import time

    n = 3000
    hostile = {
        "helpers": "def h0(*a):\n    return torch.autograd.grad(*a)\n"
        + "".join(f"def h{i + 1}(*a):\n    return h{i}(*a)\n" for i in range(n)),
        "aliases": "a0 = torch.autograd\n" + "".join(f"a{i + 1} = a{i}\n" for i in range(n)),
        "wide": "".join(f"w = x{i}.y{i}\nx{i} = w.z\n" for i in range(n)),
        "classes": "class C0(torch.autograd.Function):\n    pass\n"
        + "".join(f"class C{i + 1}(C{i}):\n    pass\n" for i in range(n)),
        "too deep to parse": "q = torch" + ".a" * 5000,
    }
    lines = {"helpers": f"h{n}", "aliases": f"a{n}.grad", "wide": "w.grad", "classes": "g"}
    start = time.perf_counter()
    found = {
        kind: flags_for("c", _linear_function(GRADS.format(lines.get(kind, "q.grad")), prelude), False)
        for kind, prelude in hostile.items()
    }
    found["too deep to print"] = flags_for(
        "c", _linear_function(GRADS.format("x" + ".a" * 900 + ".backward")), False
    )
    assert time.perf_counter() - start < 20
    # a helper chain of any length is followed; an alias chain is followed 20 deep (docs/guarantees.md)
    assert [f.name for f in found["helpers"]] == ["LinearFunction"]
    assert found["aliases"] == found["wide"] == found["classes"] == found["too deep to parse"] == []
    assert "nested too deep to show" in found["too deep to print"][0].reason


_FLASH_HEAD = """
import math
import torch
import torch.nn.functional as F

"""
#: Notebook 06's answers that skip the exercise: a FlashAttention or an attention_op that uses PyTorch's
#: own attention, directly, under an alias, through a helper; an operator whose backward asks autograd.
ATTENTION_EVASIONS = {
    "sdpa in forward": """
class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        ctx.save_for_backward(q, k, v, o)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o = ctx.saved_tensors
        return do, do, do, None
""",
    "sdpa imported under an alias, in a helper": """
from torch.nn.functional import scaled_dot_product_attention as fast

def helper(q, k, v, c):
    return fast(q, k, v, is_causal=c)

class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        ctx.save_for_backward(q, k, v)
        return helper(q, k, v, is_causal)

    @staticmethod
    def backward(ctx, do):
        q, k, v = ctx.saved_tensors
        return do * 2, k * 0, v * 0, None
""",
    "MultiheadAttention in an operator": """
@torch.library.custom_op("backprop_course::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> torch.Tensor:
    mha = torch.nn.MultiheadAttention(q.shape[-1], 1)
    return mha(q, k, v)[0]
""",
    "multi_head_attention_forward by getattr": """
class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        f = getattr(F, "multi_head_attention_forward")
        return f(q, k, v)

    @staticmethod
    def backward(ctx, do):
        return do, do, do, None
""",
    "operator backward asks autograd": """
@torch.library.custom_op("backprop_course::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> torch.Tensor:
    return torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), -1) @ v

def setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:3])

def backward(ctx, do):
    q, k, v = (t.detach().requires_grad_() for t in ctx.saved_tensors)
    with torch.enable_grad():
        o = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), -1) @ v
        return (*torch.autograd.grad(o, (q, k, v), do), None)

attention_op.register_autograd(backward, setup_context=setup_context)
""",
}


@pytest.mark.parametrize("kind", sorted(ATTENTION_EVASIONS))
def test_an_attention_that_skips_the_exercise_is_flagged(kind: str) -> None:
    found = flags_for("cell", _FLASH_HEAD + ATTENTION_EVASIONS[kind], numpy_only=False)
    assert found, kind
    names = {flag.name for flag in found}
    assert names <= {"FlashAttention", "attention_op"}, found
    reasons = " ".join(flag.reason for flag in found)
    assert "PyTorch's own attention" in reasons or "asking autograd" in reasons, found


def test_plain_attention_and_a_computed_flash_attention_are_not_flagged() -> None:
    source = (
        _FLASH_HEAD
        + """
def attention(q, k, v, is_causal=False):
    return torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), -1) @ v

class FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, is_causal=False):
        s = q @ k.mT / math.sqrt(q.shape[-1])
        lse = torch.logsumexp(s, -1)
        o = torch.exp(s - lse[..., None]) @ v
        ctx.save_for_backward(q, k, v, o, lse)
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        p = torch.exp(q @ k.mT / math.sqrt(q.shape[-1]) - lse[..., None])
        ds = p * (do @ v.mT - (do * o).sum(-1, keepdim=True))
        return ds @ k / math.sqrt(q.shape[-1]), ds.mT @ q / math.sqrt(q.shape[-1]), p.mT @ do, None

@torch.library.custom_op("backprop_course::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool) -> torch.Tensor:
    return FlashAttention.apply(q, k, v, is_causal)

def setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs[:3], output)

def backward(ctx, do):
    q, k, v, o = ctx.saved_tensors
    return FlashAttention.backward(ctx, do)

attention_op.register_autograd(backward, setup_context=setup_context)
"""
    )
    assert flags_for("cell", source, numpy_only=False) == []
