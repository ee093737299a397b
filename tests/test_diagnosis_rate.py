"""The checks' diagnosis rate may not fall: a fixed sample of the mutation tool's killed mutants.

``benchmarks/mutation.py`` mutates every exercise's reference solution with mutmut and grades each
mutant with its check (the full run takes minutes). ``--baseline`` then picks, per check, a few of
the killed mutants whose feedback names the mistake and a few whose feedback does not, and records
them with today's figures in ``tests/diagnosis_baseline.json``. Here each sampled mutant is applied
to the solution again and graded in-process: every one must still lose points, and no check may
diagnose fewer of them than the baseline says. A check that diagnoses more passes; rewrite the
baseline to keep the gain.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_harness", ROOT / "benchmarks" / "mutation.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


harness = _load_harness()
BASELINE = json.loads(harness.BASELINE.read_text())
CHECKS = BASELINE["checks"]


@pytest.fixture(scope="module")
def exercises() -> dict[str, object]:
    return {
        stem: harness.extract(harness.SOLUTIONS / f"{stem}.py")
        for stem in {c["notebook"] for c in CHECKS.values()}
    }


def test_the_baseline_covers_every_graded_test_cell() -> None:
    # A mutant belongs to the first test cell that grades the function it changes; a test cell that
    # grades only functions an earlier cell grades (06's test_flash_memory, on FlashAttention) has no
    # mutants of its own: its check runs on them in the mutation run, its baseline is the earlier cell's.
    cells = {
        cell
        for source in harness.SOLUTIONS.glob("[0-9][0-9]_*.py")
        for cell in harness.extract(source).owner.values()
    }
    fix = (
        "run `python benchmarks/mutation.py NN --baseline-new` for the notebook NN of a new cell "
        "(minutes; `--baseline` re-samples every check of NN)"
    )
    assert not cells - set(CHECKS), (
        f"test cells without sampled mutants: {sorted(cells - set(CHECKS))}; {fix}"
    )
    assert not set(CHECKS) - cells, (
        f"the baseline names cells the solutions lack: {sorted(set(CHECKS) - cells)}; {fix}"
    )
    assert all(c["sample"] for c in CHECKS.values()), "a check without sampled mutants is not held"
    # the sample counts what it claims
    for check in CHECKS.values():
        assert check["sample_diagnosed"] == sum(m["diagnosed"] for m in check["sample"])


@pytest.mark.parametrize("cell", sorted(CHECKS))
def test_sampled_mutants_stay_killed_and_diagnosed(cell: str, exercises: dict) -> None:
    check = CHECKS[cell]
    exercise = exercises[check["notebook"]]
    lost, undiagnosed = [], []
    diagnosed = 0
    for mutant in check["sample"]:
        verdict = harness.judge(exercise, cell, mutant["function"], mutant["old"], mutant["new"])
        if not verdict["killed"]:
            lost.append(mutant["mutant"])
        diagnosed += verdict["diagnosed"]
        if mutant["diagnosed"] and not verdict["diagnosed"]:
            undiagnosed.append(mutant["mutant"])
    assert not lost, f"{cell}: these mutants now earn full points: {lost}"
    assert diagnosed >= check["sample_diagnosed"], (
        f"{cell}: {diagnosed} of {len(check['sample'])} sampled mutants diagnosed, the baseline has "
        f"{check['sample_diagnosed']}; no longer named: {undiagnosed}"
    )


# ----------------------------------------------------------------------------- the harness itself


def test_names_mistake_needs_a_diagnosis_not_a_symptom() -> None:
    assert harness.names_mistake(["dW: dW has shape (3, 5), expected (5, 3). Likely mistake: transposed."])
    assert harness.names_mistake(["inputs unchanged: in case N=4, your code changed its argument x in place"])
    assert not harness.names_mistake(
        ["dx: dx values differ in 12 of 12 elements; worst at [0, 0]: got 1, expected 2"]
    )
    assert not harness.names_mistake(["out: linear_forward raised TypeError: unsupported operand"])
    assert not harness.names_mistake([])


def test_a_baseline_run_over_one_notebook_keeps_the_other_notebooks() -> None:
    old = {
        "test_a": {"notebook": "01_x", "sample": [1]},
        "test_b": {"notebook": "04_y", "sample": [2]},
        "test_gone": {"notebook": "04_y", "sample": [3]},
        "test_c": {"notebook": "05_z", "sample": [4]},
    }
    new = {"test_b": {"notebook": "04_y", "sample": [5]}, "test_new": {"notebook": "04_y", "sample": [6]}}
    merged = harness.merge_baseline(old, new)
    assert list(merged) == ["test_a", "test_b", "test_new", "test_c"]
    assert merged["test_b"]["sample"] == [5] and merged["test_a"] is old["test_a"]
    # the committed baseline, merged with one notebook's own entries, is itself
    one = {cell: entry for cell, entry in CHECKS.items() if entry["notebook"].startswith("04")}
    assert harness.merge_baseline(CHECKS, one) == CHECKS
    # --baseline-new adds the checks the baseline lacks and re-samples none of the others
    added = harness.merge_baseline(old, new, only_new=True)
    assert list(added) == ["test_a", "test_b", "test_gone", "test_new", "test_c"]
    assert added["test_b"] is old["test_b"] and added["test_new"] is new["test_new"]


def test_a_patch_applies_once_in_its_function_or_says_the_baseline_is_stale() -> None:
    module = "def f(x):\n    y = x + 1\n    return y\n\n\ndef g(x):\n    y = x + 1\n    return y\n"
    patched = harness.apply_patch(module, "g", "    y = x + 1\n", "    y = x - 1\n")
    assert patched == module[: module.index("def g")] + "def g(x):\n    y = x - 1\n    return y\n"
    with pytest.raises(LookupError, match="rewrite it with benchmarks/mutation.py --baseline"):
        harness.apply_patch(module, "f", "    y = x * 2\n", "    y = x\n")
    with pytest.raises(LookupError, match="h is not defined"):
        harness.apply_patch(module, "h", "    y = x + 1\n", "    y = x - 1\n")
    # a method's diff comes dedented from its class, except inside its docstring, and may end in a
    # comment after its last line; the context grows until the lines are found once
    method = (
        'class C:\n    def f(self):\n        """Doc.\n\n        More.\n        """\n        return 1\n'
        "        # end\n\n    def g(self):\n        return 1\n"
    )
    lines = [
        (" ", "    More."),
        (" ", '    """'),
        ("-", "    return 1"),
        ("+", "    return 2"),
        (" ", "    # end"),
    ]
    lines[0] = (" ", "        More.")  # docstring lines keep the class's indentation
    assert harness.indent_patch(method, "C.f", lines) == ("        return 1\n", "        return 2\n")
    assert harness.indent_patch(method + method.replace("C:", "D:"), "C.f", lines)[0] == "        return 1\n"
    with pytest.raises(LookupError, match="not found once in C.f"):
        harness.indent_patch(method, "C.f", [("-", "    return 3"), ("+", "    return 4")])
    assert harness.qualname_of("exercise.solution.x\u01c1C\u01c1f__mutmut_3") == "C.f"
    assert harness.qualname_of("exercise.solution.x_mse_loss__mutmut_11") == "mse_loss"


def test_patch_from_a_mutmut_diff() -> None:
    diff = (
        "# exercise.solution.x_mse_loss__mutmut_11: killed\n"
        "--- exercise/solution.py\n+++ exercise/solution.py\n"
        "@@ -16,3 +16,3 @@\n     diff = pred - target\n-    dpred = 2.0 * diff / diff.size\n"
        "+    dpred = 3.0 * diff / diff.size\n     ### END SOLUTION\n"
    )
    old, new = harness.patch_from_diff(diff)
    assert old == "    diff = pred - target\n    dpred = 2.0 * diff / diff.size\n    ### END SOLUTION\n"
    assert new == "    diff = pred - target\n    dpred = 3.0 * diff / diff.size\n    ### END SOLUTION\n"


def test_only_the_solution_blocks_are_mutated() -> None:
    exercise = harness.extract(harness.SOLUTIONS / "01_linear_layer.py")
    lines = exercise.module.splitlines()
    inside = False
    for line in lines:
        if line.strip() == "### BEGIN SOLUTION":
            inside = True
        elif line.strip() == "### END SOLUTION":
            inside = False
        elif inside:
            assert harness.PRAGMA not in line
        elif line.strip().startswith(("def ", "return ", "import ", "from ")):
            assert line.endswith(harness.PRAGMA.strip()), line
    assert exercise.owner["linear_backward"] == "test_linear_layer"
    assert [c.seed for c in exercise.tests[0].calls] == [0, 7]  # visible and hidden test
