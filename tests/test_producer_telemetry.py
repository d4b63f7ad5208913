"""``KafkaProducer.client_instance_id`` and ``enable.metrics.push`` (KIP-714) on a mock
cluster without the telemetry APIs (as any broker without a client-telemetry plugin)."""

from __future__ import annotations

import pytest

from kclient import KafkaProducer
from kclient.clock import SYSTEM_CLOCK
from kclient.errors import IllegalStateError
from kclient.testing.client import MockClient, metadata_update_with


def client() -> MockClient:
    return MockClient(SYSTEM_CLOCK, metadata_update_with(1, {"t": 1}))


def test_client_instance_id_needs_enable_metrics_push() -> None:
    producer = KafkaProducer(
        bootstrap_servers="h:1", kafka_client=client(), enable_metrics_push=False
    )
    try:
        with pytest.raises(IllegalStateError, match="'enable.metrics.push'"):
            producer.client_instance_id(1)
    finally:
        producer.close(0)  # a MockClient answers no metadata request: do not wait


def test_client_instance_id_is_none_when_the_cluster_takes_no_metrics() -> None:
    producer = KafkaProducer(bootstrap_servers="h:1", kafka_client=client())
    try:
        assert producer.config.enable_metrics_push is True  # Java's default
        assert producer.client_instance_id(5) is None
        with pytest.raises(ValueError, match=">= 0"):
            producer.client_instance_id(-1)
    finally:
        producer.close(0)
