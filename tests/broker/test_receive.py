"""The broker reads a request's bytes into a buffer that grows as they arrive: what a
size prefix announces is not allocated until the client sends it."""

from __future__ import annotations

import struct

import pytest

from kclient.broker.network_receive import FIRST_CHUNK_BYTES, InvalidReceiveError, NetworkReceive


class TrickleSocket:
    """``recv_into`` hands out the queued bytes, at most ``chunk`` at a time."""

    def __init__(self, data: bytes = b"", chunk: int = 1 << 30) -> None:
        self.data = bytearray(data)
        self.chunk = chunk

    def recv_into(self, view: memoryview) -> int:
        if not self.data:
            raise BlockingIOError
        n = min(len(view), len(self.data), self.chunk)
        view[:n] = self.data[:n]
        del self.data[:n]
        return n


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_a_size_prefix_followed_by_silence_allocates_a_first_chunk_only() -> None:
    receive = NetworkReceive(max_size=200 * 1024 * 1024)
    sock = TrickleSocket(struct.pack(">i", 100 * 1024 * 1024) + b"x" * 10)
    assert receive.read_from(sock) == (False, 14)  # type: ignore[arg-type]
    assert len(receive.payload) <= FIRST_CHUNK_BYTES  # not 100 MiB


@pytest.mark.parametrize("size", [0, 1, FIRST_CHUNK_BYTES, FIRST_CHUNK_BYTES + 1, 1_000_003])
def test_frames_of_any_size_arrive_whole_however_they_are_cut(size: int) -> None:
    payload = bytes(i % 251 for i in range(size))
    for chunk in (1 << 30, 7919):
        receive = NetworkReceive(max_size=2_000_000)
        sock = TrickleSocket(frame(payload), chunk)
        done = False
        while not done:
            done, _ = receive.read_from(sock)  # type: ignore[arg-type]
        assert bytes(receive.payload) == payload


def test_a_size_over_the_limit_is_refused_before_anything_is_allocated() -> None:
    receive = NetworkReceive(max_size=1000)
    with pytest.raises(InvalidReceiveError, match="socket.request.max.bytes"):
        receive.read_from(TrickleSocket(struct.pack(">i", 1001)))  # type: ignore[arg-type]
