"""Read what the producer wrote with an independent consumer (confluent-kafka, ``assign``),
and the workload shared by the producer's integration tests."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import confluent_kafka

from integration.peers import QUICK_READ, from_start

Headers = list[tuple[str, bytes | None]]
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers


def dataset(n: int, tag: str) -> list[tuple[bytes | None, bytes, Headers]]:
    """Keys and null keys, an empty value, no/one/two headers; values unique per tag."""
    out: list[tuple[bytes | None, bytes, Headers]] = []
    for i in range(n):
        key = None if i % 3 == 0 else f"key-{i % 17}".encode()
        value = b"" if i == 5 else f"{tag}-{i}-".encode() + bytes([i % 256]) * (i % 50)
        headers: Headers = []
        if i % 2:
            headers.append(("trace", f"t{i}".encode()))
        if i % 4 == 1:
            headers.append(("empty", b""))
        out.append((key, value, headers))
    return out


def consume_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    timeout_s: float = 60,
    *,
    settings: dict[str, object] | None = None,
) -> list[Consumed]:
    """Every record of the topic, in (partition, offset) order.

    Reads until at least ``expected`` records arrived and every partition then reported
    its end, so duplicates beyond ``expected`` are returned too. ``settings`` go to the
    consumer as well (e.g. ``security.protocol`` and ``ssl.ca.location``).
    """
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **QUICK_READ,
            **(settings or {}),
        }
    )
    try:
        consumer.assign(from_start(topic, partitions))
        out: list[Consumed] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + timeout_s
        while len(out) < expected or len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumed {len(out)} of {expected} records in {timeout_s} s")
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    continue
                raise RuntimeError(f"consumer error: {message.error()}")
            at_end.discard(message.partition())
            headers = list(message.headers() or [])
            out.append(
                Consumed(
                    message.partition(),
                    message.offset(),
                    message.key(),
                    message.value(),
                    headers,
                )
            )
        return sorted(out, key=lambda c: (c.partition, c.offset))
    finally:
        consumer.close()


def confluent_partitions(bootstrap: str, topic: str, keys: list[bytes]) -> dict[bytes, int]:
    """Where confluent-kafka (librdkafka) with ``partitioner=murmur2_random`` puts each key."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5}
    )
    placed: dict[bytes, int] = {}

    def report(err: object, message: confluent_kafka.Message) -> None:
        if err is None:
            placed[message.key()] = message.partition()

    for key in keys:
        producer.produce(topic, value=b"x", key=key, on_delivery=report)
    producer.flush(60)
    return placed
