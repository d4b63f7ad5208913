"""The producer's metrics as KIP-714 pushes them: Java's ``KafkaMetricsCollector`` for the
metrics kclient measures (``SenderMetrics`` and ``KafkaProducer.metrics()``).

A metric ``record-send-rate`` of Java's ``producer-metrics`` group is pushed as
``org.apache.kafka.producer.record.send.rate`` (KIP-714's naming: the prefix, then the name
with dashes as dots). Cumulative counts (``...-total``) are monotonic ``Sum``\\ s — as deltas
since the last push when the subscription asks for delta temporality, else since the
producer started — and everything else (rates, averages, maxima, gauges) a ``Gauge``. The
resource is named by ``client_id`` (and ``transactional_id`` when set).

What kclient does not measure is not pushed: the per-node, per-topic and per-partition
metrics (``node.request.latency.*``, ``partition.*``), ``produce.throttle.time.*`` and
``connection.creation.*`` (docs/guide/telemetry.md).
Owned by the Sender thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kclient.protocol.otlp import (
    CUMULATIVE,
    DELTA,
    DataPoint,
    Metric,
    MetricsData,
    ResourceMetrics,
    ScopeMetrics,
)
from kclient.sender.telemetry import TelemetrySubscription

PREFIX = "org.apache.kafka.producer."
SCOPE = "kclient"


def telemetry_name(java_name: str) -> str:
    """KIP-714's name of a producer metric: ``record-send-rate`` →
    ``org.apache.kafka.producer.record.send.rate``."""
    return PREFIX + java_name.replace("-", ".")


class TelemetryMetrics:
    """Turns ``snapshot()`` (Java metric name → value) into the ``MetricsData`` of one push."""

    def __init__(
        self,
        snapshot: Callable[[], Mapping[str, float]],
        wall_time_ns: Callable[[], int],
        resource: tuple[tuple[str, str], ...],
        version: str = "",
    ) -> None:
        self._snapshot = snapshot
        self._wall_time_ns = wall_time_ns
        self._resource = resource
        self._version = version
        self._start_ns = wall_time_ns()
        self._last_push_ns = self._start_ns
        self._last_totals: dict[str, float] = {}

    def collect(self, sub: TelemetrySubscription, now_ms: int, terminating: bool) -> MetricsData:
        """The subscribed metrics, now (``now_ms`` is the Sender's monotonic time, unused:
        OTLP wants wall-clock nanoseconds)."""
        now_ns = self._wall_time_ns()
        delta = sub.delta_temporality
        metrics: list[Metric] = []
        for java_name, value in sorted(self._snapshot().items()):
            name = telemetry_name(java_name)
            if not sub.selects(name):
                continue
            if java_name.endswith("-total"):
                if delta:
                    point = DataPoint(
                        value - self._last_totals.get(java_name, 0.0), now_ns, self._last_push_ns
                    )
                else:
                    point = DataPoint(value, now_ns, self._start_ns)
                self._last_totals[java_name] = value
                metrics.append(
                    Metric(
                        name,
                        (point,),
                        sum=True,
                        temporality=DELTA if delta else CUMULATIVE,
                        monotonic=True,
                    )
                )
            else:
                metrics.append(Metric(name, (DataPoint(value, now_ns),)))
        self._last_push_ns = now_ns
        scope = ScopeMetrics(tuple(metrics), SCOPE, self._version)
        return MetricsData((ResourceMetrics((scope,), self._resource),))
