"""Bad input over real sockets: only the offending connection is closed (or answered with
the right error), one line is logged, and the broker keeps serving everyone else."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator

import confluent_kafka
import pytest

from kclient import errors
from kclient.broker import EmbeddedBroker
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.testing.hostile import read_frame

MAX_REQUEST = 1024 * 1024


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(socket_request_max_bytes=MAX_REQUEST) as b:
        b.create_topic("alive", 1)
        yield b


@pytest.fixture(scope="module")
def producer(broker: EmbeddedBroker) -> Iterator[confluent_kafka.Producer]:
    """A well-behaved client connected for the whole module."""
    p = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 1})
    yield p
    p.flush(10)


def connect(broker: EmbeddedBroker) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", broker.port), timeout=5)
    return sock


def closed_by_broker(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:  # closed with our unread bytes still queued: RST
        return True
    except TimeoutError:
        return False


def assert_still_serving(broker: EmbeddedBroker, producer: confluent_kafka.Producer) -> None:
    """A new connection gets ApiVersions answered; the old producer still produces."""
    with connect(broker) as sock:
        body = {"client_software_name": "probe", "client_software_version": "1"}
        sock.sendall(b"".join(encode_request(ApiKey.API_VERSIONS, 3, 11, "probe", body)))
        corr, reply = decode_response(ApiKey.API_VERSIONS, 3, read_frame(sock))
        assert (corr, reply["error_code"]) == (11, 0)
    before = broker.high_watermark("alive")
    producer.produce("alive", b"still here", partition=0)
    assert producer.flush(10) == 0
    assert broker.high_watermark("alive") == before + 1


def broker_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("kclient.broker") and r.levelname == "WARNING"
    ]


def wait_for(condition: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return
        time.sleep(0.01)
    raise AssertionError("condition not reached")


def header(api_key: int, version: int, corr: int = 1) -> bytes:
    return struct.pack(">hhih", api_key, version, corr, 4) + b"test"


CLOSING_INPUTS = {
    "garbage frame": struct.pack(">i", 12) + b"\x13\x37" * 6,
    "negative size": struct.pack(">i", -1) + b"x" * 8,
    "oversized size": struct.pack(">i", MAX_REQUEST + 1) + b"x" * 100,
    "http request": b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "unknown api key": struct.pack(">i", 14) + header(1234, 0),
    "unsupported version": struct.pack(">i", 14) + header(ApiKey.METADATA, 99),
    "truncated body": struct.pack(">i", 15) + header(ApiKey.METADATA, 12) + b"\x05",
}


@pytest.mark.parametrize("case", sorted(CLOSING_INPUTS))
def test_bad_input_closes_only_that_connection(
    case: str,
    broker: EmbeddedBroker,
    producer: confluent_kafka.Producer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert_still_serving(broker, producer)
    caplog.clear()
    with connect(broker) as sock:
        sock.sendall(CLOSING_INPUTS[case])
        assert closed_by_broker(sock)
    wait_for(lambda: broker_warnings(caplog))
    assert len(broker_warnings(caplog)) == 1, broker_warnings(caplog)
    assert_still_serving(broker, producer)


def test_api_versions_newer_than_the_broker_gets_a_v0_error_answer(
    broker: EmbeddedBroker, producer: confluent_kafka.Producer
) -> None:
    with connect(broker) as sock:
        sock.sendall(struct.pack(">i", 16) + header(ApiKey.API_VERSIONS, 77, corr=9) + b"\x00\x00")
        corr, body = decode_response(ApiKey.API_VERSIONS, 0, read_frame(sock))
        assert corr == 9
        assert body["error_code"] == errors.UnsupportedVersionError.code
        versions = {k["api_key"]: k["max_version"] for k in body["api_keys"]}
        assert versions[ApiKey.API_VERSIONS] >= 3
        # the connection stays usable: negotiate down and ask again
        ask = {"client_software_name": "t", "client_software_version": "1"}
        sock.sendall(b"".join(encode_request(ApiKey.API_VERSIONS, 3, 10, "t", ask)))
        assert decode_response(ApiKey.API_VERSIONS, 3, read_frame(sock))[1]["error_code"] == 0
    assert_still_serving(broker, producer)


def test_a_client_vanishing_mid_request(
    broker: EmbeddedBroker, producer: confluent_kafka.Producer
) -> None:
    frame = b"".join(encode_request(ApiKey.METADATA, 12, 1, "t", {"topics": None}))
    for cut in (2, 4, 9, len(frame) - 1):
        sock = connect(broker)
        sock.sendall(frame[:cut])
        sock.close()
    sock = connect(broker)
    sock.sendall(frame)
    sock.close()  # gone before its response: the response is dropped
    assert_still_serving(broker, producer)


def test_hundreds_of_idle_connections(
    broker: EmbeddedBroker, producer: confluent_kafka.Producer
) -> None:
    idle = [connect(broker) for _ in range(300)]
    try:
        wait_for(lambda: broker.brokers[0].connection_count >= 300)
        for _ in range(3):
            assert_still_serving(broker, producer)
        half = idle[:150]
        for sock in half:
            sock.sendall(struct.pack(">i", 100) + b"partial")  # started, never finished
        assert_still_serving(broker, producer)
    finally:
        for sock in idle:
            sock.close()
    wait_for(lambda: broker.brokers[0].connection_count < 10)
