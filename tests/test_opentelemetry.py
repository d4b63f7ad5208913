"""``kclient.opentelemetry``: a PRODUCER span per record (``TracingInterceptor``) and the
producer's metrics (``export_metrics``), read with the SDK's in-memory span exporter and
metric reader, over the scripted client of ``test_producer`` (no sockets)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from kclient import KafkaProducer, ProducerInterceptor, ProducerRecord, errors
from kclient.aio import AIOKafkaProducer
from kclient.opentelemetry import METRICS, TracingInterceptor, export_metrics
from kclient.sender.future import RecordMetadata
from tests.test_producer import LiveMockClient


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def _producer(client: LiveMockClient, provider: TracerProvider, **settings: Any) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers="broker-1:9093,broker-2:9093",
        client_id="orders-app",
        linger_ms=0,
        kafka_client=client,
        interceptors=[TracingInterceptor(tracer_provider=provider)],
        **settings,
    )


def _traceparent(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    assert context.trace_flags.sampled
    return b"00-%032x-%016x-%02x" % (context.trace_id, context.span_id, context.trace_flags)


def test_each_record_gets_a_producer_span_parented_on_the_callers_context(
    client: LiveMockClient, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    tracer = provider.get_tracer("app")
    with (
        _producer(client, provider, key_serializer="str") as producer,
        tracer.start_as_current_span("handle") as parent,
    ):
        first = producer.send("t", b"v0", key="user-7", partition=1).result(10)
        second = producer.send("t", None, key=None, partition=1).result(10)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"send t", "handle"}
    sent = [s for s in exporter.get_finished_spans() if s.name == "send t"]
    assert len(sent) == 2
    for span, metadata in zip(sent, (first, second), strict=True):
        assert span.kind is SpanKind.PRODUCER
        assert span.parent is not None
        assert span.parent.span_id == parent.get_span_context().span_id
        assert span.status.status_code is StatusCode.UNSET
        attributes = dict(span.attributes or {})
        assert attributes["messaging.kafka.offset"] == metadata.offset
        assert attributes["messaging.destination.partition.id"] == "1"
    assert dict(sent[0].attributes or {}) == {
        "messaging.system": "kafka",
        "messaging.operation.type": "send",
        "messaging.operation.name": "send",
        "messaging.destination.name": "t",
        "messaging.destination.partition.id": "1",
        "messaging.client.id": "orders-app",
        "server.address": "broker-1",
        "server.port": 9093,
        "messaging.kafka.message.key": "user-7",
        "messaging.message.body.size": 2,
        "messaging.kafka.offset": 0,
    }
    second_attributes = dict(sent[1].attributes or {})
    assert "messaging.kafka.message.key" not in second_attributes
    assert second_attributes["messaging.kafka.message.tombstone"] is True
    # the record carries its span's context, for a consumer to continue the trace
    records = client.records[("t", 1)]
    assert [r.headers for r in records] == [[("traceparent", _traceparent(s))] for s in sent]


def test_user_headers_are_kept_and_a_stale_traceparent_is_replaced(
    client: LiveMockClient, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    user = [("app", b"1"), ("traceparent", b"00-stale"), ("empty", None)]
    with _producer(client, provider) as producer:
        producer.send("t", b"v", headers=user, partition=0).result(10)
    (span,) = exporter.get_finished_spans()
    assert span.parent is None  # no current span: a root
    (record,) = client.records[("t", 0)]
    assert record.headers == [("app", b"1"), ("empty", None), ("traceparent", _traceparent(span))]
    assert user[1] == ("traceparent", b"00-stale")  # the caller's list is not changed


def test_malformed_headers_fail_the_send_and_end_the_span_with_that_error(
    client: LiveMockClient, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with _producer(client, provider) as producer, pytest.raises(TypeError, match="header"):
        producer.send("t", b"v", headers=[42], partition=0)  # type: ignore[list-item]
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "TypeError"


def test_a_failed_record_ends_its_span_with_error_status_and_the_exception(
    client: LiveMockClient, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with _producer(
        client, provider, max_request_size=1000, delivery_timeout_ms=200, request_timeout_ms=100
    ) as producer:
        with pytest.raises(errors.RecordTooLargeError):
            producer.send("t", b"x" * 2000, partition=0)
        client.hold = True  # no answer: the record times out
        with pytest.raises(errors.KafkaTimeoutError):
            producer.send("t", b"late", partition=2).result(10)
    too_large, timed_out = exporter.get_finished_spans()
    for span, error in ((too_large, "RecordTooLargeError"), (timed_out, "KafkaTimeoutError")):
        assert span.status.status_code is StatusCode.ERROR
        assert span.status.description is not None
        assert span.status.description.startswith(error)
        assert (span.attributes or {})["error.type"] == error
        assert [event.name for event in span.events] == ["exception"]
        assert "messaging.kafka.offset" not in (span.attributes or {})
    assert (timed_out.attributes or {})["messaging.destination.partition.id"] == "2"


def test_send_batch_traces_each_record(
    client: LiveMockClient, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    with _producer(client, provider) as producer:
        producer.send_batch("t", [b"a", b"b", b"c"], partitions=[3, 3, 3]).result(10)
    spans = exporter.get_finished_spans()
    assert [(s.attributes or {})["messaging.kafka.offset"] for s in spans] == [0, 1, 2]
    records = client.records[("t", 3)]
    assert [r.headers for r in records] == [[("traceparent", _traceparent(s))] for s in spans]


def test_aio_send_and_send_batch_are_traced(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    client = LiveMockClient(partitions=1)
    tracer = provider.get_tracer("app")

    async def main() -> None:
        async with AIOKafkaProducer(
            bootstrap_servers="127.0.0.1:1",
            kafka_client=client,
            interceptors=[TracingInterceptor(tracer_provider=provider)],
        ) as producer:
            with tracer.start_as_current_span("request"):
                await producer.send_and_wait("t", b"a", key=b"k")
            batch = producer.create_batch()
            batch.append(key=None, value=b"b", timestamp=None)
            await (await producer.send_batch(batch, "t", partition=0))

    asyncio.run(asyncio.wait_for(main(), 30))
    spans = {span.name: span for span in exporter.get_finished_spans()}
    sent = [s for s in exporter.get_finished_spans() if s.name == "send t"]
    assert len(sent) == 2
    assert sent[0].parent is not None
    assert sent[0].parent.span_id == spans["request"].context.span_id
    assert sent[1].parent is None
    records = client.records[("t", 0)]
    assert [r.headers for r in records] == [[("traceparent", _traceparent(s))] for s in sent]


def test_aio_a_send_that_waits_for_metadata_in_vain_ends_its_span_with_the_error(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async def main() -> None:
        async with AIOKafkaProducer(
            bootstrap_servers="127.0.0.1:1",
            kafka_client=LiveMockClient(partitions=1),
            max_block_ms=100,
            interceptors=[TracingInterceptor(tracer_provider=provider)],
        ) as producer:
            with pytest.raises(errors.KafkaTimeoutError, match="max_block_ms"):
                await producer.send("unknown", b"x")  # tried again until max_block_ms

    asyncio.run(asyncio.wait_for(main(), 30))
    (span,) = exporter.get_finished_spans()  # one span for all the tries, ended once
    assert span.name == "send unknown"
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "KafkaTimeoutError"


def test_aio_a_send_after_stop_ends_its_span_with_the_error(
    provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async def main() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers="127.0.0.1:1",
            kafka_client=LiveMockClient(partitions=1),
            interceptors=[TracingInterceptor(tracer_provider=provider)],
        )
        await producer.start()
        await producer.stop()
        with pytest.raises(errors.IllegalStateError, match="stopped"):
            await producer.send("t", b"x")

    asyncio.run(asyncio.wait_for(main(), 30))
    (span,) = exporter.get_finished_spans()
    assert span.status.status_code is StatusCode.ERROR
    assert (span.attributes or {})["error.type"] == "IllegalStateError"


def test_a_sampled_out_record_still_carries_its_context_and_costs_no_attributes(
    client: LiveMockClient,
) -> None:
    from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

    with _producer(client, TracerProvider(sampler=ALWAYS_OFF)) as producer:
        producer.send("t", b"v", partition=0).result(10)
    (record,) = client.records[("t", 0)]
    ((name, value),) = record.headers
    assert name == "traceparent" and value is not None
    assert not int(value.rsplit(b"-", 1)[1], 16) & 1  # the flags say: not sampled


class _PerRecord(ProducerInterceptor):
    """``on_send_record``: a per-record acknowledgement (the hook TracingInterceptor uses)."""

    def __init__(self, broken: bool = False) -> None:
        self.broken = broken
        self.acked: list[tuple[object, RecordMetadata | None, BaseException | None]] = []
        self.config: Any = None

    def configure(self, config: Any) -> None:
        self.config = config

    def on_send_record(self, record: ProducerRecord) -> tuple[ProducerRecord, Any]:
        def acknowledge(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
            if self.broken:
                raise RuntimeError("acknowledgement broke")
            self.acked.append((record.value, metadata, exc))

        return record, acknowledge


def test_on_send_record_acknowledges_its_own_record_and_its_errors_are_logged(
    client: LiveMockClient, caplog: pytest.LogCaptureFixture
) -> None:
    hook, broken = _PerRecord(), _PerRecord(broken=True)
    calls: list[object] = []
    with KafkaProducer(
        bootstrap_servers="h:1", client_id="c1", kafka_client=client, interceptors=[broken, hook]
    ) as producer:
        producer.send("t", b"a", partition=0, callback=lambda m, e: calls.append(m)).result(10)
        producer.send("t", b"b", partition=0).result(10)
        with pytest.raises(errors.RecordTooLargeError):
            producer.send("t", b"x" * 2_000_000, partition=1)
    assert hook.config.client_id == "c1"  # configure: once, with the producer's config
    assert [(v, m.offset if m else None, type(e)) for v, m, e in hook.acked] == [
        (b"a", 0, type(None)),
        (b"b", 1, type(None)),
        (b"x" * 2_000_000, -1, errors.RecordTooLargeError),
    ]
    assert len(calls) == 1  # the user's callback still runs
    broke = [r.getMessage() for r in caplog.records if "acknowledgement broke" in str(r.exc_info)]
    assert len(broke) == 1  # logged once (later ones counted), never stopping the producer


def test_export_metrics_reads_the_producers_metrics_when_collected(
    client: LiveMockClient,
) -> None:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    with KafkaProducer(
        bootstrap_servers="h:1", client_id="m1", linger_ms=0, kafka_client=client
    ) as producer:
        export_metrics(producer, meter_provider=meters, attributes={"service.tier": "gold"})
        for _ in range(3):
            producer.send("t", b"v", partition=0).result(10)
        data = reader.get_metrics_data()
    assert data is not None
    points = {
        metric.name: (metric.unit, list(metric.data.data_points))
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }
    assert set(points) == {metric.name for metric in METRICS.values()}
    unit, (sent,) = points["org.apache.kafka.producer.record.send.total"]
    assert (unit, sent.value) == ("{record}", 3)
    assert dict(sent.attributes or {}) == {"messaging.client.id": "m1", "service.tier": "gold"}
    unit, (total,) = points["org.apache.kafka.producer.buffer.total.bytes"]
    assert (unit, total.value) == ("By", producer.config.buffer_memory)


def test_export_metrics_of_an_aio_producer_not_started_reports_nothing() -> None:
    reader = InMemoryMetricReader()
    export_metrics(AIOKafkaProducer(), meter_provider=MeterProvider(metric_readers=[reader]))
    data = reader.get_metrics_data()
    assert data is None or not any(
        scope.metrics for resource in data.resource_metrics for scope in resource.scope_metrics
    )


def test_export_metrics_of_an_aio_producer_once_started() -> None:
    reader = InMemoryMetricReader()

    async def main() -> None:
        async with AIOKafkaProducer(
            bootstrap_servers="127.0.0.1:1",
            client_id="aio-1",
            kafka_client=LiveMockClient(partitions=1),
        ) as producer:
            export_metrics(producer, meter_provider=MeterProvider(metric_readers=[reader]))
            await producer.send_and_wait("t", b"a")
            await producer.send_and_wait("t", b"b")
            data = reader.get_metrics_data()
            assert data is not None
            (sent,) = [
                point
                for resource in data.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
                if metric.name == "org.apache.kafka.producer.record.send.total"
                for point in metric.data.data_points
            ]
            assert sent.value == 2
            assert dict(sent.attributes or {}) == {"messaging.client.id": "aio-1"}

    asyncio.run(asyncio.wait_for(main(), 30))


def test_kclient_imports_no_opentelemetry_unless_asked() -> None:
    code = (
        "import sys, kclient, kclient.aio, kclient.producer, kclient.testing\n"
        "from kclient.testing.client import MockClient, metadata_update_with\n"
        "from kclient.clock import SYSTEM_CLOCK\n"
        "client = MockClient(SYSTEM_CLOCK, metadata_update_with(1, {'t': 1}))\n"
        "kclient.KafkaProducer(bootstrap_servers='h:1', kafka_client=client).close(0)\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], sys.modules\n"
        "import kclient.opentelemetry\n"
        "assert 'opentelemetry.trace' in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_global_tracer_provider_is_used_when_none_is_given() -> None:
    interceptor = TracingInterceptor()
    _, acknowledge = interceptor.on_send_record(ProducerRecord("t", b"v"))
    assert acknowledge is not None
    acknowledge(RecordMetadata("t", 0, 5, -1), None)  # a no-op span without an SDK: no error
    assert isinstance(trace.get_tracer_provider(), trace.TracerProvider)
