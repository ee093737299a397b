"""What the grading path imports, and what it does not.

The grading command and its runners import only what grading needs: no jupytext (it builds notebooks
from ``solutions/``; grading reads the built ones) and no ``rfc3987_syntax`` (jsonschema's optional
IRI checker, which compiles a grammar at import time and which nbformat's schema never uses). Each
check runs a real process and reads its ``sys.modules`` as it exits.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from autograder.course.build import BUILT, SOLUTIONS, sync_sources

#: Modules a grading process must never import (see autograder.engine.light and autograder.course.build).
NOT_ON_THE_GRADING_PATH = ("jupytext", "rfc3987_syntax")


PROBE = (
    "import atexit, json, runpy, sys\n"
    "atexit.register(lambda: print('MODULES ' + json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
)


def imported(args: list[str]) -> tuple[set[str], subprocess.CompletedProcess]:
    """The top-level packages a Python process really imported (``sys.modules`` as it exits), and how it
    ended; ``args`` is ``["-c", CODE]`` or ``["-m", MODULE, *ARGV]``."""
    if args[0] == "-c":
        code = PROBE + args[1]
    else:
        code = PROBE + f"sys.argv = {args[1:]!r}\nrunpy.run_module({args[1]!r}, run_name='__main__')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    lines = [line for line in done.stderr.splitlines() if line.startswith("MODULES ")]
    assert lines, done.stderr[-3000:]
    return {name.split(".")[0] for name in json.loads(lines[-1][len("MODULES ") :])}, done


def test_the_probe_sees_what_a_process_imports() -> None:
    """The probe itself: a process that imports jupytext is seen to."""
    names, done = imported(["-c", "import jupytext"])
    assert done.returncode == 0
    assert "jupytext" in names and "nbformat" in names


def test_a_runner_imports_neither_jupytext_nor_the_iri_grammar() -> None:
    names, done = imported(["-c", "import autograder.engine.runner"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "nbformat" in names and "nbclient" in names
    assert not set(NOT_ON_THE_GRADING_PATH) & names


def test_the_grade_command_imports_neither(built_course: Path, tmp_path: Path) -> None:
    """A real ``grade`` run on an already built course: graded, and nothing it did not need imported."""
    root = tmp_path / "course"
    shutil.copytree(built_course, root)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    shutil.copyfile(
        root / "source" / "01_linear_layer" / "01_linear_layer.ipynb", inbox / "s1_01_linear_layer.ipynb"
    )
    names, done = imported(
        ["-m", "autograder", "grade", "01_linear_layer", str(inbox), "--course", str(root), "--workers", "1"]
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "nbformat" in names and "sqlalchemy" in names
    assert not set(NOT_ON_THE_GRADING_PATH) & names, set(NOT_ON_THE_GRADING_PATH) & names
    assert "s1" in done.stdout


def test_notebooks_are_still_validated_on_the_grading_path() -> None:
    """Leaving the grammar out loses no validation nbformat does."""
    code = (
        "from autograder.engine import light; nb = light.nbformat()\n"
        "import sys; assert 'rfc3987_syntax' not in sys.modules\n"
        "bad = nb.v4.new_notebook(); bad.cells.append(nb.v4.new_code_cell('1'))\n"
        "bad.cells[0].outputs = [{}]\n"
        "try:\n    nb.validate(bad)\nexcept nb.ValidationError:\n    print('rejected')\n"
        "import rfc3987_syntax  # still importable by whoever needs it afterwards\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "rejected"


def test_checking_a_gradebook_before_grading_does_not_import_nbgrader(tmp_path: Path) -> None:
    """nbgrader's import (its server extensions, about 1.5 s) is left to the gradebook step after grading,
    warmed beside the kernels; the check before grading reads the schema version without it."""
    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    Gradebook(url).close()  # a gradebook with nbgrader's tables: its schema version is checked
    names, done = imported(
        ["-c", f"from autograder.engine import gradebook; gradebook.check_database({url!r})"]
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sqlalchemy" in names and "nbgrader" not in names


def test_the_graders_warm_up_imports_what_their_first_calls_would() -> None:
    """``warm_up`` runs the library paths whose first call imports more of PyTorch; a control shows that
    loading the graders alone does not import them, so the check can fail."""
    warm, done = imported(["-c", "from autograder.grading import warm_up; warm_up()"])
    assert done.returncode == 0, done.stderr[-2000:]
    loaded, done = imported(["-c", "from autograder.grading import load; load()"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert "sympy" in warm and "sympy" not in loaded
    modules = "import sys; from autograder.grading import {}; {}(); print('torch._dynamo' in sys.modules)"
    for function, expected in (("warm_up", "True"), ("load", "False")):
        ran = subprocess.run(
            [sys.executable, "-c", modules.format(function, function)], capture_output=True, text=True
        )
        assert ran.stdout.strip() == expected, (function, ran.stderr[-2000:])


def test_a_run_warms_the_optimizer_only_for_the_checks_that_build_one() -> None:
    """The first optimizer imports TorchDynamo (about 0.5 s of CPU on the command's critical path): a run
    of notebook 01's checks is warmed without it, one with notebook 04's train_spiral with it."""
    code = (
        "import sys; from autograder.grading import warm_up; warm_up({!r}); "
        "print('torch._dynamo' in sys.modules, 'sympy' in sys.modules)"
    )
    for checks, expected in ((["linear_layer", "fit_cubic"], "False True"), (["train_spiral"], "True True")):
        ran = subprocess.run([sys.executable, "-c", code.format(checks)], capture_output=True, text=True)
        assert ran.stdout.strip() == expected, (checks, ran.stderr[-2000:])


def test_every_grader_that_builds_an_optimizer_is_warmed_for_it() -> None:
    """:data:`~autograder.grading.OPTIMIZER_CHECKS` names exactly the checks whose grading module uses
    ``torch.optim``: a new one left out would pay the import while its first notebook waits."""
    import inspect

    from autograder.grading import OPTIMIZER_CHECKS, load

    users = {
        name
        for name, function in load().items()
        if "torch.optim" in inspect.getsource(inspect.getmodule(function))
    }
    assert users == OPTIMIZER_CHECKS


@pytest.fixture
def sources(tmp_path: Path) -> Path:
    folder = tmp_path / "solutions"
    folder.mkdir()
    shutil.copyfile(SOLUTIONS / "01_linear_layer.py", folder / "01_linear_layer.py")
    return folder


def test_an_unchanged_course_is_known_without_jupytext_and_a_changed_one_is_rebuilt(
    sources: Path, tmp_path: Path
) -> None:
    root = tmp_path / "course"
    _, changed = sync_sources(root, sources)
    assert changed == ["01_linear_layer"] and (root / BUILT).exists()
    (root / "release" / "01_linear_layer").mkdir(parents=True)
    (root / "release" / "01_linear_layer" / "01_linear_layer.ipynb").write_text("{}")

    check = (
        "import sys; from pathlib import Path; from autograder.course.build import sync_sources\n"
        f"print(sync_sources(Path({str(root)!r}), Path({str(sources)!r}))[1])\n"
    )
    names, done = imported(["-c", check])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]" and "jupytext" not in names

    # The source notebook edited by hand: rebuilt from its source, back to the built bytes.
    target = root / "source" / "01_linear_layer" / "01_linear_layer.ipynb"
    built = target.read_bytes()
    nb = nbformat.read(target, as_version=4)
    nb.cells[0].source += "\n# edited"
    nbformat.write(nb, target)
    assert sync_sources(root, sources)[1] == ["01_linear_layer"]
    assert target.read_bytes() == built

    # The .py source changed: rebuilt, with the change.
    text = (sources / "01_linear_layer.py").read_text()
    (sources / "01_linear_layer.py").write_text(text + "\n# %%\n# a new last cell\n")
    assert sync_sources(root, sources)[1] == ["01_linear_layer"]
    assert "a new last cell" in target.read_text()
    assert sync_sources(root, sources)[1] == []


def test_the_kinds_of_kernel_a_course_needs_are_read_without_importing(built_course: Path) -> None:
    """What the grade command reads before anything else, to start the right zygotes at once."""
    names, done = imported(
        [
            "-c",
            "from pathlib import Path; from autograder.engine.executor import course_kinds\n"
            f"root = Path({str(built_course)!r})\n"
            "names = ('01_linear_layer', '04_custom_functions', '06_memory_efficient_attention',\n"
            "         'all', 'none')\n"
            "print([course_kinds(root, a) for a in names])",
        ]
    )
    assert done.returncode == 0, done.stderr[-2000:]
    kinds = "[['numpy'], ['torch'], ['compile'], ['compile', 'numpy', 'torch'], []]"
    assert done.stdout.strip() == kinds
    assert "nbformat" not in names and "torch" not in names


def _children(pid: int) -> list[tuple[int, str]]:
    """The processes whose parent is ``pid``, with their command lines."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(
                    (int(entry.name), (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode())
                )
        except (OSError, IndexError, ValueError):
            continue
    return found


def _zygotes_of(pid: int) -> list[tuple[int, str]]:
    """The zygote processes among ``pid``'s children (process id, command line), once there is one,
    or none after a minute."""
    deadline = time.monotonic() + 60
    zygotes: list[tuple[int, str]] = []
    while not zygotes and time.monotonic() < deadline:
        time.sleep(0.1)
        zygotes = [c for c in _children(pid) if "autograder.engine.zygote serve" in c[1]]
    return zygotes


def test_runners_started_ahead_start_their_zygotes_before_any_notebook() -> None:
    """``start_runners`` (the grade command's first step): each runner starts the zygote of the kind it
    was told at once, with no job given, so that the first notebook does not wait for its imports; the
    runner is still one the grader's threads take, and stopping it stops its zygote."""
    from autograder.engine.executor import LocalExecutor

    executor = LocalExecutor()
    try:
        executor.start_runners(1, ["numpy"])
        runner = executor._idle[0].proc
        zygotes = _zygotes_of(runner.pid)
        assert [cmd.split()[-2:] for _, cmd in zygotes] == [["numpy", "behind"]], _children(runner.pid)
    finally:
        executor.close()
    assert runner.poll() is not None


def test_a_class_warms_its_zygotes_up_first_and_runners_of_one_notebook_never() -> None:
    """``executor.when_to_warm``: a runner that gets more than one notebook warms its zygotes up before
    its first kernel, one that gets one notebook never (no kernel is forked after it); a runner started
    so (the grade command's, ahead) starts its zygote with that word, and with ``first`` says it is
    ready only once the zygote has warmed up. A runner the executor starts for a notebook is told too."""
    from autograder.engine.executor import LocalExecutor, when_to_warm

    assert when_to_warm(1, 1) == when_to_warm(2, 2) == "never"
    assert when_to_warm(2, 1) == when_to_warm(3, 2) == when_to_warm(10, 2) == "first"

    for warm in ("first", "never"):
        executor = LocalExecutor()
        try:
            executor.start_runners(1, ["numpy"], warm)
            runner = executor._idle[0].proc
            zygotes = _zygotes_of(runner.pid)
            assert [cmd.split()[-2:] for _, cmd in zygotes] == [["numpy", warm]], _children(runner.pid)
            if warm == "first":
                assert executor._idle[0].answer(60) == "ready"  # once the zygote has warmed up
        finally:
            executor.close()
    executor = LocalExecutor()
    try:
        executor.threads(2, 1)
        with executor._runner("numpy") as runner:
            assert runner.warm == "never" and runner.proc is None  # started with its job, told `never`
        executor.threads(2, 5)
        executor._idle.clear()
        with executor._runner("numpy") as runner:
            assert runner.warm == "first" and runner.kinds == ["numpy"] and runner.proc is not None
    finally:
        executor.close()


def test_a_job_answered_in_the_same_read_as_ready_is_taken_at_once(tmp_path: Path) -> None:
    """A runner that says ``ready`` and, its first notebook fast, ``done`` before the command reads either:
    the job is done, not waited on until its hard limit and killed (a select on the pipe does not see a
    line a buffered read already took in)."""
    from autograder.engine.executor import RunnerProcess

    class Quick(RunnerProcess):
        def _start(self) -> subprocess.Popen[str]:
            both = "import os, sys; job = sys.stdin.readline().strip(); "
            both += "os.write(1, f'ready\\ndone {job}\\n'.encode()); sys.stdin.readline()"
            pipe, command = subprocess.PIPE, [sys.executable, "-c", both]
            # a session of its own, as a runner's: kill() kills the runner's session
            return subprocess.Popen(command, stdin=pipe, stdout=pipe, text=True, start_new_session=True)

    runner = Quick(tmp_path / "runner.log", warm="first")
    runner.log.touch()
    runner.proc = runner._start()
    started = time.monotonic()
    try:
        killed, _ = runner.run(tmp_path / "job-1.job.json", hard_limit=20)
    finally:
        runner.kill()
    assert not killed and time.monotonic() - started < 10
