"""KIP-714 metrics push, kclient → Apache Kafka 4.4 with a client-telemetry plugin (our
``KclientTelemetryRecorder``, installed as ``metric.reporters``) and a ``CLIENT_METRICS``
subscription made with Kafka's ``ConfigCommand``: kclient's pushes arrive, Kafka's own
OpenTelemetry classes and kclient's reader both decode them (zstd-compressed on the wire) to
the subscribed metrics, counted as deltas, the client instance id is Kafka's, and closing
sends a terminating push. One Kafka start."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kclient import KafkaProducer
from kclient.protocol import ApiKey
from kclient.protocol.otlp import DELTA, decode_metrics_data
from kclient.record.compression import CompressionType
from kclient.sender.telemetry import preferred_compression
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka, kafka_jars
from kclient.testing.apache_kafka_telemetry import read_pushes, recorder_setup, subscribe

PREFIX = "org.apache.kafka.producer.record.send"
INTERVAL_MS = 1_000


@pytest.fixture(scope="module")
def kafka_with_telemetry(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ApacheKafka, Path]]:
    pushes = tmp_path_factory.mktemp("telemetry") / "pushes.tsv"
    classes, properties = recorder_setup(kafka_jars(VERSIONS[0]), pushes)
    with ApacheKafka(VERSIONS[0], properties=properties, classpath=[classes]) as kafka:
        subscribe(kafka, "kclient-producers", [PREFIX], INTERVAL_MS)
        yield kafka, pushes


def test_pushes_reach_apache_kafka_and_decode_to_the_subscribed_metrics(
    kafka_with_telemetry: tuple[ApacheKafka, Path],
) -> None:
    kafka, file = kafka_with_telemetry
    assert ApiKey.GET_TELEMETRY_SUBSCRIPTIONS in kafka.api_versions()
    kafka.create_topic("telemetry", 1)
    with KafkaProducer(bootstrap_servers=kafka.bootstrap_servers, client_id="kip714") as producer:
        instance_id = producer.client_instance_id(15)
        assert isinstance(instance_id, uuid.UUID)
        telemetry = producer._sender.telemetry
        assert telemetry is not None and telemetry.reporter.subscription is not None
        accepted = telemetry.reporter.subscription.accepted_compression_types
        # Kafka 4.4 lists zstd first: kclient's pushes go zstd-compressed, Kafka reads them
        assert preferred_compression(accepted) == CompressionType.ZSTD
        producer.send("telemetry", b"v").get(15)
        deadline = time.monotonic() + 15
        while not [p for p in read_pushes(file) if p.client_instance_id == instance_id]:
            assert time.monotonic() < deadline, "no push reached Kafka within 15 s"
            time.sleep(0.1)
    mine = [p for p in read_pushes(file) if p.client_instance_id == instance_id]
    assert all(p.error is None for p in mine), [p.error for p in mine]
    assert mine[-1].terminating and not any(p.terminating for p in mine[:-1])
    assert mine[0].push_interval_ms == INTERVAL_MS
    for push in mine:
        assert push.metric_names, "a push of the subscribed metrics holds some"
        assert all(name.startswith(PREFIX) for name in push.metric_names)
        assert decode_metrics_data(push.data).metric_names() == list(push.metric_names)
    decoded = [decode_metrics_data(p.data) for p in mine]
    totals = [m for d in decoded for m in d.metrics() if m.name == PREFIX + ".total"]
    # Kafka asks for delta temporality: the one record sent is counted once over the pushes
    assert all(m.sum and m.monotonic and m.temporality == DELTA for m in totals)
    assert sum(m.points[0].value for m in totals) == 1.0
    assert all(("client_id", "kip714") in d.resource_metrics[0].attributes for d in decoded)
