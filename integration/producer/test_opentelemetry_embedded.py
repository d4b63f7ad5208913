"""``kclient.opentelemetry`` on the embedded broker: each record read back (confluent-kafka)
carries the ``traceparent`` of its span, whose partition and offset are the record's; a
header of the user's own is kept; ``kclient.aio`` (its Sender on the event loop) the same.
On Apache Kafka:
``integration/apache_kafka/test_opentelemetry.py``."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from integration.producer.verify import consume_all
from integration.tracing import send_traced, traceparent
from kclient.aio import AIOKafkaProducer
from kclient.broker import EmbeddedBroker
from kclient.opentelemetry import TracingInterceptor


def test_each_record_carries_its_spans_traceparent() -> None:
    with EmbeddedBroker() as broker:
        broker.create_topic("traced", 2)
        expected = send_traced({"bootstrap.servers": broker.bootstrap_servers}, "traced")
        read = consume_all(broker.bootstrap_servers, "traced", 2, 5, 30)
    got = {(r.partition, r.offset): dict(r.headers)["traceparent"] for r in read}
    assert got == expected
    assert [dict(r.headers).get("app") for r in read if r.value == b"v1"] == [b"1"]


def test_aio_records_carry_their_spans_traceparent() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))

    async def main(bootstrap: str) -> None:
        async with AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            interceptors=[TracingInterceptor(tracer_provider=provider)],
        ) as producer:
            with provider.get_tracer("test").start_as_current_span("parent"):
                await producer.send_and_wait("traced-aio", b"a")  # waits for metadata first
            batch = producer.create_batch()
            for value in (b"b", b"c"):
                batch.append(key=None, value=value, timestamp=None)
            await (await producer.send_batch(batch, "traced-aio", partition=0))

    with EmbeddedBroker() as broker:
        broker.create_topic("traced-aio", 1)
        asyncio.run(asyncio.wait_for(main(broker.bootstrap_servers), 30))
        read = consume_all(broker.bootstrap_servers, "traced-aio", 1, 3, 30)
    spans = [s for s in exporter.get_finished_spans() if s.name == "send traced-aio"]
    assert spans[0].parent is not None and spans[1].parent is None
    by_offset = {(s.attributes or {})["messaging.kafka.offset"]: traceparent(s) for s in spans}
    assert {r.offset: dict(r.headers)["traceparent"] for r in read} == by_offset
    assert sorted(by_offset) == [0, 1, 2]
