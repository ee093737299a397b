"""The runner's connection to a kernel: every socket of it, the client's as well as the manager's,
refuses an oversized message part and tries again quickly to reach a kernel that is not listening yet."""

from __future__ import annotations

from pathlib import Path

import zmq

from autograder.engine.kernel import RECONNECT_MS, JailedKernelManager, QuickReadyClient, bound_messages


def test_every_socket_of_the_connection_is_bounded_and_reconnects_quickly(tmp_path: Path) -> None:
    """jupyter_client's client makes a ZeroMQ context of its own: options set on the manager's alone
    left the client's sockets, the ones that read the kernel's messages, unbounded (and at ZeroMQ's
    100 ms between tries to connect)."""
    km = JailedKernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "kernel"))
    km.client_factory = QuickReadyClient
    bound_messages(km, 12345)
    km.write_connection_file()
    client = km.client()
    try:
        channels = [client.shell_channel, client.iopub_channel, client.stdin_channel, client.control_channel]
        sockets = [c.socket for c in channels] + [km.context.socket(zmq.DEALER)]
        for socket in sockets:
            assert socket.getsockopt(zmq.MAXMSGSIZE) == 12345
            assert socket.getsockopt(zmq.RECONNECT_IVL) == RECONNECT_MS
        sockets[-1].close(linger=0)
    finally:
        client.stop_channels()
        km.cleanup_connection_file()
