"""The producer's side of KIP-714 client metrics push: builds the Sender's
``TelemetrySender`` from the settings (``enable.metrics.push``) and answers
``KafkaProducer.client_instance_id`` (Java's ``clientInstanceId``).

Construction runs on the caller's thread; the reporter then belongs to the Sender thread.
"""

from __future__ import annotations

import uuid
import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from kclient.clock import Clock
from kclient.config import ProducerConfig
from kclient.errors import IllegalStateError
from kclient.network.kafka_client import KafkaClient
from kclient.sender.telemetry import ClientTelemetryReporter, TelemetrySender
from kclient.sender.telemetry_metrics import TelemetryMetrics

if TYPE_CHECKING:
    from kclient.producer.kafka_producer import KafkaProducer


def telemetry_sender(
    producer: KafkaProducer,
    cfg: ProducerConfig,
    client: KafkaClient,
    clock: Clock,
    log_prefix: str,
) -> TelemetrySender | None:
    """The Sender's metrics push, or None with ``enable.metrics.push=false``. It reads
    ``producer.metrics()`` through a weak reference (the I/O thread must not keep the
    producer alive)."""
    if not cfg.enable_metrics_push:
        return None
    from kclient import __version__  # kclient/__init__ imports this module

    producer_ref = weakref.ref(producer)

    def snapshot() -> Mapping[str, float]:
        alive = producer_ref()
        return alive.metrics() if alive is not None else {}

    resource: tuple[tuple[str, str], ...] = (("client_id", cfg.client_id),)
    if cfg.transactional_id is not None:
        resource += (("transactional_id", cfg.transactional_id),)
    wall_ns: Callable[[], int] = lambda: clock.time_ms() * 1_000_000  # noqa: E731
    metrics = TelemetryMetrics(snapshot, wall_ns, resource, __version__)
    reporter = ClientTelemetryReporter(
        metrics.collect, retry_backoff_ms=cfg.retry_backoff_ms, log_prefix=log_prefix
    )
    return TelemetrySender(
        reporter,
        client,
        request_timeout_ms=cfg.request_timeout_ms,
        monotonic_ms=clock.monotonic_ms,
        log_prefix=log_prefix,
    )


def client_instance_id(telemetry: TelemetrySender | None, timeout: float) -> uuid.UUID | None:
    """``KafkaProducer.client_instance_id``: see there."""
    if telemetry is None:
        raise IllegalStateError(
            "client_instance_id(): telemetry is not enabled; set 'enable.metrics.push' to true"
        )
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
        raise ValueError(f"client_instance_id() timeout must be >= 0 seconds, got {timeout!r}")
    return telemetry.reporter.client_instance_id(float(timeout))
