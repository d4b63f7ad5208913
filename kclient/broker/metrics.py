"""Request metrics of the embedded broker (``RequestChannel.Metrics`` / ``RequestMetrics``).

Per API (``Produce``, ``Fetch`` ...): RequestsPerSec, RequestQueueTimeMs, LocalTimeMs,
RemoteTimeMs, ResponseQueueTimeMs, ResponseSendTimeMs, TotalTimeMs and ErrorsPerSec,
plus broker-wide gauges (request queue size, per-processor response queue sizes,
connection count) and the SASL session counters of KIP-368 (successful
re-authentications, connections closed because their session expired). Samples are
recorded by the Processor threads when a response has been sent
(``Request.update_request_metrics``); snapshots are read from any thread.
Every method that needs the time takes ``now_ns``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

from kclient.broker.client_quota_manager import ClientQuotaMetrics

_NS_PER_MS = 1_000_000
_TICK_NS = 5_000_000_000  # EWMA tick, as in the Dropwizard meters Kafka uses
_ALPHA_1M = 1.0 - math.exp(-5.0 / 60.0)
_RESERVOIR = 1024


class Meter:
    """Count, mean rate and one-minute exponentially weighted rate of events."""

    def __init__(self, now_ns: int) -> None:
        self._lock = threading.Lock()
        self._start_ns = now_ns
        self._last_tick_ns = now_ns
        self._uncounted = 0
        self._rate_per_ns = 0.0
        self._initialized = False
        self.count = 0

    def mark(self, now_ns: int, n: int = 1) -> None:
        with self._lock:
            self._tick(now_ns)
            self.count += n
            self._uncounted += n

    def one_minute_rate(self, now_ns: int) -> float:
        """Events per second, one-minute EWMA."""
        with self._lock:
            self._tick(now_ns)
            return self._rate_per_ns * 1e9

    def mean_rate(self, now_ns: int) -> float:
        elapsed_ns = now_ns - self._start_ns
        return self.count * 1e9 / elapsed_ns if elapsed_ns > 0 else 0.0

    def _tick(self, now_ns: int) -> None:
        while now_ns - self._last_tick_ns >= _TICK_NS:
            instant = self._uncounted / _TICK_NS
            self._uncounted = 0
            if self._initialized:
                self._rate_per_ns += _ALPHA_1M * (instant - self._rate_per_ns)
            else:
                self._rate_per_ns = instant
                self._initialized = True
            self._last_tick_ns += _TICK_NS


class Histogram:
    """Count, mean, max and percentiles (over the last 1024 samples) of a duration in ms."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: list[float] = []
        self._next = 0
        self.count = 0
        self.total = 0.0
        self.max = 0.0

    def update(self, value: float) -> None:
        with self._lock:
            self.count += 1
            self.total += value
            self.max = max(value, self.max)
            if len(self._samples) < _RESERVOIR:
                self._samples.append(value)
            else:
                self._samples[self._next] = value
                self._next = (self._next + 1) % _RESERVOIR

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    def percentile(self, fraction: float) -> float:
        with self._lock:
            ordered = sorted(self._samples)
        if not ordered:
            return 0.0
        index = min(len(ordered) - 1, max(0, math.ceil(fraction * len(ordered)) - 1))
        return ordered[index]


@dataclass(frozen=True)
class TimingSnapshot:
    count: int
    mean_ms: float
    p99_ms: float
    max_ms: float


@dataclass(frozen=True)
class RequestMetricsSnapshot:
    """What one API's metrics showed at one moment."""

    api: str
    requests: int
    requests_per_sec: float
    errors: int
    request_queue_time_ms: TimingSnapshot
    local_time_ms: TimingSnapshot
    remote_time_ms: TimingSnapshot
    response_queue_time_ms: TimingSnapshot
    response_send_time_ms: TimingSnapshot
    total_time_ms: TimingSnapshot


class RequestMetrics:
    """The metrics of one API (Kafka's ``RequestMetrics``)."""

    TIMINGS = (
        "request_queue_time_ms",
        "local_time_ms",
        "remote_time_ms",
        "response_queue_time_ms",
        "response_send_time_ms",
        "total_time_ms",
    )

    def __init__(self, api: str, now_ns: int) -> None:
        self.api = api
        self.requests_per_sec = Meter(now_ns)
        self.errors_per_sec = Meter(now_ns)
        self.request_queue_time_ms = Histogram()
        self.local_time_ms = Histogram()
        self.remote_time_ms = Histogram()
        self.response_queue_time_ms = Histogram()
        self.response_send_time_ms = Histogram()
        self.total_time_ms = Histogram()

    def record(
        self,
        *,
        now_ns: int,
        start_ns: int,
        dequeue_ns: int,
        local_complete_ns: int,
        remote_complete_ns: int,
        response_complete_ns: int,
        response_dequeue_ns: int,
    ) -> None:
        """One finished request; a stage that never happened (-1) counts as 0 ms."""

        def span(begin: int, end: int) -> float:
            return max(0, end - begin) / _NS_PER_MS if begin >= 0 and end >= 0 else 0.0

        self.requests_per_sec.mark(now_ns)
        self.request_queue_time_ms.update(span(start_ns, dequeue_ns))
        self.local_time_ms.update(span(dequeue_ns, local_complete_ns))
        self.remote_time_ms.update(span(local_complete_ns, remote_complete_ns))
        self.response_queue_time_ms.update(span(response_complete_ns, response_dequeue_ns))
        self.response_send_time_ms.update(span(response_dequeue_ns, now_ns))
        self.total_time_ms.update(span(start_ns, now_ns))

    def snapshot(self, now_ns: int) -> RequestMetricsSnapshot:
        def timing(h: Histogram) -> TimingSnapshot:
            return TimingSnapshot(h.count, h.mean, h.percentile(0.99), h.max)

        return RequestMetricsSnapshot(
            api=self.api,
            requests=self.requests_per_sec.count,
            requests_per_sec=self.requests_per_sec.one_minute_rate(now_ns),
            errors=self.errors_per_sec.count,
            request_queue_time_ms=timing(self.request_queue_time_ms),
            local_time_ms=timing(self.local_time_ms),
            remote_time_ms=timing(self.remote_time_ms),
            response_queue_time_ms=timing(self.response_queue_time_ms),
            response_send_time_ms=timing(self.response_send_time_ms),
            total_time_ms=timing(self.total_time_ms),
        )


@dataclass(frozen=True)
class BrokerMetricsSnapshot:
    node_id: int
    request_queue_size: int
    response_queue_sizes: dict[int, int]
    connections: int
    bytes_in: int
    bytes_out: int
    requests: dict[str, RequestMetricsSnapshot]
    #: Kafka's ``successful-reauthentication-total``.
    successful_reauthentications: int = 0
    #: Kafka's ``expired-connections-killed-count``: closed after their SASL session ended.
    expired_connections_killed: int = 0
    #: per client with a quota: its quota, measured rate and throttle times (Kafka's
    #: ``byte-rate`` / ``request-time`` and ``throttle-time`` per user and client id)
    client_quotas: tuple[ClientQuotaMetrics, ...] = ()


class BrokerMetrics:
    """All request metrics of one broker plus its gauges. Thread-safe."""

    def __init__(self, node_id: int, now_ns: int) -> None:
        self.node_id = node_id
        self._created_ns = now_ns
        self._lock = threading.Lock()
        self._by_api: dict[str, RequestMetrics] = {}
        self._gauges: dict[str, Callable[[], int]] = {}
        self._response_queue_gauges: dict[int, Callable[[], int]] = {}
        self._client_quotas: Callable[[int], list[ClientQuotaMetrics]] | None = None
        self._counter_lock = threading.Lock()
        self.connections = 0
        self.bytes_in = 0
        self.bytes_out = 0
        self.successful_reauthentications = 0
        self.expired_connections_killed = 0

    def for_api(self, api: str) -> RequestMetrics:
        metrics = self._by_api.get(api)
        if metrics is None:
            with self._lock:
                metrics = self._by_api.get(api)
                if metrics is None:
                    metrics = self._by_api[api] = RequestMetrics(api, self._created_ns)
        return metrics

    def set_request_queue_gauge(self, gauge: Callable[[], int]) -> None:
        self._gauges["request_queue_size"] = gauge

    def set_client_quotas_source(self, source: Callable[[int], list[ClientQuotaMetrics]]) -> None:
        """Where the client quota metrics come from (``QuotaManagers.metrics(now_ms)``)."""
        self._client_quotas = source

    def add_response_queue_gauge(self, processor_id: int, gauge: Callable[[], int]) -> None:
        self._response_queue_gauges[processor_id] = gauge

    def remove_response_queue_gauge(self, processor_id: int) -> None:
        self._response_queue_gauges.pop(processor_id, None)

    def add_counts(
        self,
        *,
        connections: int = 0,
        bytes_in: int = 0,
        bytes_out: int = 0,
        successful_reauthentications: int = 0,
        expired_connections_killed: int = 0,
    ) -> None:
        with self._counter_lock:
            self.connections += connections
            self.bytes_in += bytes_in
            self.bytes_out += bytes_out
            self.successful_reauthentications += successful_reauthentications
            self.expired_connections_killed += expired_connections_killed

    def snapshot(self, now_ns: int) -> BrokerMetricsSnapshot:
        gauge = self._gauges.get("request_queue_size")
        return BrokerMetricsSnapshot(
            node_id=self.node_id,
            request_queue_size=gauge() if gauge else 0,
            response_queue_sizes={pid: g() for pid, g in list(self._response_queue_gauges.items())},
            connections=self.connections,
            bytes_in=self.bytes_in,
            bytes_out=self.bytes_out,
            requests={api: m.snapshot(now_ns) for api, m in sorted(list(self._by_api.items()))},
            successful_reauthentications=self.successful_reauthentications,
            expired_connections_killed=self.expired_connections_killed,
            client_quotas=tuple(self._client_quotas(now_ns // 1_000_000))
            if self._client_quotas is not None
            else (),
        )


def format_snapshot(snap: BrokerMetricsSnapshot) -> str:
    """A human-readable table (the CLI prints this every ``--metrics-interval`` seconds)."""
    queues = ",".join(str(n) for _, n in sorted(snap.response_queue_sizes.items())) or "-"
    lines = [
        f"broker {snap.node_id}: request queue {snap.request_queue_size}, "
        f"response queues [{queues}], connections {snap.connections}, "
        f"in {snap.bytes_in / 1e6:.1f} MB, out {snap.bytes_out / 1e6:.1f} MB",
        f"  {'api':<16}{'requests':>9}{'req/s':>9}{'errors':>7}"
        f"{'queue':>8}{'local':>8}{'remote':>8}{'respq':>8}{'send':>8}{'total':>8}{'p99':>8}",
    ]
    for api, r in snap.requests.items():
        lines.append(
            f"  {api:<16}{r.requests:>9}{r.requests_per_sec:>9.1f}{r.errors:>7}"
            f"{r.request_queue_time_ms.mean_ms:>8.2f}{r.local_time_ms.mean_ms:>8.2f}"
            f"{r.remote_time_ms.mean_ms:>8.2f}{r.response_queue_time_ms.mean_ms:>8.2f}"
            f"{r.response_send_time_ms.mean_ms:>8.2f}{r.total_time_ms.mean_ms:>8.2f}"
            f"{r.total_time_ms.p99_ms:>8.2f}"
        )
    lines.extend(
        f"  quota {q.quota_type} user={q.user or '-'} client-id={q.client_id or '-'}: "
        f"{q.rate:,.1f} of {q.quota:,.1f}, throttled {q.throttle_count} times, "
        f"{q.throttle_time_ms_total} ms in all"
        for q in snap.client_quotas
    )
    return "\n".join(lines)
