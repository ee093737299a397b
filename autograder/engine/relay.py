"""A relay between the runner's client and the kernel's sockets that bounds a message before any of it
is held.

ZeroMQ delivers a multipart message whole: its I/O thread keeps every frame of a message in the
receiving process until the last one has arrived, and ``ZMQ_MAXMSGSIZE`` bounds each frame, not the
message. A kernel holding one 2 MB buffer can send messages of thousands of frames that all point
at it, and the runner then holds gigabytes before it can read the first frame. So the runner's
client does not connect to the kernel: it connects to this relay, which passes the bytes on as they
come and reads the frame headers of ZeroMQ's wire protocol (ZMTP 3) in the kernel's direction. It
stops the kernel as soon as one message's frames add up to more than ``message_bytes``, a message
has more than ``message_frames`` frames, or everything the kernel sent adds up to more than
``stream_bytes``: what the runner holds of a kernel's messages is bounded by those numbers, whatever
the kernel sends, and the relay itself holds one read (64 KiB) per connection.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import threading
from collections.abc import Callable

#: What the relay reads at once from a connection.
CHUNK = 64 * 1024
#: A ZMTP 3 greeting's length; its first byte, and the lowest major version the relay understands.
GREETING, SIGNATURE, MAJOR = 64, 0xFF, 3
MORE, LONG, COMMAND = 0x01, 0x02, 0x04


class FrameMeter:
    """Reads a ZMTP 3 byte stream's frame headers as the bytes pass, and says when it goes over."""

    def __init__(self, message_bytes: int, message_frames: int) -> None:
        self.message_bytes, self.message_frames = message_bytes, message_frames
        self.greeting = b""
        self.header = b""
        self.body_left = 0
        self.more = self.command = False
        self.message = self.frames = 0

    def feed(self, data: bytes) -> str | None:
        """Account for ``data``, the next bytes of the stream; a sentence when it broke a bound."""
        view = memoryview(data)
        while view:
            if len(self.greeting) < GREETING:
                take = GREETING - len(self.greeting)
                self.greeting += bytes(view[:take])
                view = view[take:]
                if self._bad_greeting():
                    return "a connection that does not speak ZeroMQ's protocol (ZMTP 3)"
            elif self.body_left:
                take = min(self.body_left, len(view))
                self.body_left -= take
                view = view[take:]
            else:
                self.header += bytes(view[:1])
                view = view[1:]
                over = self._header()
                if over:
                    return over
        return None

    def _bad_greeting(self) -> bool:
        """The signature (0xFF, padding, 0x7F) and a major version of at least 3, checked as they come."""
        g = self.greeting
        return g[0] != SIGNATURE or (len(g) > 9 and not g[9] & 1) or (len(g) > 10 and g[10] < MAJOR)

    def _header(self) -> str | None:
        flags = self.header[0]
        if len(self.header) < (9 if flags & LONG else 2):
            return None
        size = int.from_bytes(self.header[1:], "big")
        self.header = b""
        self.body_left = size
        if flags & COMMAND:
            return "a protocol command larger than a message may be" if size > self.message_bytes else None
        self.message += size
        self.frames += 1
        if self.frames > self.message_frames:
            return f"a message of more than {self.message_frames} parts"
        if self.message > self.message_bytes:
            return f"a message larger than {self.message_bytes} bytes"
        if not flags & MORE:
            self.message = self.frames = 0
        return None


class Relay:
    """Relays the channels ``ports`` of a kernel bound at ``kernel_base-PORT`` to ``client_base-PORT``.

    ``on_over(sentence, size)`` is called once, from the relay's thread, when the kernel breaks a
    bound (``size``: a bound in bytes, not of form); by then every connection is closed, and the
    relay accepts none. Writes never block the relay: a side that cannot take more is written to when
    it can, and the other side is not read meanwhile, so at most one read is held per direction.
    """

    def __init__(
        self,
        kernel_base: str,
        client_base: str,
        ports: list[int],
        limits: tuple[int, int, int],
        on_over: Callable[[str, bool], None],
    ) -> None:
        self.kernel_base, self.client_base = kernel_base, client_base
        self.message_bytes, self.message_frames, self.stream_bytes = limits
        self.on_over = on_over
        self.received = 0
        self.over: str | None = None
        self._selector = selectors.DefaultSelector()
        self._listeners: dict[socket.socket, int] = {}
        self._peers: dict[socket.socket, tuple[socket.socket, FrameMeter | None]] = {}
        self._pending: dict[socket.socket, memoryview] = {}
        self._paused: set[socket.socket] = set()
        self._stopped = threading.Event()
        # close() wakes the loop through this pair at once, rather than after its select's timeout: a
        # runner closes the relay after every notebook, and waited up to 0.2 s for it.
        self._wake, self._woken = socket.socketpair()
        self._selector.register(self._woken, selectors.EVENT_READ)
        self.paths = [f"{client_base}-{port}" for port in ports]
        for port, path in zip(ports, self.paths, strict=True):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(path)
            os.chmod(path, 0o600)
            listener.listen(8)
            self._listeners[listener] = port
            self._selector.register(listener, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._loop, name="kernel-relay", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stopped.is_set() and self.over is None:
                for key, mask in self._selector.select(timeout=0.2):
                    sock = key.fileobj
                    if sock is self._woken:
                        break
                    if sock in self._listeners:
                        self._accept(sock)
                        continue
                    if mask & selectors.EVENT_WRITE and sock in self._peers:
                        self._flush(sock)
                    if mask & selectors.EVENT_READ and sock in self._peers:
                        self._pump(sock)
                    if self.over is not None:
                        break
        finally:
            self._teardown()
        if self.over is not None:
            self.on_over(self.over, "bytes" in self.over)

    def _accept(self, listener: socket.socket) -> None:
        client, _ = listener.accept()
        kernel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            kernel.connect(f"{self.kernel_base}-{self._listeners[listener]}")
        except OSError:  # not bound yet: the client's ZeroMQ connects again shortly
            client.close()
            kernel.close()
            return
        self._peers[client] = (kernel, None)
        self._peers[kernel] = (client, FrameMeter(self.message_bytes, self.message_frames))
        for sock in (client, kernel):
            sock.setblocking(False)
            self._want(sock)

    def _want(self, sock: socket.socket) -> None:
        """Register what the relay waits for on ``sock``: reading unless paused, writing if pending."""
        events = (0 if sock in self._paused else selectors.EVENT_READ) | (
            selectors.EVENT_WRITE if sock in self._pending else 0
        )
        registered = sock in self._selector.get_map()
        if events and registered:
            self._selector.modify(sock, events)
        elif events:
            self._selector.register(sock, events)
        elif registered:
            self._selector.unregister(sock)

    def _pump(self, source: socket.socket) -> None:
        target, meter = self._peers[source]
        try:
            data = source.recv(CHUNK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._close(source)
            return
        if meter is not None:
            self.received += len(data)
            self.over = meter.feed(data)
            if self.over is None and self.received > self.stream_bytes:
                self.over = f"more than {self.stream_bytes} bytes of messages in all"
            if self.over is not None:
                return
        self._pending[target] = memoryview(data)
        self._paused.add(source)
        self._flush(target)
        if source in self._peers:
            self._want(source)

    def _flush(self, target: socket.socket) -> None:
        data = self._pending[target]
        try:
            sent = target.send(data)
        except BlockingIOError:
            sent = 0
        except OSError:
            self._close(target)
            return
        if sent < len(data):
            self._pending[target] = data[sent:]
        else:
            del self._pending[target]
            source, _ = self._peers[target]
            self._paused.discard(source)
            self._want(source)
        self._want(target)

    def _close(self, sock: socket.socket) -> None:
        peer, _ = self._peers.get(sock, (None, None))
        for s in (sock, peer):
            if s is not None and s in self._peers:
                del self._peers[s]
                self._pending.pop(s, None)
                self._paused.discard(s)
                with contextlib.suppress(KeyError, ValueError):
                    self._selector.unregister(s)
                s.close()

    def _teardown(self) -> None:
        for sock in [*self._peers, *self._listeners]:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            sock.close()
        self._peers.clear()
        self._listeners.clear()
        self._selector.close()
        self._woken.close()
        for path in self.paths:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def close(self) -> None:
        """Close every connection and listener, and wait for the relay's thread to end."""
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._wake.send(b"x")
        self._thread.join(timeout=5)
        self._wake.close()
