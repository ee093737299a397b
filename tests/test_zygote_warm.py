"""The warm zygote: its kernels see nothing of its warm-up, and nothing of each other.

Each notebook below runs in the real engine (jail, runner, zygote) on the course's notebook 03, a
PyTorch notebook, and prints what it can see as JSON; the test reads it back from the executed
notebook the engine keeps. A kernel forked from the warm zygote is compared with a cold kernel (the
engine without its zygote: a new Python process per kernel), and a submission graded after another by
the same runner looks for every mark the first one left.
"""

from __future__ import annotations

import copy
import json
import shutil
import uuid
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell

from autograder.course.build import SOLUTIONS, assignments
from autograder.engine.grade import Grader, Limits
from autograder.engine.intake import Submission
from autograder.engine.zygote import WARM_ENV

ASSIGNMENT = "03_autograd_graph"
LIMITS = Limits(cell_seconds=60, notebook_seconds=180, memory_bytes=3 * 1024**3, output_bytes=400_000)

#: What a kernel can observe that a warm-up could have left behind.
PROBE = """
import gc, hashlib, json, os, sys, warnings
import numpy as np, torch, matplotlib, matplotlib.pyplot as plt
def digest(b): return hashlib.sha256(b).hexdigest()[:16]
figure = plt.figure()
state = {
    "torch_initial_seed": torch.initial_seed(),
    "torch_rng": digest(torch.get_rng_state().numpy().tobytes()),
    "torch_first_draw": torch.rand(3).tolist(),
    "numpy_rng": digest(np.random.get_state()[1].tobytes()),
    "grad_enabled": torch.is_grad_enabled(),
    "default_dtype": str(torch.get_default_dtype()),
    "threads": [torch.get_num_threads(), torch.get_num_interop_threads()],
    "open_figures_before": [n for n in plt.get_fignums() if n != figure.number],
    "next_figure_number": figure.number,
    "rc_params": digest(repr(sorted((k, repr(v)) for k, v in matplotlib.rcParams.items())).encode()),
    "engine_classes": sorted({
        t.__qualname__ for t in gc.get_objects()
        if isinstance(t, type) and str(getattr(t, "__module__", "")).startswith("autograder.engine")
    }),
    "engine_modules": sorted(m for m in sys.modules if m.startswith("autograder.engine")),
    "warning_filters": len(warnings.filters),
    "cpu_priority": os.nice(0),
}
plt.close(figure)
print("STATE " + json.dumps(state))
"""

WRITER = """
import builtins, os, sys, tempfile, types
import numpy as np, torch, matplotlib, matplotlib.pyplot as plt
MARK = {mark!r}
os.environ["LEFT_MARK"] = MARK
builtins.LEFT_MARK = MARK
sys.modules["left_mark"] = types.ModuleType("left_mark")
torch.LEFT_MARK = np.LEFT_MARK = matplotlib.LEFT_MARK = MARK
torch.manual_seed(1234)
np.random.seed(1234)
torch.set_default_dtype(torch.float64)
torch.set_grad_enabled(False)
matplotlib.rcParams["axes.titlesize"] = 31
plt.figure(num=77)
for folder in (os.getcwd(), tempfile.gettempdir(), os.path.expanduser("~"), "/dev/shm", "/var/tmp", "/tmp"):
    try:
        with open(os.path.join(folder, "left_mark.txt"), "w") as f:
            f.write(MARK)
    except OSError:
        pass
print("WROTE")
"""

READER = """
import builtins, json, os, sys, tempfile
import numpy as np, torch, matplotlib, matplotlib.pyplot as plt
MARK = {mark!r}
found = []
if os.environ.get("LEFT_MARK"): found.append("environment")
if hasattr(builtins, "LEFT_MARK"): found.append("builtins")
if "left_mark" in sys.modules: found.append("sys.modules")
for name, module in (("torch", torch), ("numpy", np), ("matplotlib", matplotlib)):
    if hasattr(module, "LEFT_MARK"): found.append(name + " attribute")
if torch.get_default_dtype() != torch.float32: found.append("default dtype")
if not torch.is_grad_enabled(): found.append("grad mode")
if matplotlib.rcParams["axes.titlesize"] == 31: found.append("rcParams")
if 77 in plt.get_fignums(): found.append("open figure")
torch.manual_seed(1234); seeded = torch.rand(2).tolist()
for folder in (os.getcwd(), tempfile.gettempdir(), os.path.expanduser("~"), "/dev/shm", "/var/tmp", "/tmp"):
    try:
        for name in os.listdir(folder):
            try:
                with open(os.path.join(folder, name), errors="replace") as f:
                    if MARK in f.read(100_000):
                        found.append("file " + os.path.join(folder, name))
            except OSError:
                pass
    except OSError:
        pass
print("FOUND " + json.dumps(found))
"""


@pytest.fixture(scope="module")
def course(built_course: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("warm") / "course"
    shutil.copytree(built_course, root)
    release = nbformat.read(root / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", as_version=4)
    return root, release


def with_cell(release, code: str):
    nb = copy.deepcopy(release)
    cell = new_code_cell(code)
    cell.id = "added-probe"
    nb.cells.insert(1, cell)  # after the locked set-up cell, which imports the notebook's libraries
    return nb


def grade(root: Path, notebooks: dict[str, object], zygote: bool) -> dict[str, str]:
    """Grade the notebooks on one runner, one after the other (in the grader's order: the largest file
    first, equal ones as its threads reach the runner); return each one's printed output."""
    a = next(a for a in assignments(SOLUTIONS) if a.name == ASSIGNMENT)
    inbox = root.parent / f"inbox-{uuid.uuid4().hex[:6]}"
    inbox.mkdir()
    subs = []
    for student, nb in notebooks.items():
        path = inbox / f"{student}_{ASSIGNMENT}.ipynb"
        nbformat.write(nb, path)
        subs.append(Submission(student, ASSIGNMENT, path, path.name))
    grader = Grader(root, [a], LIMITS, workers=1, zygote=zygote)
    try:
        outcomes = grader.grade_all(subs, force=True)
    finally:
        grader.close()
    assert [o.status for o in outcomes] == ["graded"] * len(subs), [o.reason for o in outcomes]
    printed = {}
    for student in notebooks:
        executed = nbformat.read(root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4)
        cell = next(c for c in executed.cells if c.get("id") == "added-probe")
        printed[student] = "".join(
            o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream"
        )
    return printed


def state(text: str) -> dict:
    lines = [line for line in text.splitlines() if line.startswith("STATE ")]
    assert lines, text
    line = lines[0]
    return json.loads(line[len("STATE ") :])


def test_a_kernel_of_the_warm_zygote_sees_what_a_cold_kernel_sees(course, monkeypatch) -> None:
    """Against a cold kernel, and against a kernel of a zygote that did not warm up: the engine's own
    objects a forked kernel inherits (the jail's) are the zygote's, not the warm-up's."""
    root, release = course
    probe = with_cell(release, PROBE)
    cold = grade(root, {"cold-1": probe, "cold-2": probe}, zygote=False)
    with monkeypatch.context() as patch:
        patch.setenv(WARM_ENV, "0")
        unwarmed = grade(root, {"unwarmed-1": probe, "unwarmed-2": probe}, zygote=True)
    unwarmed_2 = state(unwarmed["unwarmed-2"])
    # Two in a row from the same zygote: it warms up before the first (``executor.when_to_warm``: two
    # notebooks on one runner), and both are forked after (the comparisons below hold either way).
    warm = grade(root, {"warm-1": probe, "warm-2": probe}, zygote=True)
    cold_1, cold_2 = state(cold["cold-1"]), state(cold["cold-2"])
    warm_1, warm_2 = state(warm["warm-1"]), state(warm["warm-2"])
    # numpy's and PyTorch's global generators are seeded from the OS in every cold process: so they
    # are in every warm kernel, never shared with another kernel of the same zygote
    for key in ("numpy_rng", "torch_initial_seed", "torch_rng", "torch_first_draw"):
        assert cold_1.pop(key) != cold_2.pop(key), key
        assert warm_1.pop(key) != warm_2.pop(key), key
    assert cold_1 == cold_2
    for key in ("engine_classes", "engine_modules"):
        assert warm_1.pop(key) == warm_2.pop(key) == unwarmed_2.pop(key), key
        cold_1.pop(key), cold_2.pop(key)
    assert warm_2 == cold_1, {k: (warm_2[k], cold_1[k]) for k in cold_1 if warm_2.get(k) != cold_1[k]}
    assert warm_1 == cold_1
    assert cold_1["grad_enabled"] and cold_1["default_dtype"] == "torch.float32"
    assert cold_1["open_figures_before"] == []


def test_two_submissions_graded_in_a_row_cannot_see_each_other(course) -> None:
    """Each of four submissions on one runner looks for every mark a submission before it could have
    left, then leaves its own: whichever order the grader runs them in, the last three look after
    another left its marks, and none finds one."""
    root, release = course
    mark = f"mark-{uuid.uuid4().hex}"
    both = READER.format(mark=mark) + WRITER.format(mark=mark)
    students = ("first", "second", "third", "fourth")
    printed = grade(root, {student: with_cell(release, both) for student in students}, zygote=True)
    for student in students:
        assert "WROTE" in printed[student], printed[student]
        line = next(line for line in printed[student].splitlines() if line.startswith("FOUND "))
        assert json.loads(line[len("FOUND ") :]) == [], printed[student]


def test_the_zygote_stays_single_threaded_and_its_warm_up_leaves_no_state() -> None:
    """In a zygote-like process: the warm-up runs the libraries, yet their global state is as before."""
    import subprocess
    import sys

    code = (
        "import os, random, numpy as np, torch, matplotlib\n"
        "from autograder.engine.zygote import warm_up\n"
        "before = (torch.initial_seed(), torch.get_rng_state().clone(), np.random.get_state()[1].copy(),"
        " random.getstate(), torch.get_num_threads(), torch.get_default_dtype(), torch.is_grad_enabled(),"
        " dict(matplotlib.rcParams))\n"
        "warm_up('torch')\n"
        "import matplotlib.pyplot as plt\n"
        "after = (torch.initial_seed(), torch.get_rng_state().clone(), np.random.get_state()[1].copy(),"
        " random.getstate(), torch.get_num_threads(), torch.get_default_dtype(), torch.is_grad_enabled(),"
        " dict(matplotlib.rcParams))\n"
        "assert before[0] == after[0] and torch.equal(before[1], after[1])\n"
        "assert (before[2] == after[2]).all() and before[3] == after[3]\n"
        "assert before[4:7] == after[4:7], (before[4:7], after[4:7])\n"
        "assert before[7] == after[7]\n"
        "assert plt.get_fignums() == []\n"
        "print(len(os.listdir('/proc/self/task')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "1"


#: What a kernel of a notebook that compiles can observe of PyTorch's compiler stack, read before and
#: after its own first compile and opcheck.
COMPILE_PROBE = (
    "import sys\n"
    "preloaded = 'torch.testing._internal.optests' in sys.modules\n"
    + PROBE.replace('print("STATE " + json.dumps(state))', "")
    + """
import torch._dynamo, functorch.compile
from torch._dynamo.utils import counters
state["preloaded"] = preloaded
state["filters_after_import"] = len(warnings.filters)
state["counters_before"] = {k: dict(v) for k, v in counters.items()}
state["ops_namespaces"] = sorted(n for n in dir(torch.ops) if not n.startswith("_"))
plain = (bool, int, float, str, type(None))
config = torch._dynamo.config.get_config_copy()
here = lambda v: v.replace(os.getcwd(), "<its folder>") if isinstance(v, str) else v
state["dynamo_config"] = sorted((k, here(v)) for k, v in config.items() if isinstance(v, plain))

@torch.library.custom_op("probe_course::double", mutates_args=())
def double(x: torch.Tensor) -> torch.Tensor:
    return x * 2

@double.register_fake
def _(x):
    return torch.empty_like(x)

double.register_autograd(lambda ctx, g: g * 2)
torch.library.opcheck(double, (torch.ones(3, requires_grad=True),))
compiled = torch.compile(lambda y: double(y).sin(), backend="aot_eager", fullgraph=True)
state["compiled"] = compiled(torch.zeros(2, requires_grad=True)).tolist()
state["counters_after"] = {k: dict(v) for k, v in counters.items()}
state["ops_after"] = sorted(n for n in dir(torch.ops) if not n.startswith("_") and n != "probe_course")
print("STATE " + json.dumps(state))
"""
)


def test_a_kernel_of_the_compile_zygote_sees_what_a_cold_kernel_sees(course, monkeypatch) -> None:
    """A notebook that uses PyTorch's compiler stack (``kernel_kind``: ``compile``) gets kernels of a
    zygote whose warm-up imported and ran it (``torch.compile``, ``opcheck``): the second kernel, forked
    after that warm-up, has it loaded, and yet sees what a cold kernel sees before and after its own
    first compile and opcheck: no operator or namespace, cache or counter of the warm-up's. Two
    notebooks on one runner: its zygote warms up before the first (``executor.when_to_warm``); a zygote
    that warms up behind its first kernel (a Dask worker's, which does not know how many notebooks it
    will get) forks that kernel cold, before it."""
    root, release = course
    probe = with_cell(release, COMPILE_PROBE)
    cold = state(grade(root, {"cold-c": probe}, zygote=False)["cold-c"])
    with monkeypatch.context() as patch:
        patch.setattr("autograder.engine.grade.kernel_kind", lambda source: "compile")
        warm = grade(root, {"compile-1": probe, "compile-2": probe}, zygote=True)
        patch.setattr("autograder.engine.executor.when_to_warm", lambda notebooks, runners: "behind")
        behind = state(grade(root, {"compile-0": probe}, zygote=True)["compile-0"])
    warm_1, warm_2 = state(warm["compile-1"]), state(warm["compile-2"])
    assert warm_1.pop("preloaded") and warm_2.pop("preloaded")
    assert not cold.pop("preloaded") and not behind.pop("preloaded")
    for key in ("numpy_rng", "torch_initial_seed", "torch_rng", "torch_first_draw"):
        assert warm_1.pop(key) != warm_2.pop(key), key
        cold.pop(key), behind.pop(key)
    for key in ("engine_classes", "engine_modules"):
        assert warm_1.pop(key) == warm_2.pop(key) == behind.pop(key), key
        cold.pop(key)
    assert cold["counters_before"] == {} and cold["compiled"] == [0.0, 0.0]
    # What the compiler stack's imports register, a cold kernel has once it has compiled: a warm one from
    # the start (sympy's warning filter, operator namespaces such as ``cplib``).
    assert warm_2.pop("warning_filters") == cold["filters_after_import"]
    assert warm_2.pop("ops_namespaces") == cold["ops_after"]
    config = {k: v for k, v in cold["dynamo_config"]}
    assert warm_2["dynamo_config"] == cold["dynamo_config"], {
        k: (v, config.get(k)) for k, v in warm_2["dynamo_config"] if config.get(k) != v
    }
    assert warm_1.pop("warning_filters") == cold["filters_after_import"]
    assert warm_1.pop("ops_namespaces") == cold["ops_after"]
    cold.pop("warning_filters"), cold.pop("ops_namespaces")
    behind.pop("warning_filters"), behind.pop("ops_namespaces")
    assert warm_2 == cold, {k: (warm_2.get(k), cold[k]) for k in cold if warm_2.get(k) != cold[k]}
    assert warm_1 == cold
    assert behind == cold
