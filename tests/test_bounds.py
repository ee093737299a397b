"""A kernel attacks the grader's resources: its disk, and the runner's memory through messages.

Each test plays the attack against the real engine (jail, zygote, runner) and asserts its outcome:
the kernel hits its own cap, the machine's disk and the runner's memory stay under a stated bound,
and the notebook's honest cells keep their points.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import nbformat
import pytest
from notebook_helpers import source_and_release

from autograder.engine import space
from autograder.engine.grade import Limits
from autograder.engine.jail import jail_available
from autograder.engine.pipeline import ClassResult, ensure_course, grade_class
from tests.test_attacks import _printed
from tests.test_engine import ASSIGNMENT, FIXTURE, after, solved

pytestmark = pytest.mark.skipif(not jail_available(), reason="the jail needs root and namespaces")

LIMITS = Limits(cell_seconds=30, notebook_seconds=150, memory_bytes=2 * 1024**3, output_bytes=300_000)
CAP = space.space_bytes(LIMITS.memory_bytes)

#: Fills each writable folder with 64 MiB files (under the per-file limit) up to 1 GiB, then empties it.
DISK_FILL = """
import json, os
def fill(folder, most=1024**3):
    written, error, block = 0, None, b"\\1" * (8 * 1024**2)
    try:
        for i in range(most // (64 * 1024**2)):
            with open(os.path.join(folder, f"fill-{i}"), "wb", buffering=0) as f:
                for _ in range(8):
                    written += f.write(block)
    except OSError as exc:
        error = exc.errno
    for name in os.listdir(folder):
        if name.startswith("fill-"):
            os.remove(os.path.join(folder, name))
    return {"written": written, "errno": error}
def size(folder):
    s = os.statvfs(folder)
    return [s.f_blocks * s.f_frsize, s.f_files, os.stat(folder).st_dev]
report = {folder: fill(folder) for folder in (".", "/tmp", "/var/tmp", "/dev/shm")}
print("DISK " + json.dumps({"fill": report, "size": {f: size(f) for f in report}}))
"""
#: Creates empty files in /tmp, then in the job folder, until refused; then removes them.
FILE_FLOOD = """
import json, os
def flood(folder, most=300_000):
    made, error = 0, None
    try:
        while made < most:
            open(os.path.join(folder, f"f{made}"), "w").close()
            made += 1
    except OSError as exc:
        error = exc.errno
    for i in range(made):
        os.remove(os.path.join(folder, f"f{i}"))
    return {"made": made, "errno": error}
print("FILES " + json.dumps({folder: flood(folder) for folder in ("/tmp", ".")}))
"""


class DiskWatch:
    """The least free space the machine's disk (the grader's scratch folder's) had while it ran."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.before = self._free()
        self.least = self.before
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _free(self) -> int:
        s = os.statvfs(self.folder)
        return s.f_bavail * s.f_frsize

    def _watch(self) -> None:
        while not self._done.wait(0.05):
            self.least = min(self.least, self._free())

    def __enter__(self) -> DiskWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    @property
    def used(self) -> int:
        return self.before - self.least


def _grade(tmp_path: Path, notebooks: dict, limits: Limits = LIMITS) -> tuple[ClassResult, Path]:
    root = tmp_path / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, ASSIGNMENT)
    good = solved(source, release)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    for student, code in notebooks.items():
        nbformat.write(after(good, "linear_layer", code), inbox / f"{student}_{ASSIGNMENT}.ipynb")
    result = grade_class(inbox, ASSIGNMENT, root, FIXTURE, workers=1, limits=limits, progress=False)
    return result, root


def _outcome(result: ClassResult, student: str):
    (found,) = [o for o in result.outcomes if o.student == student]
    return found


def test_a_kernel_filling_its_folders_hits_its_cap_in_memory_not_the_disk(tmp_path: Path) -> None:
    import tempfile

    with DiskWatch(tempfile.gettempdir()) as disk:
        result, root = _grade(tmp_path, {"filler": DISK_FILL})
    seen = json.loads(_printed(root, "filler", "DISK"))
    for folder, fill in seen["fill"].items():
        assert fill["errno"] == 28, f"{folder}: {fill}"  # ENOSPC, before 1 GiB
        assert CAP - 64 * 1024**2 <= fill["written"] <= CAP, f"{folder}: {fill}"
    sizes = seen["size"].values()
    assert {s[2] for s in sizes} == {seen["size"]["."][2]}, "the four folders are one filesystem"
    assert all(s[0] == CAP and s[1] == space.SPACE_INODES for s in sizes), seen["size"]
    # The kernel wrote its cap four times over; the machine's disk saw none of it.
    print("USED", disk.used, seen)
    assert disk.used < 64 * 1024**2, f"the disk lost {disk.used / 1024**2:.0f} MiB while the kernel wrote"
    filler = _outcome(result, "filler")
    assert (filler.score, filler.status) == (7, "graded"), filler.reason


def test_a_kernel_creating_files_hits_its_inode_cap(tmp_path: Path) -> None:
    result, root = _grade(tmp_path, {"files": FILE_FLOOD})
    seen = json.loads(_printed(root, "files", "FILES"))
    for folder, flood in seen.items():
        assert flood["errno"] == 28, f"{folder}: {flood}"
        assert space.SPACE_INODES - 200 <= flood["made"] < space.SPACE_INODES, f"{folder}: {flood}"
    files = _outcome(result, "files")
    assert (files.score, files.status) == (7, "graded"), files.reason


#: One 300 kB buffer sent as a message of 3 000 parts (each under the per-part limit): 0.9 GB if held.
MANY_PARTS = """
import threading
kernel = get_ipython().kernel
sent = threading.Event()
def send():
    kernel.iopub_thread.socket.send_multipart([b"x" * 300_000] * 3000, copy=False)
    sent.set()
kernel.iopub_thread.schedule(send)
sent.wait(60)
import time; time.sleep(5)
"""
#: Display messages whose parent is no request of the runner's: 200 of 100 kB, 20 MB in all.
WRONG_PARENT = """
import datetime, time
kernel = get_ipython().kernel
parent = {"msg_id": "not-a-request-of-yours", "msg_type": "execute_request", "session": "s",
          "username": "u", "date": datetime.datetime.now(), "version": "5.3"}
for _ in range(200):
    kernel.session.send(kernel.iopub_socket, "display_data",
                        {"data": {"text/plain": "z" * 100_000}, "metadata": {}}, parent=parent)
time.sleep(5)
"""
#: The most a runner may hold at its peak, its own interpreter and libraries included.
RUNNER_PEAK = 300 * 1024**2


class RunnerPeak:
    """The highest peak resident memory (VmHWM) of the grader's runner processes while it ran."""

    def __init__(self) -> None:
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._done.wait(0.05):
            for entry in os.scandir("/proc"):
                if entry.name.isdigit():
                    self.peak = max(self.peak, _runner_hwm(entry.path))

    def __enter__(self) -> RunnerPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def _runner_hwm(proc: str) -> int:
    """A runner child of this process's peak resident memory in bytes, 0 for any other process."""
    try:
        if b"autograder.engine.runner" not in Path(proc, "cmdline").read_bytes():
            return 0
        status = Path(proc, "status").read_text()
    except OSError:
        return 0
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    if int(fields["PPid"]) != os.getpid():
        return 0
    return int(fields["VmHWM"].split()[0]) * 1024


def _grade_after_mse(tmp_path: Path, student: str, code: str) -> ClassResult:
    root = tmp_path / "course"
    ensure_course(root, FIXTURE)
    source, release = source_and_release(root, ASSIGNMENT)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    nbformat.write(after(solved(source, release), "mse_loss", code), inbox / f"{student}_{ASSIGNMENT}.ipynb")
    return grade_class(inbox, ASSIGNMENT, root, FIXTURE, workers=1, limits=LIMITS, progress=False)


def test_a_message_of_thousands_of_parts_is_refused_before_the_runner_holds_it(tmp_path: Path) -> None:
    with RunnerPeak() as runner:
        result = _grade_after_mse(tmp_path, "parts", MANY_PARTS)
    (o,) = result.outcomes
    assert o.status == "stopped" and "output" in (o.reason or ""), o.reason
    assert o.score == 4, "the cells before the attack keep their points"
    assert 0 < runner.peak < RUNNER_PEAK, f"the runner peaked at {runner.peak / 1024**2:.0f} MiB"


def test_messages_of_another_parent_count_against_the_output_budget(tmp_path: Path) -> None:
    with RunnerPeak() as runner:
        result = _grade_after_mse(tmp_path, "flood", WRONG_PARENT)
    (o,) = result.outcomes
    assert o.status == "stopped" and "output" in (o.reason or ""), o.reason
    assert o.score == 4, "the cells before the attack keep their points"
    assert 0 < runner.peak < RUNNER_PEAK, f"the runner peaked at {runner.peak / 1024**2:.0f} MiB"
