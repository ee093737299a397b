"""Method checks of notebook 06 (see :mod:`autograder.engine.method`): a ``FlashAttention`` Function or an
``attention_op`` custom operator that uses PyTorch's own attention instead of computing it, and an operator
whose ``register_autograd`` backward asks autograd for the gradient."""

from __future__ import annotations

import ast

from autograder.engine.method import (
    Flag,
    Names,
    _asks_autograd,
    _bodies_of,
    _first_reason,
    _helpers_that,
    _shown,
)

#: PyTorch's own attention: a FlashAttention or an attention operator that uses it skips its exercise.
ATTENTION_CALLS = ("scaled_dot_product_attention", "multi_head_attention_forward", "MultiheadAttention")


def _attention_use(node: ast.AST, names: Names) -> str | None:
    """Why ``node`` is PyTorch's own attention (named directly, under an alias, or by getattr), or None."""
    if isinstance(node, ast.Attribute) and node.attr in ATTENTION_CALLS:
        return f"uses {_shown(node)}, PyTorch's own attention"
    if isinstance(node, (ast.Name, ast.Call)):
        for path in sorted(names.resolve(node.func if isinstance(node, ast.Call) else node)):
            if path.rsplit(".", 1)[-1] in ATTENTION_CALLS:
                return f"uses {_shown(node)}, which is {path}, PyTorch's own attention"
    return None


def _is_custom_op(node: ast.AST, names: Names) -> bool:
    """True for a function defined under ``@torch.library.custom_op(...)`` (under any alias)."""
    return isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
        path.rsplit(".", 1)[-1] == "custom_op"
        for d in node.decorator_list
        for path in names.resolve(d.func if isinstance(d, ast.Call) else d)
    )


def attention_flags(cells: list[tuple[str, ast.Module]], names: Names, asking: dict[str, str]) -> list[Flag]:
    """Functions and custom ops using PyTorch's attention; ops whose backward asks autograd (see the top)."""
    helpers = _helpers_that(names, lambda node: _attention_use(node, names))
    found = []
    for cell_id, tree in cells:
        for node in ast.walk(tree):
            unit = isinstance(node, ast.ClassDef) and names.is_function_class(node.bases)
            if unit or _is_custom_op(node, names):
                why = _first_reason(node, lambda n: _attention_use(n, names), names, helpers)
                if why:
                    found.append(Flag(node.name, cell_id, f"it {why}: the exercise is to compute attention"))
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
                continue
            if node.func.attr == "register_autograd" and isinstance(node.func.value, ast.Name):
                for body in _bodies_of(node.args[0], names):
                    asks = _asks_autograd(body, names, asking)
                    if asks:
                        found.append(
                            Flag(node.func.value.id, cell_id, f"its backward (register_autograd) {asks}")
                        )
    return found


__all__ = ["ATTENTION_CALLS", "attention_flags"]
