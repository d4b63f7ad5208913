"""``kclient.opentelemetry`` on the embedded broker: each record read back (confluent-kafka)
carries the ``traceparent`` of its span, whose partition and offset are the record's; a
header of the user's own is kept. The same on Apache Kafka:
``integration/apache_kafka/test_opentelemetry.py``."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from integration.producer.verify import consume_all
from integration.tracing import send_traced
from kclient.broker import EmbeddedBroker


def test_each_record_carries_its_spans_traceparent() -> None:
    with EmbeddedBroker() as broker:
        broker.create_topic("traced", 2)
        expected = send_traced({"bootstrap.servers": broker.bootstrap_servers}, "traced")
        read = consume_all(broker.bootstrap_servers, "traced", 2, 5, 30)
    got = {(r.partition, r.offset): dict(r.headers)["traceparent"] for r in read}
    assert got == expected
    assert [dict(r.headers).get("app") for r in read if r.value == b"v1"] == [b"1"]
