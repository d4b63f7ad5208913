"""OpenTelemetry for kclient's producers: a span per record and the producer's metrics.

Install the extra (``pip install 'kclient-kafka[opentelemetry]'``, which brings only
``opentelemetry-api``) and configure an SDK as usual; nothing of kclient imports this
module, or ``opentelemetry``, unless you do. ::

    from kclient import KafkaProducer
    from kclient.opentelemetry import TracingInterceptor, export_metrics

    producer = KafkaProducer(
        bootstrap_servers="127.0.0.1:9092", interceptors=[TracingInterceptor()]
    )
    export_metrics(producer)

**Tracing** rides on the producer's interceptors (``kclient/producer/interceptors.py``):
``TracingInterceptor.on_send_record`` starts a PRODUCER span when ``send`` is called
(parented on the caller's current context), injects its W3C trace context into the
record's headers through the global propagator, and ends the span when the record is
acknowledged (its partition and offset) or failed (status ERROR, the exception recorded).
The span's name and attributes follow the OpenTelemetry messaging semantic conventions for
Kafka (``send <topic>``; the table in ``docs/guide/observability.md``). ``send_batch``
traces each record (an interceptor sees every record of it, as Java's does).

**Metrics**: ``export_metrics`` registers one observable instrument per metric of
``producer.metrics()`` (``METRICS``), read when the SDK's reader collects.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from opentelemetry import metrics, propagate, trace
from opentelemetry.propagators.textmap import TextMapPropagator
from opentelemetry.trace import SpanKind, Status, StatusCode

import kclient
from kclient.producer.interceptors import (
    ProducerInterceptor,
    ProducerRecord,
    RecordAcknowledgement,
)
from kclient.sender.batch import Header
from kclient.sender.future import RecordMetadata
from kclient.sender.telemetry_metrics import telemetry_name

log = logging.getLogger(__name__)

INSTRUMENTATION_NAME = "kclient"
"""The instrumentation scope of kclient's tracer and meter."""

SCHEMA_URL = "https://opentelemetry.io/schemas/1.27.0"
"""The semantic conventions version the attributes follow (messaging: ``operation.type``
``send``, ``messaging.kafka.offset``, ``destination.partition.id``)."""


class TracingInterceptor(ProducerInterceptor):
    """An interceptor (``KafkaProducer(..., interceptors=[TracingInterceptor()])``, or
    ``kclient.aio.AIOKafkaProducer(interceptors=[...])``) that traces each record: a
    PRODUCER span from ``send`` to the record's acknowledgement, its context injected into
    the record's headers (``traceparent``, ``tracestate``; a user's header of the same
    name is replaced, every other header kept).

    ``tracer_provider`` (default: the global one) makes the spans; ``propagator`` (default:
    the global text-map propagator, W3C trace context unless configured otherwise) writes
    the headers. One interceptor per producer: it reads the producer's ``client.id`` and
    first bootstrap server when the producer is created (``configure``). Put it last in
    ``interceptors``: it then traces the record as sent, and no interceptor after it can
    drop the headers it added."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        propagator: TextMapPropagator | None = None,
    ) -> None:
        self._tracer = trace.get_tracer(
            INSTRUMENTATION_NAME, kclient.__version__, tracer_provider, schema_url=SCHEMA_URL
        )
        self._propagator = propagator
        self._attributes: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
        }

    def configure(self, config: Any) -> None:
        """Called by the producer when it is created: its ``client.id`` and the first
        bootstrap server become attributes of every span."""
        client_id = getattr(config, "client_id", None)
        if client_id:
            self._attributes["messaging.client.id"] = client_id
        servers = getattr(config, "bootstrap_servers", None)
        if servers:
            host, _, port = str(servers[0]).rpartition(":")
            if host and port.isdigit():
                self._attributes["server.address"] = host.strip("[]")
                self._attributes["server.port"] = int(port)

    def on_send_record(
        self, record: ProducerRecord
    ) -> tuple[ProducerRecord, RecordAcknowledgement | None]:
        """Start the record's span and inject its context into the headers (on the caller's
        thread); returns the record to send and what ends the span."""
        topic = record.topic
        attributes = self._attributes.copy()
        attributes["messaging.destination.name"] = topic
        if record.partition is not None:
            attributes["messaging.destination.partition.id"] = str(record.partition)
        key = record.key
        if key.__class__ is str:
            attributes["messaging.kafka.message.key"] = key
        value = record.value
        if value is None:
            attributes["messaging.kafka.message.tombstone"] = True
        elif value.__class__ is bytes:
            attributes["messaging.message.body.size"] = len(value)
        span = self._tracer.start_span(
            f"send {topic}", kind=SpanKind.PRODUCER, attributes=attributes
        )
        carrier: dict[str, str] = {}
        span_context = trace.set_span_in_context(span)
        if self._propagator is None:
            propagate.inject(carrier, context=span_context)
        else:
            self._propagator.inject(carrier, context=span_context)
        if carrier:
            injected: list[Header] = [(name, text.encode()) for name, text in carrier.items()]
            if not record.headers:
                record = record._replace(headers=injected)
            else:
                try:
                    kept = [header for header in record.headers if header[0] not in carrier]
                except (TypeError, IndexError, KeyError):  # send says what is wrong with them
                    return record, _SpanEnd(span)  # and the span ends with that error
                record = record._replace(headers=kept + injected)
        return record, _SpanEnd(span)

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        """Nothing: each record's span ends in its own acknowledgement (``on_send_record``)."""


class _SpanEnd:
    """Ends one record's span with its acknowledgement (on the producer's I/O thread)."""

    __slots__ = ("span",)

    def __init__(self, span: trace.Span) -> None:
        self.span = span

    def __call__(self, metadata: RecordMetadata | None, exception: BaseException | None) -> None:
        span = self.span
        if span.is_recording():
            if exception is not None:
                span.record_exception(exception)
                span.set_status(
                    Status(StatusCode.ERROR, f"{type(exception).__name__}: {exception}")
                )
                span.set_attribute("error.type", type(exception).__qualname__)
            if metadata is not None and metadata.partition >= 0:
                if metadata.offset >= 0:  # one call: each takes the span's lock
                    span.set_attributes(
                        {
                            "messaging.destination.partition.id": str(metadata.partition),
                            "messaging.kafka.offset": metadata.offset,
                        }
                    )
                else:
                    span.set_attribute(
                        "messaging.destination.partition.id", str(metadata.partition)
                    )
        span.end()


# ---- metrics -----------------------------------------------------------------------------


class Metric(NamedTuple):
    """How one metric of ``producer.metrics()`` is exported: its OpenTelemetry ``name``,
    ``kind`` (``"gauge"`` or ``"counter"``, a monotonic total), ``unit`` (UCUM) and
    ``description``."""

    name: str
    kind: str
    unit: str
    description: str


def _metric(java: str, kind: str, unit: str, description: str) -> tuple[str, Metric]:
    return java, Metric(telemetry_name(java), kind, unit, description)  # KIP-714's name


METRICS: Mapping[str, Metric] = dict(
    [
        _metric("record-send-rate", "gauge", "{record}/s", "Records sent per second."),
        _metric("record-send-total", "counter", "{record}", "Records sent."),
        _metric("record-error-rate", "gauge", "{record}/s", "Records failed per second."),
        _metric("record-error-total", "counter", "{record}", "Records failed."),
        _metric("record-retry-rate", "gauge", "{record}/s", "Records retried per second."),
        _metric("outgoing-byte-rate", "gauge", "By/s", "Bytes sent to brokers per second."),
        _metric("request-latency-avg", "gauge", "ms", "Average produce request latency."),
        _metric("request-latency-max", "gauge", "ms", "Largest produce request latency."),
        _metric("batch-size-avg", "gauge", "By", "Average batch size."),
        _metric("batch-size-max", "gauge", "By", "Largest batch size."),
        _metric("batch-split-total", "counter", "{batch}", "Batches split (too large)."),
        _metric("compression-rate-avg", "gauge", "1", "Average compressed/uncompressed size."),
        _metric("records-per-request-avg", "gauge", "{record}", "Average records per request."),
        _metric(
            "leader-hint-followed-total",
            "counter",
            "{hint}",
            "Leader hints (KIP-951) followed without a metadata refresh.",
        ),
        _metric("buffer-available-bytes", "gauge", "By", "Unused buffer.memory."),
        _metric("buffer-total-bytes", "gauge", "By", "buffer.memory."),
        _metric(
            "bufferpool-wait-time-ns-total",
            "counter",
            "ns",
            "Time send() waited for buffer.memory.",
        ),
        _metric("requests-in-flight", "gauge", "{request}", "Requests sent, not answered yet."),
    ]
)
"""``producer.metrics()`` name -> how ``export_metrics`` exports it (the names Java's
producer pushes under KIP-714, so one dashboard reads both)."""

_SNAPSHOT_TTL_S = 1.0
"""One ``producer.metrics()`` serves every instrument of one collection."""


class _MetricsSource:
    """Reads ``producer.metrics()`` at most once per collection; nothing once the producer
    is gone (it is held weakly) or not started (``kclient.aio``)."""

    def __init__(self, producer: object, attributes: Mapping[str, Any]) -> None:
        self._producer = weakref.ref(producer)
        self._attributes = dict(attributes)
        self._values: Mapping[str, float] = {}
        self._read_at = float("-inf")

    def observe(self, java: str) -> Callable[[Any], Iterable[metrics.Observation]]:
        def callback(options: Any) -> Iterable[metrics.Observation]:
            value = self._read().get(java)
            if value is None:
                return ()
            return (metrics.Observation(value, self._attributes),)

        return callback

    def _read(self) -> Mapping[str, float]:
        now = time.monotonic()
        if now - self._read_at >= _SNAPSHOT_TTL_S:
            producer = self._producer()
            values: Mapping[str, float] = {}
            if producer is not None:
                try:
                    values = producer.metrics()  # type: ignore[attr-defined]
                except Exception:  # not started (aio) or closed: nothing to report
                    values = {}
                if "messaging.client.id" not in self._attributes:
                    client_id = _client_id(producer)
                    if client_id:
                        self._attributes["messaging.client.id"] = client_id
            self._values, self._read_at = values, now
        return self._values


def _client_id(producer: object) -> str | None:
    config = getattr(producer, "config", None)
    if config is None:  # kclient.aio: the inner producer's, once started
        config = getattr(getattr(producer, "_producer", None), "config", None)
    client_id = getattr(config, "client_id", None)
    return client_id if isinstance(client_id, str) else None


def export_metrics(
    producer: object,
    meter_provider: metrics.MeterProvider | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> None:
    """Export ``producer.metrics()`` (a ``KafkaProducer`` or a ``kclient.aio``
    ``AIOKafkaProducer``) through OpenTelemetry: one observable instrument per entry of
    ``METRICS``, read when ``meter_provider``'s readers collect (default: the global meter
    provider), with the attribute ``messaging.client.id`` and any ``attributes`` given.
    The producer is held weakly: once it is garbage, its instruments report nothing."""
    meter = metrics.get_meter(
        INSTRUMENTATION_NAME, kclient.__version__, meter_provider, schema_url=SCHEMA_URL
    )
    source = _MetricsSource(producer, attributes or {})
    for java, metric in METRICS.items():
        create = (
            meter.create_observable_counter
            if metric.kind == "counter"
            else meter.create_observable_gauge
        )
        create(
            metric.name,
            callbacks=[source.observe(java)],
            unit=metric.unit,
            description=metric.description,
        )


__all__ = [
    "INSTRUMENTATION_NAME",
    "METRICS",
    "SCHEMA_URL",
    "Metric",
    "TracingInterceptor",
    "export_metrics",
]
