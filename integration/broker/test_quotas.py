"""Client quotas on a running embedded broker: a client over its quota is told how long to
wait (throttle_time_ms) and its connection is muted that long (KIP-219), an old request
version's answer is held back instead; a flooding client is slowed while an honest one
keeps its rate."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kclient.broker import EmbeddedBroker
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response, encode_request
from kclient.record import RecordBatchBuilder

from .clients import read_frame

TOPIC = "quota-topic"


def records(n: int, size: int = 1000) -> bytes:
    builder = RecordBatchBuilder("none", batch_size=1 << 30)
    for i in range(n):
        builder.append(1_700_000_000_000 + i, None, b"x" * size, ())
    return builder.build()


class RawClient:
    """One connection speaking the protocol by hand (to see what the broker answers)."""

    def __init__(self, broker: EmbeddedBroker, client_id: str) -> None:
        self.sock = socket.create_connection((broker.host, broker.port), timeout=10)
        self.client_id = client_id
        self.correlation = 0

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        self.correlation += 1
        frame = encode_request(api_key, version, self.correlation, self.client_id, body)
        self.sock.sendall(b"".join(frame))

    def receive(self, api_key: int, version: int) -> dict[str, Any]:
        corr, body = decode_response(api_key, version, read_frame(self.sock))
        assert corr == self.correlation
        return body

    def produce(self, version: int, batch: bytes) -> tuple[float, dict[str, Any]]:
        """Seconds until the answer, and the answer."""
        start = time.monotonic()
        self.send_produce(version, batch)
        body = self.receive(ApiKey.PRODUCE, version)
        assert body["responses"][0]["partition_responses"][0]["error_code"] == 0
        return time.monotonic() - start, body

    def send_produce(self, version: int, batch: bytes) -> None:
        self.send(
            ApiKey.PRODUCE,
            version,
            {
                "transactional_id": None,
                "acks": 1,
                "timeout_ms": 5000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": batch}]}],
            },
        )

    def metadata(self) -> float:
        start = time.monotonic()
        self.send(ApiKey.METADATA, 12, {"topics": [], "allow_auto_topic_creation": False})
        self.receive(ApiKey.METADATA, 12)
        return time.monotonic() - start

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    # 2 KB/s per client id, measured over 2 windows of 1 s (so that throttle times are
    # short: 3 KB at once is 0.55 s)
    with EmbeddedBroker(quota_producer_byte_rate=2000, quota_window_num=2) as b:
        b.create_topic(TOPIC)
        yield b


def test_a_client_over_its_quota_is_answered_at_once_then_muted(broker: EmbeddedBroker) -> None:
    client = RawClient(broker, "flood")
    try:
        elapsed_s, body = client.produce(9, records(3))  # 3 KB in a 1 s window: 1.5 times the quota
        throttle_ms = body["throttle_time_ms"]
        assert throttle_ms > 300
        assert elapsed_s < throttle_ms / 1000 / 2  # the answer came at once (KIP-219)
        # a client ignoring throttle_time_ms: its next request waits out the throttle time
        waited_s = client.metadata()
        assert waited_s >= throttle_ms / 1000 - 0.05
        assert waited_s < throttle_ms / 1000 + 1
    finally:
        client.close()
    # the broker counted it, per client id
    (m,) = [m for m in broker.quota_metrics() if m.client_id == "flood"]
    assert m.quota_type == "Produce" and m.quota == 2000
    assert m.throttle_count == 1 and m.throttle_time_ms_total == throttle_ms


def test_an_old_produce_version_gets_its_answer_after_the_throttle_time(
    broker: EmbeddedBroker,
) -> None:
    client = RawClient(broker, "old-client")
    try:
        elapsed_s, body = client.produce(5, records(3))  # Produce v5: before KIP-219
        throttle_ms = body["throttle_time_ms"]
        assert throttle_ms > 300
        assert elapsed_s >= throttle_ms / 1000 - 0.05
        assert client.metadata() < 1.0  # and then the connection is read again
    finally:
        client.close()


def test_other_clients_are_not_held_up_by_a_throttled_one(broker: EmbeddedBroker) -> None:
    flood = RawClient(broker, "flood")
    honest = RawClient(broker, "honest")
    try:
        start = time.monotonic()
        flood.send_produce(5, records(3))  # its answer is held back for seconds
        latencies = [honest.produce(9, records(1, size=100))[0] for _ in range(5)]
        assert max(latencies) < 0.5
        body = flood.receive(ApiKey.PRODUCE, 5)
        assert time.monotonic() - start >= body["throttle_time_ms"] / 1000 - 0.05 > 0.3
    finally:
        flood.close()
        honest.close()
