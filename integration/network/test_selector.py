"""KSelector over real sockets: local socket pairs and a loopback listener (fast; bounded loops).

The idle-expiry bookkeeping alone is unit-tested without sockets in
``tests/network/test_idle_expiry.py``.
"""

import os
import selectors
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from kclient.errors import IllegalStateError, KafkaConnectionError, ProtocolDecodeError
from kclient.network.selector import KSelector, NetworkSend
from kclient.testing import MockClock
from kclient.waker import Waker


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@pytest.fixture
def clock() -> MockClock:
    return MockClock()


@pytest.fixture
def selector(clock: MockClock) -> Iterator[KSelector]:
    sel = KSelector(clock)
    yield sel
    sel.close()


@pytest.fixture
def peer(selector: KSelector) -> Iterator[socket.socket]:
    """The broker's end of a connection registered as node 1."""
    ours, theirs = socket.socketpair()
    selector.register(1, ours, "peer:1")
    theirs.settimeout(5)
    yield theirs
    theirs.close()


def poll_until(selector: KSelector, done: object, rounds: int = 200) -> None:
    for _ in range(rounds):
        selector.poll(50)
        if callable(done) and done():
            return
    raise AssertionError("condition not reached")


def test_a_send_is_written_by_poll_and_reported_completed(
    selector: KSelector, peer: socket.socket
) -> None:
    send = NetworkSend(1, [b"\x00\x00\x00\x05", b"he", memoryview(b"llo")])
    selector.send(send)
    selector.poll(0)
    assert selector.completed_sends == [send]
    assert peer.recv(100) == b"\x00\x00\x00\x05hello"


def test_a_large_send_completes_over_several_polls(
    selector: KSelector, peer: socket.socket
) -> None:
    body = bytes(range(256)) * (16 * 1024)  # 4 MiB, far more than a socket buffer
    selector.send(NetworkSend(1, [frame(body)[:4], body]))
    received = bytearray()
    peer.setblocking(False)
    completed = []
    for _ in range(10_000):
        selector.poll(0)
        completed += selector.completed_sends
        try:
            while chunk := peer.recv(1 << 20):
                received += chunk
        except BlockingIOError:
            pass
        if completed and len(received) == len(body) + 4:
            break
    assert len(completed) == 1
    assert bytes(received[4:]) == body


def test_a_second_send_before_the_first_is_written_is_refused(
    selector: KSelector, peer: socket.socket
) -> None:
    big = bytes(8 << 20)  # more than the socket buffers take while the peer reads nothing
    first = NetworkSend(1, [frame(big)[:4], big])
    selector.send(first)
    assert not first.completed
    with pytest.raises(IllegalStateError, match="send in progress"):
        selector.send(NetworkSend(1, [b"efgh"]))


def test_send_writes_at_once_and_the_next_poll_reports_it(
    selector: KSelector, peer: socket.socket
) -> None:
    send = NetworkSend(1, [frame(b"now")])
    selector.send(send)
    assert peer.recv(100) == frame(b"now")  # on the wire before any poll
    selector.poll(0)
    assert selector.completed_sends == [send]
    selector.poll(0)
    assert selector.completed_sends == []


def test_a_send_that_fails_at_once_is_reported_as_a_disconnect_by_the_next_poll(
    selector: KSelector, peer: socket.socket
) -> None:
    channel = selector.channel(1)
    assert channel is not None
    channel.sock.shutdown(socket.SHUT_WR)  # every write now fails with EPIPE
    selector.send(NetworkSend(1, [frame(b"x")]))
    assert not selector.is_channel_ready(1)
    selector.poll(0)
    assert list(selector.disconnected) == [1]
    assert "node 1 at peer:1 lost" in str(selector.disconnected[1])
    selector.poll(0)
    assert selector.disconnected == {}


def test_responses_are_read_into_completed_receives(
    selector: KSelector, peer: socket.socket
) -> None:
    peer.sendall(frame(b"one") + frame(b"two"))
    poll_until(selector, lambda: selector.completed_receives)
    assert [bytes(r.payload) for r in selector.completed_receives] == [b"one", b"two"]


def test_a_muted_channel_is_not_read_until_unmuted(
    selector: KSelector, peer: socket.socket
) -> None:
    selector.mute(1)
    peer.sendall(frame(b"later"))
    selector.poll(20)
    assert selector.completed_receives == []
    selector.unmute(1)
    poll_until(selector, lambda: selector.completed_receives)
    assert bytes(selector.completed_receives[0].payload) == b"later"


def test_a_peer_close_is_reported_with_node_and_address(
    selector: KSelector, peer: socket.socket
) -> None:
    peer.close()
    poll_until(selector, lambda: selector.disconnected)
    error = selector.disconnected[1]
    assert isinstance(error, KafkaConnectionError)
    assert "node 1 at peer:1 closed the connection" in str(error)
    assert not selector.is_channel_ready(1)


def test_garbage_from_a_non_kafka_port_closes_with_a_protocol_error(
    selector: KSelector, peer: socket.socket
) -> None:
    peer.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    poll_until(selector, lambda: selector.disconnected)
    assert isinstance(selector.disconnected[1], ProtocolDecodeError)
    assert "Kafka listener" in str(selector.disconnected[1])


def test_connections_idle_longer_than_connections_max_idle_ms_are_closed(
    clock: MockClock,
) -> None:
    selector = KSelector(clock, connections_max_idle_ms=540_000)
    a, b = socket.socketpair()
    try:
        selector.register(1, a, "peer:1")
        clock.advance(540_000)
        selector.poll(0)
        assert selector.disconnected == {}
        clock.advance(1)
        selector.poll(0)
        assert "connections.max.idle.ms=540000" in str(selector.disconnected[1])
    finally:
        selector.close()
        b.close()


def test_wakeup_from_another_thread_ends_a_long_poll(selector: KSelector) -> None:
    waker = threading.Thread(target=selector.wakeup)
    waker.start()
    waker.join()
    started = time.monotonic()
    selector.poll(10_000)  # returns at once: a wakeup is pending
    assert time.monotonic() - started < 5


@contextmanager
def connected_to_a_listener(selector: KSelector) -> Iterator[int]:
    """A loopback listener that ``selector`` has connected to as node 7; yields its port."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        selector.connect(7, "127.0.0.1", port)
        poll_until(selector, lambda: 7 in selector.connected)
        yield port


def test_connect_to_a_listener_reports_connected_with_tcp_nodelay(selector: KSelector) -> None:
    with connected_to_a_listener(selector):
        assert selector.is_channel_ready(7)
        channel = selector.channel(7)
        assert channel is not None
        assert channel.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def buffer_sizes(sock: socket.socket) -> tuple[int, int]:
    return (
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF),
        sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF),
    )


def reference_buffer_sizes(port: int, send_bytes: int, receive_bytes: int) -> tuple[int, int]:
    """What the OS reports for a plain socket given those sizes (<= 0: left alone) and
    connected to ``port``: Linux doubles a requested size, and grows a send buffer left at
    its default once the connection is established, so only a connected socket compares."""
    with socket.socket() as sock:
        if send_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_bytes)
        if receive_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_bytes)
        sock.settimeout(5)
        sock.connect(("127.0.0.1", port))
        return buffer_sizes(sock)


# 65536 is the usual request; 262144 is a receive size the OS default (131072 on Linux,
# the same as 65536 doubled) cannot pass for.
@pytest.mark.parametrize(
    ("send_bytes", "receive_bytes"), [(65536, 65536), (65536, 262144), (-1, -1)]
)
def test_send_and_receive_buffer_bytes_size_the_socket_and_minus_one_keeps_os_defaults(
    clock: MockClock, send_bytes: int, receive_bytes: int
) -> None:
    selector = KSelector(clock, send_buffer_bytes=send_bytes, receive_buffer_bytes=receive_bytes)
    try:
        with connected_to_a_listener(selector) as port:
            channel = selector.channel(7)
            assert channel is not None
            sizes = buffer_sizes(channel.sock)
            # -1: what a plain socket gets (nothing set); else what the OS makes of the request
            assert sizes == reference_buffer_sizes(port, send_bytes, receive_bytes)
            if send_bytes > 0:
                assert sizes[0] >= send_bytes and sizes[1] >= receive_bytes
    finally:
        selector.close()


def test_connect_to_a_closed_port_fails_naming_node_address_and_reason(
    selector: KSelector,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # bound, never listening: refused
        try:
            selector.connect(7, "127.0.0.1", port)
        except KafkaConnectionError as exc:
            error: Exception = exc
        else:
            poll_until(selector, lambda: selector.disconnected)
            error = selector.disconnected[7]
    assert f"node 7 at 127.0.0.1:{port} failed: connection refused" in str(error)


def test_closing_a_node_is_not_reported_as_a_disconnect(
    selector: KSelector, peer: socket.socket
) -> None:
    selector.close(1)
    selector.poll(0)
    assert selector.disconnected == {}
    assert not selector.is_channel_ready(1)


@pytest.mark.parametrize(
    "eventfd", [True, False] if hasattr(os, "eventfd") else [False], ids=lambda e: f"eventfd={e}"
)
def test_the_waker_interrupts_a_select_once_per_wake_and_ignores_wakes_after_close(
    eventfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not eventfd:
        monkeypatch.delattr(os, "eventfd", raising=False)
    waker = Waker()
    sel = selectors.DefaultSelector()
    sel.register(waker.fileno(), selectors.EVENT_READ)
    try:
        assert sel.select(0) == []
        waker.wake()
        waker.wake()
        assert len(sel.select(1)) == 1
        waker.drain()
        assert sel.select(0) == []  # two wakes, one drain: nothing left
    finally:
        sel.close()
        waker.close()
    waker.wake()  # after close: no error, no write to a reused descriptor
