"""The jail's parts, one by one: user ids, the kernel's view of the machine, its environment, its group."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.engine import cgroup, jail

root_only = pytest.mark.skipif(not jail.jail_available(), reason="the jail needs root and namespaces")


@root_only
def test_claimed_user_ids_are_distinct_while_held_and_free_again_when_released() -> None:
    first, lock1 = jail.claim_uid()
    second, lock2 = jail.claim_uid()
    try:
        assert first != second
        assert first in jail.UID_RANGE and second in jail.UID_RANGE
    finally:
        os.close(lock1)
        os.close(lock2)


@root_only
def test_a_user_id_a_live_process_has_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = jail.UID_RANGE.start + 7
    sleeper = subprocess.Popen(
        ["setpriv", f"--reuid={busy}", f"--regid={busy}", "--clear-groups", "sleep", "30"]
    )
    try:
        for _ in range(100):  # until setpriv has become the busy user
            if f"{busy}" in Path(f"/proc/{sleeper.pid}/status").read_text():
                break
            time.sleep(0.05)
        monkeypatch.setattr(jail, "UID_RANGE", range(busy, busy + 2))
        for _ in range(10):
            uid, lock = jail.claim_uid()
            os.close(lock)
            assert uid == busy + 1
    finally:
        sleeper.kill()
        sleeper.wait()


@root_only
def test_a_claim_held_by_another_process_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    start = jail.UID_RANGE.start + 11
    monkeypatch.setattr(jail, "UID_RANGE", range(start, start + 2))
    code = (
        "import os, sys, time; from autograder.engine import jail; "
        f"jail.UID_RANGE = range({start}, {start} + 2); uid, lock = jail.claim_uid(); "
        "print(uid, flush=True); time.sleep(30)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        held = int(holder.stdout.readline())
        uid, lock = jail.claim_uid()
        os.close(lock)
        assert uid != held
    finally:
        holder.kill()
        holder.wait()


def test_the_kernel_environment_keeps_only_listed_variables() -> None:
    env = {"AWS_SECRET_ACCESS_KEY": "s3cr3t", "OMP_NUM_THREADS": "1", "PATH": "/grader/bin", "HOME": "/root"}
    kept = jail.kernel_environment(env, "/job")
    assert "AWS_SECRET_ACCESS_KEY" not in kept and "s3cr3t" not in kept.values()
    assert kept["OMP_NUM_THREADS"] == "1" and kept["HOME"] == "/job"
    assert "/grader/bin" not in kept["PATH"]


def test_the_kernel_view_holds_the_collect_side_only() -> None:
    view = jail.kernel_view(numpy_only=False)
    (package, entries), *_ = [(p, e) for p, e in view["packages"].items() if p.endswith("autograder")]
    assert "checks" in entries and "grading" not in entries and "engine" not in entries
    assert not any(p.endswith("autograder/grading") for p in view["ro"])
    assert view["masked"] == []


def test_a_numpy_kernel_view_masks_every_torch_package() -> None:
    import torch

    view = jail.kernel_view(numpy_only=True)
    torch_dir = str(Path(torch.__file__).resolve().parent)
    assert torch_dir in view["masked"]


@pytest.mark.skipif(cgroup.cgroup_support() is None, reason="no control group can be made on this machine")
def test_a_kernel_group_is_made_with_its_limits_and_removed() -> None:
    group = cgroup.Cgroup.create(f"test-{os.getpid()}", 256 * 1024**2, 17)
    assert group is not None
    try:
        texts = {Path(d).name: sorted(p.name for p in Path(d).iterdir()) for d in group.dirs}
        assert texts
        limits = [Path(d, "pids.max") for d in group.dirs if Path(d, "pids.max").exists()]
        assert limits and limits[0].read_text().strip() == "17"
    finally:
        group.remove()
    assert not any(Path(d).exists() for d in group.dirs)
