"""What the two read-back tests of ``kclient.opentelemetry`` share (the embedded broker:
``integration/producer/test_opentelemetry_embedded.py``; Apache Kafka:
``integration/apache_kafka/test_opentelemetry.py``): send traced records, then the
``traceparent`` each record must carry, by (partition, offset), from the finished spans."""

from __future__ import annotations

from collections.abc import Mapping

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from kclient import KafkaProducer
from kclient.opentelemetry import TracingInterceptor


def send_traced(settings: Mapping[str, object], topic: str) -> dict[tuple[int, int], bytes]:
    """Five records to partitions 0 and 1 of ``topic`` (two by ``send`` under a parent
    span, one with a header of its own, three by ``send_batch``), each traced; returns the
    ``traceparent`` header each must carry, by (partition, offset), checking each span."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with KafkaProducer(
        settings, interceptors=[TracingInterceptor(tracer_provider=provider)]
    ) as producer:
        with provider.get_tracer("test").start_as_current_span("parent"):
            producer.send(topic, b"v0", key=b"k", partition=0)
            producer.send(topic, b"v1", headers=[("app", b"1")], partition=1)
        producer.send_batch(topic, [b"b0", b"b1", b"b2"], partitions=[0, 1, 0])
        producer.flush(timeout=30)
    spans = [s for s in exporter.get_finished_spans() if s.kind is SpanKind.PRODUCER]
    assert len(spans) == 5
    expected: dict[tuple[int, int], bytes] = {}
    for span in spans:
        attributes = span.attributes or {}
        assert span.name == f"send {topic}"
        assert span.status.status_code is StatusCode.UNSET
        partition = int(str(attributes["messaging.destination.partition.id"]))
        offset = attributes["messaging.kafka.offset"]
        assert isinstance(offset, int)
        expected[partition, offset] = traceparent(span)
    assert len(expected) == 5
    return expected


def traceparent(span: ReadableSpan) -> bytes:
    """The W3C ``traceparent`` header of ``span``'s context."""
    context = span.get_span_context()
    return b"00-%032x-%016x-%02x" % (context.trace_id, context.span_id, context.trace_flags)
