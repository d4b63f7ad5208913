"""The embedded broker's KIP-714 side (kclient.broker.client_metrics): subscriptions, the
checks a push goes through, and bad payloads kept with their error, never raised."""

from __future__ import annotations

import uuid
from typing import Any

from kclient.broker.client_metrics import ClientMetricsManager
from kclient.protocol.otlp import (
    DataPoint,
    Metric,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
    encode_metrics_data,
)
from kclient.protocol.types import ZERO_UUID
from kclient.record.compression import CompressionType, compress

PAYLOAD = encode_metrics_data(
    MetricsData((ResourceMetrics((ScopeMetrics((Metric("m.a", (DataPoint(1, 5),)),)),)),))
)


def push_body(sub: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    body = {
        "client_instance_id": sub["client_instance_id"],
        "subscription_id": sub["subscription_id"],
        "terminating": False,
        "compression_type": 0,
        "metrics": PAYLOAD,
    }
    body.update(overrides)
    return body


def test_a_zero_instance_id_gets_a_new_one_and_the_subscription() -> None:
    manager = ClientMetricsManager(("org.apache.kafka.producer.",), 2_000)
    sub = manager.get_subscriptions(ZERO_UUID)
    assert sub["client_instance_id"] != ZERO_UUID
    assert sub["requested_metrics"] == ["org.apache.kafka.producer."]
    assert sub["push_interval_ms"] == 2_000
    assert int(CompressionType.GZIP) in sub["accepted_compression_types"]
    again = manager.get_subscriptions(sub["client_instance_id"])
    assert again["client_instance_id"] == sub["client_instance_id"]
    assert again["subscription_id"] == sub["subscription_id"]


def test_a_good_push_is_kept_decoded() -> None:
    manager = ClientMetricsManager()
    sub = manager.get_subscriptions(ZERO_UUID)
    gz = compress(CompressionType.GZIP, PAYLOAD)
    assert manager.push(push_body(sub, compression_type=1, metrics=gz), "p1", 0) == 0
    [got] = manager.received()
    assert got.metric_names() == ["m.a"]
    assert (got.client_id, got.client_instance_id, got.error) == (
        "p1",
        sub["client_instance_id"],
        None,
    )


def test_pushes_are_checked_as_kafka_checks_them() -> None:
    manager = ClientMetricsManager(max_bytes=len(PAYLOAD) + 10)
    sub = manager.get_subscriptions(ZERO_UUID)
    unknown = push_body(sub, client_instance_id=uuid.uuid4())
    assert manager.push(unknown, None, 0) == 117  # UNKNOWN_SUBSCRIPTION_ID
    assert manager.push(push_body(sub, subscription_id=sub["subscription_id"] + 1), None, 0) == 117
    assert manager.push(push_body(sub, compression_type=9), None, 0) == 76
    assert manager.push(push_body(sub, metrics=PAYLOAD + bytes(11)), None, 0) == 118
    assert manager.push(push_body(sub, terminating=True), None, 0) == 0
    assert manager.push(push_body(sub), None, 0) == 42  # after the terminating push
    assert [r.terminating for r in manager.received()] == [True]


def test_a_new_subscription_makes_old_pushes_unknown() -> None:
    manager = ClientMetricsManager(("a",), 1_000)
    sub = manager.get_subscriptions(ZERO_UUID)
    manager.set_subscription(("b",), 1_000)
    assert manager.push(push_body(sub), None, 0) == 117
    assert manager.get_subscriptions(sub["client_instance_id"])["requested_metrics"] == ["b"]


def test_a_payload_that_does_not_decode_is_invalid_record_and_kept() -> None:
    manager = ClientMetricsManager()
    sub = manager.get_subscriptions(ZERO_UUID)
    assert manager.push(push_body(sub, metrics=b"\x0a\xff\xff"), None, 0) == 87
    assert manager.push(push_body(sub, compression_type=1, metrics=b"not gzip"), None, 0) == 87
    kept = manager.received()
    assert [r.metrics for r in kept] == [None, None]
    assert all(r.error for r in kept) and kept[0].metric_names() == []
