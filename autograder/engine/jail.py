"""The jail a learner's kernel runs in: its own mount, PID and network namespaces, an unprivileged user.

The grading engine starts every kernel through :func:`jail_command`::

    setpriv --pdeathsig KILL  unshare --mount --pid --net --fork --kill-child --propagation private
        python -m autograder.engine.jail SPEC.json -- python -m ipykernel_launcher -f CONNECTION

``unshare`` gives the kernel namespaces of its own; ``--kill-child`` and ``--pdeathsig`` make the
whole namespace die with the runner that started it, so nothing outlives a killed job. Inside, this
module (still root, in the new namespaces):

1. hides the folders the learner must not reach (the course directory with its gradebook and hidden
   tests, the repository with the solutions, the submissions, other jobs, ``/root``, ``/home``,
   ``/tmp``) under empty tmpfs mounts, and mounts back read-only only what the kernel needs (the
   Python installation, the virtual environment, the ``autograder`` and ``utils`` packages) and,
   read-write, the job's own folder;
2. mounts a fresh ``/proc`` for the new PID namespace, so no other process can be seen;
3. sets resource limits (address space, file size, processes, open files);
4. drops to the ``nobody`` user, which can neither undo the mounts nor write to the installation;
5. replaces itself with the kernel.

It needs root and a kernel that allows mount namespaces; :func:`jail_available` says whether it
works here, and the engine states in its summary when it had to run without it.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x2, 0x4, 0x8
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC = 0x1, 0x20, 0x1000, 0x4000
PR_SET_PDEATHSIG = 1
NOBODY = 65534

UNSHARE = ["unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "--propagation", "private"]


@functools.cache
def jail_available() -> bool:
    """True when kernels can be jailed here: running as root, with the namespace tools working."""
    if os.name != "posix" or os.geteuid() != 0:
        return False
    if not (shutil.which("unshare") and shutil.which("setpriv")):
        return False
    try:
        probe = subprocess.run(
            ["setpriv", "--pdeathsig", "KILL", *UNSHARE, "true"], capture_output=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def jail_command(spec_path: Path) -> list[str]:
    """The command prefix that runs a kernel command in the jail described by ``spec_path``."""
    return [
        "setpriv",
        "--pdeathsig",
        "KILL",
        *UNSHARE,
        sys.executable,
        "-m",
        "autograder.engine.jail",
        str(spec_path),
        "--",
    ]


_libc = ctypes.CDLL(None, use_errno=True)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    if _libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def build_view(hide: list[str], expose_ro: list[str], expose_rw: list[str]) -> None:
    """Hide folders under empty tmpfs mounts, then mount back the exposed ones (must run as root)."""
    exposed = [(p, True) for p in expose_ro] + [(p, False) for p in expose_rw]
    # Keep a handle on every exposed folder before anything covers it; mount it back from the handle.
    handles = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p, _ in exposed if os.path.isdir(p)}
    hidden: list[str] = []
    for folder in sorted({os.path.realpath(h) for h in hide if os.path.isdir(h)}, key=len):
        if any(_inside(folder, h) for h in hidden):
            continue
        _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=64m")
        hidden.append(folder)
    for path, read_only in sorted(exposed, key=lambda e: len(e[0])):
        if path not in handles or not any(_inside(path, h) for h in hidden):
            continue
        os.makedirs(path, exist_ok=True)
        _mount(f"/proc/self/fd/{handles[path]}", path, None, MS_BIND | MS_REC)
        if read_only:
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for fd in handles.values():
        os.close(fd)


def _limit(kind: int, value: int | None) -> None:
    if value:
        resource.setrlimit(kind, (value, value))


CLONE_NEWNS, CLONE_NEWNET = 0x00020000, 0x40000000
MS_PRIVATE = 1 << 18


def enter(spec: dict, own_namespaces: bool = True) -> None:
    """Enter the jail described by ``spec`` in this process (which must be single-threaded and root).

    With ``own_namespaces`` (a kernel forked from the zygote), this process first moves into new
    mount and network namespaces itself; otherwise ``unshare`` has already made them, a PID
    namespace too. Without a PID namespace, ``/proc`` shows only the kernel's own processes
    (``hidepid``), and each concurrent kernel has a user id of its own, so that no kernel can see
    or signal another.
    """
    workdir = spec["workdir"]
    if own_namespaces:
        if _libc.unshare(CLONE_NEWNS | CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare: {os.strerror(err)}")
        _mount(None, "/", None, MS_REC | MS_PRIVATE)
    build_view(spec["hide"], spec["expose_ro"], [workdir])
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2" if own_namespaces else None)

    uid = gid = int(spec.get("uid", NOBODY))
    for root, dirs, files in os.walk(workdir):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            os.chown(name, uid, gid)
    _limit(resource.RLIMIT_AS, spec.get("memory_bytes"))
    _limit(resource.RLIMIT_FSIZE, spec.get("file_bytes"))
    _limit(resource.RLIMIT_NOFILE, 1024)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    # Changing user clears the parent-death signal: set it (again) so the kernel dies with its parent.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _limit(resource.RLIMIT_NPROC, spec.get("processes"))
    os.environ.update(
        {
            "HOME": workdir,
            "IPYTHONDIR": os.path.join(workdir, ".ipython"),
            "MPLCONFIGDIR": os.path.join(workdir, ".matplotlib"),
            "TMPDIR": "/tmp",
        }
    )
    os.chdir(workdir)


def main(argv: list[str]) -> None:
    """Enter the jail described by the spec file ``argv[0]`` and exec the command after ``--``."""
    spec = json.loads(Path(argv[0]).read_text())
    command = argv[argv.index("--") + 1 :]
    enter(spec, own_namespaces=False)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
