"""Mutation testing of the checks: mutate every exercise's reference solution, grade each mutant.

For each notebook source ``solutions/NN_*.py`` this writes a small project under
``build/mutation/NN_*/``: the set-up cell and every ``# %% solution`` cell as one module
(``exercise/solution.py``), and one pytest test per graded test cell that runs that cell's checks
(``Check.collect`` then the trusted ``autograder.grading.grade``, through the engine's JSON round
trip) on the module's functions and fails when any call earns less than full points. mutmut
(pinned in requirements.txt) mutates the module, code inside ``### BEGIN SOLUTION`` /
``### END SOLUTION`` only (what a learner writes; the given scaffolding carries
``# pragma: no mutate``), and runs the tests that reach each mutant.

Why mutmut: it forks every mutant's test run from a process that has already imported numpy,
PyTorch and the checks, so a mutant costs its checks' time only (cosmic-ray starts a new
interpreter per mutant, ~3 s of imports each); it instruments methods of classes, static methods
included, which every ``torch.autograd.Function`` of notebooks 04 and 05 is made of; and it runs
only the tests that reach the mutated function.

For each mutant a test writes the failing check's feedback to a JSON file, so that the report can
say, per check, the **kill rate** (mutants that lose points, or hang past mutmut's time limit) and
the **diagnosis rate** (killed mutants whose feedback names a mistake class: see
:func:`names_mistake`). Surviving mutants are listed with their diff for review; the ones shown
equivalent are in ``benchmarks/equivalent_mutants.md``.

    nice -n 19 .venv/bin/python benchmarks/mutation.py                  # every notebook
    nice -n 19 .venv/bin/python benchmarks/mutation.py 01 --max-children 1
    .venv/bin/python benchmarks/mutation.py --report-only               # reprint the last run

Results go to ``build/mutation/results.json`` (and a Markdown table on stdout).
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tokenize
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = ROOT / "solutions"
WORK = ROOT / "build" / "mutation"
RESULTS = WORK / "results.json"
BASELINE = ROOT / "tests" / "diagnosis_baseline.json"

PRAGMA = "  # pragma: no mutate"

#: Feedback that names a mistake class, not only a symptom. "Likely mistake" is how every check
#: states a recognised diagnosis; the other phrases are diagnoses the shared grading toolkit gives
#: in its own words (an argument changed in place names the mistake and the fix).
DIAGNOSES = ("Likely mistake", "changed its argument")


def names_mistake(messages: list[str]) -> bool:
    """True when the failing items' messages name a mistake class (see :data:`DIAGNOSES`)."""
    return any(marker in message for message in messages for marker in DIAGNOSES)


# ----------------------------------------------------------------------------- extraction


@dataclass
class Cell:
    kind: str  # "setup", "solution", "tests", "code" (any other code cell) or "" (markdown)
    grade_id: str
    points: float
    source: str


@dataclass
class CheckCall:
    check: str  # the check's name in autograder.checks.CHECKS
    args: list[str]  # names the test cell passes, defined by the solution cells
    seed: int


@dataclass
class TestCell:
    grade_id: str
    points: float
    calls: list[CheckCall]
    after: int = 0  # index of the cell in the notebook, to attribute helpers to the next test


@dataclass
class Exercise:
    stem: str
    module: str  # the source of exercise/solution.py
    tests: list[TestCell]
    owner: dict[str, str] = field(default_factory=dict)  # top-level name -> test cell that grades it


_HEADER = re.compile(r"^# %%(.*)$")


def split_cells(text: str) -> list[Cell]:
    """The jupytext percent-format cells of a solutions file, with their nbgrader role."""
    cells: list[Cell] = []
    header, lines = None, []

    def close() -> None:
        if header is None:
            return
        kind = ""
        words = header.split()
        if words and words[0] in ("solution", "tests"):
            kind = words[0]
        elif "[markdown]" not in header:
            kind = "code"
        if 'grade_id="setup"' in header:
            kind = "setup"
        grade_id = re.search(r'grade_id="([^"]+)"', header)
        points = re.search(r"points=([0-9.]+)", header)
        cells.append(
            Cell(
                kind,
                grade_id.group(1) if grade_id else "",
                float(points.group(1)) if points else 0.0,
                "".join(lines),
            )
        )

    for line in text.splitlines(keepends=True):
        match = _HEADER.match(line)
        if match:
            close()
            header, lines = match.group(1), []
        else:
            lines.append(line)
    close()
    return cells


def protect_scaffolding(source: str) -> str:
    """``source`` with ``# pragma: no mutate`` on every line outside the solution blocks.

    Only the lines a learner writes are mutated; a comment can end a line only where a token line
    ends (not inside a string, not after a backslash).
    """
    lines = source.splitlines(keepends=True)
    ends = {
        tok.start[0]
        for tok in tokenize.generate_tokens(io.StringIO(source).readline)
        if tok.type in (tokenize.NEWLINE, tokenize.NL)
    }
    inside, out = False, []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if stripped == "### BEGIN SOLUTION":
            inside = True
        elif stripped == "### END SOLUTION":
            inside = False
        elif not inside and number in ends and stripped and not stripped.startswith("#"):
            line = line.rstrip("\n") + PRAGMA + "\n"
        out.append(line)
    return "".join(out)


def _check_calls(cell: Cell) -> list[CheckCall]:
    calls = []
    for node in ast.walk(ast.parse(cell.source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id.startswith("check_")
        ):
            seeds = [k.value for k in node.keywords if k.arg == "seed"]
            seed = seeds[0].value if seeds and isinstance(seeds[0], ast.Constant) else 0
            args = [a.id for a in node.args if isinstance(a, ast.Name)]
            if len(args) != len(node.args):
                raise ValueError(f"test cell {cell.grade_id}: check arguments must be plain names")
            calls.append(CheckCall(node.func.id.removeprefix("check_"), args, int(seed)))
    return calls


def _defined_names(source: str) -> list[str]:
    return [
        node.name
        for node in ast.parse(source).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
    ]


def _definitions(source: str) -> str:
    """The imports, functions and classes of a plain code cell, without the code it runs."""
    keep = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef)
    lines = source.splitlines(keepends=True)
    kept = []
    for node in ast.parse(source).body:
        if isinstance(node, keep):
            start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
            kept.append("".join(lines[start - 1 : node.end_lineno]))
    return "\n\n".join(kept)


def extract(path: Path) -> Exercise:
    """The exercise module (set-up and solution cells) and the test cells of one solutions file."""
    cells = split_cells(path.read_text())
    parts, tests, defined_at = [], [], {}
    for index, cell in enumerate(cells):
        if cell.kind == "setup":
            parts.append(protect_scaffolding(cell.source))
        elif cell.kind == "solution":
            parts.append(protect_scaffolding(cell.source))
            for name in _defined_names(cell.source):
                defined_at[name] = index
        elif cell.kind == "code":
            helpers = _definitions(cell.source)
            if helpers:
                parts.append(protect_scaffolding(helpers))
        elif cell.kind == "tests":
            tests.append(TestCell(cell.grade_id, cell.points, _check_calls(cell), index))
    owner = {}
    for name, index in defined_at.items():
        graders = [t for t in tests if any(name in c.args for c in t.calls)]
        later = [t for t in tests if t.after > index]
        chosen = graders[0] if graders else later[0] if later else None
        if chosen:
            owner[name] = chosen.grade_id
    module = f'"""Generated from solutions/{path.name}: set-up and solution cells."""\n'
    module += "\n\n".join(p.strip("\n") + "\n" for p in parts)
    return Exercise(path.stem, module, tests, owner)


# ----------------------------------------------------------------------------- the project


SETUP_CFG = """\
[mutmut]
source_paths = exercise/
pytest_add_cli_args_test_selection = tests/
timeout_multiplier = 4.0
timeout_constant = 5.0
use_git_change_detection = false

[tool:pytest]
addopts = -p no:cacheprovider
filterwarnings = ignore
"""

TEST_TEMPLATE = '''\
"""Generated: one test per graded test cell of {stem}, failing when a check loses points."""

import json
import os
from pathlib import Path

from autograder.checks import evidence as evidence_json
from autograder.checks import CHECKS, all_checks
from autograder.grading import grade
from exercise import solution

all_checks()


def function_of(mutant):
    local = mutant.split(".")[-1].rsplit("__mutmut_", 1)[0]
    return local.split("\u01c1")[1] if local.startswith("x\u01c1") else local.removeprefix("x_")


def grade_calls(cell, calls):
    for check_name, args, seed in calls:
        check = CHECKS[check_name]
        evidence = check.collect(*(getattr(solution, a) for a in args), seed=seed)
        report = grade(check, evidence_json.loads(evidence_json.dumps(evidence)))
        if report.score < report.points:
            mutant = os.environ.get("MUTANT_UNDER_TEST", "")
            out = os.environ.get("MUTATION_FEEDBACK_DIR")
            if out and mutant:
                record = {{
                    "mutant": mutant,
                    "cell": cell,
                    "check": check_name,
                    "seed": seed,
                    "score": report.score,
                    "points": report.points,
                    "failing": [i.name + ": " + i.message for i in report.items if not i.passed],
                    "feedback": report.render(),
                }}
                Path(out, mutant + ".json").write_text(json.dumps(record, indent=1))
            raise AssertionError(report.render())


def run_cell(cell):
    # The check that grades the mutated function runs first, whichever test mutmut starts with,
    # so that a mutant is judged by the feedback of its own exercise.
    owner = OWNER.get(function_of(os.environ.get("MUTANT_UNDER_TEST", "")))
    if owner in CELLS and owner != cell:
        grade_calls(owner, CELLS[owner])
    grade_calls(cell, CELLS[cell])
'''


def write_project(exercise: Exercise, where: Path) -> None:
    """A fresh mutmut project for one exercise in ``where``."""
    if where.exists():
        shutil.rmtree(where)
    (where / "exercise").mkdir(parents=True)
    (where / "tests").mkdir()
    (where / "feedback").mkdir()
    (where / "exercise" / "__init__.py").write_text("")
    (where / "exercise" / "solution.py").write_text(exercise.module)
    (where / "setup.cfg").write_text(SETUP_CFG)
    test = TEST_TEMPLATE.format(stem=exercise.stem)
    cells = {cell.grade_id: [(c.check, c.args, c.seed) for c in cell.calls] for cell in exercise.tests}
    test += f"\n\nOWNER = {exercise.owner!r}\nCELLS = {cells!r}\n"
    for cell in exercise.tests:
        test += f"\n\ndef test_{cell.grade_id.removeprefix('test_')}():\n    run_cell({cell.grade_id!r})\n"
    (where / "tests" / "test_checks.py").write_text(test)


# ----------------------------------------------------------------------------- running


def _env() -> dict[str, str]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    env.pop("MUTANT_UNDER_TEST", None)
    return env


def _mutmut() -> str:
    return str(Path(sys.executable).with_name("mutmut"))


def run_mutmut(where: Path, max_children: int) -> float:
    """Run mutmut in ``where``; return the wall time in seconds."""
    env = _env()
    env["MUTATION_FEEDBACK_DIR"] = str(where / "feedback")
    start = time.monotonic()
    done = subprocess.run(
        [_mutmut(), "run", "--max-children", str(max_children)],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
    )
    (where / "mutmut-run.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        raise RuntimeError(f"mutmut failed in {where}; see {where / 'mutmut-run.log'}")
    return time.monotonic() - start


_RESULT = re.compile(r"^\s+(\S+): (.+)$")


def mutant_statuses(where: Path) -> dict[str, str]:
    """Every mutant's status (killed, survived, timeout, no tests...), from ``mutmut results``."""
    done = subprocess.run(
        [_mutmut(), "results", "--all", "true"],
        cwd=where,
        env=_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    return {m.group(1): m.group(2).strip() for m in map(_RESULT.match, done.stdout.splitlines()) if m}


def mutant_diff(where: Path, mutant: str) -> str:
    done = subprocess.run([_mutmut(), "show", mutant], cwd=where, env=_env(), capture_output=True, text=True)
    return "\n".join(
        line
        for line in done.stdout.splitlines()
        if line.startswith(("-", "+")) and line[:3] not in ("---", "+++")
    )


def function_of(mutant: str) -> str:
    """The top-level function or class a mutant belongs to.

    ``exercise.solution.xǁLinearFunctionǁbackward__mutmut_3`` -> ``LinearFunction``;
    ``exercise.solution.x_mse_loss__mutmut_1`` -> ``mse_loss``.
    """
    return qualname_of(mutant).split(".")[0]


# ----------------------------------------------------------------------------- the report


@dataclass
class MutantResult:
    name: str
    cell: str
    status: str
    killed_by: str | None = None
    diagnosed: bool | None = None
    failing: list[str] = field(default_factory=list)
    diff: str = ""


def collect_results(exercise: Exercise, where: Path) -> list[MutantResult]:
    results = []
    for name, status in sorted(mutant_statuses(where).items()):
        cell = exercise.owner.get(function_of(name), "?")
        result = MutantResult(name, cell, status)
        record_path = where / "feedback" / f"{name}.json"
        if status == "killed" and record_path.exists():
            record = json.loads(record_path.read_text())
            result.killed_by, result.failing = record["cell"], record["failing"]
            result.diagnosed = names_mistake(record["failing"])
        if status not in ("killed",):
            result.diff = mutant_diff(where, name)
        results.append(result)
    return results


_CRASH = re.compile(r" raised [A-Za-z_.]+(Error|Exception|Interrupt|Exit)\b|: not checked: ")


def crashed(messages: list[str]) -> bool:
    """True when every failing item failed because the learner's code raised, or was not run."""
    return bool(messages) and all(_CRASH.search(m) for m in messages)


def summarise(results: dict[str, list[dict]], wrong: dict[str, dict] | None = None) -> list[dict]:
    """Per test cell: mutants, killed (timeouts included), those killed by a verdict (with feedback),
    those among them that ran and returned wrong values (no crash), and how many of each the
    feedback diagnoses; with the check tests' own wrong implementations when ``wrong`` is given."""
    rows = []
    for stem, mutants in results.items():
        for cell in dict.fromkeys(m["cell"] for m in mutants):
            mine = [m for m in mutants if m["cell"] == cell and m["status"] != "no tests"]
            killed = [m for m in mine if m["status"] in ("killed", "timeout", "segfault")]
            judged = [m for m in mine if m["diagnosed"] is not None]
            ran = [m for m in judged if not crashed(m["failing"])]
            row = {
                "notebook": stem,
                "check": cell,
                "mutants": len(mine),
                "killed": len(killed),
                "survived": len(mine) - len(killed),
                "judged": len(judged),
                "diagnosed": sum(m["diagnosed"] for m in judged),
                "ran": len(ran),
                "ran_diagnosed": sum(m["diagnosed"] for m in ran),
            }
            if wrong is not None:
                found = wrong.get(cell.removeprefix("test_"), {"wrong": 0, "diagnosed": 0})
                row["tests_wrong"], row["tests_diagnosed"] = found["wrong"], found["diagnosed"]
            rows.append(row)
    return rows


def _rate(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def markdown(rows: list[dict]) -> str:
    """The per-check table: kill rate, diagnosis rate over killed mutants and over those that ran."""
    tests = rows and "tests_wrong" in rows[0]
    head = (
        "| nb | check | mutants | kill rate | diagnosed / killed | of those that ran "
        + ("| tests' wrong implementations diagnosed " if tests else "")
        + "|"
    )
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    keys = ["mutants", "killed", "judged", "diagnosed", "ran", "ran_diagnosed"]
    keys += ["tests_wrong", "tests_diagnosed"] if tests else []
    total = {k: sum(r[k] for r in rows) for k in keys}
    for r in [*rows, {"notebook": "all", "check": "", **total}]:
        line = (
            f"| {r['notebook'].split('_')[0]} | {r['check'].removeprefix('test_')} | {r['mutants']} "
            f"| {r['killed']} ({_rate(r['killed'], r['mutants'])}) "
            f"| {r['diagnosed']} / {r['judged']} ({_rate(r['diagnosed'], r['judged'])}) "
            f"| {r['ran_diagnosed']} / {r['ran']} ({_rate(r['ran_diagnosed'], r['ran'])}) |"
        )
        if tests:
            rate = _rate(r["tests_diagnosed"], r["tests_wrong"])
            line += f" {r['tests_diagnosed']} / {r['tests_wrong']} ({rate}) |"
        lines.append(line)
    return "\n".join(lines)


# ----------------------------------------------------------------------------- the tests' wrong code


def measure_wrong_implementations() -> dict[str, dict[str, int]]:
    """Per check: how many of the check tests' own wrong implementations lose points, and how many
    of those get feedback that names the mistake.

    Runs ``tests/test_checks_*.py`` in this process with every grade recorded. A wrong
    implementation is a (test, check) pair whose first report loses points; blanks (an untouched
    stub raising NotImplementedError) are not wrong implementations and are left out.
    """
    import pytest

    import autograder.grading as grading

    first: dict[tuple[str, str], list[str]] = {}
    current = {"test": ""}
    original = grading.grade

    def recording_grade(check, evidence):
        report = original(check, evidence)
        name = check if isinstance(check, str) else check.name
        if report.score < report.points:
            failing = [f"{i.name}: {i.message}" for i in report.items if not i.passed]
            first.setdefault((current["test"], name), failing)
        return report

    class Recorder:
        @pytest.hookimpl(wrapper=True)
        def pytest_runtest_call(self, item):
            current["test"] = item.nodeid
            return (yield)

    grading.grade = recording_grade
    try:
        files = sorted(str(p) for p in (ROOT / "tests").glob("test_checks_*.py"))
        code = pytest.main([*files, "-q", "-p", "no:cacheprovider", "-x"], plugins=[Recorder()])
    finally:
        grading.grade = original
    if code != 0:
        raise RuntimeError(f"the check tests failed (pytest exit code {code})")
    counts: dict[str, dict[str, int]] = {}
    for (_, check), failing in first.items():
        if all("NotImplementedError" in m for m in failing):
            continue
        entry = counts.setdefault(check, {"wrong": 0, "diagnosed": 0})
        entry["wrong"] += 1
        entry["diagnosed"] += names_mistake(failing)
    return counts


def survivors(results: dict[str, list[dict]]) -> str:
    out = []
    for mutants in results.values():
        for m in mutants:
            if m["status"] not in ("killed", "timeout", "segfault"):
                out.append(
                    f"{m['cell']}  {m['name']}  [{m['status']}]\n"
                    + "\n".join("    " + d for d in m["diff"].splitlines())
                )
    return "\n".join(out)


# ----------------------------------------------------------------------------- a fixed sample, in-process


def hunk_lines(diff: str) -> list[tuple[str, str]]:
    """The ``(tag, text)`` lines of a one-hunk ``mutmut show`` diff; tag is " ", "-" or "+"."""
    lines, in_hunk = [], False
    for line in diff.splitlines():
        if line.startswith("@@"):
            if in_hunk:
                raise ValueError("more than one hunk")
            in_hunk = True
        elif in_hunk and (line == "" or line[0] in " -+"):
            lines.append((line[:1] or " ", line[1:]))
    return lines


def patch_from_diff(diff: str) -> tuple[str, str]:
    """The (old, new) text of a one-hunk ``mutmut show`` diff: the hunk's lines before and after."""
    lines = hunk_lines(diff)
    old = [text for tag, text in lines if tag != "+"]
    new = [text for tag, text in lines if tag != "-"]
    return "\n".join(old) + "\n", "\n".join(new) + "\n"


def qualname_of(mutant: str) -> str:
    """The function or method a mutant mutates: ``xǁMyReLUǁbackward__mutmut_3`` -> ``MyReLU.backward``."""
    local = mutant.split(".")[-1].rsplit("__mutmut_", 1)[0]
    if local.startswith("xǁ"):
        return ".".join(local.split("ǁ")[1:])
    return local.removeprefix("x_")


def _span(module: str, qualname: str) -> tuple[int, int]:
    """Character offsets of the definition of ``qualname`` (a function, or Class.method) in ``module``,
    up to the next definition (trailing comments such as ``### END SOLUTION`` included)."""
    starts = [0]
    for line in module.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    body, first, last = ast.parse(module).body, 1, len(starts) - 1
    for name in qualname.split("."):
        found = [
            i for i, n in enumerate(body) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == name
        ]
        if not found:
            raise LookupError(f"{qualname} is not defined in the solution")
        index = found[-1]  # a later definition wins, as when the cells run
        node = body[index]
        first = node.lineno
        if index + 1 < len(body):
            following = body[index + 1]
            last = min([following.lineno] + [d.lineno for d in getattr(following, "decorator_list", [])]) - 1
        body = node.body
    return starts[first - 1], starts[last]


def _occurrences(region: str, block: str) -> int:
    """How often ``block`` (whole lines) occurs in ``region``, each time from the start of a line."""
    return ("\n" + region).count("\n" + block)


def indent_patch(module: str, qualname: str, lines: list[tuple[str, str]]) -> tuple[str, str]:
    """The smallest ``(old, new)`` around a diff's changed lines that occurs once in ``qualname``.

    mutmut shows a method dedented from its class, except inside strings (a docstring keeps its
    indentation): the changed lines are code and get the method's indentation; each context line
    is taken as it appears in the module.
    """
    start, end = _span(module, qualname)
    region = module[start:end]
    region_lines = set(region.splitlines())
    changed = [i for i, (tag, _) in enumerate(lines) if tag != " "]
    if not changed:
        raise ValueError("the diff changes nothing")
    first, last = changed[0], changed[-1]
    for prefix in ("", "    ", "        "):

        def placed(tag: str, text: str, prefix: str = prefix) -> str:
            if tag == " " and text.strip() and prefix + text not in region_lines:
                return text
            return prefix + text if text.strip() else text

        for context in range(4):
            window = lines[max(first - context, 0) : last + context + 1]
            old = "".join(placed(t, x) + "\n" for t, x in window if t != "+")
            new = "".join(placed(t, x) + "\n" for t, x in window if t != "-")
            found = _occurrences(region, old)
            if found == 1:
                return old, new
            if found == 0:
                break
    raise LookupError(f"the mutated lines are not found once in {qualname}")


def apply_patch(module: str, qualname: str, old: str, new: str) -> str:
    """``module`` with the one occurrence of ``old`` in the definition of ``qualname`` replaced by ``new``."""
    start, end = _span(module, qualname)
    region = module[start:end]
    count = _occurrences(region, old)
    if count != 1:
        raise LookupError(
            f"the mutated lines occur {count} times in {qualname} (once expected): the solutions "
            "changed since the baseline was written; rewrite it with benchmarks/mutation.py --baseline"
        )
    patched = ("\n" + region).replace("\n" + old, "\n" + new)[1:]
    return module[:start] + patched + module[end:]


def load_module(source: str, name: str) -> types.ModuleType:
    """Execute a generated exercise module's source as a fresh module."""
    module = types.ModuleType(name)
    module.__file__ = f"<{name}>"
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102 - our own solutions
    return module


def grade_cell(module: types.ModuleType, cell: TestCell) -> list[str] | None:
    """Run a test cell's checks on ``module``; the failing items' messages of the first call that
    loses points, or None when every call earns full points."""
    from autograder.checks import CHECKS, all_checks
    from autograder.checks import evidence as evidence_json
    from autograder.grading import grade

    all_checks()
    for call in cell.calls:
        check = CHECKS[call.check]
        evidence = check.collect(*(getattr(module, a) for a in call.args), seed=call.seed)
        report = grade(check, evidence_json.loads(evidence_json.dumps(evidence)))
        if report.score < report.points:
            return [f"{i.name}: {i.message}" for i in report.items if not i.passed]
    return None


def judge(exercise: Exercise, cell: str, qualname: str, old: str, new: str) -> dict[str, bool]:
    """Whether the mutant (``old`` -> ``new`` in ``qualname``) loses points in ``cell``,
    and whether the feedback then names the mistake.

    A notebook's set-up cell may change PyTorch's global state (``torch.set_default_dtype``,
    ``torch.manual_seed``): each notebook runs in a kernel of its own, so that state is restored
    here after each mutant, as if it had.
    """
    import torch

    (test_cell,) = [t for t in exercise.tests if t.grade_id == cell]
    saved = torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_rng_state()
    try:
        module = load_module(apply_patch(exercise.module, qualname, old, new), f"mutant_{exercise.stem}")
        failing = grade_cell(module, test_cell)
    finally:
        torch.set_default_dtype(saved[0])
        torch.set_grad_enabled(saved[1])
        torch.set_rng_state(saved[2])
    return {"killed": failing is not None, "diagnosed": failing is not None and names_mistake(failing)}


def _spread(items: list, count: int) -> list:
    """``count`` items spread evenly over ``items`` (all of them when there are fewer)."""
    if len(items) <= count:
        return items
    step = len(items) / count
    return [items[int(i * step)] for i in range(count)]


def merge_baseline(old: dict[str, dict], new: dict[str, dict], only_new: bool = False) -> dict[str, dict]:
    """The baseline's checks after a run: every check of a notebook the run covered comes from
    ``new`` (a check the notebook no longer has is dropped); other notebooks keep their old entries.
    With ``only_new``, only the checks the baseline lacks come from ``new``: every existing entry is
    kept as it was (adding an exercise re-samples no other check). Ordered by notebook, each
    notebook's checks in the order they were written."""
    if only_new:
        new = {cell: entry for cell, entry in new.items() if cell not in old}
        covered: set[str] = set()
    else:
        covered = {entry["notebook"] for entry in new.values()}
    kept = [(cell, entry) for cell, entry in old.items() if entry["notebook"] not in covered]
    return dict(sorted([*kept, *new.items()], key=lambda item: item[1]["notebook"]))


def write_baseline(
    results: dict[str, list[dict]], per_check: tuple[int, int] = (3, 2), only_new: bool = False
) -> dict:
    """Pick a fixed sample of killed mutants per check (diagnosed and not), re-judge each in-process,
    and write the baseline that ``tests/test_diagnosis_rate.py`` holds the checks to.

    Only the notebooks in ``results`` are rewritten: the other notebooks' entries of the existing
    baseline are kept, so a run over one notebook (``mutation.py 04 --baseline``) updates its checks
    without dropping the rest; with ``only_new`` (``--baseline-new``) only the checks it lacks are
    added."""
    rows = {r["check"]: r for r in summarise(results)}
    checks = {}
    for stem, mutants in results.items():
        exercise = extract(SOLUTIONS / f"{stem}.py")
        for cell in dict.fromkeys(m["cell"] for m in mutants):
            judged = [m for m in mutants if m["cell"] == cell and m["diagnosed"] is not None]
            picked = _spread([m for m in judged if m["diagnosed"]], per_check[0])
            picked += _spread([m for m in judged if not m["diagnosed"]], per_check[1])
            sample = []
            for m in picked:
                diff = subprocess.run(
                    [_mutmut(), "show", m["name"]],
                    cwd=WORK / stem,
                    env=_env(),
                    capture_output=True,
                    text=True,
                ).stdout
                try:
                    qualname = qualname_of(m["name"])
                    old, new = indent_patch(exercise.module, qualname, hunk_lines(diff))
                    verdict = judge(exercise, cell, qualname, old, new)
                except (ValueError, LookupError):
                    continue
                if verdict["killed"]:  # as under mutmut; anything else is not a fixed point to hold
                    sample.append(
                        {"mutant": m["name"], "function": qualname, "old": old, "new": new, **verdict}
                    )
            row = rows[cell]
            checks[cell] = {
                "notebook": stem,
                "full_run": {k: row[k] for k in ("mutants", "killed", "judged", "diagnosed")},
                "sample_diagnosed": sum(m["diagnosed"] for m in sample),
                "sample": sample,
            }
    old = json.loads(BASELINE.read_text())["checks"] if BASELINE.exists() else {}
    baseline = {
        "about": "Written by `python benchmarks/mutation.py --baseline` after a full run; "
        "tests/test_diagnosis_rate.py fails when a sampled mutant is no longer killed, or fewer "
        "sampled mutants of a check get a diagnosis.",
        "checks": merge_baseline(old, checks, only_new),
    }
    BASELINE.write_text(json.dumps(baseline, indent=1, ensure_ascii=False) + "\n")
    return baseline


def main(argv: list[str] | None = None) -> int:
    global WORK, RESULTS
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebook numbers or stems (default: all), e.g. 01 04")
    parser.add_argument("--max-children", type=int, default=1, help="mutants tested in parallel (default 1)")
    parser.add_argument("--report-only", action="store_true", help="reprint the report of the last run")
    parser.add_argument(
        "--work",
        type=Path,
        default=WORK,
        help="where the mutmut projects and results.json go (build/mutation)",
    )
    parser.add_argument(
        "--wrong-implementations",
        action="store_true",
        help="also grade the check tests' own wrong implementations (runs tests/test_checks_*.py)",
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help=f"after the report, rewrite these notebooks' entries of {BASELINE.name} (others kept)",
    )
    parser.add_argument(
        "--baseline-new",
        action="store_true",
        help=f"after the report, add to {BASELINE.name} only the checks it lacks (a new exercise)",
    )
    args = parser.parse_args(argv)
    WORK, RESULTS = args.work.resolve(), args.work.resolve() / "results.json"

    sources = sorted(SOLUTIONS.glob("[0-9][0-9]_*.py"))
    if args.notebooks:
        sources = [s for s in sources if any(s.stem.startswith(n) for n in args.notebooks)]
        if not sources:
            parser.error(f"no solutions file matches {args.notebooks}")

    previous = json.loads(RESULTS.read_text()) if RESULTS.exists() else {"notebooks": {}, "seconds": {}}
    if not args.report_only:
        for source in sources:
            exercise = extract(source)
            where = WORK / source.stem
            write_project(exercise, where)
            print(f"{source.stem}: running mutmut...", flush=True)
            seconds = run_mutmut(where, args.max_children)
            mutants = collect_results(exercise, where)
            previous["notebooks"][source.stem] = [asdict(m) for m in mutants]
            previous["seconds"][source.stem] = round(seconds)
            print(f"{source.stem}: {len(mutants)} mutants in {seconds:.0f} s", flush=True)
            WORK.mkdir(parents=True, exist_ok=True)
            RESULTS.write_text(json.dumps(previous, indent=1, ensure_ascii=False))

    results = previous["notebooks"]
    wrong = None
    if args.wrong_implementations:
        wrong = measure_wrong_implementations()
        previous["wrong_implementations"] = wrong
        RESULTS.write_text(json.dumps(previous, indent=1, ensure_ascii=False))
    elif "wrong_implementations" in previous:
        wrong = previous["wrong_implementations"]
    print(markdown(summarise(results, wrong)))
    print(f"\nwall time: {sum(previous['seconds'].values())} s ({previous['seconds']})")
    print("\nSurviving mutants:\n" + survivors(results))
    if args.baseline or args.baseline_new:
        baseline = write_baseline(results, only_new=args.baseline_new)
        size = sum(len(c["sample"]) for c in baseline["checks"].values())
        print(f"\nwrote {BASELINE.relative_to(ROOT)}: {size} sampled mutants")
    return 0


if __name__ == "__main__":
    sys.exit(main())
