"""One connection's bytes: Kafka's ``KafkaChannel``, ``NetworkSend`` and ``NetworkReceive``.

Used only by ``KSelector`` and the thread that drives it (the producer's Sender thread);
the embedded broker has its own (``kclient.broker.selector``). Not thread-safe.

A ``NetworkSend`` is the list of buffers the encoder produced, written with gathered
writes (``socket.sendmsg``) so record batches are never concatenated; a partial write
resumes from a memoryview of the first unwritten buffer.

Reads go into a 64 KiB chunk buffer, one ``recv_into`` per readable event, and every
complete size-prefixed frame in it becomes a ``NetworkReceive`` whose ``payload`` (the
frame without its size) is one buffer of exactly the frame's size. A frame larger than
the chunk gets its own buffer, read straight into, which grows (doubling, up to the
frame's size) as bytes actually arrive: a size prefix alone, however large, allocates
nothing (a broker announcing 100 MB and sending 10 costs 10). A size above
``max_receive_bytes`` (``receive.message.max.bytes``) raises ``ProtocolDecodeError``
naming that setting.

With TLS (``security.protocol=SSL``) the channel's socket becomes an ``ssl.SSLSocket``
once TCP is connected; it is ``connected`` only after the handshake. Sends are then
regrouped into chunks of up to 64 KiB (TLS encrypts a copy anyway; ``sendmsg`` does not
exist for TLS sockets), and a read drains what the TLS layer already decrypted, which
``select`` cannot see. See ``kclient.tls``.
"""

from __future__ import annotations

import errno
import os
import socket
import ssl
import struct
from collections.abc import Sequence

from kclient import tls
from kclient.errors import ProtocolDecodeError

Buffer = bytes | bytearray | memoryview

_IOV_MAX = 1024
_READ_CHUNK_BYTES = 64 * 1024
#: The first buffer of a frame larger than the chunk (then doubled as bytes arrive).
_FIRST_FRAME_BUFFER_BYTES = 256 * 1024
_SIZE = struct.Struct(">i")
CONNECT_IN_PROGRESS = frozenset(
    {errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN, errno.EALREADY}
)


def describe_os_error(exc: BaseException) -> str:
    """A short, lower-case reason for an OS error: 'connection refused', 'no such host'."""
    if isinstance(exc, ssl.SSLError):
        return tls.describe_tls_error(exc)
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

    __slots__ = (
        "_buffers",
        "_index",
        "_tls_chunked",
        "awaits_response",
        "destination",
        "remaining",
        "size",
    )

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
        self._tls_chunked = False
        self.size = size
        self.remaining = size

    @property
    def completed(self) -> bool:
        return self.remaining == 0

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
        self._advance(written)
        return written

    def _advance(self, written: int) -> None:
        buffers = self._buffers
        index = self._index
        self.remaining -= written
        if self.remaining == 0:
            self._index = len(buffers)
            return
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

    def remaining_bytes(self) -> bytes:
        """The bytes not written yet, joined (for tests and debugging; copies)."""
        return b"".join(self._buffers[self._index :])

    def write_to_tls(self, sock: ssl.SSLSocket) -> int:
        """``write_to`` for a TLS socket: chunk by chunk, retrying a chunk the socket
        refused with the very same bytes (as OpenSSL requires)."""
        if self.remaining == 0:
            return 0
        if not self._tls_chunked:
            self._buffers = tls.tls_chunks(self._buffers[self._index :])
            self._index = 0
            self._tls_chunked = True
        total = 0
        while self.remaining:
            written = tls.send_some(sock, self._buffers[self._index])
            if not written:
                break
            self._advance(written)
            total += written
        return total

    def __repr__(self) -> str:
        return f"NetworkSend(destination={self.destination}, size={self.size})"


class NetworkReceive:
    """One size-prefixed frame from a node. ``payload`` is the body without the size.

    While a large frame is read, ``payload`` holds the ``filled`` bytes so far and grows
    toward ``size`` as more arrive; once ``complete`` it is exactly ``size`` bytes.
    """

    __slots__ = ("filled", "payload", "size", "source")

    def __init__(
        self,
        source: int,
        payload: bytearray,
        filled: int | None = None,
        size: int | None = None,
    ) -> None:
        self.source = source
        self.payload = payload
        self.size = len(payload) if size is None else size
        self.filled = self.size if filled is None else filled

    @property
    def complete(self) -> bool:
        return self.filled == self.size

    def read_from(self, sock: socket.socket) -> int | None:
        """Read more of the body straight into ``payload`` (grown first if it is full);
        0 means the peer closed, None (TLS only) that no whole TLS record has arrived yet."""
        payload = self.payload
        filled = self.filled
        room = len(payload) - filled
        if room == 0:  # double the buffer, up to the frame's size
            room = min(max(len(payload), _FIRST_FRAME_BUFFER_BYTES), self.size - filled)
            payload.extend(bytes(room))
        view = memoryview(payload)
        try:
            target = view[filled:]
            if isinstance(sock, ssl.SSLSocket):
                n = tls.recv_into(sock, target)
            else:
                n = sock.recv_into(target)
            target.release()
        finally:
            view.release()  # no export left: the buffer may grow again
        if n:
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
        "tls_context",
        "tls_hostname",
        "tls_wait",
    )

    def __init__(
        self,
        node_id: int,
        sock: socket.socket,
        address: str,
        max_receive_bytes: int,
        *,
        tls_context: ssl.SSLContext | None = None,
        tls_hostname: str | None = None,
    ) -> None:
        self.node_id = node_id
        self.tls_context = tls_context
        """Set for TLS channels; the socket is wrapped once TCP is connected."""
        self.tls_hostname = tls_hostname
        self.tls_wait = 0
        """While the TLS handshake runs: the ``selectors`` event it waits for."""
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
        """Advance a non-blocking connect (and then the TLS handshake); raises the OS or
        TLS error of a failed one. ``connected`` once ready for Kafka requests."""
        if self.tls_wait:
            self.continue_handshake()
            return
        code = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code in CONNECT_IN_PROGRESS:
            return
        if code != 0:
            raise OSError(code, os.strerror(code))
        self.tcp_connected()

    def tcp_connected(self) -> None:
        """TCP is up: ready, or (TLS) start the handshake."""
        if self.tls_context is None:
            self.connected = True
            return
        self.sock = self.tls_context.wrap_socket(
            self.sock, server_hostname=self.tls_hostname, do_handshake_on_connect=False
        )
        self.continue_handshake()

    def continue_handshake(self) -> None:
        self.tls_wait = tls.handshake_step(self.sock)  # type: ignore[arg-type]
        if not self.tls_wait:
            self.connected = True

    def write(self) -> NetworkSend | None:
        """Write the pending send; return it once completely written."""
        send = self.send
        if send is None:
            return None
        if self.tls_context is None:
            send.write_to(self.sock)
        else:
            send.write_to_tls(self.sock)  # type: ignore[arg-type]
        if send.completed:
            self.send = None
            return send
        return None

    def read(self, completed: list[NetworkReceive]) -> None:
        """One read from the socket (with TLS: until the TLS layer holds nothing more);
        appends every frame it completes to ``completed``."""
        if self.tls_context is None:
            self._read_once(completed)
            return
        self._read_tls(completed)

    def _read_tls(self, completed: list[NetworkReceive]) -> None:
        sock = self.sock
        while self._read_once(completed) and tls.has_pending(sock):
            pass

    def _read_once(self, completed: list[NetworkReceive]) -> bool:
        """One ``recv_into``; False if nothing was there (TLS: no whole record yet)."""
        big = self.receive
        if big is not None:  # a frame too large for the chunk buffer is read into place
            got = big.read_from(self.sock)
            if got == 0:
                raise PeerClosedError
            if got is None:
                return False
            if big.complete:
                self.receive = None
                completed.append(big)
            return True
        view = self._chunk_view[self._chunk_len :]
        if self.tls_context is None:
            n: int | None = self.sock.recv_into(view)
        else:
            n = tls.recv_into(self.sock, view)  # type: ignore[arg-type]
            if n is None:
                return False
        if n == 0:
            raise PeerClosedError
        assert n is not None
        end = self._chunk_len + n
        pos = 0
        chunk = self._chunk
        while end - pos >= 4:
            size = _SIZE.unpack_from(chunk, pos)[0]
            if size < 0 or size > self.max_receive_bytes:
                raise ProtocolDecodeError(
                    f"node {self.node_id} at {self.address} announced a response of {size} "
                    f"bytes, more than 'receive.message.max.bytes' ({self.max_receive_bytes}); "
                    f"closing the connection. Is {self.address} a Kafka listener (it may speak "
                    "another protocol, or TLS)? If the broker is right, raise "
                    "'receive.message.max.bytes'"
                )
            available = end - pos - 4
            if available >= size:
                completed.append(NetworkReceive(self.node_id, chunk[pos + 4 : pos + 4 + size]))
                pos += 4 + size
            elif size + 4 > len(chunk):
                # only what arrived, not the announced size: the buffer grows as bytes come
                payload = bytearray(chunk[pos + 4 : end])
                self.receive = NetworkReceive(self.node_id, payload, available, size)
                pos = end
                break
            else:
                break
        if pos:
            chunk[: end - pos] = chunk[pos:end]
        self._chunk_len = end - pos
        return True
