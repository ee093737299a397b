"""The jail a learner's kernel runs in: an allow-listed root, its own namespaces, a user id of its own.

A kernel is either forked from the runner's zygote (the ordinary way; :mod:`autograder.engine.zygote`
gives it a PID namespace of its own before the fork) or started behind :func:`jail_command`
(``unshare`` with a PID namespace). Either way the kernel process, still root, calls :func:`enter`,
which:

1. joins a control group of its own, when the machine lets us make one (:mod:`cgroup v2 or v1
   <autograder.engine.cgroup.Cgroup>`): one memory and process limit for all its processes together;
2. moves into new mount, network, IPC and UTS namespaces;
3. builds a new root that holds only what a kernel needs (the allow-list, :func:`kernel_view`): the
   system's libraries and the Python installation read-only, the virtual environment read-only,
   of the course's own packages only the collect side of the checks and ``utils`` (never
   ``autograder.grading``, where references are computed, nor the engine), no PyTorch at all for
   a numpy notebook, its job folder, ``/tmp``, ``/var/tmp`` and ``/dev/shm`` read-write, all four
   folders of one tmpfs capped in bytes and files (:mod:`autograder.engine.space`, mounted by the
   runner), a few device nodes, and a fresh ``/proc`` that shows only its own processes; and
   pivots into it, so that nothing else of the machine exists for it;
4. sets resource limits (address space per process, file size, open files, processes);
5. drops to its own unprivileged user id with ``no_new_privs`` (no setuid binary can raise it);
6. replaces the grader's environment with a minimal one (:data:`KERNEL_ENV`).

It needs root and namespaces; :func:`jail_available` says whether it works here, and the engine
states in its summary when it had to run without it. Where no control group can be made,
:func:`~autograder.engine.cgroup.cgroup_support` says so and only the per-process limits hold (see
docs/guarantees.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import functools
import json
import os
import platform
import random
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from autograder.engine.cgroup import Cgroup

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_MOVE, MS_REC = 0x20, 0x1000, 0x2000, 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWPID, CLONE_NEWNET = (
    0x00020000,
    0x04000000,
    0x08000000,
    0x20000000,
    0x40000000,
)
PR_SET_PDEATHSIG, PR_SET_NO_NEW_PRIVS = 1, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}

UNSHARE = ["unshare", "--mount", "--pid", "--net", "--fork", "--kill-child", "--propagation", "private"]

#: Kernels get user ids from this range, one no other live kernel on the host holds (:func:`claim_uid`).
UID_RANGE = range(200_000, 260_000)
#: Where the claims on user ids are kept: a lock file per id, held for the kernel's life.
UID_LOCKS = Path("/run/backprop-course/uids")
#: The folder the new root is assembled on before the kernel pivots into it.
ROOT_MOUNT = Path("/run/backprop-course/root")

#: The only variables of the grader's environment a kernel sees; everything else is dropped.
KERNEL_ENV = (
    "BACKPROP_COURSE_EVIDENCE",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "OPENBLAS_CORETYPE",
    "OPENBLAS_L2_SIZE",
    "MPLBACKEND",
    "PYTHONDONTWRITEBYTECODE",
    "PYDEVD_DISABLE_FILE_VALIDATION",
)
#: System folders and files a Python kernel needs, read-only (symlinks are recreated as symlinks).
SYSTEM_PATHS = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/hosts",
)
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
#: Of the course's ``autograder`` package, a kernel sees only its ``__init__`` and the folder of what a
#: kernel may import (``autograder/checks/``, whole): never ``grading`` (references, verdicts), ``engine``
#: or ``course``.
KERNEL_PACKAGE = ("__init__.py", "checks")
#: Top-level packages that make up PyTorch: absent from a numpy notebook's kernel.
TORCH_PACKAGES = ("torch", "functorch", "torchgen")
#: What a masked package's ``__init__`` says when imported.
MASKED_PACKAGE = (
    "raise ModuleNotFoundError(\"No module named '{name}': this notebook is graded with numpy only, "
    'in a kernel without PyTorch", name={name!r})\n'
)


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
    return ["setpriv", "--pdeathsig", "KILL", *UNSHARE, sys.executable, "-m", "autograder.engine.jail",
            str(spec_path), "--"]  # fmt: skip


# -- what a kernel sees ---------------------------------------------------------------------------


def _package_dir(name: str) -> str:
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"cannot find the {name!r} package")
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def _site_packages() -> list[str]:
    import site

    return sorted({os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)})


def kernel_view(numpy_only: bool) -> dict[str, list[str]]:
    """The allow-list of a kernel's root: ``ro`` paths, ``masked`` folders inside them (shown empty),
    and ``packages`` (a folder shown with only the listed entries), all absolute and real paths."""
    ro = [p for p in SYSTEM_PATHS if os.path.lexists(p)]
    ro += sorted({os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)})
    autograder_dir, utils_dir = _package_dir("autograder"), _package_dir("backprop_utils")
    ro += [autograder_dir, utils_dir]
    masked = []
    if numpy_only:
        masked += [os.path.join(s, p) for s in _site_packages() for p in TORCH_PACKAGES]
        masked = [p for p in masked if os.path.isdir(p)]
    return {"ro": ro, "masked": masked, "packages": {autograder_dir: list(KERNEL_PACKAGE)}}


def spec_for(workdir: Path, *, memory_bytes: int, file_bytes: int, processes: int, numpy_only: bool) -> dict:
    """The jail spec of one kernel: its folder, its writable space, its view of the machine and its limits."""
    from autograder.engine import space

    return {
        "workdir": str(workdir),
        "space": space.space_of(str(workdir)),
        "space_bytes": space.space_bytes(memory_bytes),
        "space_inodes": space.SPACE_INODES,
        "view": kernel_view(numpy_only),
        "numpy_only": numpy_only,
        "memory_bytes": memory_bytes,
        "file_bytes": file_bytes,
        "processes": processes,
    }


# -- user ids -------------------------------------------------------------------------------------


def _uids_in_use() -> set[int]:
    """Every user id (real, effective, saved) of every process on the machine."""
    used = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError):
                for line in Path(entry.path, "status").read_text().splitlines():
                    if line.startswith("Uid:"):
                        used.update(int(u) for u in line.split()[1:])
                        break
    return used


def claim_uid() -> tuple[int, int]:
    """A user id that no live process and no other kernel on this host has, and the lock that holds it.

    The claim is a ``flock`` on the id's lock file, held until the returned descriptor is closed (or
    its holder dies), so two grading runs at once, or a crashed one, never hand out the same id.
    """
    UID_LOCKS.mkdir(parents=True, exist_ok=True, mode=0o700)
    used = _uids_in_use()
    start = random.randrange(len(UID_RANGE))
    for offset in range(len(UID_RANGE)):
        uid = UID_RANGE[(start + offset) % len(UID_RANGE)]
        if uid in used:
            continue
        fd = os.open(UID_LOCKS / str(uid), os.O_CREAT | os.O_RDWR, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return uid, fd
    raise RuntimeError("no free user id for a kernel")


# -- entering the jail ----------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def enc(s: str | None) -> bytes | None:
        return s.encode() if s is not None else None

    _check(_libc.mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)),
           f"mount {source} on {target}")  # fmt: skip


def _tmpfs(target: str, size: int, mode: str = "755") -> None:
    os.makedirs(target, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},size={size}")


def _bind(source: str, target: str, read_only: bool, device: bool = False) -> None:
    """Mount ``source`` at ``target`` (a folder or a file), read-only unless asked otherwise; nosuid,
    and nodev unless it is a ``device`` node."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.exists(target):
            Path(target).touch()
    _mount(source, target, None, MS_BIND | MS_REC)
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | (0 if device else MS_NODEV) | (MS_RDONLY if read_only else 0)
    _mount(None, target, None, flags)


def _place(root: str, path: str, read_only: bool = True) -> None:
    """Make ``path`` of the machine appear at the same path under ``root``."""
    target = root + path
    if os.path.islink(path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.symlink(os.readlink(path), target)
        real = os.path.realpath(path)
        if not os.path.lexists(root + real):
            _place(root, real, read_only)
        return
    if os.path.lexists(target) and os.path.ismount(target):
        return
    _bind(path, target, read_only)


def _build_root(spec: dict) -> str:
    root = str(ROOT_MOUNT)
    os.makedirs(root, exist_ok=True)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=16m")
    view = spec["view"]
    space = spec["space"]
    if not os.path.ismount(space):  # never the machine's disk for want of the runner's tmpfs
        raise OSError(f"the kernel's writable space {space} is not mounted (the runner mounts it)")
    # Private folders first: a course checked out under /tmp is then mounted on top of them.
    for private, folder in (("/tmp", "tmp"), ("/var/tmp", "var-tmp")):
        _bind(os.path.join(space, folder), root + private, read_only=False)
    for path in sorted(view["ro"], key=len):
        _place(root, path)
    for folder, entries in view["packages"].items():
        # Shadow the package folder, then put back only the entries a kernel may import.
        _tmpfs(root + folder, 1024**2)
        for entry in entries:
            if os.path.lexists(os.path.join(folder, entry)):
                _bind(os.path.join(folder, entry), root + os.path.join(folder, entry), read_only=True)
        _mount(None, root + folder, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for folder in view["masked"]:
        # An empty folder would import as a namespace package: the masked package says it is absent.
        _tmpfs(root + folder, 64 * 1024)
        name = os.path.basename(folder)
        Path(root + folder, "__init__.py").write_text(MASKED_PACKAGE.format(name=name))
        _mount(None, root + folder, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    _bind(spec["workdir"], root + spec["workdir"], read_only=False)
    _tmpfs(root + "/dev", 1024**2)
    for device in DEVICES:
        if os.path.exists(device):
            _bind(device, root + device, read_only=False, device=True)
    _bind(os.path.join(space, "shm"), root + "/dev/shm", read_only=False)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):  # fmt: skip
        os.symlink(target, f"{root}/dev/{name}")
    _mount(None, root + "/dev", None, MS_REMOUNT | MS_NOSUID | MS_RDONLY)
    os.makedirs(root + "/proc", exist_ok=True)
    return root


def _pivot(root: str) -> None:
    """Make ``root`` the process's ``/``; the machine's own root is detached and gone."""
    number = SYS_PIVOT_ROOT.get(platform.machine())
    old = os.path.join(root, ".old-root")
    os.makedirs(old, exist_ok=True)
    if number is not None and _libc.syscall(number, root.encode(), old.encode()) == 0:
        os.chdir("/")
        _check(_libc.umount2(b"/.old-root", MNT_DETACH), "umount the old root")
        os.rmdir("/.old-root")
    else:  # no pivot_root here: move the new root over / and chroot into it
        os.chdir(root)
        _mount(root, "/", None, MS_MOVE)
        os.chroot(".")
        os.chdir("/")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _limit(kind: int, value: int | None) -> None:
    if value:
        resource.setrlimit(kind, (value, value))


def kernel_environment(env: dict[str, str], workdir: str) -> dict[str, str]:
    """The kernel's whole environment: the allow-listed variables of ``env`` and the kernel's own."""
    kept = {k: v for k, v in env.items() if k in KERNEL_ENV}
    bin_dir = os.path.dirname(sys.executable)
    return {
        **kept,
        "PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin",
        "HOME": workdir,
        "USER": "learner",
        "LOGNAME": "learner",
        "LANG": "C.UTF-8",
        "IPYTHONDIR": os.path.join(workdir, ".ipython"),
        "MPLCONFIGDIR": os.path.join(workdir, ".matplotlib"),
        "TMPDIR": "/tmp",
    }


def unshare_pid() -> None:
    """Give this process's next child a PID namespace of its own, in which it is process 1: when it
    exits, the kernel kills every process left in that namespace."""
    _check(_libc.unshare(CLONE_NEWPID), "unshare the PID namespace")


def enter(spec: dict) -> None:
    """Enter the jail described by ``spec`` in this process (single-threaded, root, and already the
    first process of a PID namespace of its own). On return the process is the jailed learner."""
    workdir = spec["workdir"]
    uid = gid = int(spec["uid"])
    cgroup = spec.get("cgroup")
    if cgroup:
        Cgroup(tuple(cgroup)).join()
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for root, dirs, files in os.walk(workdir):
        for name in [root, *(os.path.join(root, d) for d in dirs), *(os.path.join(root, f) for f in files)]:
            os.chown(name, uid, gid, follow_symlinks=False)
    _pivot(_build_root(spec))
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)

    _limit(resource.RLIMIT_AS, spec.get("memory_bytes"))
    _limit(resource.RLIMIT_FSIZE, spec.get("file_bytes"))
    _limit(resource.RLIMIT_NOFILE, 1024)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    # Changing user clears the parent-death signal: set it (again) so the kernel dies with its parent.
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    _limit(resource.RLIMIT_NPROC, spec.get("processes"))
    env = kernel_environment(dict(os.environ), workdir)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(workdir)


def main(argv: list[str]) -> None:
    """Enter the jail described by the spec file ``argv[0]`` and exec the command after ``--``.

    The fallback path, for a runner without a zygote: ``unshare`` has made the PID namespace; the
    user id is claimed here and the claim is held by the kernel process itself until it exits. No
    control group is made on this path: only the per-process limits hold.
    """
    spec = json.loads(Path(argv[0]).read_text())
    command = argv[argv.index("--") + 1 :]
    spec["uid"], lock = claim_uid()
    os.set_inheritable(lock, True)
    enter(spec)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
