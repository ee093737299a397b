"""The trust line is a folder: ``autograder/checks/`` is everything a learner's kernel may import, and
the jail mounts exactly it; ``autograder/grading/`` (everything that decides a score) never enters a
kernel; the version that keys stored results hashes those folders whole."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import autograder
from autograder.checks import core
from autograder.engine import jail, versions

PACKAGE = Path(autograder.__file__).parent
KERNEL_SIDE = PACKAGE / "checks"


def _imports(path: Path) -> list[str]:
    """Every module an ``import`` statement of ``path`` names, at any depth (functions included)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_the_kernel_side_imports_nothing_of_the_course_outside_itself() -> None:
    outside = {
        f"{path.relative_to(PACKAGE)}: {name}"
        for path in sorted(KERNEL_SIDE.rglob("*.py"))
        for name in _imports(path)
        if name.split(".")[0] == "autograder" and not name.startswith("autograder.checks")
        and name != "autograder"
    }  # fmt: skip
    assert not outside, f"the kernel side imports the trusted side or the engine: {sorted(outside)}"
    # modules loaded by name: the package's own lazy entry points, and the one declared hook by which
    # the learner's own lab grades in its process
    loaded = {
        (path.name, ast.unparse(node.args[0]))
        for path in KERNEL_SIDE.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module")
    }
    own = "f'autograder.checks.{module}'"
    assert loaded == {("__init__.py", own), ("core.py", own), ("core.py", "TRUSTED_SIDE")}
    assert core.TRUSTED_SIDE == "autograder.grading"


def test_every_kernel_module_imports_with_the_rest_of_the_course_absent() -> None:
    """What a jailed kernel meets: the course's other packages do not exist. Every module of the kernel
    side imports all the same, and the hook to the trusted side fails as an ImportError."""
    modules = sorted(
        ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        for p in KERNEL_SIDE.rglob("*.py")
    )
    script = (
        "import importlib, importlib.abc, sys\n"
        "class Absent(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[:2] in (['autograder', 'grading'], ['autograder', 'engine'],\n"
        "                                   ['autograder', 'course']):\n"
        "            raise ModuleNotFoundError(name)\n"
        "sys.meta_path.insert(0, Absent())\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "from autograder.checks.core import CHECKS\n"
        "check = next(iter(CHECKS.values()))\n"
        "try:\n"
        "    check.grade({})\n"
        "except ImportError:\n"
        "    print('absent')\n"
    )
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "absent"


def test_the_jail_mounts_exactly_the_kernel_side() -> None:
    view = jail.kernel_view(numpy_only=False)
    assert view["packages"] == {os.path.realpath(PACKAGE): ["__init__.py", "checks"]}


def test_the_version_of_stored_results_hashes_the_folders_that_decide_a_score() -> None:
    assert set(versions.GRADING_CODE) == {"autograder.checks", "autograder.grading", "backprop_utils"}
    code = versions.GRADING_CODE
    hashed = {f"{module}/{name}" for module in code for name, _ in versions._code_files(module)}
    for folder, module in ((KERNEL_SIDE, "autograder.checks"), (PACKAGE / "grading", "autograder.grading")):
        for path in folder.rglob("*.py"):
            assert f"{module}/{path.relative_to(folder)}" in hashed, path
