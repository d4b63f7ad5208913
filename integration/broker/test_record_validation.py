"""Batches Kafka's LogValidator refuses, sent over a real socket, are answered with its error
codes and never reach a consumer: confluent-kafka reads back only the good records."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator

import confluent_kafka
import pytest

from kclient import errors
from kclient.broker import EmbeddedBroker
from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_response
from kclient.testing.hostile import (
    bad_gzip_batch,
    count_mismatch_batch,
    produce_request,
    read_frame,
    trailing_bytes_batch,
    zstd_bomb_batch,
)

BAD_BATCHES = {
    "count mismatch": (count_mismatch_batch, errors.InvalidRecordError),
    "trailing bytes": (trailing_bytes_batch, errors.InvalidRecordError),
    "not gzip": (bad_gzip_batch, errors.CorruptMessageError),
    "zstd bomb": (lambda ts: zstd_bomb_batch(64, 1 << 20, ts), errors.MessageTooLargeError),
}


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        b.create_topic("checked", 1)
        yield b


def produce_raw(sock: socket.socket, corr: int, records: bytes) -> dict[str, object]:
    sock.sendall(produce_request("checked", records, correlation_id=corr, acks=-1))
    got, reply = decode_response(ApiKey.PRODUCE, 9, read_frame(sock))
    assert got == corr
    part: dict[str, object] = reply["responses"][0]["partition_responses"][0]
    return part


def test_a_consumer_never_sees_a_refused_batch(broker: EmbeddedBroker) -> None:
    now_ms = int(time.time() * 1000)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        for corr, (name, (make, error)) in enumerate(sorted(BAD_BATCHES.items()), 1):
            part = produce_raw(sock, corr, make(now_ms))
            assert part["error_code"] == error.code, (name, part)
            assert part["error_message"], name
    assert broker.high_watermark("checked") == 0
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": broker.bootstrap_servers, "compression.type": "gzip"}
    )
    for i in range(3):
        producer.produce("checked", b"good %d" % i, partition=0)
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": broker.bootstrap_servers,
            "group.id": "verify",
            "enable.auto.commit": False,
        }
    )
    consumer.assign(
        [confluent_kafka.TopicPartition("checked", 0, confluent_kafka.OFFSET_BEGINNING)]
    )
    seen: list[tuple[int, bytes | None]] = []
    deadline = time.monotonic() + 20
    try:
        while len(seen) < 3 and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.2):
                assert msg.error() is None, msg.error()
                seen.append((msg.offset(), msg.value()))
        # nothing more shows up
        seen.extend((msg.offset(), msg.value()) for msg in consumer.consume(100, 0.5))
    finally:
        consumer.close()
    assert seen == [(0, b"good 0"), (1, b"good 1"), (2, b"good 2")]
