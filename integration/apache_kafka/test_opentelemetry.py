"""``kclient.opentelemetry`` on Apache Kafka 4.4: each record read back by Kafka's own Java
consumer carries the ``traceparent`` of its span, whose partition and offset are the
record's; a header of the user's own is kept."""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk")

from integration.apache_kafka.readback import unique
from integration.tracing import send_traced
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka


@pytest.mark.parametrize("apache_kafka", [VERSIONS[0]], indirect=True)
def test_the_java_consumer_reads_each_records_traceparent(apache_kafka: ApacheKafka) -> None:
    topic = unique("traced")
    apache_kafka.create_topic(topic, 2)
    expected = send_traced({"bootstrap.servers": apache_kafka.bootstrap_servers}, topic)
    read = apache_kafka.java_read([topic])
    got = {(r.partition, r.offset): dict(r.headers)["traceparent"] for r in read.of(topic)}
    assert got == expected
    assert [dict(r.headers).get("app") for r in read.of(topic) if r.value == b"v1"] == [b"1"]
