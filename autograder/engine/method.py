"""Method checks: a static look at the learner's answer cells for answers that skip the exercise.

The checks grade results. Two ways of getting right results without doing the exercise are visible
in the code itself, and flagged here:

* a numpy notebook's answer that uses PyTorch (in the graded kernel it has none, so the answer
  fails there anyway; the flag says why, and also shows in a learner's own unjailed check);
* a custom ``torch.autograd.Function`` whose ``backward`` asks autograd for the gradient
  (``.backward()``, ``torch.autograd.grad``, ``torch.func``...) instead of computing it, or never
  uses the gradient it is given;
* a ``Function`` or ``custom_op`` using PyTorch's own attention, or an operator whose
  ``register_autograd`` backward asks autograd for the gradient (:mod:`autograder.engine.method_attention`).

The look follows names across every answer cell of the notebook (:class:`Names`): aliases
(``ag = torch.autograd``, ``from torch import autograd as A``), ``getattr`` with a constant name,
modules loaded by ``importlib.import_module`` or ``__import__`` with a constant name, ``sys.modules``
and a module's ``__dict__`` subscripted with a constant, helpers (functions, lambdas, a class's other
methods) that ask autograd themselves or through another helper, base classes that are aliases of
``Function`` or subclasses of one, a ``backward`` assigned in the class body or afterwards, and
classes built with ``type(name, (Function,), {...})``.

A flag names the definition and the reason. Feedback and summary show it; with
``withhold=True`` the grader also sets to zero every test cell that grades a flagged definition.
The look is static: code that computes the names it calls (a string built at run time, ``exec``,
``eval``, ``compile``) is not seen, which is why flags are advice to the instructor and withholding
is an option.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
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


#: A function-like definition whose body can be read: a ``def`` or a ``lambda``.
Body = ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
#: How deep :meth:`Names.resolve` follows one expression through the names and expressions it refers to
#: (``a = b``, ``b = c.d``...), and how many paths one name may stand for: a notebook written to make the
#: look slow (long chains, a name assigned thousands of times) makes it give up early, not hang.
DEPTH, WIDTH = 20, 64
#: What stands for a value the look cannot name (a parameter, a call's result).
UNKNOWN = "?"


class Names:
    """What the names of a notebook's answer cells may stand for, over every cell together (a name
    defined in one answer cell is used in another): dotted module paths for aliases and imports, and
    the functions, lambdas and classes defined there. A name assigned several things may be any of them."""

    def __init__(self, trees: list[ast.Module]) -> None:
        self.values: dict[str, list[ast.expr | str]] = {}
        self.bodies: dict[str, Body] = {}
        self.classes: dict[str, ast.ClassDef] = {}
        self._cache: dict[str, set[str]] = {}
        for tree in trees:
            for node in ast.walk(tree):
                self._learn(node)
        for cls in self.classes.values():
            for item in cls.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.bodies[f"{cls.name}.{item.name}"] = item

    def _learn(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    self.values.setdefault(alias.asname, []).append(alias.name)
                else:
                    top = alias.name.split(".")[0]
                    self.values.setdefault(top, []).append(top)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                target = alias.asname or alias.name
                self.values.setdefault(target, []).append(f"{node.module}.{alias.name}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.bodies.setdefault(node.name, node)
        elif isinstance(node, ast.ClassDef):
            self.classes.setdefault(node.name, node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in _target_names(target):
                    self.values.setdefault(name, []).append(node.value)
                    if isinstance(node.value, ast.Lambda):
                        self.bodies.setdefault(name, node.value)

    def resolve(self, expr: ast.expr | None, depth: int = 0) -> set[str]:
        """The dotted paths ``expr`` may stand for: ``torch.autograd.grad``, a defined function's or class's
        name (``helper``, ``Cls.method``), or a path that starts with :data:`UNKNOWN`."""
        if expr is None or depth > DEPTH:
            return {UNKNOWN}
        if isinstance(expr, ast.Name):
            return self._resolve_name(expr.id, depth)
        if isinstance(expr, ast.Attribute):
            found = {f"{base}.{expr.attr}" for base in self.resolve(expr.value, depth + 1)}
            if isinstance(expr.value, ast.Name):  # an attribute set to something: ctx.g = torch.autograd.grad
                found |= self._assigned(f"{expr.value.id}.{expr.attr}", depth)
            return found
        if isinstance(expr, ast.Call):
            return self._resolve_call(expr, depth)
        if isinstance(expr, ast.Subscript) and isinstance(key := _constant(expr.slice), str):
            return self._resolve_subscript(expr.value, key, depth)
        return {UNKNOWN}

    def _resolve_name(self, name: str, depth: int) -> set[str]:
        found = {name} if name in self.bodies or name in self.classes else set()
        found |= self._assigned(name, depth)
        # a name defined nowhere in the answers is a builtin, a module the notebook imports, or a parameter
        return found or {name}

    def _assigned(self, name: str, depth: int) -> set[str]:
        """What the values assigned to ``name`` may stand for, worked out once per name (a name met again
        while its own values are being worked out, ``a = a.b``, stands for nothing more)."""
        if name not in self._cache:
            self._cache[name] = set()
            found: set[str] = set()
            for value in self.values.get(name, []):
                found |= {value} if isinstance(value, str) else self.resolve(value, depth + 1)
                if len(found) >= WIDTH:
                    break
            self._cache[name] = set(sorted(found)[:WIDTH])
        return self._cache[name]

    def _resolve_call(self, call: ast.Call, depth: int) -> set[str]:
        funcs = self.resolve(call.func, depth + 1)
        first = call.args[0] if call.args else None
        name = _constant(call.args[1]) if len(call.args) > 1 else None
        if "getattr" in funcs and isinstance(name, str):
            return {f"{base}.{name}" for base in self.resolve(first, depth + 1)}
        module = _constant(first)
        if isinstance(module, str) and funcs & {"importlib.import_module", "__import__"}:
            fromlist = any(k.arg == "fromlist" for k in call.keywords) or len(call.args) > 3
            return {module if fromlist or "__import__" not in funcs else module.split(".")[0]}
        if funcs & {"staticmethod", "classmethod", "functools.partial"} and first is not None:
            return self.resolve(first, depth + 1)
        if "vars" in funcs and first is not None:
            return {f"{base}.__dict__" for base in self.resolve(first, depth + 1)}
        return {f"{UNKNOWN}()"}

    def _resolve_subscript(self, value: ast.expr, key: str, depth: int) -> set[str]:
        found = set()
        for base in self.resolve(value, depth + 1):
            if base == "sys.modules":
                found.add(key)
            elif base.endswith(".__dict__"):
                found.add(f"{base.removesuffix('.__dict__')}.{key}")
        return found or {UNKNOWN}

    def is_function_class(self, bases: list[ast.expr], seen: frozenset[str] = frozenset()) -> bool:
        """True when one of ``bases`` is ``torch.autograd.Function`` (under any alias) or a class defined
        in the answers that derives from it."""
        for base in bases:
            for path in self.resolve(base):
                if path.rsplit(".", 1)[-1] == "Function":
                    return True
                cls = self.classes.get(path)
                if cls is None or path in seen or len(seen) >= DEPTH:
                    continue
                if self.is_function_class(cls.bases, seen | {path}):
                    return True
        return False


def _target_names(target: ast.expr) -> list[str]:
    """The names an assignment target binds: ``x``, each of ``x, y``, and ``obj.attr`` for an attribute."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
        return [f"{target.value.id}.{target.attr}"]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in _target_names(element)]
    return []


def _constant(node: ast.expr | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _autograd_path(paths: set[str]) -> str | None:
    """The first of ``paths`` that is one of autograd's ways of computing a gradient, or None."""
    for path in sorted(paths):
        parts = path.split(".")
        if parts[-1] == "backward" and len(parts) > 1:
            return path
        if parts[-1] in AUTOGRAD_CALLS and set(parts[:-1]) & set(AUTOGRAD_MODULES):
            return path
        if parts[0] == "functorch" and parts[-1] in AUTOGRAD_CALLS:
            return path
    return None


def _shown(expr: ast.expr, limit: int = 80) -> str:
    """``expr`` as source for a flag's reason, cut to ``limit`` characters."""
    try:
        text = ast.unparse(expr)
    except RecursionError:
        return "an expression nested too deep to show"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _own_backward(func: ast.expr, names: Names) -> bool:
    """True when ``func`` can only be the ``backward`` of a Function class of the answers: calling it
    computes a gradient by the learner's own code (what it asks autograd is judged on its own body)."""
    paths = names.resolve(func)
    classes = [names.classes.get(p.removesuffix(".backward")) for p in paths if p.endswith(".backward")]
    return len(classes) == len(paths) > 0 and all(c and names.is_function_class(c.bases) for c in classes)


def _autograd_call(node: ast.Call, names: Names) -> str | None:
    """Why the call ``node`` asks autograd for a gradient itself, or None."""
    func = node.func
    if _own_backward(func, names):
        return None
    if isinstance(func, ast.Attribute) and func.attr in AUTOGRAD_CALLS:
        owner = func.value
        owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if func.attr == "backward" or owner_name in AUTOGRAD_MODULES:
            return f"calls {_shown(func)}(...), asking autograd for the gradient"
    if isinstance(func, ast.Name) and func.id in ("grad", "vjp", "jacrev", "jacfwd"):
        return f"calls {func.id}(...), asking autograd for the gradient"
    found = _autograd_path(names.resolve(func))
    if found:
        return f"calls {_shown(func)}(...), which is {found}, asking autograd for the gradient"
    return None


def _asks_autograd(body: Body, names: Names, helpers: dict[str, str]) -> str | None:
    """Why ``body`` asks autograd for a gradient (itself, or through a helper in ``helpers``), or None."""
    return _first_reason(
        body, lambda node: _autograd_call(node, names) if isinstance(node, ast.Call) else None, names, helpers
    )


def _first_reason(
    unit: ast.AST, reason: Callable[[ast.AST], str | None], names: Names, helpers: dict[str, str]
) -> str | None:
    """The first node of ``unit`` that ``reason`` names, or that calls a helper of ``helpers``: why."""
    for node in ast.walk(unit):
        why = reason(node)
        helper = None
        if isinstance(node, ast.Call):
            helper = next((path for path in sorted(names.resolve(node.func)) if path in helpers), None)
        if why or helper:
            return why or f"calls {helper}(...), which {helpers[helper]}"
    return None


def _helpers_asking_autograd(names: Names) -> dict[str, str]:
    """Every defined function or lambda that asks autograd, itself or through others: name -> why."""
    return _helpers_that(
        names, lambda node: _autograd_call(node, names) if isinstance(node, ast.Call) else None
    )


def _helpers_that(names: Names, reason: Callable[[ast.AST], str | None]) -> dict[str, str]:
    """Every defined function or lambda with a node ``reason`` names, itself or through others: name ->
    why. Each body is read once; a helper calling one that does is marked from it, caller by caller."""
    found: dict[str, str] = {}
    callers: dict[str, set[str]] = {}
    for name, body in names.bodies.items():
        for node in ast.walk(body):
            why = reason(node)
            if why and name not in found:
                found[name] = why
            if not isinstance(node, ast.Call):
                continue
            for path in names.resolve(node.func):
                if path in names.bodies:
                    callers.setdefault(path, set()).add(name)
    roots = {name: (name, why) for name, why in found.items()}  # the helper that asks, and how
    queue = list(found)
    while queue:
        callee = queue.pop()
        for caller in sorted(callers.get(callee, ())):
            if caller not in found:
                helper, why = roots[callee]
                found[caller] = f"calls {callee}(...), which " + (
                    why if helper == callee else f"leads to {helper}(...), which {why}"
                )
                roots[caller] = roots[callee]
                queue.append(caller)
    return found


def _ignores_upstream(backward: Body) -> str | None:
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


def _unanswered(backward: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A backward left as handed out: it raises before anything else (a docstring, ``pass``), what follows
    the ``raise`` never runs. It scores nothing, and its feedback says so; it took no shortcut."""
    for node in backward.body:
        if isinstance(node, ast.Pass) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        ):
            continue
        return isinstance(node, ast.Raise)
    return True


def _class_backwards(cls: ast.ClassDef, names: Names) -> list[Body]:
    """The bodies a Function class's ``backward`` may be: a ``def backward`` in its body, or what
    ``backward = ...`` there names (a function, a lambda, ``staticmethod(helper)``)."""
    found: list[Body] = []
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "backward":
            found.append(item)
        elif isinstance(item, ast.Assign) and "backward" in [
            n for t in item.targets for n in _target_names(t)
        ]:
            found += _bodies_of(item.value, names)
    return found


def _bodies_of(value: ast.expr, names: Names) -> list[Body]:
    """The function bodies an expression may stand for (a lambda itself, or defined functions it names)."""
    while (
        isinstance(value, ast.Call)
        and value.args
        and names.resolve(value.func) & {"staticmethod", "classmethod"}
    ):
        value = value.args[0]
    if isinstance(value, ast.Lambda):
        return [value]
    return [names.bodies[path] for path in sorted(names.resolve(value)) if path in names.bodies]


def _built_backward(value: ast.expr, names: Names) -> list[Body] | None:
    """For ``type(name, (Function,), {...})``: the bodies its ``backward`` entry may be; None for
    anything else."""
    if not (isinstance(value, ast.Call) and len(value.args) == 3 and "type" in names.resolve(value.func)):
        return None
    bases, namespace = value.args[1], value.args[2]
    if not (isinstance(bases, (ast.Tuple, ast.List)) and names.is_function_class(bases.elts)):
        return None
    entries: list[tuple[object, ast.expr]] = []
    if isinstance(namespace, ast.Dict):
        entries = [(_constant(k), v) for k, v in zip(namespace.keys, namespace.values, strict=True)]
    elif isinstance(namespace, ast.Call) and "dict" in names.resolve(namespace.func):
        entries = [(k.arg, k.value) for k in namespace.keywords]
    return [body for key, v in entries if key == "backward" for body in _bodies_of(v, names)]


def _backwards(cells: list[tuple[str, ast.Module]], names: Names) -> list[tuple[str, str, Body]]:
    """Every (class name, cell id, backward body) of the answers' ``Function`` classes: defined with
    ``class``, built with ``type(...)``, or given a ``backward`` by assignment after the class."""
    found = []
    for cell_id, tree in cells:
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and names.is_function_class(node.bases):
                found += [(node.name, cell_id, body) for body in _class_backwards(node, names)]
            if not isinstance(node, ast.Assign):
                continue
            built = _built_backward(node.value, names)
            targets = [n for t in node.targets for n in _target_names(t)]
            if built is not None:
                found += [(name, cell_id, body) for name in targets for body in built]
            for target in node.targets:
                owner = (
                    target.value if isinstance(target, ast.Attribute) and target.attr == "backward" else None
                )
                cls = names.classes.get(owner.id) if isinstance(owner, ast.Name) else None
                if cls is not None and names.is_function_class(cls.bases):
                    found += [(cls.name, cell_id, body) for body in _bodies_of(node.value, names)]
    return found


def _parsed(answers: list[dict[str, str]]) -> list[tuple[str, ast.Module]]:
    cells = []
    for answer in answers:
        try:
            cells.append((answer["id"], ast.parse(answer["source"])))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue  # a cell that does not parse (or nests too deep to) defines nothing: the checks say so
    return cells


def flags(answers: list[dict[str, str]], numpy_only: bool) -> list[Flag]:
    """The flags of a submission's answer cells (``{"id": ..., "source": ...}``, as the grader keeps
    them), read together: a helper or an alias defined in one answer cell counts in every other."""
    cells = _parsed(answers)
    found: list[Flag] = []
    if numpy_only:
        for cell_id, tree in cells:
            why = _uses_torch(tree)
            if why:
                defined = ", ".join(_defined_names(tree)) or "this cell"
                found.append(Flag(defined, cell_id, f"a numpy exercise answered with PyTorch ({why})"))
        return found
    names = Names([tree for _, tree in cells])
    helpers = _helpers_asking_autograd(names)
    for name, cell_id, body in _backwards(cells, names):
        if not isinstance(body, ast.Lambda) and _unanswered(body):
            continue
        asks = _asks_autograd(body, names, helpers)
        why = f"its backward {asks}" if asks else _ignores_upstream(body)
        if why and Flag(name, cell_id, why) not in found:
            found.append(Flag(name, cell_id, why))
    from autograder.engine.method_attention import attention_flags

    found += [flag for flag in attention_flags(cells, names, helpers) if flag not in found]
    return found


def flags_for(cell_id: str, source: str, numpy_only: bool) -> list[Flag]:
    """The flags of one answer cell's source read alone (an empty list when it cannot be parsed)."""
    return flags([{"id": cell_id, "source": source}], numpy_only)


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
