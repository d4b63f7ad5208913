"""Read a topic back with an independent consumer (confluent-kafka, ``assign`` over every
partition) and compare what was written with what arrived, as a multiset."""

from __future__ import annotations

import hashlib
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import confluent_kafka

from integration.peers import QUICK_READ, from_start

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Consumed:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: Headers


def consume_all(
    bootstrap: str, topic: str, partitions: int, expected: int, timeout_s: float = 60.0
) -> list[Consumed]:
    """Every record of the topic: reads until at least ``expected`` records arrived and
    every partition then reported its end, so duplicates beyond ``expected`` show up."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"kclient-spark-verify-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 50 * 1024 * 1024,
            **QUICK_READ,
        }
    )
    out: list[Consumed] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        consumer.assign(from_start(topic, partitions))
        while len(out) < expected or len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"read {len(out)} of {expected} records of {topic!r} in {timeout_s} s "
                    f"(partitions at their end: {sorted(at_end)})"
                )
            for message in consumer.consume(10_000, 0.5):
                m: Any = message  # its accessors are typed Optional for error messages
                if m.error() is not None:
                    if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                        continue
                    raise confluent_kafka.KafkaException(m.error())
                at_end.discard(m.partition())
                out.append(
                    Consumed(
                        topic=m.topic(),
                        partition=m.partition(),
                        offset=m.offset(),
                        timestamp_ms=m.timestamp()[1],
                        key=m.key(),
                        value=m.value(),
                        headers=cast(Headers, tuple(m.headers() or ())),
                    )
                )
    finally:
        consumer.close()
    return out


Record = tuple[bytes | None, bytes | None, Headers]


def checksum(records: Iterable[Record]) -> tuple[int, str]:
    """Count and an order-independent digest of (key, value, headers) records."""
    count = 0
    total = 0
    for key, value, headers in records:
        h = hashlib.blake2b(digest_size=16)
        for part in (key, value):
            h.update(b"\x00" if part is None else b"\x01%d:" % len(part) + part)
        for name, hv in headers:
            h.update(b"\x02" + name.encode() + b"\x00")
            h.update(b"\x00" if hv is None else b"\x01%d:" % len(hv) + hv)
        total = (total + int.from_bytes(h.digest(), "big")) % (1 << 128)
        count += 1
    return count, f"{total:032x}"
