"""kclient → Apache Kafka 4.4 and 3.9 (one node), read back by Kafka's own Java consumer and
by confluent-kafka: the sync producer, kclient.aio and ``send_batch`` (lists and Arrow) at
the newest Produce version each broker serves, every codec with its levels, acks 0/1/all
with idempotence on and off, a record of the largest size a request takes, and the TLS and
SASL (PLAIN, SCRAM-SHA-256/512) listeners. Each test writes a topic per case and reads
them all back with one JVM."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import pyarrow as pa

from integration.apache_kafka.readback import Sent, assert_read_back, request_versions, unique
from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
from kclient.protocol import ApiKey
from kclient.sender.sender import PRODUCE_MAX_VERSION
from kclient.testing.apache_kafka import ApacheKafka

PARTITIONS = 3
#: a timestamp the broker's 7-day retention keeps (an older one is deleted within minutes)
_HOUR_AGO_MS = int(time.time() * 1000) - 3_600_000


def _records(tag: str, n: int = 12) -> list[Sent]:
    """Keyed records with headers over every partition, a null key and a null value among
    them, and every third with its own timestamp."""
    out = []
    for i in range(n):
        key = None if i == 1 else b"%s-k%d" % (tag.encode(), i)
        value = None if i == 2 else b"%s-v%d" % (tag.encode(), i)
        headers: tuple[tuple[str, bytes | None], ...] = (
            ("i", str(i).encode()),
            ("tag", tag.encode()),
            ("none", None),
        )
        stamp = _HOUR_AGO_MS + i if i % 3 == 0 else None
        out.append(Sent(i % PARTITIONS, key, value, headers if i % 2 else (), stamp))
    return out


def _send_all(producer: KafkaProducer, topic: str, records: list[Sent]) -> None:
    futures = [
        producer.send(
            topic,
            r.value,
            key=r.key,
            partition=r.partition,
            headers=list(r.headers),
            timestamp_ms=r.timestamp_ms,
        )
        for r in records
    ]
    producer.flush(timeout=30)
    for future in futures:
        future.result(timeout=0)


def _topic(kafka: ApacheKafka, prefix: str) -> str:
    name = unique(prefix)
    kafka.create_topic(name, PARTITIONS)
    return name


def test_sync_aio_and_send_batch_at_the_newest_produce_version(apache_kafka: ApacheKafka) -> None:
    kafka = apache_kafka
    topics = {name: _topic(kafka, name) for name in ("sync", "aio", "lists", "arrow")}
    expected: dict[str, tuple[int, list[Sent]]] = {}
    with request_versions() as used:
        with KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
            records = _records("sync")
            _send_all(producer, topics["sync"], records)
            expected[topics["sync"]] = (PARTITIONS, records)

            rows = [r for r in _records("lists") if r.partition == 0]  # bulk path: one partition
            producer.send_batch(
                topics["lists"],
                [r.value for r in rows],
                [r.key for r in rows],
                [list(r.headers) for r in rows],
                [r.partition for r in rows],
                [r.timestamp_ms for r in rows],
            ).result(timeout=30)
            expected[topics["lists"]] = (PARTITIONS, rows)

            values = [b"arrow-%d" % i for i in range(40)]
            keys = [b"key-%d" % (i % 7) for i in range(40)]
            parts = [i % PARTITIONS for i in range(40)]
            producer.send_batch(
                topics["arrow"],
                pa.array(values, pa.binary()),
                pa.array(keys, pa.binary()),
                partitions=pa.array(parts, pa.int32()),
            ).result(timeout=30)
            expected[topics["arrow"]] = (
                PARTITIONS,
                [Sent(p, k, v) for p, k, v in zip(parts, keys, values, strict=True)],
            )

        async def aio() -> list[Sent]:
            sent = _records("aio")
            async with AIOKafkaProducer(bootstrap_servers=kafka.bootstrap_servers) as producer:
                for r in sent[:6]:
                    await producer.send_and_wait(
                        topics["aio"], r.value, r.key, r.partition, r.timestamp_ms, list(r.headers)
                    )
                pending = [
                    await producer.send(
                        topics["aio"],
                        r.value,
                        r.key,
                        r.partition,
                        r.timestamp_ms,
                        list(r.headers),
                    )
                    for r in sent[6:]
                ]
                await asyncio.gather(*pending)
                batch = producer.create_batch()
                tail = [Sent(1, b"batch-k%d" % i, b"batch-v%d" % i) for i in range(5)]
                for r in tail:
                    batch.append(timestamp=None, key=r.key, value=r.value)
                await (await producer.send_batch(batch, topics["aio"], partition=1))
            return sent + tail

        expected[topics["aio"]] = (PARTITIONS, asyncio.run(aio()))
    # v13 on Kafka 4.4 (topics by id, KIP-516), v11 on 3.9
    served = kafka.api_versions()[ApiKey.PRODUCE][1]
    assert served == (13 if kafka.version.startswith("4.") else 11)
    assert used["PRODUCE"] == {min(PRODUCE_MAX_VERSION, served)}
    assert_read_back(kafka, expected)


CODECS: list[tuple[str, dict[str, Any]]] = [
    ("none", {}),
    ("gzip", {}),
    ("gzip", {"compression.gzip.level": 1}),
    ("gzip", {"compression.gzip.level": 9}),
    ("snappy", {}),
    ("lz4", {}),
    ("lz4", {"compression.lz4.level": 1}),
    ("lz4", {"compression.lz4.level": 17}),
    ("zstd", {}),
    ("zstd", {"compression.zstd.level": -5}),
    ("zstd", {"compression.zstd.level": 19}),
]


def test_every_codec_and_level(apache_kafka: ApacheKafka) -> None:
    kafka = apache_kafka
    expected: dict[str, tuple[int, list[Sent]]] = {}
    for codec, levels in CODECS:
        topic = _topic(kafka, f"codec-{codec}")
        settings = {
            "bootstrap.servers": kafka.bootstrap_servers,
            "compression.type": codec,
            "linger.ms": 50,  # several records per batch: the batch is what is compressed
            **levels,
        }
        records = _records(codec, 30)
        with KafkaProducer(settings) as producer:
            _send_all(producer, topic, records)
        expected[topic] = (PARTITIONS, records)
    assert_read_back(kafka, expected)


def test_acks_and_idempotence(apache_kafka: ApacheKafka) -> None:
    kafka = apache_kafka
    expected: dict[str, tuple[int, list[Sent]]] = {}
    for max_in_flight in (1, 5):
        for acks, idempotence in (("0", False), ("1", False), ("all", False), ("all", True)):
            topic = _topic(kafka, f"acks{acks}-idem{int(idempotence)}-{max_in_flight}")
            settings = {
                "bootstrap.servers": kafka.bootstrap_servers,
                "acks": acks,
                "enable.idempotence": idempotence,
                "max.in.flight.requests.per.connection": max_in_flight,
                "batch.size": 200,  # many small batches in flight at once
            }
            records = _records(f"acks{acks}", 60)
            with KafkaProducer(settings) as producer:
                _send_all(producer, topic, records)
            expected[topic] = (PARTITIONS, records)
    assert_read_back(kafka, expected)


def test_records_of_the_largest_size_a_request_takes(apache_kafka: ApacheKafka) -> None:
    """A record just under ``max.request.size`` (1 MiB; the broker takes 1 MiB + 12 bytes
    per batch), and more small records than one request holds."""
    kafka = apache_kafka
    topic = _topic(kafka, "large")
    big = os.urandom(1024 * 1024 - 200)  # incompressible: the record batch is as big
    records = [Sent(0, b"big", big, (("h", b"x"),))]
    records += [Sent(1, b"small-%d" % i, os.urandom(1000)) for i in range(2000)]
    settings = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "batch.size": 512 * 1024,
        "linger.ms": 100,
    }
    with KafkaProducer(settings) as producer:
        _send_all(producer, topic, records)
    assert_read_back(kafka, {topic: (PARTITIONS, records)})


def test_tls_and_sasl_listeners(apache_kafka: ApacheKafka) -> None:
    """kclient writes through the SSL listener and through SASL with each mechanism; the
    Java consumer reads through SASL (SCRAM-SHA-512), confluent-kafka through TLS."""
    kafka = apache_kafka
    expected: dict[str, tuple[int, list[Sent]]] = {}
    for listener, mechanism in (
        ("SSL", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ):
        topic = _topic(kafka, f"{listener}-{mechanism}".lower())
        records = _records(f"{listener}-{mechanism}")
        with KafkaProducer(kafka.client_config(listener, mechanism)) as producer:
            _send_all(producer, topic, records)
        expected[topic] = (PARTITIONS, records)
    assert_read_back(
        kafka,
        expected,
        listener="SASL_PLAINTEXT",
        mechanism="SCRAM-SHA-512",
        confluent_listener="SSL",
    )
