"""kclient → the embedded 3-broker cluster, read back by confluent-kafka; brokers stopped
and started during a run; every broker down."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from integration.producer.verify import CODECS, consume_all, dataset
from kclient import KafkaProducer
from kclient.broker import EmbeddedCluster
from kclient.errors import KafkaError
from kclient.protocol import ApiKey

_topics = itertools.count()


@pytest.fixture
def cluster() -> Iterator[EmbeddedCluster]:
    with EmbeddedCluster(3) as embedded:
        yield embedded


def _topic(cluster: EmbeddedCluster, partitions: int) -> str:
    name = f"kclient-{next(_topics)}"
    cluster.create_topic(name, partitions)
    return name


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips_across_three_brokers(cluster: EmbeddedCluster, codec: str) -> None:
    topic = _topic(cluster, 6)
    assert {cluster.leader(topic, p) for p in range(6)} == {0, 1, 2}
    records = dataset(400, codec)
    with KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        compression_type=codec,
        batch_size=4096,
    ) as producer:
        futures = [producer.send(topic, value=v, key=k, headers=h) for k, v, h in records]
        producer.flush(60)
        placed = [f.result(0) for f in futures]
    consumed = consume_all(cluster.bootstrap_servers, topic, 6, len(records))
    assert len(consumed) == len(records)
    by_position = {(c.partition, c.offset): c for c in consumed}
    for (key, value, headers), md in zip(records, placed, strict=True):
        got = by_position[(md.partition, md.offset)]
        assert (got.key, got.value, got.headers) == (key, value, headers)
    for partition in range(6):
        sent = [
            v for (_, v, _), md in zip(records, placed, strict=True) if md.partition == partition
        ]
        assert [c.value for c in consumed if c.partition == partition] == sent


def test_brokers_restarting_during_a_run_lose_and_duplicate_nothing(
    cluster: EmbeddedCluster,
) -> None:
    topic = _topic(cluster, 6)
    total = 30_000
    errors: list[BaseException] = []
    with KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        linger_ms=2,
        batch_size=4096,
        request_timeout_ms=5_000,
        delivery_timeout_ms=60_000,
        retry_backoff_ms=20,
        reconnect_backoff_ms=20,
    ) as producer:

        def chaos() -> None:
            for node in (0, 1, 2, 0):
                time.sleep(0.3)
                cluster.stop_broker(node)
                time.sleep(0.3)
                cluster.start_broker(node)

        restarts = threading.Thread(target=chaos)
        restarts.start()
        futures = []
        for i in range(total):
            futures.append(producer.send(topic, value=b"%06d" % i, partition=i % 6))
            if i % 2000 == 0:
                time.sleep(0.05)  # keep the run going while brokers come and go
        restarts.join(60)
        producer.flush(120)
        for future in futures:
            exc = future.exception(0)
            if exc is not None:
                errors.append(exc)
    assert errors == []
    consumed = consume_all(cluster.bootstrap_servers, topic, 6, total)
    for partition in range(6):
        values = [int(c.value or b"") for c in consumed if c.partition == partition]
        assert values == list(range(partition, total, 6)), (
            f"partition {partition} lost or duplicated"
        )


def test_threads_sending_while_brokers_restart_at_random_lose_duplicate_reorder_nothing(
    cluster: EmbeddedCluster,
) -> None:
    """Three threads share one producer (idempotent, lz4, 5 requests in flight) while a
    broker at a time goes down for 0.05-1 s at random moments (a fixed seed: the same
    schedule every run): each thread's records stay in order within each partition, and
    every record is there exactly once."""
    partitions, threads, total = 12, 3, 150_000
    topic = _topic(cluster, partitions)
    rng = random.Random(7)
    stop = threading.Event()
    restarts: list[int] = []

    def chaos() -> None:
        while not stop.wait(rng.uniform(0.1, 0.5)):
            node = rng.choice(cluster.broker_ids)
            cluster.stop_broker(node)
            restarts.append(node)
            stop.wait(rng.uniform(0.05, 1.0))
            cluster.start_broker(node)

    futures: list[list[Any]] = [[] for _ in range(threads)]
    with KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        compression_type="lz4",
        linger_ms=2,
        batch_size=4096,
        request_timeout_ms=3_000,
        retry_backoff_ms=20,
        reconnect_backoff_ms=20,
    ) as producer:

        def send(n: int) -> None:
            for i in range(n, total, threads):
                futures[n].append(producer.send(topic, value=b"%08d" % i, partition=i % partitions))
                if i % 1500 < threads:
                    time.sleep(0.02)  # spread the run over the restarts

        restarter = threading.Thread(target=chaos)
        restarter.start()
        senders = [threading.Thread(target=send, args=(n,)) for n in range(threads)]
        for sender in senders:
            sender.start()
        for sender in senders:
            sender.join(120)
        producer.flush(120)
        stop.set()
        restarter.join(10)
        failed = [f.exception(0) for fs in futures for f in fs if f.exception(0) is not None]
    assert failed == []
    assert len(restarts) >= 3
    consumed = consume_all(cluster.bootstrap_servers, topic, partitions, total)
    for partition in range(partitions):
        values = [int(c.value or b"") for c in consumed if c.partition == partition]
        assert sorted(values) == list(range(partition, total, partitions)), (
            f"partition {partition} lost or duplicated records"
        )
        for n in range(threads):
            mine = [v for v in values if v % threads == n]
            assert mine == sorted(mine), f"thread {n}'s records reordered in {partition}"


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
def test_lost_answers_are_retried_and_idempotence_keeps_each_record_once(
    cluster: EmbeddedCluster, idempotent: bool
) -> None:
    """The leader writes three batches but their answers are lost (the connection closes
    instead): the producer retries each. With idempotence the broker recognises the
    retries and every record is there once, at the offset its future reported; without
    it, the same faults leave duplicates (what makes this test able to fail)."""
    topic = _topic(cluster, 1)
    leader = cluster.leader(topic, 0)
    values = [b"%d" % i for i in range(10)]
    with KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        linger_ms=0,
        enable_idempotence=idempotent,
        acks="all" if idempotent else 1,
        retry_backoff_ms=10,
        reconnect_backoff_ms=10,
    ) as producer:
        producer.send(topic, b"first", partition=0).result(10)
        cluster.lose_answers(leader, ApiKey.PRODUCE, 3)
        placed = [producer.send(topic, value, partition=0).result(30) for value in values]
    assert cluster.answers_to_lose(leader) == 0  # all three answers were lost
    consumed = consume_all(cluster.bootstrap_servers, topic, 1, 1 + len(values))
    got = [c.value for c in consumed]
    if idempotent:
        assert got == [b"first", *values]
        assert [md.offset for md in placed] == list(range(1, 1 + len(values)))
    else:
        assert sorted(set(got)) == sorted({b"first", *values})
        assert len(got) == 1 + len(values) + 3  # each lost answer: one record written twice


def test_every_broker_down_fails_every_record_within_the_delivery_timeout(
    cluster: EmbeddedCluster,
) -> None:
    topic = _topic(cluster, 3)
    delivery_timeout_ms = 3_000
    with KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers,
        linger_ms=0,
        request_timeout_ms=1_000,
        delivery_timeout_ms=delivery_timeout_ms,
        reconnect_backoff_max_ms=200,
    ) as producer:
        producer.send(topic, b"warm-up", partition=0).result(10)
        for node in cluster.broker_ids:
            cluster.stop_broker(node)
        start = time.monotonic()
        futures = [producer.send(topic, value=b"%d" % i, partition=i % 3) for i in range(30)]
        failures = []
        for future in futures:
            exc = future.exception(timeout=delivery_timeout_ms / 1000 + 5)
            failures.append(exc)
        elapsed_s = time.monotonic() - start
    assert all(isinstance(exc, KafkaError) for exc in failures)
    assert elapsed_s < delivery_timeout_ms / 1000 + 2
    for index, exc in enumerate(failures):
        assert f"{topic}-{index % 3}" in str(exc)


def test_acks_zero_completes_on_send_and_delivers(cluster: EmbeddedCluster) -> None:
    topic = _topic(cluster, 1)
    with KafkaProducer(
        bootstrap_servers=cluster.bootstrap_servers, acks=0, linger_ms=0
    ) as producer:
        results = [producer.send(topic, value=b"%d" % i).result(30) for i in range(50)]
    assert all(md.offset == -1 for md in results)
    consumed = consume_all(cluster.bootstrap_servers, topic, 1, 50)
    assert [c.value for c in consumed] == [b"%d" % i for i in range(50)]
