"""A request's buffer grows as its bytes arrive, drawing from the broker's memory pool
(``queued.max.request.bytes``): a size prefix alone costs 4 KiB, not the size it announces."""

from __future__ import annotations

import struct
from collections import deque

import pytest

from kclient.broker.network_receive import (
    FIRST_CHUNK_BYTES,
    InvalidReceiveError,
    MemoryPool,
    NetworkReceive,
)

MIB = 1 << 20


class FakeSocket:
    """Hands out queued bytes to ``recv_into``; BlockingIOError when there are none."""

    def __init__(self) -> None:
        self.chunks: deque[bytes] = deque()
        self.closed = False

    def feed(self, data: bytes) -> None:
        self.chunks.append(data)

    def recv_into(self, view: memoryview) -> int:
        if not self.chunks:
            if self.closed:
                return 0
            raise BlockingIOError
        chunk = self.chunks.popleft()
        n = min(len(chunk), len(view))
        view[:n] = chunk[:n]
        if n < len(chunk):
            self.chunks.appendleft(chunk[n:])
        return n


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def test_a_size_prefix_alone_allocates_the_first_chunk_only() -> None:
    """On main the announced 100 MiB were allocated at once (840 MB for 8 connections)."""
    pool = MemoryPool(-1)
    sock = FakeSocket()
    receive = NetworkReceive(100 * MIB + 1, pool)
    sock.feed(struct.pack(">i", 100 * MIB))
    assert receive.read_from(sock) == (False, 4)  # type: ignore[arg-type]
    assert len(receive.payload) == FIRST_CHUNK_BYTES == receive.reserved == pool.used_bytes


def test_the_buffer_doubles_as_bytes_arrive_and_ends_exactly_full() -> None:
    pool = MemoryPool(-1)
    sock = FakeSocket()
    body = bytes(range(256)) * 4000  # 1,024,000 bytes
    receive = NetworkReceive(2 * MIB, pool)
    sock.feed(frame(body)[: 4 + 10_000])
    assert receive.read_from(sock) == (False, 10_004)  # type: ignore[arg-type]
    assert len(receive.payload) == 16 * 1024  # 4 KiB, 8 KiB, 16 KiB
    sock.feed(frame(body)[4 + 10_000 :])
    complete, _ = receive.read_from(sock)  # type: ignore[arg-type]
    assert complete
    assert receive.payload == body
    assert receive.reserved == len(body) == pool.used_bytes


def test_nothing_past_the_request_is_read() -> None:
    sock = FakeSocket()
    sock.feed(frame(b"first") + frame(b"second"))
    receive = NetworkReceive(MIB)
    assert receive.read_from(sock) == (True, 9)  # type: ignore[arg-type]
    assert receive.payload == b"first"
    assert sock.chunks[0] == frame(b"second")


def test_an_empty_request_completes() -> None:
    sock = FakeSocket()
    sock.feed(frame(b""))
    receive = NetworkReceive(MIB)
    assert receive.read_from(sock) == (True, 4)  # type: ignore[arg-type]
    assert receive.payload == b""


@pytest.mark.parametrize("size", [-1, MIB + 1, 2**31 - 1])
def test_a_size_outside_the_limit_is_refused(size: int) -> None:
    sock = FakeSocket()
    sock.feed(struct.pack(">i", size))
    with pytest.raises(InvalidReceiveError, match=r"socket.request.max.bytes is 1048576"):
        NetworkReceive(MIB).read_from(sock)  # type: ignore[arg-type]


def test_the_peer_closing_is_eof() -> None:
    sock = FakeSocket()
    sock.feed(frame(b"abcdef")[:6])
    sock.closed = True
    with pytest.raises(EOFError, match="in the middle of a request"):
        NetworkReceive(MIB).read_from(sock)  # type: ignore[arg-type]


def test_an_empty_pool_stops_growth_but_not_small_requests() -> None:
    pool = MemoryPool(64 * 1024)
    pool.reserve(64 * 1024)  # used up by others
    big, big_sock = NetworkReceive(MIB, pool), FakeSocket()
    big_frame = frame(b"x" * 100_000)
    big_sock.feed(big_frame[:60_000])
    # the first receive past an empty pool may go on (so that a large request completes) ...
    assert big.read_from(big_sock)[0] is False  # type: ignore[arg-type]
    assert not big.waiting_for_memory and len(big.payload) == 64 * 1024
    # ... one at a time: meanwhile another one waits for room, a small one does not
    other, other_sock = NetworkReceive(MIB, pool), FakeSocket()
    other_sock.feed(frame(b"y" * 20_000))
    assert other.read_from(other_sock)[0] is False  # type: ignore[arg-type]
    assert other.waiting_for_memory
    assert len(other.payload) == FIRST_CHUNK_BYTES
    small, small_sock = NetworkReceive(MIB, pool), FakeSocket()
    small_sock.feed(frame(b"z" * 3000))
    assert small.read_from(small_sock)[0]  # type: ignore[arg-type]
    big_sock.feed(big_frame[60_000:])
    assert big.read_from(big_sock)[0]  # type: ignore[arg-type]
    assert other.read_from(other_sock)[0] is False  # type: ignore[arg-type]
    # answers go out: the bytes go back, and the waiting receive completes
    pool.release(big.reserved, big)
    pool.release(small.reserved + 64 * 1024)
    assert other.read_from(other_sock)[0]  # type: ignore[arg-type]
    assert other.payload == b"y" * 20_000
    assert not other.waiting_for_memory


def test_a_waiting_receive_goes_on_once_the_overdraft_is_over() -> None:
    pool = MemoryPool(8 * 1024)
    first, first_sock = NetworkReceive(MIB, pool), FakeSocket()
    first_sock.feed(frame(b"a" * 50_000)[:30_000])
    assert first.read_from(first_sock)[0] is False  # type: ignore[arg-type]
    assert not first.waiting_for_memory  # it holds the overdraft: only bytes are missing
    second, second_sock = NetworkReceive(MIB, pool), FakeSocket()
    second_sock.feed(frame(b"b" * 50_000))
    assert second.read_from(second_sock)[0] is False  # type: ignore[arg-type]
    assert second.waiting_for_memory
    pool.release(first.reserved, first)  # its connection closed
    assert second.read_from(second_sock)[0]  # type: ignore[arg-type]
