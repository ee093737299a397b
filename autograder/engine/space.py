"""The kernel's writable space: one tmpfs per kernel, capped in bytes and in files together.

Everything a jailed kernel can write (its job folder, ``/tmp``, ``/var/tmp``, ``/dev/shm``) is a folder
of one tmpfs mounted by the runner for that job, with ``size=`` and ``nr_inodes=``: a kernel that
writes past either cap gets ``ENOSPC``, and nothing it writes reaches the machine's disk. A tmpfs is
memory: its pages are charged to the memory control group of the process that writes them (the
kernel's, so they count against the kernel's memory limit), and the cap keeps them under a fixed
share of that limit where no group can be made.

The runner mounts the spaces in a mount namespace of its own (:func:`private_mounts`, called once, at
its start, before it has any thread or child): the host never sees them, and they vanish with the
runner whatever ends it. The kernel's namespace is a copy of the runner's, so the runner and the
kernel see the same folder (the runner keeps the kernel's sockets and connection file there).
"""

from __future__ import annotations

import ctypes
import os
import shutil
from pathlib import Path

from autograder.engine import jail

#: Where a runner mounts its kernels' spaces (over a small tmpfs of its own, in its own namespace).
SPACES = Path("/run/backprop-course/spaces")
#: The most bytes one kernel's space holds: its folder, /tmp, /var/tmp and /dev/shm together.
SPACE_BYTES = 512 * 1024**2
#: The most files and folders one kernel's space holds (a tmpfs inode costs kernel memory of its own).
SPACE_INODES = 10_000
#: The space's folders, and where each appears in the kernel's root (``work``: the job folder).
FOLDERS = {"work": None, "tmp": "/tmp", "var-tmp": "/var/tmp", "shm": "/dev/shm"}


def space_bytes(memory_bytes: int) -> int:
    """The byte cap of a kernel's space: :data:`SPACE_BYTES`, or half the kernel's memory limit if
    that is less (the space is memory)."""
    return min(SPACE_BYTES, memory_bytes // 2)


def private_mounts() -> bool:
    """Move this process into a mount namespace of its own, where kernels' spaces can be mounted;
    False when it cannot (not root): jailed kernels then fail to start, saying why."""
    if os.name != "posix" or os.geteuid() != 0:
        return False
    try:
        jail._check(jail._libc.unshare(jail.CLONE_NEWNS), "unshare the mount namespace")
        jail._mount(None, "/", None, jail.MS_REC | jail.MS_PRIVATE)
        SPACES.mkdir(parents=True, exist_ok=True, mode=0o700)
        jail._mount("tmpfs", str(SPACES), "tmpfs", jail.MS_NOSUID | jail.MS_NODEV, "mode=700,size=1m")
    except OSError:
        return False
    return True


def space_of(workdir: str) -> str:
    """Where the space of the kernel working in ``workdir`` is mounted."""
    return str(SPACES / os.path.basename(workdir))


def mount_space(workdir: str, size: int, inodes: int) -> str:
    """Mount a fresh space for ``workdir``'s kernel, with what the grader put in ``workdir`` copied into
    it, and its ``work`` folder over ``workdir``; return the space's path."""
    space = space_of(workdir)
    os.makedirs(space, exist_ok=True)
    flags = jail.MS_NOSUID | jail.MS_NODEV
    jail._mount("tmpfs", space, "tmpfs", flags, f"mode=755,size={size},nr_inodes={inodes}")
    for name, target in FOLDERS.items():
        os.mkdir(os.path.join(space, name), 0o755 if target is None else 0o1777)
        os.chmod(os.path.join(space, name), 0o755 if target is None else 0o1777)
    shutil.copytree(workdir, os.path.join(space, "work"), symlinks=True, dirs_exist_ok=True)
    jail._mount(os.path.join(space, "work"), workdir, None, jail.MS_BIND)
    return space


def unmount_space(workdir: str) -> None:
    """Unmount ``workdir``'s space (its memory is freed once no process of the kernel holds it)."""
    space = space_of(workdir)
    for target in (workdir, space):
        if os.path.ismount(target):
            jail._libc.umount2(target.encode(), ctypes.c_int(jail.MNT_DETACH))
    if os.path.isdir(space):
        os.rmdir(space)
