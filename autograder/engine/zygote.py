"""Kernels forked from a warm process, so that no notebook pays again for importing torch.

Importing ipykernel, numpy and torch takes a new kernel about 3.5 s on this course's machines,
most of the per-notebook cost of grading. A zygote imports them once; each kernel is a ``fork`` of
it, which then enters its jail and becomes an ordinary ipykernel. Each kernel still starts from a
fresh, clean interpreter state: nothing of one notebook is in the zygote, and so nothing reaches
the next.

Three pieces:

* the zygote (``python -m autograder.engine.zygote serve SOCKET``), one per grading worker, started
  by the runner;
* the kernel command that jupyter_client launches (``python -m autograder.engine.zygote kernel SOCKET
  SPEC -- ARGS``): a small stand-in process that asks the zygote for a kernel, hands it its standard
  streams, forwards interrupts to it, and exits with its exit status, so that jupyter_client manages
  it like any kernel process;
* the forked child, which enters the jail (:func:`autograder.engine.jail.enter`) and runs ipykernel.

Lifetimes: when the stand-in dies (killed with the runner), the zygote kills its kernel; when the
zygote dies, its kernels die with it (parent-death signal).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import struct
import sys

#: What a zygote imports before it forks, by kind: a numpy notebook's kernels must not have PyTorch,
#: not even in memory, so they come from a zygote that never imported it.
PRELOAD = {
    "numpy": ("ipykernel.kernelapp", "ipykernel.ipkernel", "IPython", "numpy", "matplotlib"),
    "torch": ("ipykernel.kernelapp", "ipykernel.ipkernel", "IPython", "numpy", "torch", "matplotlib"),
}
#: The kernels of notebooks that use PyTorch's compiler stack (``executor.kernel_kind``): the same
#: imports before the fork; the compiler's, behind the first kernel (:func:`_warm_compile`).
PRELOAD["compile"] = PRELOAD["torch"]
#: What every kernel imports while it starts (``IPKernelApp.initialize``), whatever its notebook: its
#: debugger (debugpy, with pydevd: about 60 ms of CPU), IPython's debugger, the completer's helpers, the
#: history's sqlite3. Imported before the fork, they are already loaded in the kernel.
KERNEL_START = ("ipykernel.debugger", "IPython.core.debugger", "IPython.core.completerlib", "sqlite3")


#: Set to ``0`` to fork kernels from a zygote that skipped :func:`warm_up` (to measure what it saves).
WARM_ENV = "AUTOGRADER_ZYGOTE_WARM"


def warm_up(kind: str) -> None:
    """Run, once, the library code paths the notebooks take, so that no forked kernel pays their first call.

    A fresh process pays for a first call of most numpy, PyTorch and matplotlib paths (lazy imports,
    dispatch tables, operator registration, font loading): about half of a notebook's cell time.
    Only library code runs here, on fixed inputs, never a learner's code nor the course's checks,
    and it leaves nothing a kernel could read back: everything is local to this function (and
    collected), no figure stays open, the random generators' states are put back as they were (none
    is drawn from: the one ``nn.Linear`` initialisation is undone), no warning is recorded as
    shown, and the default dtype, grad mode and thread counts are never set
    (``tests/test_speed_paths.py`` compares a forked kernel with a cold one).
    """
    import gc
    import io
    import random
    import warnings

    import numpy as np

    states = (random.getstate(), np.random.get_state())
    if kind == "compile":
        # Outside the warnings' context: the filters these imports add stay, as a cold import leaves them.
        import functorch.compile  # noqa: F401
        import torch._dynamo  # noqa: F401
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # leaving the filters resets every "already shown" registry
        a = np.linspace(-1.0, 1.0, 24).reshape(4, 6)
        b = a @ a.T + np.eye(4)
        values = [np.exp(a), np.tanh(a), np.maximum(a, 0), np.where(a > 0, a, 0.0), np.abs(a).argmax(1)]
        values += [np.linalg.norm(a), np.linalg.solve(b, a[:, 0]), a.mean(axis=0), np.allclose(a, a)]
        values += [np.isclose(a, a).all(), np.array_equal(a, a), np.outer(a[0], a[1]), np.sort(a, axis=1)]
        values += [np.random.default_rng(0).normal(size=3), np.einsum("ij,kj->ik", a, a), np.clip(a, 0, 1)]
        if kind in ("torch", "compile"):
            _warm_torch()
        if kind == "compile":
            _warm_compile()
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(a[0], a[1], "--", label="line")
        ax.scatter(a[2], a[3], s=6, alpha=0.6)
        ax.contourf(b, levels=3, alpha=0.3)
        ax.semilogy(np.arange(1, 7), np.arange(1, 7) ** 2.0)
        ax.set_xlabel("x")
        ax.set_title("warm-up")
        ax.legend()
        fig.savefig(io.BytesIO(), format="png")
        plt.close("all")
        del fig, ax, values, a, b
    random.setstate(states[0])
    np.random.set_state(states[1])
    gc.collect()


def _warm_up_behind(kind: str) -> None:
    """:func:`warm_up` at the lowest CPU priority (as root, who can restore it), so that it takes only
    what the kernel it runs beside, and the rest of the machine, leave idle."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    lowered = os.geteuid() == 0
    if lowered:
        os.setpriority(os.PRIO_PROCESS, 0, 19)
    try:
        warm_up(kind)
    finally:
        if lowered:
            os.setpriority(os.PRIO_PROCESS, 0, before)  # the kernels forked next inherit it


def _warm_torch() -> None:
    """The PyTorch half of :func:`warm_up`: forward and backward of the notebooks' kinds of layers,
    a custom ``autograd.Function``, ``gradcheck``, ``nn`` modules and an optimiser step."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    rng_state = torch.get_rng_state()

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    for dtype in (torch.float32, torch.float64):
        x = torch.linspace(-1.0, 1.0, 24, dtype=dtype).reshape(4, 6).requires_grad_()
        w = torch.linspace(-0.5, 0.5, 18, dtype=dtype).reshape(3, 6).requires_grad_()
        bias = torch.zeros(3, dtype=dtype, requires_grad=True)
        y = F.linear(x, w, bias) + x.mm(w.t()) + torch.addmm(bias, x, w.t()) + x @ w.T
        h = torch.relu(y) + y.clamp(min=0) + torch.tanh(y) + torch.sigmoid(y) + y.exp() + Square.apply(y)
        loss = F.mse_loss(h, torch.ones_like(h)) + F.cross_entropy(y, torch.tensor([0, 1, 2, 0]))
        loss = loss + h.pow(2).mean() + (h - 1).abs().sum() + h.log_softmax(dim=1).sum()
        loss.backward()
        torch.autograd.grad(Square.apply(x).sum(), x)
        with torch.no_grad():
            w -= 0.1 * w.grad
            w.grad.zero_()
        torch.allclose(x, x)
        torch.testing.assert_close(x.detach(), x.detach())
    torch.autograd.gradcheck(Square.apply, (torch.linspace(-1, 1, 6, dtype=torch.float64).requires_grad_(),))
    model = nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 3))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        optimiser.zero_grad()
        F.mse_loss(model(torch.ones(4, 6)), torch.zeros(4, 3)).backward()
        optimiser.step()
    torch.set_rng_state(rng_state)


def _warm_compile() -> None:
    """The compiler half of :func:`warm_up`, for ``compile`` kernels: the imports and first calls of
    ``torch.compile`` (TorchDynamo, AOTAutograd, forward and backward) and of ``torch.library.opcheck``
    (its test utilities), about 2.5 s of CPU that every kernel of such a notebook paid on its first call.
    It compiles a local function and checks a built-in operator, so that no operator, library or
    namespace of its own is left registered; dynamo's caches and counters are emptied after."""
    import torch
    import torch._dynamo
    from torch._dynamo.utils import counters

    def twice(a: torch.Tensor) -> torch.Tensor:
        return torch.sin(a) * 2 + a.exp()

    rng_state = torch.get_rng_state()
    x = torch.linspace(-1.0, 1.0, 6, dtype=torch.float64).reshape(2, 3).requires_grad_()
    torch.compile(twice, backend="aot_eager", fullgraph=True)(x).sum().backward()
    torch.library.opcheck(torch.ops.aten.sin.default, (x.detach().requires_grad_(),))
    torch._dynamo.reset()
    counters.clear()
    torch.set_rng_state(rng_state)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _send_msg(sock: socket.socket, obj: object, fds: list[int] | None = None) -> None:
    payload = json.dumps(obj).encode()
    header = struct.pack("!I", len(payload))
    if fds:
        socket.send_fds(sock, [header + payload], fds)
    else:
        sock.sendall(header + payload)


def _recv_msg(sock: socket.socket, with_fds: int = 0) -> tuple[object, list[int]]:
    fds: list[int] = []
    if with_fds:
        data, fds, _, _ = socket.recv_fds(sock, 4, with_fds)
        if len(data) < 4:
            data += _recv_exact(sock, 4 - len(data))
        header = data[:4]
        rest = data[4:]
    else:
        header, rest = _recv_exact(sock, 4), b""
    (length,) = struct.unpack("!I", header)
    payload = rest + _recv_exact(sock, length - len(rest))
    return json.loads(payload), list(fds)


# -- the zygote ---------------------------------------------------------------------------------


def _child(request: dict, fds: list[int], lock: int | None) -> None:
    """In the forked child: take the stand-in's streams, enter the jail, run ipykernel. Never returns."""
    try:
        if lock is not None:
            os.close(lock)  # the manager holds the claim on the user id, not the learner
        os.setsid()
        # A cold process seeds numpy's and PyTorch's global generators from the OS: so does each
        # kernel, rather than all of them sharing the zygote's state (Python's random reseeds itself
        # at fork). Before the jail, which may leave no /dev/urandom.
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed()
        if "torch" in sys.modules:
            sys.modules["torch"].seed()
        for target, fd in zip((0, 1, 2), fds, strict=True):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        if request.get("jail"):
            from autograder.engine.jail import enter

            enter(request["jail"])
            # The engine's own modules were imported here, before the fork: the learner's kernel
            # must not find them already loaded, since its jail holds no such files.
            for name in [m for m in sys.modules if m == "autograder" or m.startswith("autograder.")]:
                del sys.modules[name]
        else:
            os.chdir(request["cwd"])
        _rebase_paths()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        from ipykernel.kernelapp import IPKernelApp

        sys.argv = ["ipykernel_launcher", *request["argv"]]
        app = IPKernelApp.instance()
        app.initialize(request["argv"])
        app.start()
        os._exit(0)
    except SystemExit as exc:
        os._exit(exc.code if isinstance(exc.code, int) else 1)
    except BaseException as exc:  # noqa: BLE001 - report on the kernel's stderr, then die
        try:
            os.write(2, f"kernel start failed: {type(exc).__name__}: {exc}\n".encode())
        finally:
            os._exit(70)


def _rebase_paths() -> None:
    """In the forked child, in its own folder and environment: what a library worked out from the
    zygote's folder when the zygote imported it, worked out again as the kernel's own import would
    (TorchDynamo's ``debug_dir_root``, the current folder's ``torch_compile_debug`` at import)."""
    config = sys.modules.get("torch._dynamo.config")
    if config is not None:
        config.debug_dir_root = config.default_debug_dir_root()


def _manage(conn: socket.socket) -> None:
    """In a forked manager: fork the kernel, then wait for it or for the stand-in to go. Never returns.

    A jailed kernel is the first process of a PID namespace of its own (so everything it starts dies
    with it), runs as a user id the manager has claimed for it (held until the manager exits), and
    in a control group of its own where the machine allows one (removed when the kernel is gone).
    """
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    _set_parent_death_signal()
    try:
        request, fds = _recv_msg(conn, with_fds=3)
    except (ConnectionError, OSError, ValueError):
        os._exit(1)
    lock, group = None, None
    spec = request.get("jail")
    if spec:
        from autograder.engine import cgroup, jail

        try:
            spec["uid"], lock = jail.claim_uid()
            group = cgroup.Cgroup.create(f"kernel-{spec['uid']}", spec["memory_bytes"], spec["processes"])
            spec["cgroup"] = list(group.dirs) if group else None
            jail.unshare_pid()
        except OSError as exc:
            os.write(fds[2], f"kernel start failed: cannot make its jail: {exc}\n".encode())
            os._exit(1)
    pid = os.fork()
    if pid == 0:
        conn.close()
        _child(request, fds, lock)  # never returns
    for fd in fds:
        os.close(fd)
    _send_msg(conn, {"pid": pid})
    conn.setblocking(False)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            if group is not None:
                group.remove()
            try:
                conn.setblocking(True)
                _send_msg(conn, {"exit": os.waitstatus_to_exitcode(status)})
            except OSError:
                pass
            os._exit(0)
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable:
            try:
                gone = conn.recv(1) == b""
            except BlockingIOError:
                gone = False
            except OSError:
                gone = True
            if gone:
                # The stand-in died (killed with its runner): the kernel must not outlive it.
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


def _set_parent_death_signal() -> None:
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def serve(path: str, kind: str = "torch", warm: str = "behind") -> None:
    """Import the modules of ``kind``'s kernels, then fork a kernel for every request on socket ``path``.

    The zygote stays single-threaded (forking a threaded process can deadlock the child): each
    request is handled by a forked manager process, which forks the kernel and watches over it.
    ``warm`` says when it warms up (:func:`warm_up`; ``executor.when_to_warm``): ``first``, before it says
    it is ready, so that no kernel of it starts cold (a resident runner's zygote, or one that will fork
    several kernels); ``behind`` its first kernel; or ``never`` (one that forks one kernel).
    """
    import importlib

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")  # as in a kernel: pydevd reads it at import
    for name in PRELOAD[kind] + KERNEL_START:
        importlib.import_module(name)
    import autograder.engine.jail  # noqa: F401 - the children need it: import it once, here

    if os.environ.get(WARM_ENV, "1") == "0":
        warm = "never"
    if warm == "first":
        warm_up(kind)
        _say_threads()
    behind = warm == "behind"

    _set_parent_death_signal()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # managers are reaped automatically
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    os.chmod(path, 0o600)
    server.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        if os.fork() == 0:
            server.close()
            _manage(conn)
        conn.close()
        if behind:
            # After the first kernel is forked (it starts cold, while this runs beside it), before the
            # next: the run's first notebook does not wait for the warm-up.
            behind = False
            _warm_up_behind(kind)
            _say_threads()


def _say_threads() -> None:
    """Say so when the warm-up left a thread behind: forking a threaded process may hang."""
    threads = len(os.listdir("/proc/self/task"))
    if threads > 1:
        print(f"zygote: {threads} threads after its warm-up: forking may hang", file=sys.stderr, flush=True)


# -- the stand-in -------------------------------------------------------------------------------


def standin(path: str, jail_spec: str | None, argv: list[str], pid_file: str | None = None) -> int:
    """Ask the zygote for a kernel with ``argv``; forward interrupts; exit as the kernel exits.

    With ``pid_file``, write the kernel's process id there (the runner reads the kernel's CPU time)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(path)
    request = {"argv": argv, "env": dict(os.environ), "cwd": os.getcwd(), "jail": None}
    if jail_spec:
        with open(jail_spec) as f:
            request["jail"] = json.load(f)
    _send_msg(sock, request, fds=[0, 1, 2])
    reply, _ = _recv_msg(sock)
    pid = reply["pid"]
    if pid_file:
        with open(pid_file + ".tmp", "w") as f:
            f.write(str(pid))
        os.replace(pid_file + ".tmp", pid_file)

    def forward(signum: int, frame: object) -> None:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, forward)
    try:
        reply, _ = _recv_msg(sock)
    except (ConnectionError, OSError):
        return 1
    code = int(reply.get("exit", 1))
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def main(argv: list[str]) -> int:
    """``serve SOCKET [numpy|torch|compile [first|behind|never]]`` or
    ``kernel SOCKET SPEC|- [PID_FILE] -- KERNEL ARGS``."""
    if argv[0] == "serve":
        serve(argv[1], argv[2] if len(argv) > 2 else "torch", argv[3] if len(argv) > 3 else "behind")
        return 0
    if argv[0] == "kernel":
        sep = argv.index("--")
        spec = argv[2] if argv[2] != "-" else None
        return standin(argv[1], spec, argv[sep + 1 :], argv[3] if sep > 3 else None)
    raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
