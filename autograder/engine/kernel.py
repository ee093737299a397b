"""The learner's kernel as the runner sees it: how it starts (jailed, forked from a zygote) and what it
may send (every message counted against the output budget, and bounded before it is held).

:class:`JailedKernelManager` starts the kernel behind the jail's command, or has a zygote fork it;
:class:`QuickReadyClient` knows it is ready as soon as it answers; :class:`LimitedClient` is
nbclient's notebook client with every message counted. The runner (:mod:`autograder.engine.runner`)
drives them cell by cell.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from typing import Any

from autograder.engine.light import nbformat

nbformat()  # before nbclient imports it: see autograder.engine.light

import zmq  # noqa: E402
from jupyter_client.asynchronous import AsyncKernelClient  # noqa: E402
from jupyter_client.manager import AsyncKernelManager  # noqa: E402
from nbclient import NotebookClient  # noqa: E402
from nbclient.exceptions import CellExecutionComplete  # noqa: E402

from autograder.engine.relay import Relay  # noqa: E402

#: The kernel's stand-in (:func:`autograder.engine.zygote.standin`), run as a script.
STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "zygote.py")


class QuickReadyClient(AsyncKernelClient):
    """A kernel client that tells a started kernel is ready without waiting out jupyter_client's 0.2 s.

    jupyter_client sends ``kernel_info`` until it is answered, then waits up to 0.2 s for any message
    on the kernel's output channel (proof that it is connected), and starts over when none comes: a
    kernel that answers before the output channel has joined costs every notebook 0.2 s of nothing.
    Here the same two proofs are asked for, the output channel's in short waits, with a new
    ``kernel_info`` (whose status messages it will carry) after each.
    """

    async def _async_wait_for_ready(self, timeout: float | None = None) -> None:
        import asyncio
        from queue import Empty

        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        answered = False
        while True:
            if not answered:
                self.kernel_info()
                try:
                    msg = await self.shell_channel.get_msg(timeout=1)
                except Empty:
                    msg = None
                if msg is not None and msg["msg_type"] == "kernel_info_reply":
                    answered = True
                    self._handle_kernel_info_reply(msg)
            if answered:
                try:
                    await self.iopub_channel.get_msg(timeout=0.02)
                    break
                except Empty:
                    self.kernel_info()  # its busy/idle status comes on the output channel once joined
                    with contextlib.suppress(Empty):
                        await self.shell_channel.get_msg(timeout=0.5)
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")
            await asyncio.sleep(0)

    wait_for_ready = _async_wait_for_ready


class JailedKernelManager(AsyncKernelManager):
    """A kernel manager whose kernel is forked from the zygote, or started behind the jail's command."""

    jail_prefix: list[str] = []
    zygote: str | None = None
    jail_spec: str | None = None
    pid_file: str | None = None
    """Where the zygote's stand-in writes the forked kernel's process id."""
    relay_base: str | None = None
    """Where the client's sockets are, when it talks to the kernel through a :class:`Relay`."""
    relay_limits: tuple[int, int, int] = (0, 0, 0)
    relay: Relay | None = None
    socket_options: dict[int, int] = {}
    """ZeroMQ options of every socket of the kernel's connection, the manager's own and its clients'
    (:func:`connection_options`)."""

    def client(self, **kwargs: Any) -> Any:
        """A client of the kernel, through a :class:`Relay` when ``relay_base`` is set: ZeroMQ would
        hold a whole multipart message of the kernel, of any size, before the runner could read it."""
        if self.relay_base and self.transport == "ipc":
            info = self.get_connection_info()
            ports = [info[f"{c}_port"] for c in ("shell", "iopub", "stdin", "control", "hb")]
            if self.relay is not None:
                self.relay.close()
            self.relay = Relay(self.ip, self.relay_base, ports, self.relay_limits, self.relay_over)
            kwargs["ip"] = self.relay_base
        client = super().client(**kwargs)
        # A client makes a ZeroMQ context of its own, not the manager's: the options go on it too,
        # before its first socket.
        for option, value in self.socket_options.items():
            client.context.setsockopt(option, value)
        return client

    def relay_over(self, sentence: str, size: bool) -> None:
        """What the relay calls when the kernel broke a bound: the notebook stops (:class:`LimitedClient`
        reads the sentence), and the kernel with it."""
        self.relay_stop = (sentence, size)
        process = kernel_process(self)
        if process is not None and process.poll() is None:
            process.kill()

    relay_stop: tuple[str, bool] | None = None

    def format_kernel_cmd(self, extra_arguments: list[str] | None = None) -> list[str]:
        command = super().format_kernel_cmd(extra_arguments)
        if self.zygote and "ipykernel_launcher" in command:
            kernel_args = command[command.index("ipykernel_launcher") + 1 :]
            # The stand-in needs only the standard library: without site (``-S``), its interpreter
            # starts in about half the time, and that is on every notebook's way to its first cell.
            return [
                "setpriv",
                "--pdeathsig",
                "KILL",
                sys.executable,
                "-I",
                "-S",
                STANDIN,
                "kernel",
                self.zygote,
                self.jail_spec or "-",
                *([self.pid_file] if self.pid_file else []),
                "--",
                *kernel_args,
            ]
        return [*self.jail_prefix, *command]

    async def _async_kill_kernel(self, restart: bool = False) -> None:
        """Kill the kernel and reap it at once: jupyter_client's own way polls for its end every 0.1 s,
        a tenth of a second per notebook that the runner, done with the kernel, has no use for."""
        process = kernel_process(self)
        if process is not None and process.poll() is None:
            process.kill()
            with contextlib.suppress(Exception):
                process.wait(timeout=5)
        await super()._async_kill_kernel(restart)


class LimitedClient(NotebookClient):
    """A notebook client that counts every message the kernel publishes against a byte budget.

    Outputs, comm and widget messages, status and everything else count alike; past the budget the
    client keeps nothing more and kills the kernel. No single message can cost the runner more than
    the budget in memory either: the sockets refuse larger ones before they are read
    (:func:`connection_options`), and the client notices (:meth:`refused_oversized`).
    """

    output_budget: int = 1 << 20
    output_used: int = 0
    output_exceeded: bool = False
    bad_message: str | None = None
    """Why a message of the learner's kernel could not be handled, when one could not."""

    async def _async_poll_output_msg(self, parent_msg_id: str, cell: Any, cell_index: int) -> None:
        """nbclient's loop, with every message counted, whatever its parent (nbclient drops those of
        another request unread)."""
        assert self.kc is not None
        while True:
            msg = await self.kc.iopub_channel.get_msg(timeout=None)
            if not self._counted(msg):
                return
            if msg["parent_header"].get("msg_id") == parent_msg_id:
                try:
                    self.process_message(msg, cell, cell_index)
                except CellExecutionComplete:
                    return

    def _counted(self, msg: dict) -> bool:
        """Count ``msg`` against the budget; False (and the kernel stopped) once past it."""
        content = msg.get("content", {})
        self.output_used += len(json.dumps(content, default=str)) + sum(
            len(b) for b in msg.get("buffers", [])
        )
        if self.output_used > self.output_budget:
            self._stop_kernel()
            self.output_exceeded = True
            return False
        return True

    def process_message(self, msg: dict, cell: Any, cell_index: int) -> Any:
        if self.output_exceeded:
            return None
        try:
            return super().process_message(msg, cell, cell_index)
        except CellExecutionComplete:
            raise
        except Exception as exc:  # noqa: BLE001 - a malformed message is the learner's outcome, not ours
            self.bad_message = f"{msg.get('msg_type', '?')}: {type(exc).__name__}"[:200]
            self._stop_kernel()
            raise CellExecutionComplete() from None

    def _stop_kernel(self) -> None:
        process = kernel_process(self.km)
        if process is not None and process.poll() is None:
            process.kill()

    def refused_oversized(self) -> bool:
        """True when the sockets dropped the kernel for a message over the budget."""
        from zmq.utils.monitor import recv_monitor_message

        monitor = getattr(self, "_monitor", None)
        while monitor is not None and monitor.poll(0):
            if recv_monitor_message(monitor)["event"] == zmq.EVENT_DISCONNECTED:
                return True
        return False

    def stop_watching(self) -> None:
        """Close the watch: the kernel's sockets cannot be closed while a monitor is open on them."""
        monitor = getattr(self, "_monitor", None)
        if monitor is not None:
            with contextlib.suppress(zmq.ZMQError):
                self.kc.iopub_channel.socket.disable_monitor()
            monitor.close(linger=0)
            self._monitor = None

    def watch_disconnects(self) -> None:
        """Watch the kernel's output socket for being dropped (what an oversized message causes)."""
        socket = self.kc.iopub_channel.socket
        address = f"inproc://iopub-monitor-{id(socket)}"
        socket.monitor(address, zmq.EVENT_DISCONNECTED)
        # a plain (not asyncio) socket on the same context, so that polling it is immediate
        self._monitor = zmq.Context.shadow(socket.context.underlying).socket(zmq.PAIR)
        self._monitor.connect(address)


def connection_options(km: JailedKernelManager, limit: int) -> None:
    """Set the options of every socket of the kernel's connection: refuse a message part larger than
    ``limit`` bytes before any of it is read into memory (ZeroMQ drops the sending peer instead), and
    try again every :data:`RECONNECT_MS` to reach a kernel that is not listening yet.

    The client connects as soon as the kernel's process is started, before the kernel has bound its
    sockets, so its first try always fails: at ZeroMQ's default interval (100 ms) every notebook waited
    0.1 to 0.2 s more for a kernel that had been listening for most of that time. A refused try costs
    a failed ``connect`` on a local socket.
    """
    km.socket_options = {zmq.MAXMSGSIZE: limit, zmq.RECONNECT_IVL: RECONNECT_MS}
    for option, value in km.socket_options.items():
        km.context.setsockopt(option, value)


#: How often a client's socket tries again to reach a kernel that is not listening yet, in milliseconds.
RECONNECT_MS = 5


#: A message's envelope (header, signature, metadata) beyond its content, allowed on top of the budget.
MESSAGE_OVERHEAD = 64 * 1024
#: The most parts one message of a kernel may have (a Jupyter message has 7, and its binary buffers).
MESSAGE_FRAMES = 64
#: Everything a kernel sends (every message on every channel, envelopes included) may add up to this
#: many times the output budget, and :data:`STREAM_EXTRA` more.
STREAM_FACTOR, STREAM_EXTRA = 4, 16 * 1024**2


def relay_limits(output_bytes: int) -> tuple[int, int, int]:
    """The relay's bounds for a kernel: one message's bytes and parts, and all its messages' bytes."""
    return output_bytes + MESSAGE_OVERHEAD, MESSAGE_FRAMES, STREAM_FACTOR * output_bytes + STREAM_EXTRA


def kernel_process(km: AsyncKernelManager) -> Any:
    """The kernel's process (a Popen), or None before it started."""
    return getattr(getattr(km, "provisioner", None), "process", None)
