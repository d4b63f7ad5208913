"""A 3-node Apache Kafka 4.4 (replication factor 3, min.insync.replicas=2): idempotent
kclient producers with acks=all keep writing while the partition's leader is killed
(``kill -9``) or paused (SIGSTOP) past ``request.timeout.ms``, follow the new leader, and
lose, duplicate and reorder nothing; the killed node then comes back."""

from __future__ import annotations

import asyncio
import time

from integration.apache_kafka.chaos import metadata_requests
from integration.apache_kafka.faults import move_leader
from integration.apache_kafka.readback import Sent, assert_read_back, unique
from kclient import KafkaProducer
from kclient.aio import AIOKafkaProducer
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
