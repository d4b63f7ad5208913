"""Reading kclient's records back from Apache Kafka with Kafka's own Java consumer and with
confluent-kafka, and checking every record: partition, order, key, value, headers and,
where the test set one, the timestamp. Also: which request versions kclient sent."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import confluent_kafka

from kclient.testing.apache_kafka import ApacheKafka
from kclient.testing.apache_kafka_java import JavaReadBack

Headers = tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Sent:
    """A record as the test sent it."""

    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp_ms: int | None = None
    """Checked when set (the record's CreateTime)."""


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _expected(
    sent: Sequence[Sent],
) -> dict[int, list[tuple[bytes | None, bytes | None, Headers, int | None]]]:
    out: dict[int, list[tuple[bytes | None, bytes | None, Headers, int | None]]] = {}
    for s in sent:
        out.setdefault(s.partition, []).append((s.key, s.value, s.headers, s.timestamp_ms))
    return out


def _strip_unstamped(
    got: dict[int, list[tuple[bytes | None, bytes | None, Headers, int]]],
    want: dict[int, list[tuple[bytes | None, bytes | None, Headers, int | None]]],
) -> dict[int, list[tuple[bytes | None, bytes | None, Headers, int | None]]]:
    """``got`` with the timestamps the test did not set blanked (compared positionally)."""
    out: dict[int, list[tuple[bytes | None, bytes | None, Headers, int | None]]] = {}
    for partition, rows in got.items():
        expected = want.get(partition, [])
        out[partition] = [
            (k, v, h, ts if i < len(expected) and expected[i][3] is not None else None)
            for i, (k, v, h, ts) in enumerate(rows)
        ]
    return out


def java_view(
    read: JavaReadBack, topic: str
) -> dict[int, list[tuple[bytes | None, bytes | None, Headers, int]]]:
    out: dict[int, list[tuple[bytes | None, bytes | None, Headers, int]]] = {}
    for r in sorted(read.of(topic), key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append((r.key, r.value, r.headers, r.timestamp_ms))
    return out


def confluent_read(
    kafka: ApacheKafka,
    counts: Mapping[str, tuple[int, int]],
    *,
    isolation_level: str = "read_committed",
    listener: str = "PLAINTEXT",
    mechanism: str | None = None,
    timeout_s: float = 30.0,
) -> dict[str, dict[int, list[tuple[bytes | None, bytes | None, Headers, int]]]]:
    """Read every topic of ``counts`` (topic → (partitions, records expected)) with a
    confluent-kafka consumer until it has the expected count, then 0.3 s more to catch
    extras; per topic, per partition, records in the order read."""
    consumer = confluent_kafka.Consumer(
        {
            **kafka.client_config(listener, mechanism),
            "group.id": unique("confluent-read"),
            "enable.auto.commit": False,
            "isolation.level": isolation_level,
            "fetch.wait.max.ms": 20,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, 0)
            for topic, (partitions, _) in counts.items()
            for p in range(partitions)
        ]
    )
    want = sum(n for _, n in counts.values())
    got: dict[str, dict[int, list[tuple[bytes | None, bytes | None, Headers, int]]]] = {
        topic: {} for topic in counts
    }
    seen = 0
    deadline = time.monotonic() + timeout_s
    extra_until: float | None = None
    try:
        while time.monotonic() < deadline:
            if seen >= want:
                extra_until = extra_until or time.monotonic() + 0.3
                if time.monotonic() >= extra_until:
                    break
            for msg in consumer.consume(1000, 0.1):
                assert msg.error() is None, msg.error()
                headers = tuple((k, v) for k, v in (msg.headers() or ()))
                got[msg.topic()].setdefault(msg.partition(), []).append(
                    (msg.key(), msg.value(), headers, msg.timestamp()[1])
                )
                seen += 1
    finally:
        consumer.close()
    return got


def assert_read_back(
    kafka: ApacheKafka,
    expected: Mapping[str, tuple[int, Sequence[Sent]]],
    *,
    listener: str = "PLAINTEXT",
    mechanism: str | None = None,
    group: str | None = None,
    confluent_listener: str | None = None,
    confluent_mechanism: str | None = None,
) -> JavaReadBack:
    """Read every topic of ``expected`` (topic → (partitions, records sent, in order)) in
    ``read_committed`` with the Java consumer (one JVM for all) and with confluent-kafka,
    and assert both see exactly the records sent, per partition in the order sent. The
    Java consumer connects to ``listener``; confluent-kafka to ``confluent_listener`` (the
    same unless given)."""
    java = kafka.java_read(list(expected), group=group, listener=listener, mechanism=mechanism)
    confluent = confluent_read(
        kafka,
        {topic: (partitions, len(sent)) for topic, (partitions, sent) in expected.items()},
        listener=confluent_listener or listener,
        mechanism=confluent_mechanism if confluent_listener else mechanism,
    )
    for topic, (_, sent) in expected.items():
        want = _expected(sent)
        assert _strip_unstamped(java_view(java, topic), want) == want, f"Java consumer, {topic}"
        assert _strip_unstamped(confluent[topic], want) == want, f"confluent-kafka, {topic}"
    return java


@contextmanager
def request_versions() -> Iterator[dict[str, set[int]]]:
    """Api name (``PRODUCE``, ``END_TXN``…) → the versions kclient sent them at, from the
    network client's DEBUG lines, while the block runs."""
    seen: dict[str, set[int]] = {}
    pattern = re.compile(r"sending (\w+) v(\d+) to node")

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found = pattern.search(record.getMessage())
            if found:
                seen.setdefault(found.group(1), set()).add(int(found.group(2)))

    logger = logging.getLogger("kclient.network.client")
    handler = Collect(logging.DEBUG)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
