"""A motivated student who has read every line of the course's code attacks the grading engine.

Each submission below plays one attack from the trusted-grading issue against the real engine (jail,
zygote, runner), and each test asserts its exact outcome: no point gained, no hidden-test text and no
canary in any feedback, nothing of the kernel left on the machine afterwards, the reason stated.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import nbformat
import pytest
from notebook_helpers import source_and_release

from autograder.engine.cgroup import cgroup_support
from autograder.engine.grade import Limits
from autograder.engine.jail import jail_available
from autograder.engine.pipeline import ClassResult, ensure_course, grade_class
from autograder.grading.seeds import SEED_RANGE
from tests.test_engine import ASSIGNMENT, FIXTURE, after, solved

pytestmark = pytest.mark.skipif(not jail_available(), reason="the jail needs root and namespaces")

LIMITS = Limits(cell_seconds=20, notebook_seconds=150, memory_bytes=2 * 1024**3, output_bytes=300_000)
CANARY = f"canary-{uuid.uuid4().hex}"

#: Tries every way a public-code reader would compute the expected answers inside the kernel.
FORGER = """
found = []
for name in ("autograder.grading", "autograder.grading.reference", "autograder.grading.linear_layer",
             "autograder.engine", "torch"):
    try:
        __import__(name)
        found.append(name)
    except ImportError:
        pass
print("FOUND", found)
def linear_forward(x, W, b):
    raise NotImplementedError("nothing to forge with")
"""
#: Reads every file it can reach looking for hidden tests or solutions, and records the tests' code
#: as it runs (an IPython hook sees each cell's source), then raises both as errors for the feedback.
PEEK = """
import os
seen = []
get_ipython().events.register("pre_run_cell", lambda info: seen.append(info.raw_cell))
hits = []
SKIP = ("/proc", "/sys", "/usr", "/lib", "/lib64", "/bin", "/sbin", "/etc", "/dev")
for folder, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(folder, d) not in SKIP and d != "site-packages"]
    for name in files:
        if name.endswith((".ipynb", ".py", ".db", ".zip", ".txt", ".json", ".md", ".csv", ".html")):
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as f:
                    text = f.read(1_000_000)
            except OSError:
                continue
            if b"BEGIN HIDDEN" in text or b"BEGIN SOLUTION" in text or CANARY_BYTES in text:
                hits.append(path)
print("HITS", hits)
"""
PEEK_ECHO = """
raise RuntimeError("ECHO " + " | ".join(seen))
"""
#: Leaves processes behind: a double-forked sleeper and a CPU hog, both detached from the kernel.
ORPHANS = """
import os, subprocess, sys
for code in ("import time; time.sleep(600)", "while True: pass"):
    subprocess.Popen([sys.executable, "-c", code + "  # {marker}"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
if os.fork() == 0:
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)  # {marker}"])
    os._exit(0)
"""
#: Reports who and where the kernel is, what it can see of the machine, and what it can write.
SNOOP = """
import os, json
status = open("/proc/self/status").read()
report = {{
    "uid": os.getuid(),
    "pid": os.getpid(),
    "no_new_privs": "NoNewPrivs:\\t1" in status,
    "processes": sorted(p for p in os.listdir("/proc") if p.isdigit()),
    "environ": dict(os.environ),
    "visible": [p for p in {paths!r} if os.path.exists(p)],
    "root": sorted(os.listdir("/")),
}}
for path in ("/dev/shm/{marker}", "/var/tmp/{marker}", "/tmp/{marker}"):
    try:
        open(path, "w").write("left behind")
    except OSError:
        pass
print("SNOOP " + json.dumps(report))
"""
#: Floods the grader: one display message far over the output budget, then comm messages.
BIG_MESSAGE = """
from IPython.display import publish_display_data
publish_display_data({"text/plain": "x" * 50_000_000})
"""
COMM_FLOOD = """
from ipykernel.comm import Comm
c = Comm(target_name="flood", data={})
for _ in range(200):
    c.send({"blob": "y" * 100_000})
"""
BAD_WIDGET = """
from ipykernel.comm import Comm
Comm(target_name="jupyter.widget", data={"state": None})
"""
#: Three processes, each well under the per-process limit, together over the kernel's memory limit.
MEMORY_TEAM = """
import multiprocessing as mp
def hold(n):
    block = bytearray(n)
    for i in range(0, n, 4096):
        block[i] = 1
    return len(block)
with mp.get_context("fork").Pool(3) as pool:
    try:
        print("TEAM", pool.map(hold, [700 * 1024**2] * 3, chunksize=1))
    except Exception as exc:
        print("TEAM failed", type(exc).__name__)
"""
SLOW = "import time\ntime.sleep(1000)"


def _executed(root: Path, student: str) -> str:
    path = root / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    return path.read_text() if path.exists() else ""


def _printed(root: Path, student: str, tag: str) -> str:
    nb = nbformat.reads(_executed(root, student), as_version=4)
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("text", "")
            for line in text.splitlines():
                if line.startswith(tag + " "):
                    return line[len(tag) + 1 :]
    raise AssertionError(f"{student} printed no {tag} line")


def _host_processes_with(marker: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if marker in line and "ps -eo" not in line]


@pytest.fixture(scope="module")
def attacked(tmp_path_factory: pytest.TempPathFactory):
    base = tmp_path_factory.mktemp("attacks")
    root = base / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, ASSIGNMENT)
    good = solved(source, release)
    marker = f"bpc-orphan-{uuid.uuid4().hex[:12]}"
    # Secrets a kernel must not reach: another checkout's solutions, a class export, shared scratch folders.
    canaries = [
        base / "other-checkout" / "solutions" / "01_linear_layer.py",
        base / "class-export.zip",
        Path("/var/tmp") / f"{CANARY}.txt",
        Path("/dev/shm") / f"{CANARY}.txt",
        Path("/opt") / CANARY / "secret.txt",
    ]
    for path in canaries:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{CANARY} ### BEGIN SOLUTION")
    peek = PEEK.replace("CANARY_BYTES", repr(CANARY.encode()))
    notebooks = {
        "ada": good,
        "forger": after(release, "linear_layer", FORGER),
        "peeker": after(after(good, "linear_layer", peek), "mse_loss", PEEK_ECHO),
        "orphans": after(good, "linear_layer", ORPHANS.format(marker=marker)),
        "snoop": after(good, "linear_layer", SNOOP.format(paths=[str(p) for p in canaries], marker=marker)),
        "bigmessage": after(good, "mse_loss", BIG_MESSAGE),
        "comms": after(good, "mse_loss", COMM_FLOOD),
        "badwidget": after(good, "mse_loss", BAD_WIDGET),
        "slow": after(good, "mse_loss", SLOW),
    }
    inbox = base / "inbox"
    inbox.mkdir()
    for student, nb in notebooks.items():
        nbformat.write(nb, inbox / f"{student}_{ASSIGNMENT}.ipynb")
    os.environ["BACKPROP_GRADER_SECRET"] = CANARY
    try:
        result = grade_class(inbox, ASSIGNMENT, root, FIXTURE, workers=2, limits=LIMITS, progress=False)
    finally:
        os.environ.pop("BACKPROP_GRADER_SECRET", None)
    yield result, root, marker
    for path in canaries:
        path.unlink(missing_ok=True)
    (Path("/opt") / CANARY).rmdir()
    for leftover in (Path("/dev/shm") / marker, Path("/var/tmp") / marker):
        leftover.unlink(missing_ok=True)


def _outcome(result: ClassResult, student: str):
    (found,) = [o for o in result.outcomes if o.student == student]
    return found


def _all_text(result: ClassResult, root: Path) -> str:
    """Every word the engine wrote for people: outcomes, feedback pages, summary, CSV."""
    texts = [json.dumps([o.__dict__ for o in result.outcomes], default=str)]
    for folder in (root / "feedback", root / "grading"):
        texts += [
            p.read_text(errors="replace") for p in folder.rglob("*") if p.suffix in (".html", ".md", ".csv")
        ]
    return "\n".join(texts)


def test_the_honest_learner_keeps_full_marks_on_fresh_inputs(attacked) -> None:
    result, root, _ = attacked
    ada = _outcome(result, "ada")
    assert (ada.score, ada.status) == (7, "graded")
    assert set(ada.seeds) == {"test_linear_layer", "test_mse_loss"}
    assert all(seed in SEED_RANGE for seed in ada.seeds.values())
    # Full marks prove the kernel ran the fresh seeds: only evidence of the drawn seed is graded.
    assert all(seed != 7 for seed in ada.seeds.values())
    assert "seed=7" not in _executed(root, "ada"), "the source's fixed hidden seed reached the kernel"


def test_a_forger_finds_nothing_that_computes_an_answer(attacked) -> None:
    result, root, _ = attacked
    assert _printed(root, "forger", "FOUND") == "[]"
    assert _outcome(result, "forger").score == 0


def test_a_peeker_finds_no_hidden_test_solution_or_canary_and_its_echo_is_removed(attacked) -> None:
    result, root, _ = attacked
    assert _printed(root, "peeker", "HITS") == "[]"
    peeker = _outcome(result, "peeker")
    assert peeker.score == 7, "peeking costs the honest answers nothing"
    echoed = [e for e in peeker.errors if "ECHO" in e]
    assert echoed, "the echo cell should have raised, or this test proves nothing"
    text = _all_text(result, root)
    assert "check_linear_layer(linear_forward, linear_backward, seed=" not in text.replace(
        "score = check_linear_layer(linear_forward, linear_backward)", ""
    )
    assert "[hidden test text removed]" in echoed[0]


def test_nothing_a_kernel_starts_outlives_it(attacked) -> None:
    result, _, marker = attacked
    assert _outcome(result, "orphans").score == 7
    assert _host_processes_with(marker) == []


def test_a_kernel_is_alone_on_an_allow_listed_machine(attacked) -> None:
    result, root, marker = attacked
    seen = json.loads(_printed(root, "snoop", "SNOOP"))
    assert seen["visible"] == [], "a secret outside the kernel's allow-list was visible"
    assert seen["pid"] == 1 and seen["processes"] == ["1"], "the kernel sees processes other than its own"
    assert seen["no_new_privs"] is True
    assert seen["uid"] >= 200_000 and seen["uid"] != 0
    assert CANARY not in json.dumps(seen["environ"]), "the grader's environment reached the kernel"
    for leftover in (Path("/dev/shm") / marker, Path("/var/tmp") / marker):
        assert not leftover.exists(), f"{leftover} was written on the host"
    assert CANARY not in _all_text(result, root)


def test_one_oversized_message_stops_the_notebook_as_an_output_limit(attacked) -> None:
    o = _outcome(attacked[0], "bigmessage")
    assert o.status == "stopped" and "output" in (o.reason or "")
    assert o.score == 4, "the cells before the flood keep their points"


def test_comm_messages_count_against_the_output_budget(attacked) -> None:
    o = _outcome(attacked[0], "comms")
    assert o.status == "stopped" and "output" in (o.reason or ""), o.reason
    assert o.score == 4


def test_a_malformed_widget_message_is_the_learners_outcome(attacked) -> None:
    o = _outcome(attacked[0], "badwidget")
    assert o.status == "stopped" and "message" in (o.reason or ""), o.reason
    assert "could not be started" not in (o.reason or "")
    assert o.score == 4


def test_a_slow_cell_is_interrupted_and_the_notebook_goes_on(attacked) -> None:
    o = _outcome(attacked[0], "slow")
    assert (o.score, o.status) == (7, "graded"), o.reason
    assert any("interrupted" in e for e in o.errors)


@pytest.mark.skipif(cgroup_support() is None, reason="no control group can be made on this machine")
def test_a_kernels_processes_share_one_memory_limit(tmp_path: Path) -> None:
    root = tmp_path / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, ASSIGNMENT)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(
        after(solved(source, release), "mse_loss", MEMORY_TEAM), inbox / f"team_{ASSIGNMENT}.ipynb"
    )
    limits = Limits(cell_seconds=60, notebook_seconds=180, memory_bytes=1536 * 1024**2, output_bytes=300_000)
    result = grade_class(inbox, ASSIGNMENT, root, FIXTURE, workers=1, limits=limits, progress=False)
    (team,) = result.outcomes
    executed = _executed(root, "team")
    # Each child stays under the per-process limit; together they pass the kernel's: one is killed.
    assert "TEAM [" not in executed, "three children held 2.1 GB under a 1.5 GB limit"
    assert team.score == 7 or team.status == "stopped"


TORCH_ANSWER = """
def mse_loss(pred, target):
    import torch

    p = torch.tensor(pred, requires_grad=True)
    loss = torch.nn.functional.mse_loss(p, torch.tensor(target))
    loss.backward()
    return float(loss), p.grad.numpy()
"""


@pytest.mark.parametrize("withhold", [False, True])
def test_a_numpy_exercise_answered_with_torch_is_flagged_and_can_be_withheld(
    tmp_path: Path, withhold
) -> None:
    root = tmp_path / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, ASSIGNMENT)
    nb = solved(source, release)
    (answer,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mse_loss"]
    answer.source = TORCH_ANSWER
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(nb, inbox / f"torchy_{ASSIGNMENT}.ipynb")
    # Unjailed, so that PyTorch is there and the answer is right: only the method check can tell.
    result = grade_class(
        inbox, ASSIGNMENT, root, FIXTURE, workers=1, limits=LIMITS, use_jail=False,
        progress=False, withhold_flagged=withhold,
    )  # fmt: skip
    (o,) = result.outcomes
    assert o.flags and "PyTorch" in o.flags[0] and "mse_loss" in o.flags[0]
    mse = next(c for c in o.cells if c.grade_id == "test_mse_loss")
    assert mse.score == (0 if withhold else 3)
    assert ("withheld" in mse.feedback) == withhold
    assert "method check" in (root / "grading" / "summary.md").read_text()
