"""One connection's bytes: Kafka's ``KafkaChannel``, ``NetworkSend`` and ``NetworkReceive``.

Used only by ``KSelector`` (and the owning thread that drives it: the producer's Sender
thread, or a broker Processor thread). Not thread-safe.

A ``NetworkSend`` is the list of buffers the encoder produced, written with gathered
writes (``socket.sendmsg``) so record batches are never concatenated; a partial write
resumes from a memoryview of the first unwritten buffer.

Reads go into a 64 KiB chunk buffer, one ``recv_into`` per readable event, and every
complete size-prefixed frame in it becomes a ``NetworkReceive`` whose ``payload`` (the
frame without its size) is one buffer of exactly the frame's size. A frame larger than
the chunk gets its own buffer of its size and is read straight into it. A size above
``max_receive_bytes`` raises ``ProtocolDecodeError`` before anything is allocated.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Sequence

from kclient.errors import ProtocolDecodeError

Buffer = bytes | bytearray | memoryview

_IOV_MAX = 1024
_READ_CHUNK_BYTES = 64 * 1024
_SIZE = struct.Struct(">i")
CONNECT_IN_PROGRESS = frozenset(
    {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN, errno.EALREADY}
)


def describe_os_error(exc: BaseException) -> str:
    """A short, lower-case reason for an OS error: 'connection refused', 'no such host'."""
    if isinstance(exc, socket.gaierror):
        if exc.errno in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", None)):
            return "no such host"
        return f"host name lookup failed: {exc.strerror or exc}"
    if isinstance(exc, OSError) and exc.errno is not None:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class NetworkSend:
    """A request (or any frame) to write to one node: a list of buffers, written in order."""

    __slots__ = ("_buffers", "_index", "awaits_response", "destination", "remaining", "size")

    def __init__(
        self, destination: int, buffers: Sequence[Buffer], *, awaits_response: bool = True
    ) -> None:
        self.destination = destination
        self.awaits_response = awaits_response
        """False when writing it completes something (acks=0): poll then returns at once."""
        parts: list[Buffer] = []
        size = 0
        for buffer in buffers:
            if buffer.__class__ is not bytes and buffer.__class__ is not bytearray:
                view = memoryview(buffer)
                buffer = view if view.format == "B" and view.ndim == 1 else view.cast("B")
            n = len(buffer)
            if n:
                parts.append(buffer)
                size += n
        self._buffers = parts
        self._index = 0
        self.size = size
        self.remaining = size

    @property
    def completed(self) -> bool:
        return self.remaining == 0

    def remaining_bytes(self) -> bytes:
        """The bytes not written yet, joined (for tests and debugging; copies)."""
        return b"".join(self._buffers[self._index :])

    def write_to(self, sock: socket.socket) -> int:
        """Write as much as the socket takes; returns the bytes written (0 if it would block)."""
        if self.remaining == 0:
            return 0
        buffers = self._buffers
        index = self._index
        try:
            if len(buffers) - index == 1:
                written = sock.send(buffers[index])
            else:
                written = sock.sendmsg(buffers[index : index + _IOV_MAX])
        except (BlockingIOError, InterruptedError):
            return 0
        self.remaining -= written
        if self.remaining == 0:
            self._index = len(buffers)
            return written
        left = written
        while left:
            head = buffers[index]
            if left >= len(head):
                left -= len(head)
                index += 1
            else:
                buffers[index] = memoryview(head)[left:]  # no copy of the rest
                left = 0
        self._index = index
        return written

    def __repr__(self) -> str:
        return f"NetworkSend(destination={self.destination}, size={self.size})"


class NetworkReceive:
    """One size-prefixed frame from a node. ``payload`` is the body without the size."""

    __slots__ = ("_view", "filled", "payload", "size", "source")

    def __init__(self, source: int, payload: bytearray, filled: int | None = None) -> None:
        self.source = source
        self.payload = payload
        self.size = len(payload)
        self.filled = self.size if filled is None else filled
        self._view = memoryview(payload)

    @property
    def complete(self) -> bool:
        return self.filled == self.size

    def read_from(self, sock: socket.socket) -> int:
        """Read more of the body straight into ``payload``; 0 means the peer closed."""
        n = sock.recv_into(self._view[self.filled :])
        self.filled += n
        return n

    def __repr__(self) -> str:
        return f"NetworkReceive(source={self.source}, size={self.size}, filled={self.filled})"


class PeerClosedError(Exception):
    """The peer closed its end of the connection (a read returned 0 bytes)."""


class KafkaChannel:
    """One connection to one node: the socket, its pending send and its partial receive."""

    __slots__ = (
        "_chunk",
        "_chunk_len",
        "_chunk_view",
        "address",
        "connected",
        "events",
        "max_receive_bytes",
        "muted",
        "node_id",
        "receive",
        "send",
        "sock",
    )

    def __init__(
        self, node_id: int, sock: socket.socket, address: str, max_receive_bytes: int
    ) -> None:
        self.node_id = node_id
        self.sock = sock
        self.address = address
        self.max_receive_bytes = max_receive_bytes
        self.connected = False
        self.muted = False
        self.send: NetworkSend | None = None
        self.receive: NetworkReceive | None = None
        self.events = 0
        self._chunk = bytearray(_READ_CHUNK_BYTES)
        self._chunk_view = memoryview(self._chunk)
        self._chunk_len = 0

    def finish_connect(self) -> None:
        """Raise the OS error of a failed non-blocking connect, if any."""
        code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code in CONNECT_IN_PROGRESS:
            return
        if code != 0:
            raise OSError(code, os.strerror(code))
        self.connected = True

    def write(self) -> NetworkSend | None:
        """Write the pending send; return it once completely written."""
        send = self.send
        if send is None:
            return None
        send.write_to(self.sock)
        if send.completed:
            self.send = None
            return send
        return None

    def read(self, completed: list[NetworkReceive]) -> None:
        """One read from the socket; appends every frame it completes to ``completed``."""
        big = self.receive
        if big is not None:  # a frame too large for the chunk buffer is read into place
            if big.read_from(self.sock) == 0:
                raise PeerClosedError
            if big.complete:
                self.receive = None
                completed.append(big)
            return
        n = self.sock.recv_into(self._chunk_view[self._chunk_len :])
        if n == 0:
            raise PeerClosedError
        end = self._chunk_len + n
        pos = 0
        chunk = self._chunk
        while end - pos >= 4:
            size = _SIZE.unpack_from(chunk, pos)[0]
            if size < 0 or size > self.max_receive_bytes:
                raise ProtocolDecodeError(
                    f"node {self.node_id} at {self.address} sent a frame of {size} bytes; the "
                    f"limit is {self.max_receive_bytes} bytes. Is {self.address} a Kafka "
                    "listener? (it may speak another protocol, or TLS)"
                )
            available = end - pos - 4
            if available >= size:
                completed.append(NetworkReceive(self.node_id, chunk[pos + 4 : pos + 4 + size]))
                pos += 4 + size
            elif size + 4 > len(chunk):
                payload = bytearray(size)
                payload[:available] = chunk[pos + 4 : end]
                self.receive = NetworkReceive(self.node_id, payload, filled=available)
                pos = end
                break
            else:
                break
        if pos:
            chunk[: end - pos] = chunk[pos:end]
        self._chunk_len = end - pos
