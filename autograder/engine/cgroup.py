"""A control group per kernel: one memory and process limit for all of a kernel's processes together,
in cgroup v2 (``memory.max``, ``pids.max``) or the v1 memory and pids controllers, where the machine
lets the grader make one (:func:`cgroup_support` says whether and which); the jail puts each kernel in
its own (:mod:`autograder.engine.jail`)."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Cgroup:
    """A control group of one kernel: one memory and process limit for all its processes together."""

    dirs: tuple[str, ...]
    """Its folder in each hierarchy (one under cgroup v2; memory and pids under v1)."""

    @classmethod
    def create(cls, name: str, memory_bytes: int, processes: int) -> Cgroup | None:
        """Make the group (None when the machine allows none) and set its limits."""
        support = cgroup_support()
        if support is None:
            return None
        dirs = tuple(os.path.join(base, name) for base in support[1])
        try:
            for d in dirs:
                os.makedirs(d, exist_ok=True)
            if support[0] == "v2":
                _write(dirs[0], "memory.max", memory_bytes)
                _write(dirs[0], "memory.swap.max", 0, optional=True)
                _write(dirs[0], "pids.max", processes)
            else:
                memory, pids = dirs
                _write(memory, "memory.limit_in_bytes", memory_bytes)
                _write(memory, "memory.memsw.limit_in_bytes", memory_bytes, optional=True)
                _write(pids, "pids.max", processes)
        except OSError:
            cls(dirs).remove()
            return None
        return cls(dirs)

    def join(self) -> None:
        """Move the calling process into the group (its children follow)."""
        for d in self.dirs:
            _write(d, "cgroup.procs", 0)

    def remove(self) -> None:
        """Kill whatever is left in the group and delete it."""
        for d in self.dirs:
            for _ in range(50):
                try:
                    pids = [int(p) for p in Path(d, "cgroup.procs").read_text().split()]
                except OSError:
                    break
                for pid in pids:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.rmdir(d)
                    break
                import time

                time.sleep(0.02)


def _write(folder: str, name: str, value: int, optional: bool = False) -> None:
    try:
        Path(folder, name).write_text(str(value))
    except OSError:
        if not optional:
            raise


def _own_cgroup(hierarchy: str) -> str | None:
    """This process's group path in a v1 hierarchy (``memory``, ``pids``) or v2 (``""``)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers.split(",") == [hierarchy] or (hierarchy == "" and controllers == ""):
            return path
    return None


@functools.cache
def cgroup_support() -> tuple[str, tuple[str, ...]] | None:
    """``("v2", (base,))`` or ``("v1", (memory base, pids base))`` where kernels' groups can be made,
    or None when this machine lets us make none (then only per-process limits hold)."""
    if os.geteuid() != 0:
        return None
    root = Path("/sys/fs/cgroup")
    v2 = root / "cgroup.controllers"
    if v2.exists() and {"memory", "pids"} <= set(v2.read_text().split()):
        own = _own_cgroup("") or "/"
        base = str(root / own.lstrip("/") / "backprop-course")
        if _probe(base, ("memory", "pids")):
            return "v2", (base,)
    bases = []
    for controller in ("memory", "pids"):
        own = _own_cgroup(controller)
        if own is None or not (root / controller).is_dir():
            return None
        bases.append(str(root / controller / own.lstrip("/") / "backprop-course"))
    if all(_probe(b, ()) for b in bases):
        return "v1", tuple(bases)
    return None


def _probe(base: str, controllers: tuple[str, ...]) -> bool:
    try:
        os.makedirs(base, exist_ok=True)
        if controllers:  # v2: let the groups below ours use the controllers
            _write(os.path.dirname(base), "cgroup.subtree_control", 0, optional=True)
            Path(base, "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in controllers))
        probe = os.path.join(base, f"probe-{os.getpid()}")
        os.makedirs(probe, exist_ok=True)
        os.rmdir(probe)
        return True
    except OSError:
        return False
