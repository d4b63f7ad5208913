"""KIP-580 on Apache Kafka 4.4 (the 3-node session cluster): the retries of a batch are
spaced ``retry.backoff.ms`` doubling with ±20 % jitter up to ``retry.backoff.max.ms``,
observed through kclient's own log records (the time of each Produce request it sends).

A partition on nodes 1 (its leader) and 2 with ``min.insync.replicas=2``; node 2 is stopped
(a controlled shutdown takes it out of the ISR at once), so every ``acks=all`` Produce is
answered NOT_ENOUGH_REPLICAS (retriable) until ``delivery.timeout.ms``. (On one node Kafka
4.4 caps the effective ``min.insync.replicas`` at the replication factor: no such answer.)
Node 2 is started again after, and the test waits until it is back in sync."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from integration.apache_kafka.faults import wait_for
from integration.apache_kafka.readback import unique
from kclient import KafkaProducer
from kclient.cli.admin import BlockingConnection, ClusterReader, parse_address
from kclient.errors import KafkaError
from kclient.protocol import ApiKey
from kclient.testing.apache_kafka import ApacheKafka


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
        assert 0.8 * base_ms - 5 <= gap_ms <= min(1.2 * base_ms, 800) + 300, gaps_ms
    ratios = [gap / min(100 * 2**i, 800) for i, gap in enumerate(gaps_ms)]
    assert max(ratios) - min(ratios) > 0.04, ratios  # jittered, not a fixed schedule
