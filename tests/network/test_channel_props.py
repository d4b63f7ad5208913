"""The network channel on random input: whole frames and the right errors (with their
messages) however the bytes arrive, every byte written once and in order however the socket
takes them. A small read chunk brings its edges within reach: frames straddling it, frames
larger than it."""

from __future__ import annotations

import errno
import ssl
import struct
from array import array
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.errors import ProtocolDecodeError
from kclient.network.channel import PeerClosedError
from tests.network.channel_impls import CHANNEL, FakeSocket, Impl, frame, new_channel

IMPL = pytest.mark.parametrize("impl", [CHANNEL], ids=["kclient"])
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---- reads ----------------------------------------------------------------------------------


def body(index: int, size: int) -> bytes:
    return bytes((index * 37 + j) % 251 for j in range(size))


def receive_state(r: Any) -> tuple[Any, ...]:
    return (r.source, bytes(r.payload[: r.filled]), r.size, r.filled, r.complete, len(r.payload))


def read_trace(
    impl: Impl,
    chunks: list[bytes | BaseException],
    limit: int,
    chunk_bytes: int | None,
    tls_mode: bool = False,
) -> list[Any]:
    """What each read returned, raised and left behind, until the script or an error ends."""
    sock = FakeSocket(chunks=chunks, empty=ssl.SSLWantReadError if tls_mode else BlockingIOError)
    ch = new_channel(impl, sock, limit, chunk_bytes)
    if tls_mode:  # the TLS read path over a scripted socket (already "wrapped")
        ch.tls_context = object()
    trace: list[Any] = []
    for _ in range(10_000):
        if not sock.chunks:
            break
        completed: list[Any] = []  # frames before an error in the same read stay there
        try:
            ch.read(completed)
        except (ProtocolDecodeError, PeerClosedError) as exc:
            outcome: Any = ("raised", type(exc).__name__, str(exc), exc.args)
        else:
            big = None if ch.receive is None else receive_state(ch.receive)
            outcome = (big, ch._chunk_len, bytes(ch._chunk[: ch._chunk_len]))
        trace.append(([receive_state(r) for r in completed], outcome))
        if outcome[0] == "raised":
            break
    return trace


def completed_payloads(trace: list[Any]) -> list[bytes]:
    return [r[1] for frames, _ in trace for r in frames]


def pieces(data: bytes, lengths: list[int]) -> list[bytes]:
    out: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(data):
        n = lengths[i % len(lengths)]
        out.append(data[pos : pos + n])
        pos += n
        i += 1
    return out


@PROPS
@given(
    sizes=st.lists(st.integers(0, 300), max_size=10),
    lengths=st.lists(st.integers(1, 700), min_size=1, max_size=8),
    chunk_bytes=st.sampled_from([None, 8, 16, 64, 257]),
    one_byte_reads=st.booleans(),
    tls_mode=st.booleans(),
    close_after=st.booleans(),
    cut=st.integers(0, 20),
)
def test_frames_come_out_whole_however_the_bytes_arrive(
    *,
    sizes: list[int],
    lengths: list[int],
    chunk_bytes: int | None,
    one_byte_reads: bool,
    tls_mode: bool,
    close_after: bool,
    cut: int,
) -> None:
    bodies = [body(i, n) for i, n in enumerate(sizes)]
    data = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    if close_after:  # the peer closes, maybe within a frame
        data = data[: max(0, len(data) - cut)]
    chunks: list[bytes | BaseException] = list(pieces(data, [1] if one_byte_reads else lengths))
    if close_after:
        chunks.append(b"")
    trace = read_trace(CHANNEL, chunks, 1000, chunk_bytes, tls_mode)
    got = completed_payloads(trace)
    if close_after:
        assert trace[-1][1][:2] == ("raised", "PeerClosedError")
        assert got == bodies[: len(got)]
    else:
        assert got == bodies
        assert not trace or trace[-1][1][:2] == (None, 0)  # nothing left over


@PROPS
@given(
    sizes=st.lists(st.integers(0, 200), max_size=6),
    bad=st.one_of(st.integers(-(2**31), -1), st.integers(501, 2**31 - 1)),
    lengths=st.lists(st.integers(1, 300), min_size=1, max_size=5),
    chunk_bytes=st.sampled_from([None, 16, 64]),
)
def test_a_bad_size_fails_after_the_frames_before_it(
    sizes: list[int], bad: int, lengths: list[int], chunk_bytes: int | None
) -> None:
    bodies = [body(i, n) for i, n in enumerate(sizes)]
    data = b"".join(struct.pack(">i", len(b)) + b for b in bodies)
    data += struct.pack(">i", bad) + b"trailing bytes"
    chunks: list[bytes | BaseException] = list(pieces(data, lengths))
    trace = read_trace(CHANNEL, chunks, 500, chunk_bytes)
    assert completed_payloads(trace) == bodies
    raised = trace[-1][1]
    assert raised[:2] == ("raised", "ProtocolDecodeError")
    assert raised[2] == (
        f"node 3 at 10.0.0.3:9092 announced a response of {bad} bytes, more than "
        "'receive.message.max.bytes' (500); closing the connection. Is 10.0.0.3:9092 a Kafka "
        "listener (it may speak another protocol, or TLS)? If the broker is right, raise "
        "'receive.message.max.bytes'"
    )


@IMPL
def test_a_socket_error_on_read_reaches_the_caller_and_changes_nothing(impl: Impl) -> None:
    sock = FakeSocket(chunks=[b"\x00\x00\x00\x05ab", ConnectionResetError(errno.ECONNRESET, "x")])
    ch = new_channel(impl, sock)
    ch.read([])
    with pytest.raises(ConnectionResetError):
        ch.read([])
    assert ch._chunk_len == 6 and bytes(ch._chunk[:6]) == b"\x00\x00\x00\x05ab"


@IMPL
def test_a_frame_of_exactly_the_chunk_size_is_cut_from_the_chunk(impl: Impl) -> None:
    data = struct.pack(">i", 60) + body(1, 60)  # 64 bytes: fits a 64-byte chunk
    next_frame = struct.pack(">i", 61) + b"z"  # 65 bytes: its own buffer
    ch = new_channel(impl, FakeSocket(chunks=[data[:10], data[10:], next_frame]), 1000, 64)
    completed: list[Any] = []
    ch.read(completed)
    assert (ch.receive, ch._chunk_len, completed) == (None, 10, [])  # waits in the chunk
    ch.read(completed)
    assert [bytes(r.payload) for r in completed] == [body(1, 60)] and ch._chunk_len == 0
    ch.read(completed)
    assert ch.receive is not None and (ch.receive.size, ch.receive.filled) == (61, 1)


@IMPL
def test_a_channel_hands_back_its_send_once_written_whole(impl: Impl) -> None:
    sock = FakeSocket(takes=[3, BlockingIOError(), 4, 100])
    ch = new_channel(impl, sock)
    assert ch.write() is None  # nothing pending
    send = impl.send(3, [b"abcde", b"fghij"])
    ch.send = send
    assert ch.write() is None and ch.send is send  # 3 bytes
    assert ch.write() is None and ch.send is send  # would block
    assert ch.write() is None and send.remaining == 3
    assert ch.write() is send and ch.send is None
    assert bytes(sock.written) == b"abcdefghij"


@IMPL
def test_a_tls_channel_writes_in_chunks_and_reads_what_was_decrypted(impl: Impl) -> None:
    class TlsLike(FakeSocket):
        def send(self, data: bytes | memoryview) -> int:
            self.calls.append(("send", 1))
            self.written += data
            return len(data)

    sock = TlsLike(chunks=[frame(b"one") + frame(b"tw")[:3], frame(b"tw")[3:]])
    sock.empty = ssl.SSLWantReadError
    ch = new_channel(impl, sock)
    ch.tls_context = object()  # as if wrapped: the TLS paths (Python in both)
    ch.send = impl.send(3, [b"ab", b"cd", b"ef"])
    assert ch.write() is not None and ch.send is None
    assert sock.calls == [("send", 1)] and bytes(sock.written) == b"abcdef"  # one TLS record
    completed: list[Any] = []
    ch.read(completed)
    ch.read(completed)
    ch.read(completed)  # nothing decrypted: no frame, no error
    assert [bytes(r.payload) for r in completed] == [b"one", b"tw"]


# ---- writes ---------------------------------------------------------------------------------


def as_buffer(kind: int, data: bytes) -> bytes | bytearray | memoryview:
    if kind == 0:
        return data
    if kind == 1:
        return bytearray(data)
    if kind == 2:
        return memoryview(data)
    if kind == 3:  # a memoryview of int32s: sent as its bytes
        return memoryview(array("i", data[: len(data) // 4 * 4].ljust(4, b"\x01")))
    if kind == 4 and len(data) >= 2:  # two dimensions
        return memoryview(data[: len(data) // 2 * 2]).cast("B", [2, len(data) // 2])
    return memoryview(bytearray(data))[1:]


def write_trace(impl: Impl, buffers: list[Any], takes: list[Any]) -> tuple[list[Any], Any]:
    send = impl.send(7, buffers, awaits_response=False)
    sock = FakeSocket(takes=list(takes))
    trace: list[Any] = [(send.size, send.remaining, send.completed, send.remaining_bytes())]
    for _ in range(len(takes) + 3):
        if send.completed:
            break
        try:
            written = send.write_to(sock)
        except OSError as exc:
            trace.append(("raised", type(exc).__name__, str(exc)))
            break
        state = (send.remaining, send.completed, send._index, len(send._buffers))
        trace.append((written, *state, send.remaining_bytes()))
    trace.append(send.write_to(sock) if send.completed else "pending")
    return trace, (bytes(sock.written), sock.calls, send.awaits_response, repr(send))


buffer_lists = st.lists(
    st.tuples(st.integers(0, 5), st.binary(max_size=40)).map(lambda t: as_buffer(*t)),
    max_size=12,
)
socket_takes = st.lists(
    st.one_of(
        st.integers(0, 80),
        st.sampled_from([BlockingIOError(), InterruptedError()]),
    ),
    max_size=20,
)


@PROPS
@given(buffers=buffer_lists, takes=socket_takes)
def test_partial_writes_send_every_byte_once_in_order(buffers: list[Any], takes: list[Any]) -> None:
    c_trace, c_end = write_trace(CHANNEL, buffers, takes)
    expected = b"".join(memoryview(b).cast("B").tobytes() for b in buffers)
    assert c_end[0] == expected
    assert c_trace[0][0] == len(expected)
    assert c_trace[-1] == 0  # a completed send writes nothing more


@IMPL
def test_a_socket_error_on_write_reaches_the_caller(impl: Impl) -> None:
    send = impl.send(1, [b"abc", b"def"])
    sock = FakeSocket(takes=[2, BrokenPipeError(errno.EPIPE, "Broken pipe")])
    assert send.write_to(sock) == 2
    with pytest.raises(BrokenPipeError, match="Broken pipe"):
        send.write_to(sock)
    assert send.remaining == 4 and send.remaining_bytes() == b"cdef"


@IMPL
def test_more_buffers_than_iov_max_go_in_gathered_writes_of_at_most_1024(impl: Impl) -> None:
    parts = [bytes([i % 256]) * 3 for i in range(2500)]
    send = impl.send(1, parts)
    sock = FakeSocket()  # takes everything offered
    while not send.completed:
        send.write_to(sock)
    assert sock.calls == [("sendmsg", 1024), ("sendmsg", 1024), ("sendmsg", 452)]
    assert bytes(sock.written) == b"".join(parts)

    send = impl.send(1, [*parts[:1025], b"last"])
    sock = FakeSocket(takes=[1024 * 3, 3])
    send.write_to(sock)
    send.write_to(sock)
    send.write_to(sock)  # only one buffer left: a plain send
    assert sock.calls == [("sendmsg", 1024), ("sendmsg", 2), ("send", 1)]
    assert send.completed


@IMPL
def test_buffers_are_kept_by_reference_not_copied(impl: Impl) -> None:
    data = bytearray(b"abcdef")
    send = impl.send(1, [memoryview(data)[2:], data])
    data[3:4] = b"X"
    assert send.remaining_bytes() == b"cXefabcXef"
    assert send._buffers[1] is data


def test_bad_buffers_are_refused() -> None:
    for bad in ([b"ok", "text"], 5, [b"x", memoryview(array("i", [1, 2, 3, 4]))[::2]]):
        with pytest.raises((TypeError, ValueError)):
            CHANNEL.send(1, bad)


@IMPL
def test_a_receive_knows_its_size_and_whether_it_is_complete(impl: Impl) -> None:
    whole = impl.receive(4, bytearray(b"abc"))
    assert (whole.source, whole.size, whole.filled, whole.complete) == (4, 3, 3, True)
    part = impl.receive(4, bytearray(b"ab"), 2, 10)
    assert (part.size, part.filled, part.complete) == (10, 2, False)
    assert repr(part) == "NetworkReceive(source=4, size=10, filled=2)"
    send = impl.send(4, [b"ab"])
    assert send.awaits_response is True
    send.remaining = 0  # what the mock selector does
    assert send.completed
