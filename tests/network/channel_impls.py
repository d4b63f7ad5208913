"""The network channel's classes as the tests use them (compiled by mypyc in the accelerated
build, the Python source under ``KCLIENT_PURE_PYTHON``: the suite runs in both) and a
scripted fake socket."""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

from kclient.network import channel


@dataclass(frozen=True)
class Impl:
    name: str
    send: Any  # NetworkSend class
    receive: Any  # NetworkReceive class
    channel: Any  # KafkaChannel class


CHANNEL = Impl("kclient", channel.NetworkSend, channel.NetworkReceive, channel.KafkaChannel)


class FakeSocket:
    """Takes at most ``accept`` bytes per write (or, per call, the next of ``takes``: an int,
    or an exception to raise); hands out scripted chunks per read (an exception in
    ``chunks`` is raised). Records each write call as (method, number of buffers)."""

    def __init__(
        self,
        accept: int = 1 << 30,
        chunks: list[bytes | BaseException] | None = None,
        takes: list[int | BaseException] | None = None,
        empty: type[BaseException] = BlockingIOError,
    ) -> None:
        self.accept = accept
        self.written = bytearray()
        self.chunks: deque[bytes | BaseException] = deque(chunks or [])
        self.takes: deque[int | BaseException] = deque(takes or [])
        self.calls: list[tuple[str, int]] = []
        self.empty = empty

    @property
    def write_calls(self) -> int:
        return len(self.calls)

    def send(self, data: bytes | memoryview) -> int:
        return self._write("send", [data])

    def sendmsg(self, buffers: list[bytes | memoryview]) -> int:
        return self._write("sendmsg", buffers)

    def _write(self, method: str, buffers: list[bytes | memoryview]) -> int:
        self.calls.append((method, len(buffers)))
        take = self.takes.popleft() if self.takes else self.accept
        if isinstance(take, BaseException):
            raise take
        room = take
        for buf in buffers:
            view = memoryview(buf)
            assert view.format == "B" and view.ndim == 1  # what sendmsg sends is bytes
            n = min(room, view.nbytes)
            self.written += view[:n]
            room -= n
            if room == 0:
                break
        return take - room

    def recv_into(self, view: memoryview) -> int:
        if not self.chunks:
            raise self.empty
        chunk = self.chunks.popleft()
        if isinstance(chunk, BaseException):
            raise chunk
        n = min(len(chunk), len(view))
        view[:n] = chunk[:n]
        if n < len(chunk):
            self.chunks.appendleft(chunk[n:])
        return n


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def new_channel(
    impl: Impl, sock: FakeSocket, limit: int = 1 << 20, chunk_bytes: int | None = None
) -> Any:
    ch = impl.channel(3, sock, "10.0.0.3:9092", limit)
    ch.connected = True
    if chunk_bytes is not None:  # a smaller read chunk: its edges are reached sooner
        ch._chunk = bytearray(chunk_bytes)
        ch._chunk_view = memoryview(ch._chunk)
    return ch
