"""One size-prefixed request read with bounded memory: Kafka's ``NetworkReceive``, ``MemoryPool``.

A request is a 4-byte signed size, then exactly that many bytes; nothing past its end is
read. A size outside 0..``socket.request.max.bytes`` raises :class:`InvalidReceiveError`
(the connection is closed, as Kafka does). The announced size is never allocated up
front: the body's buffer starts at ``FIRST_CHUNK_BYTES`` (or the size, when smaller) and
doubles as bytes actually arrive, so a size prefix followed by silence costs 4 KiB.

Growth beyond the first chunk is drawn from the broker's :class:`MemoryPool`
(``queued.max.request.bytes``): the bytes of every request being read or waiting for its
answer. When the pool is used up a receive stops reading (the Processor mutes the
connection) until other requests are answered; small requests (up to the first chunk)
are always read, so Metadata, ApiVersions and Fetch keep flowing. Like Kafka's
``SimpleMemoryPool`` the pool is not strict (a grant is made while anything is left),
and one receive at a time may go on past an empty pool, so that requests larger than
what is left still complete (it keeps that right until its request is answered): the
bytes held stay below ``queued.max.request.bytes`` + one grant + one request (at most
``socket.request.max.bytes``) + 4 KiB per connection.

A receive belongs to the Processor thread that reads it; the pool is shared by the
Processors of a broker (a lock around its counters).
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import cast

from kclient.tls import recv_into

#: Bytes of a request body every connection may hold without drawing from the pool.
FIRST_CHUNK_BYTES = 4096
_ZEROS = memoryview(bytes(1 << 20))  # appended to grow a buffer without a temporary


class MemoryPool:
    """The request bytes a broker holds (``queued.max.request.bytes``; -1: no bound)."""

    def __init__(self, size_bytes: int) -> None:
        self.size_bytes = size_bytes
        self.used_bytes = 0
        self._overdraft: object | None = None
        self._lock = threading.Lock()

    @property
    def bounded(self) -> bool:
        return self.size_bytes >= 0

    @property
    def out_of_memory(self) -> bool:
        """Nothing left (other than for the receive allowed past the bound)."""
        return self.bounded and self.used_bytes >= self.size_bytes

    def reserve(self, n: int) -> None:
        """Count ``n`` bytes unconditionally (the first chunk of a request)."""
        with self._lock:
            self.used_bytes += n

    def try_reserve(self, n: int, owner: object) -> bool:
        """Grant ``n`` bytes to ``owner`` if anything is left, or if ``owner`` is (or may
        become) the one receive allowed past an empty pool."""
        with self._lock:
            if self.size_bytes >= 0 and self.used_bytes >= self.size_bytes:
                if self._overdraft is None:
                    self._overdraft = owner
                elif self._overdraft is not owner:
                    return False
            self.used_bytes += n
            return True

    def release(self, n: int, owner: object = None) -> None:
        """Give back ``n`` bytes (and the overdraft, if ``owner`` held it)."""
        with self._lock:
            self.used_bytes -= n
            if owner is not None and self._overdraft is owner:
                self._overdraft = None


class InvalidReceiveError(Exception):
    """A size prefix is negative or larger than ``socket.request.max.bytes``."""

    def __init__(self, message: str, size: int = -1) -> None:
        super().__init__(message)
        self.size = size


class NetworkReceive:
    """One size-prefixed frame being read (Kafka's ``NetworkReceive``).

    ``reserved`` is what it holds of the ``pool``, given back by ``owner`` (its
    ServerChannel; the receive itself by default) once the request is answered or the
    connection closed, with the overdraft if it had it; ``waiting_for_memory`` is set
    when it stopped because the pool is used up.
    """

    __slots__ = (
        "_read",
        "_size",
        "_size_buf",
        "max_size",
        "owner",
        "payload",
        "pool",
        "reserved",
        "waiting_for_memory",
    )

    def __init__(self, max_size: int, pool: MemoryPool | None = None, owner: object = None) -> None:
        self.max_size = max_size
        self.pool = pool
        self.owner = self if owner is None else owner
        self._size_buf = bytearray(4)
        self._size = -1
        self._read = 0
        self.payload = bytearray()
        self.reserved = 0
        self.waiting_for_memory = False

    def _recv(self, sock: socket.socket, view: memoryview) -> int | None:
        """Bytes read into ``view``; None when nothing is there; 0 when the peer closed."""
        try:
            return sock.recv_into(view)
        except BlockingIOError:
            return None

    def _recv_at(self, sock: socket.socket, buffer: bytearray) -> int | None:
        """Read into ``buffer`` from ``_read`` on, holding no view of it afterwards (so
        that it may grow)."""
        view = memoryview(buffer)[self._read :]
        try:
            return self._recv(sock, view)
        finally:
            view.release()

    def read_from(self, sock: socket.socket) -> tuple[bool, int]:
        """Read what is available: (complete, bytes read). Raises EOFError when the peer
        closed, InvalidReceiveError for a bad size, OSError for socket errors. Returns
        early, incomplete, with ``waiting_for_memory`` set when the pool is used up."""
        total = 0
        self.waiting_for_memory = False
        while True:
            if self._size < 0:
                n = self._recv_at(sock, self._size_buf)
                if n is None:
                    return False, total
                if n == 0:
                    raise EOFError("connection closed by peer")
                total += n
                self._read += n
                if self._read == 4 and self._begin_payload() == 0:
                    return True, total
                continue
            if self._read == len(self.payload) and not self._grow():
                self.waiting_for_memory = True
                return False, total
            n = self._recv_at(sock, self.payload)
            if n is None:
                return False, total
            if n == 0:
                raise EOFError("connection closed by peer in the middle of a request")
            total += n
            self._read += n
            if self._read == self._size:
                return True, total

    def _begin_payload(self) -> int:
        """The 4-byte size is in: check it and make room for the first chunk; returns it."""
        size = int.from_bytes(self._size_buf, "big", signed=True)
        if size < 0 or size > self.max_size:
            raise InvalidReceiveError(
                f"invalid request size {size} (socket.request.max.bytes is {self.max_size})",
                size,
            )
        self._size = size
        self._read = 0
        first = min(size, FIRST_CHUNK_BYTES)
        if self.pool is not None:
            self.pool.reserve(first)
        self.reserved = first
        self.payload = bytearray(first)
        return size

    def _grow(self) -> bool:
        """Double the buffer (up to the size) if the pool grants it."""
        have = len(self.payload)
        step = min(self._size - have, max(have, FIRST_CHUNK_BYTES))
        if self.pool is not None and not self.pool.try_reserve(step, self.owner):
            return False
        self.reserved += step
        payload = self.payload
        while step:
            k = min(step, len(_ZEROS))
            payload += _ZEROS[:k]
            step -= k
        return True

    @property
    def started(self) -> bool:
        return self._size >= 0 or self._read > 0


class TlsNetworkReceive(NetworkReceive):
    """A frame read through TLS: ``recv_into`` yields None (not BlockingIOError) when no
    whole TLS record is there. Bytes past the frame stay buffered in the TLS object."""

    __slots__ = ()

    def _recv(self, sock: socket.socket, view: memoryview) -> int | None:
        return recv_into(cast(ssl.SSLSocket, sock), view)
