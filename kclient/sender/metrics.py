"""Producer metrics: the subset of Java's ``SenderMetricsRegistry`` kclient records.

Recorded by the Sender thread alone (per batch and per request, never per record), so
recording takes no lock; ``KafkaProducer.metrics()`` reads a snapshot from any thread.
Like Java's defaults, rates, averages and maxima cover two 30-second samples
(``metrics.num.samples`` of ``metrics.sample.window.ms``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

WINDOW_MS = 30_000
SAMPLES = 2


class SampledStat:
    """Sum, count and max over the last ``samples`` windows of ``window_ms``."""

    __slots__ = ("_samples", "samples", "window_ms")

    def __init__(self, window_ms: int = WINDOW_MS, samples: int = SAMPLES) -> None:
        self.window_ms = window_ms
        self.samples = samples
        # each sample: [window start ms, sum, count, max]; replaced rather than mutated when
        # a window rolls, for readers on other threads
        self._samples: list[list[float]] = []

    def record(self, value: float, now_ms: int) -> None:
        samples = self._samples
        if not samples or now_ms - samples[-1][0] >= self.window_ms:
            kept = samples[1 - self.samples :] if self.samples > 1 else []
            self._samples = samples = [*kept, [now_ms, 0.0, 0.0, value]]
        current = samples[-1]
        current[1] += value
        current[2] += 1
        if value > current[3]:  # noqa: PLR1730 -- max() is a call
            current[3] = value

    def _live(self, now_ms: int) -> list[list[float]]:
        span_ms = self.window_ms * self.samples
        return [list(s) for s in self._samples if now_ms - s[0] < span_ms]

    def rate_per_s(self, now_ms: int) -> float:
        live = self._live(now_ms)
        if not live:
            return 0.0
        elapsed_ms = max(now_ms - live[0][0], 1)
        # Java counts at least (samples - 1) full windows, so a new stat does not spike
        elapsed_ms = max(elapsed_ms, self.window_ms * (self.samples - 1))
        return sum(s[1] for s in live) * 1000.0 / elapsed_ms

    def avg(self, now_ms: int) -> float:
        live = self._live(now_ms)
        count = sum(s[2] for s in live)
        return sum(s[1] for s in live) / count if count else 0.0

    def max(self, now_ms: int) -> float:
        live = self._live(now_ms)
        return float(max((s[3] for s in live), default=0.0))


class Stat(Protocol):
    """What SenderMetrics needs of a stat (``SampledStat``, or a test's)."""

    def record(self, value: float, now_ms: int) -> None: ...
    def rate_per_s(self, now_ms: int) -> float: ...
    def avg(self, now_ms: int) -> float: ...
    def max(self, now_ms: int) -> float: ...


class SenderMetrics:
    """The producer's metrics, by Java metric name: the Sender's stats and totals, its
    recording per request and per batch, and a snapshot for any thread."""

    def __init__(self, now_ms: Callable[[], int]) -> None:
        self._now_ms = now_ms
        self.records_sent: Stat = SampledStat()
        self.record_errors: Stat = SampledStat()
        self.record_retries: Stat = SampledStat()
        self.batch_size: Stat = SampledStat()
        self.records_per_request: Stat = SampledStat()
        self.compression_rate: Stat = SampledStat()
        self.request_latency: Stat = SampledStat()
        self.outgoing_bytes: Stat = SampledStat()
        self.queue_time: Stat = SampledStat()
        """A drained batch's time in the accumulator, created to drained (Java's
        ``record-queue-time``)."""
        self.batch_splits = 0
        self.leader_hints_followed = 0
        """Retried batches that went straight to the leader a Produce answer named (KIP-951)."""
        self.records_sent_total = 0
        self.record_errors_total = 0

    def record_request(self, batches: int, records: int, size_bytes: int, now_ms: int) -> None:
        self.records_per_request.record(records, now_ms)
        self.outgoing_bytes.record(size_bytes, now_ms)

    def record_batch(self, size_bytes: int, uncompressed_bytes: int, now_ms: int) -> None:
        self.batch_size.record(size_bytes, now_ms)
        if uncompressed_bytes > 0:
            self.compression_rate.record(size_bytes / uncompressed_bytes, now_ms)

    def record_queue_time(self, queue_time_ms: int, now_ms: int) -> None:
        self.queue_time.record(queue_time_ms, now_ms)

    def record_sent(self, records: int, now_ms: int) -> None:
        self.records_sent.record(records, now_ms)
        self.records_sent_total += records

    def record_errors_for(self, records: int, now_ms: int) -> None:
        self.record_errors.record(records, now_ms)
        self.record_errors_total += records

    def record_retries_for(self, records: int, now_ms: int) -> None:
        self.record_retries.record(records, now_ms)

    def record_latency(self, latency_ms: int, now_ms: int) -> None:
        self.request_latency.record(latency_ms, now_ms)

    def snapshot(self) -> dict[str, float]:
        now_ms = self._now_ms()
        return {
            "record-send-rate": self.records_sent.rate_per_s(now_ms),
            "record-send-total": float(self.records_sent_total),
            "record-error-rate": self.record_errors.rate_per_s(now_ms),
            "record-error-total": float(self.record_errors_total),
            "record-retry-rate": self.record_retries.rate_per_s(now_ms),
            "batch-size-avg": self.batch_size.avg(now_ms),
            "batch-size-max": self.batch_size.max(now_ms),
            "records-per-request-avg": self.records_per_request.avg(now_ms),
            "compression-rate-avg": self.compression_rate.avg(now_ms),
            "request-latency-avg": self.request_latency.avg(now_ms),
            "request-latency-max": self.request_latency.max(now_ms),
            "outgoing-byte-rate": self.outgoing_bytes.rate_per_s(now_ms),
            "record-queue-time-avg": self.queue_time.avg(now_ms),
            "record-queue-time-max": self.queue_time.max(now_ms),
            "batch-split-total": float(self.batch_splits),
            "leader-hint-followed-total": float(self.leader_hints_followed),
        }
