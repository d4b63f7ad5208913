"""Processor + ServerSelector over socket pairs (no ports): read, mute, respond, bad input."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

import pytest

from kclient.broker.metrics import BrokerMetrics
from kclient.broker.request_channel import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    RequestChannel,
    SendResponse,
)
from kclient.broker.socket_server import Processor
from kclient.protocol import ApiKey
from kclient.protocol.frame import encode_request, encode_response

MAX_REQUEST = 64 * 1024


class FakeTime:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns


@pytest.fixture
def fake_time() -> FakeTime:
    return FakeTime()


@pytest.fixture
def channel() -> RequestChannel:
    return RequestChannel(10, BrokerMetrics(0, 0))


@pytest.fixture
def processor(channel: RequestChannel, fake_time: FakeTime) -> Iterator[Processor]:
    p = Processor(
        0,
        channel,
        max_request_bytes=MAX_REQUEST,
        connections_max_idle_ms=60_000,
        metrics=channel.metrics,
        monotonic_ns=fake_time,
    )
    yield p
    p.close()


@pytest.fixture
def connect(processor: Processor) -> Iterator[Callable[[], socket.socket]]:
    clients: list[socket.socket] = []

    def make() -> socket.socket:
        ours, theirs = socket.socketpair()
        assert processor.accept(ours, may_block=False)
        processor.configure_new_connections()
        theirs.settimeout(5)
        clients.append(theirs)
        return theirs

    yield make
    for c in clients:
        c.close()


def api_versions(corr: int, version: int = 3) -> bytes:
    body = {"client_software_name": "t", "client_software_version": "1"}
    return b"".join(encode_request(ApiKey.API_VERSIONS, version, corr, "c", body))


def metadata(corr: int, version: int = 12) -> bytes:
    return b"".join(encode_request(ApiKey.METADATA, version, corr, "c", {"topics": []}))


def pump(processor: Processor, until: Callable[[], object], rounds: int = 50) -> None:
    for _ in range(rounds):
        processor.run_once(0.01)
        if until():
            return
    raise AssertionError("condition not reached")


def take(channel: RequestChannel) -> Request:
    request = channel.receive_request(0.01)
    assert isinstance(request, Request)
    return request


def respond(channel: RequestChannel, request: Request) -> bytes:
    buffers = encode_response(
        ApiKey.API_VERSIONS, 0, request.header.correlation_id, {"error_code": 0, "api_keys": []}
    )
    channel.send_response(SendResponse(request, buffers))
    return b"".join(buffers)


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        assert chunk, "connection closed"
        data += chunk
    return data


def is_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_a_request_is_parsed_queued_and_its_connection_muted(
    processor: Processor, channel: RequestChannel, connect: Callable[[], socket.socket]
) -> None:
    client = connect()
    client.sendall(api_versions(7))
    pump(processor, channel.request_queue_size)
    request = take(channel)
    assert (request.header.api_key, request.header.correlation_id) == (ApiKey.API_VERSIONS, 7)
    assert request.body == {"client_software_name": "t", "client_software_version": "1"}
    assert request.processor == 0 and request.api_name == "ApiVersions"
    ch = processor.selector.channel(request.connection_id)
    assert ch is not None and ch.muted


def test_pipelined_requests_are_handled_one_at_a_time_in_order(
    processor: Processor, channel: RequestChannel, connect: Callable[[], socket.socket]
) -> None:
    client = connect()
    client.sendall(api_versions(1) + api_versions(2))
    pump(processor, channel.request_queue_size)
    for _ in range(5):
        processor.run_once(0.01)
    assert channel.request_queue_size() == 1  # the second waits: the connection is muted
    first = take(channel)
    expected = respond(channel, first)
    pump(processor, channel.request_queue_size)
    assert recv_exactly(client, len(expected)) == expected
    assert take(channel).header.correlation_id == 2
    snapshot = channel.metrics.snapshot(0) if channel.metrics else None
    assert snapshot is not None and snapshot.requests["ApiVersions"].requests == 1


def test_noop_response_unmutes_and_close_response_closes(
    processor: Processor, channel: RequestChannel, connect: Callable[[], socket.socket]
) -> None:
    client = connect()
    client.sendall(api_versions(1) + api_versions(2))
    pump(processor, channel.request_queue_size)
    channel.send_response(NoOpResponse(take(channel)))
    pump(processor, channel.request_queue_size)
    channel.send_response(CloseConnectionResponse(take(channel)))
    pump(processor, lambda: processor.connection_count == 0)
    assert is_closed(client)


def test_a_response_for_a_vanished_connection_is_dropped(
    processor: Processor, channel: RequestChannel, connect: Callable[[], socket.socket]
) -> None:
    client = connect()
    client.sendall(api_versions(1))
    pump(processor, channel.request_queue_size)
    request = take(channel)
    client.close()
    processor.selector.close(request.connection_id, "test")
    respond(channel, request)
    processor.run_once(0.01)
    assert processor.connection_count == 0


def test_api_versions_newer_than_supported_is_flagged_not_rejected(
    processor: Processor, channel: RequestChannel, connect: Callable[[], socket.socket]
) -> None:
    client = connect()
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, 99, 5, 1) + b"c" + b"\x00" + b"junk"
    client.sendall(struct.pack(">i", len(header)) + header)
    pump(processor, channel.request_queue_size)
    request = take(channel)
    assert request.unsupported_version and request.body is None
    assert request.header.api_version == 99


BAD_FRAMES = {
    "garbage": struct.pack(">i", 3) + b"abc",
    "negative size": struct.pack(">i", -5) + b"xxxxx",
    "oversized": struct.pack(">i", MAX_REQUEST + 1),
    "unknown api key": struct.pack(">i", 10) + struct.pack(">hhih", 999, 0, 1, 0),
    "unsupported version": struct.pack(">i", 10) + struct.pack(">hhih", 3, 99, 1, 0),
    "too old version": struct.pack(">i", 10) + struct.pack(">hhih", 0, 1, 1, 0),
    "truncated body": b"",  # built in the test
    "empty frame": struct.pack(">i", 0),
}


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_bad_input_closes_only_that_connection(
    case: str,
    processor: Processor,
    channel: RequestChannel,
    connect: Callable[[], socket.socket],
    caplog: pytest.LogCaptureFixture,
) -> None:
    good, bad = connect(), connect()
    frame = BAD_FRAMES[case]
    if case == "truncated body":  # a valid size whose body ends early
        body = metadata(1)[4:-3]
        frame = struct.pack(">i", len(body)) + body
    bad.sendall(frame)
    pump(processor, lambda: processor.connection_count == 1)
    assert is_closed(bad)
    assert channel.request_queue_size() == 0
    assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1
    good.sendall(api_versions(3))
    pump(processor, channel.request_queue_size)
    expected = respond(channel, take(channel))
    pump(processor, lambda: True, rounds=2)
    assert recv_exactly(good, len(expected)) == expected


def test_a_client_vanishing_mid_request_is_just_a_disconnect(
    processor: Processor, channel: RequestChannel, connect: Callable[[], socket.socket]
) -> None:
    client = connect()
    client.sendall(api_versions(1)[:9])
    processor.run_once(0.01)
    client.close()
    pump(processor, lambda: processor.connection_count == 0)
    assert channel.request_queue_size() == 0


def test_idle_connections_are_closed_after_connections_max_idle_ms(
    processor: Processor, connect: Callable[[], socket.socket], fake_time: FakeTime
) -> None:
    client = connect()
    processor.run_once(0)
    fake_time.ns += 59 * 1_000_000_000
    processor.run_once(0)
    assert processor.connection_count == 1
    fake_time.ns += 2 * 1_000_000_000
    processor.run_once(0)
    assert processor.connection_count == 0
    assert is_closed(client)


def test_wakeup_interrupts_poll_for_new_responses(
    processor: Processor, channel: RequestChannel, connect: Callable[[], socket.socket]
) -> None:
    import threading
    import time

    client = connect()
    client.sendall(api_versions(1))
    pump(processor, channel.request_queue_size)
    request = take(channel)
    timer = threading.Timer(0.05, respond, (channel, request))
    timer.start()
    started = time.monotonic()
    processor.run_once(5.0)  # returns early: the response woke it up
    processor.run_once(5.0)
    timer.join()
    assert time.monotonic() - started < 2.0
    assert recv_exactly(client, 4)
