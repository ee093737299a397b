"""The runner's connection to a kernel: every socket of it, the client's as well as the manager's,
refuses an oversized message part and tries again quickly to reach a kernel that is not listening yet."""

from __future__ import annotations

from pathlib import Path

import zmq

from autograder.engine.kernel import RECONNECT_MS, JailedKernelManager, QuickReadyClient, connection_options


def test_every_socket_of_the_connection_is_bounded_and_reconnects_quickly(tmp_path: Path) -> None:
    """jupyter_client's client makes a ZeroMQ context of its own: options set on the manager's alone
    left the client's sockets, the ones that read the kernel's messages, unbounded (and at ZeroMQ's
    100 ms between tries to connect)."""
    km = JailedKernelManager(kernel_name="python3", transport="ipc", ip=str(tmp_path / "kernel"))
    km.client_factory = QuickReadyClient
    connection_options(km, 12345)
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


PROBE = """
import json, resource, sys
from autograder.engine.light import nbformat
nbformat = nbformat()
from autograder.engine.kernel import JailedKernelManager, LimitedClient, QuickReadyClient, connection_options

folder = sys.argv[1]
cell = nbformat.v4.new_code_cell(
    "from IPython.display import display\\n"
    "display({'text/plain': 'x' * (64 * 1024 * 1024)}, raw=True)"
)
nb = nbformat.v4.new_notebook(cells=[cell])
km = JailedKernelManager(kernel_name="python3", transport="ipc", ip=folder + "/kernel")
km.client_factory = QuickReadyClient
connection_options(km, 1 << 20)
client = LimitedClient(nb, km=km, timeout=60, allow_errors=True, kernel_name="python3", iopub_timeout=2)
client.output_budget = 1 << 20
with client.setup_kernel(cwd=folder):
    client.watch_disconnects()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    try:
        client.execute_cell(cell, 0)
    except Exception:
        pass
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    refused = client.refused_oversized()
    client.stop_watching()
print(json.dumps({"refused": refused, "counted": client.output_used, "grown_mib": grown / 1024}))
"""


def test_an_unjailed_kernels_oversized_message_part_is_dropped_unread(tmp_path: Path) -> None:
    """An unjailed kernel talks to the runner without the relay: a 64 MiB part, over a 1 MiB bound, is
    refused by the client's own socket before any of it is read (the connection dropped), rather than
    held whole by the runner and only then counted against the budget."""
    import json
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, timeout=120, check=True
    )
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["refused"] is True, seen
    assert seen["counted"] < 1 << 20, seen
    assert seen["grown_mib"] < 32, seen
