"""A 3-node Apache Kafka 4.4 (replication factor 3, min.insync.replicas=2): idempotent
kclient producers with acks=all keep writing while the partition's leader is killed
(``kill -9``) or paused (SIGSTOP) past ``request.timeout.ms``, follow the new leader, and
lose, duplicate and reorder nothing; the killed node then comes back. And KIP-580: the
retries of a batch answered NOT_ENOUGH_REPLICAS (a partition on nodes 1 and 2 with
``min.insync.replicas=2``, node 2 stopped: a controlled shutdown takes it out of the ISR at
once) are spaced ``retry.backoff.ms`` doubling with ±20 % jitter up to
``retry.backoff.max.ms``, observed through kclient's own log records (the time of each
Produce request it sends). (On one node Kafka 4.4 caps the effective
``min.insync.replicas`` at the replication factor: no such answer.)"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from integration.apache_kafka.chaos import metadata_requests
from integration.apache_kafka.faults import move_leader, wait_for
from integration.apache_kafka.readback import Sent, assert_read_back, unique
from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
from kclient.cli.admin import BlockingConnection, ClusterReader, parse_address
from kclient.errors import KafkaError
from kclient.protocol import ApiKey
from kclient.testing.apache_kafka import ApacheKafka


def test_idempotent_producer_across_a_killed_leader(apache_kafka_cluster: ApacheKafka) -> None:
    kafka = apache_kafka_cluster
    topic = unique("failover")
    kafka.create_topic(topic, 1, replication_factor=3)
    leader = kafka.leaders(topic)[0]
    records = [Sent(0, b"k%d" % (i % 5), b"v%d" % i) for i in range(200)]
    settings = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 300,  # several batches in flight when the leader dies
        "request.timeout.ms": 5000,
        "delivery.timeout.ms": 60000,
    }
    with KafkaProducer(settings) as producer:
        futures = [producer.send(topic, r.value, key=r.key, partition=0) for r in records[:100]]
        producer.flush(timeout=30)
        kafka.kill_broker(leader)
        futures += [producer.send(topic, r.value, key=r.key, partition=0) for r in records[100:]]
        producer.flush(timeout=60)
        offsets = [f.result(timeout=0).offset for f in futures]
    assert offsets == list(range(200))
    assert kafka.leaders(topic)[0] not in (leader, -1)
    assert_read_back(kafka, {topic: (1, records)})
    kafka.start_broker(leader)
    assert kafka.is_running(leader)


def test_idempotent_producers_across_a_paused_leader(apache_kafka_cluster: ApacheKafka) -> None:
    """The leader is stopped (SIGSTOP) past ``request.timeout.ms``: the controller fences
    it, a sync and an asyncio producer time their requests out, retry on the new leader,
    and every record is acknowledged once, in order, within ``delivery.timeout.ms``."""
    kafka = apache_kafka_cluster
    topic = unique("paused")
    kafka.create_topic(topic, 2, replication_factor=3)
    leader = kafka.leaders(topic)[0]
    settings = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 300,
        "request.timeout.ms": 2000,
        "delivery.timeout.ms": 30000,
    }
    sync_records = [Sent(0, b"s%d" % (i % 3), b"sync-%d" % i) for i in range(120)]
    aio_records = [Sent(1, b"a%d" % (i % 3), b"aio-%d" % i) for i in range(120)]

    async def aio_send(producer: AIOKafkaProducer, rows: list[Sent]) -> list[int]:
        futures = [await producer.send(topic, r.value, r.key, 1) for r in rows]
        return [(await f).offset for f in futures]

    async def run() -> tuple[list[int], list[int]]:
        async with AIOKafkaProducer(**{k.replace(".", "_"): v for k, v in settings.items()}) as aio:
            with KafkaProducer(settings) as producer:
                sync = [
                    producer.send(topic, r.value, key=r.key, partition=0) for r in sync_records[:60]
                ]
                aio_offsets = await aio_send(aio, aio_records[:60])
                producer.flush(timeout=30)
                kafka.pause_broker(leader)
                try:
                    started = time.monotonic()
                    sync += [
                        producer.send(topic, r.value, key=r.key, partition=0)
                        for r in sync_records[60:]
                    ]
                    aio_offsets += await aio_send(aio, aio_records[60:])
                    await asyncio.get_running_loop().run_in_executor(None, producer.flush, 30)
                    # acknowledged while the old leader is stopped: by the new leader
                    assert time.monotonic() - started < 30
                finally:
                    kafka.resume_broker(leader)
                return [f.result(timeout=0).offset for f in sync], aio_offsets

    sync_offsets, aio_offsets = asyncio.run(run())
    assert sync_offsets == list(range(120))
    assert aio_offsets == list(range(120))
    assert_read_back(kafka, {topic: (2, sync_records + aio_records)})


def test_a_moved_leader_is_followed_from_the_produce_answers(
    apache_kafka_cluster: ApacheKafka,
) -> None:
    """KIP-951 on Apache Kafka 4.4: leadership moves while every node stays up; the old
    leader's NOT_LEADER_OR_FOLLOWER answer names the new leader, and the producer's
    retries go there without a single Metadata request."""
    kafka = apache_kafka_cluster
    topic = unique("kip951")
    kafka.create_topic(topic, 1, replication_factor=3)
    old = kafka.leaders(topic)[0]
    settings = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "client.id": "kip951",
    }
    records = [Sent(0, b"k%d" % i, b"v%d" % i) for i in range(60)]
    with KafkaProducer(settings) as producer, metadata_requests() as sent:
        futures = [producer.send(topic, r.value, key=r.key, partition=0) for r in records[:30]]
        producer.flush(timeout=30)
        before = sent["kip951"]
        new = move_leader(kafka, topic, 0)
        started = time.monotonic()
        futures += [producer.send(topic, r.value, key=r.key, partition=0) for r in records[30:]]
        futures[30].result(timeout=30)
        first_s = time.monotonic() - started
        producer.flush(timeout=30)
        followed = producer.metrics()["leader-hint-followed-total"]
        after = sent["kip951"]
    print(
        f"\nleader {old} -> {new}: the first record after the move acknowledged in "
        f"{first_s * 1000:.0f} ms; {after - before} Metadata requests; {followed:.0f} "
        "batches followed a leader hint"
    )
    assert [f.result(timeout=0).offset for f in futures] == list(range(60))
    assert new != old and kafka.leaders(topic)[0] == new
    assert followed >= 1, "no retry followed a leader hint"
    assert after == before, f"{after - before} Metadata requests after the leader moved"


def _create_on_nodes_1_and_2(kafka: ApacheKafka, topic: str) -> None:
    """One partition, replicas [1, 2] (1 leads), ``min.insync.replicas=2``."""
    host, port = parse_address(kafka.broker_address(1))
    with BlockingConnection(host, port, "kip580", 30.0) as conn:
        body = conn.request(
            ApiKey.CREATE_TOPICS,
            {
                "topics": [
                    {
                        "name": topic,
                        "num_partitions": -1,
                        "replication_factor": -1,
                        "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}],
                        "configs": [{"name": "min.insync.replicas", "value": "2"}],
                    }
                ],
                "timeout_ms": 30_000,
            },
        )
    assert body["topics"][0]["error_code"] == 0, body


def _isr(kafka: ApacheKafka, topic: str) -> list[int]:
    reader = ClusterReader(kafka.broker_address(1))
    try:
        partitions = reader.metadata(topic)["partitions"]  # none until the topic is known
        if not partitions or partitions[0]["leader_id"] != 1:
            return []
        return sorted(partitions[0]["isr_nodes"])
    finally:
        reader.close()


@contextmanager
def _node_2_stopped(kafka: ApacheKafka, topic: str) -> Iterator[None]:
    kafka.stop_broker(2)
    try:
        wait_for(lambda: _isr(kafka, topic) == [1], 30, "node 2 out of the ISR")
        yield
    finally:
        kafka.start_broker(2)
        wait_for(lambda: _isr(kafka, topic) == [1, 2], 60, "node 2 back in the ISR")


def test_kip580_retries_back_off_exponentially_with_jitter(
    apache_kafka_cluster: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    kafka = apache_kafka_cluster
    topic = unique("kip580")
    _create_on_nodes_1_and_2(kafka, topic)
    wait_for(lambda: _isr(kafka, topic) == [1, 2], 30, "the topic in sync")
    settings = {
        "bootstrap.servers": kafka.broker_address(1),
        "retry.backoff.ms": 100,
        "retry.backoff.max.ms": 800,
        "delivery.timeout.ms": 5_000,
        "request.timeout.ms": 2_000,
        "linger.ms": 0,
    }
    with (
        _node_2_stopped(kafka, topic),
        caplog.at_level(logging.DEBUG, logger="kclient"),
        KafkaProducer(settings) as producer,
    ):
        future = producer.send(topic, b"v")
        with pytest.raises(KafkaError):
            future.result(timeout=30)
    messages = [(record.created, record.getMessage()) for record in caplog.records]
    assert any("NotEnoughReplicas" in message for _, message in messages), messages
    sent = [created for created, message in messages if "produce request to node 1" in message]
    gaps_ms = [(later - earlier) * 1000 for earlier, later in itertools.pairwise(sent)]
    assert len(gaps_ms) >= 5, gaps_ms
    for attempt, gap_ms in enumerate(gaps_ms):
        base_ms = min(100 * 2**attempt, 800)
        # ±20 % jitter, capped at the max; never early, and late by at most the round trip
        # and the scheduling of a shared machine
        assert 0.8 * base_ms - 5 <= gap_ms <= min(1.2 * base_ms, 800) + 600, gaps_ms
    ratios = [gap / min(100 * 2**i, 800) for i, gap in enumerate(gaps_ms)]
    assert max(ratios) - min(ratios) > 0.04, ratios  # jittered, not a fixed schedule
