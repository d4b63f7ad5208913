"""NetworkSend / KafkaChannel reads over a scripted fake socket: partial writes, framing."""

import struct
from typing import Any

import pytest

from kclient.errors import ProtocolDecodeError
from kclient.network.channel import PeerClosedError
from tests.network.channel_impls import CHANNEL, FakeSocket, Impl, frame

IMPL = pytest.mark.parametrize("impl", [CHANNEL], ids=["kclient"])


def channel(impl: Impl, sock: FakeSocket, limit: int = 1 << 20) -> Any:
    ch = impl.channel(3, sock, "10.0.0.3:9092", limit)
    ch.connected = True
    return ch


@IMPL
def test_a_send_writes_all_buffers_in_order_across_partial_writes(impl: Impl) -> None:
    records = bytes(range(256)) * 40
    send = impl.send(3, [b"\x00\x00\x00\x10head", memoryview(records), bytearray(b"tail")])
    sock = FakeSocket(accept=1000)
    while not send.completed:
        assert send.write_to(sock) > 0  # type: ignore[arg-type]
    assert bytes(sock.written) == b"\x00\x00\x00\x10head" + records + b"tail"
    assert send.size == len(sock.written)
    assert sock.write_calls == -(-len(sock.written) // 1000)


@IMPL
def test_a_send_keeps_record_buffers_by_reference_until_written(impl: Impl) -> None:
    records = bytearray(b"abc")
    send = impl.send(3, [b"hd", records])
    records[0:1] = b"X"  # a view, not a copy, is queued
    assert send.remaining_bytes() == b"hdXbc"


@IMPL
def test_a_blocked_socket_writes_nothing_and_the_send_stays_pending(impl: Impl) -> None:
    class Full(FakeSocket):
        def sendmsg(self, buffers: list[memoryview]) -> int:
            raise BlockingIOError

    send = impl.send(3, [b"ab", b"cd"])
    assert send.write_to(Full()) == 0  # type: ignore[arg-type]
    assert not send.completed


@IMPL
def test_frames_split_across_reads_are_reassembled(impl: Impl) -> None:
    data = frame(b"first") + frame(b"second response") + frame(b"")
    sock = FakeSocket(chunks=[data[i : i + 3] for i in range(0, len(data), 3)])
    ch = channel(impl, sock)
    completed: list[Any] = []
    while sock.chunks:
        ch.read(completed)
    assert [bytes(r.payload) for r in completed] == [b"first", b"second response", b""]
    assert all(r.source == 3 for r in completed)


@IMPL
def test_several_frames_in_one_read_all_complete(impl: Impl) -> None:
    sock = FakeSocket(chunks=[frame(b"a") + frame(b"bb") + frame(b"ccc")[:5]])
    completed: list[Any] = []
    channel(impl, sock).read(completed)
    assert [bytes(r.payload) for r in completed] == [b"a", b"bb"]


@IMPL
def test_a_frame_larger_than_the_read_chunk_is_read_into_one_buffer_of_its_size(impl: Impl) -> None:
    body = bytes(range(256)) * 1024  # 256 KiB
    data = frame(body)
    sock = FakeSocket(chunks=[data[i : i + 50_000] for i in range(0, len(data), 50_000)])
    ch = channel(impl, sock)
    completed: list[Any] = []
    while sock.chunks:
        ch.read(completed)
    assert len(completed) == 1
    assert completed[0].size == len(body)
    assert bytes(completed[0].payload) == body


@IMPL
def test_a_size_above_the_limit_is_rejected_before_allocating(impl: Impl) -> None:
    sock = FakeSocket(chunks=[b"HTTP/1.1 400 Bad Request\r\n"])
    with pytest.raises(ProtocolDecodeError, match=r"1213486160 bytes.*Kafka listener"):
        channel(impl, sock, limit=100 * 1024 * 1024).read([])


@IMPL
def test_a_response_above_receive_message_max_bytes_names_the_setting(impl: Impl) -> None:
    sock = FakeSocket(chunks=[struct.pack(">i", 100_000_001)])
    with pytest.raises(ProtocolDecodeError) as refused:
        channel(impl, sock, limit=100_000_000).read([])
    assert "more than 'receive.message.max.bytes' (100000000)" in str(refused.value)
    assert "raise 'receive.message.max.bytes'" in str(refused.value)


@IMPL
def test_an_announced_size_allocates_only_as_its_bytes_arrive(impl: Impl) -> None:
    """A broker announcing 90 MB and sending 100 KB costs about 100 KB, not 90 MB."""
    announced = 90_000_000
    sock = FakeSocket(chunks=[struct.pack(">i", announced) + b"x" * 1000] + [b"y" * 20_000] * 5)
    ch = channel(impl, sock, limit=100_000_000)
    completed: list[Any] = []
    while sock.chunks:
        ch.read(completed)
    assert ch.receive is not None and ch.receive.filled == 101_000
    assert ch.receive.size == announced
    assert len(ch.receive.payload) <= 512 * 1024
    assert not completed


@IMPL
def test_a_frame_read_in_small_pieces_grows_to_exactly_its_size(impl: Impl) -> None:
    body = bytes(range(256)) * 12_000  # about 3 MB: several doublings
    data = frame(body)
    pieces = [data[i : i + 7_001] for i in range(0, len(data), 7_001)]
    sock = FakeSocket(chunks=pieces)
    ch = channel(impl, sock, limit=10_000_000)
    completed: list[Any] = []
    capacities: list[int] = []
    while sock.chunks:
        ch.read(completed)
        if ch.receive is not None:
            capacities.append(len(ch.receive.payload))
            assert len(ch.receive.payload) <= max(2 * ch.receive.filled, 512 * 1024)
    assert [bytes(r.payload) for r in completed] == [body]
    assert len(completed[0].payload) == len(body) == completed[0].size
    assert capacities == sorted(capacities)  # grown in place, never shrunk


@IMPL
def test_a_negative_size_is_rejected(impl: Impl) -> None:
    sock = FakeSocket(chunks=[b"\xff\xff\xff\xfe"])
    with pytest.raises(ProtocolDecodeError, match="-2 bytes"):
        channel(impl, sock).read([])


@IMPL
def test_an_empty_read_means_the_peer_closed(impl: Impl) -> None:
    sock = FakeSocket(chunks=[b""])
    with pytest.raises(PeerClosedError):
        channel(impl, sock).read([])
