"""Method checks: a static look at the learner's answer cells for answers that skip the exercise.

The checks grade results. Two ways of getting right results without doing the exercise are visible
in the code itself, and flagged here:

* a numpy notebook's answer that uses PyTorch (in the graded kernel it has none, so the answer
  fails there anyway; the flag says why, and also shows in a learner's own unjailed check);
* a custom ``torch.autograd.Function`` whose ``backward`` asks autograd for the gradient
  (``.backward()``, ``torch.autograd.grad``, ``torch.func``...) instead of computing it, or never
  uses the gradient it is given.

A flag names the definition and the reason. Feedback and summary show it; with
``withhold=True`` the grader also sets to zero every test cell that grades a flagged definition.
The look is static: code that hides what it calls (``getattr`` with computed names, ``exec``) is
not seen, which is why flags are advice to the instructor and withholding is an option.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

#: Calls and attributes by which a backward asks autograd instead of computing its gradient.
AUTOGRAD_CALLS = ("backward", "grad", "vjp", "jvp", "jacrev", "jacfwd", "jacobian", "hessian", "enable_grad")
AUTOGRAD_MODULES = ("autograd", "func", "functional")


@dataclass(frozen=True)
class Flag:
    """One answer that skips its exercise: the definition, the cell it is in, and why."""

    name: str
    cell: str
    reason: str

    def describe(self) -> str:
        """The flag in one sentence for feedback and the summary."""
        return f"{self.name} (in cell {self.cell!r}): {self.reason}"


def _uses_torch(tree: ast.AST) -> str | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "torch" for a in node.names):
            return "imports torch"
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            return "imports from torch"
        if isinstance(node, ast.Name) and node.id == "torch":
            return "uses torch"
        if isinstance(node, ast.Constant) and node.value == "torch":
            return "names the torch module in a string (an indirect import)"
    return None


def _defined_names(tree: ast.Module) -> list[str]:
    return [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]


def _is_function_subclass(node: ast.ClassDef) -> bool:
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if name == "Function":
            return True
    return False


def _asks_autograd(backward: ast.FunctionDef) -> str | None:
    for node in ast.walk(backward):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in AUTOGRAD_CALLS:
                owner = func.value
                owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
                if func.attr == "backward" or owner_name in AUTOGRAD_MODULES:
                    return f"its backward calls {ast.unparse(func)}(...), asking autograd for the gradient"
            if isinstance(func, ast.Name) and func.id in ("grad", "vjp", "jacrev", "jacfwd"):
                return f"its backward calls {func.id}(...), asking autograd for the gradient"
    return None


def _ignores_upstream(backward: ast.FunctionDef) -> str | None:
    params = [a.arg for a in backward.args.args] + (
        [backward.args.vararg.arg] if backward.args.vararg else []
    )
    upstream = params[1:]
    if not upstream:
        return None
    used = {n.id for n in ast.walk(backward) if isinstance(n, ast.Name)}
    if not used.intersection(upstream):
        return f"its backward never uses {', '.join(upstream)}, the gradient it is given"
    return None


def _unanswered(backward: ast.FunctionDef) -> bool:
    """A backward left as handed out: it raises before anything else (a docstring, ``pass``), what follows
    the ``raise`` never runs. It scores nothing, and its feedback says so; it took no shortcut."""
    for node in backward.body:
        if isinstance(node, ast.Pass) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        ):
            continue
        return isinstance(node, ast.Raise)
    return True


def flags_for(cell_id: str, source: str, numpy_only: bool) -> list[Flag]:
    """The flags of one answer cell's source (an empty list when it cannot be parsed)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[Flag] = []
    if numpy_only:
        why = _uses_torch(tree)
        if why:
            names = ", ".join(_defined_names(tree)) or "this cell"
            found.append(Flag(names, cell_id, f"a numpy exercise answered with PyTorch ({why})"))
        return found
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and _is_function_subclass(node):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "backward" and not _unanswered(item):
                    why = _asks_autograd(item) or _ignores_upstream(item)
                    if why:
                        found.append(Flag(node.name, cell_id, why))
    return found


def flags(answers: list[dict[str, str]], numpy_only: bool) -> list[Flag]:
    """The flags of a submission's answer cells (``{"id": ..., "source": ...}``, as the grader keeps them)."""
    return [flag for answer in answers for flag in flags_for(answer["id"], answer["source"], numpy_only)]


def graded_names(test_source: str) -> set[str]:
    """The names a test cell hands to its ``check_*`` calls: the definitions it grades."""
    try:
        tree = ast.parse(test_source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.startswith("check_")
        ):
            names.update(a.id for a in node.args if isinstance(a, ast.Name))
    return names
