"""Producer metrics: the stats' windows, and what a Sender on a mock clock records (what
``KafkaProducer.metrics()`` returns)."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.sender.metrics import WINDOW_MS, SampledStat, SenderMetrics
from tests.sender.sender_helpers import make, ok


def samples_of(stat: Any) -> list[list[float]]:
    return [[float(v) for v in s] for s in stat._samples]


def test_windows_roll_and_the_oldest_goes() -> None:
    stat = SampledStat()
    stat.record(10, 1_000)
    stat.record(30, 1_000 + WINDOW_MS - 1)  # same window
    assert samples_of(stat) == [[1_000, 40, 2, 30]]
    stat.record(5, 1_000 + WINDOW_MS)  # a new window
    stat.record(7, 1_000 + 2 * WINDOW_MS + 5)  # a third: the first goes
    assert samples_of(stat) == [[1_000 + WINDOW_MS, 5, 1, 5], [1_000 + 2 * WINDOW_MS + 5, 7, 1, 7]]
    now = 1_000 + 2 * WINDOW_MS + 10
    assert stat.max(now) == 7.0
    assert stat.avg(now) == 6.0
    assert stat.rate_per_s(now) == 12 * 1000.0 / (now - (1_000 + WINDOW_MS))
    assert stat.max(now + 2 * WINDOW_MS) == 0.0  # every window too old
    assert stat.rate_per_s(now + 2 * WINDOW_MS) == 0.0


def test_the_first_value_of_a_window_is_its_max_even_when_negative() -> None:
    stat = SampledStat()
    stat.record(-3.5, 0)
    stat.record(-7, 1)
    assert stat.max(2) == -3.5
    assert stat.avg(2) == -5.25


def test_a_reader_keeps_the_samples_it_read_when_a_window_rolls() -> None:
    stat = SampledStat()
    stat.record(1, 0)
    held = stat._samples
    stat.record(2, WINDOW_MS)
    stat.record(3, 2 * WINDOW_MS)
    assert [[float(v) for v in s] for s in held] == [[0, 1, 1, 1]]


def test_a_value_that_is_no_number_is_a_type_error() -> None:
    stat = SampledStat()
    with pytest.raises(TypeError):
        stat.record("3", 0)


@pytest.mark.parametrize("samples", [1, 2, 3, 16])
def test_a_stat_keeps_as_many_windows_as_samples(samples: int) -> None:
    stat = SampledStat(1_000, samples)
    for i in range(40):
        stat.record(i, i * 700)
        assert len(stat._samples) <= samples
    assert len(stat._samples) == samples
    assert samples_of(stat)[-1] == [26_600, 77, 2, 39]  # 38 and 39, 700 ms apart


def test_sender_metrics_record_totals_and_rates() -> None:
    now = [0]
    c = SenderMetrics(lambda: now[0])
    calls: list[tuple[str, tuple[int, ...]]] = [
        ("record_request", (1, 3, 500, 0)),
        ("record_batch", (400, 800, 0)),
        ("record_batch", (400, 0, 0)),  # no compression rate without uncompressed bytes
        ("record_sent", (3, 5)),
        ("record_latency", (5, 5)),
        ("record_retries_for", (2, 10)),
        ("record_errors_for", (2, 40_000)),
        ("record_request", (2, 7, 900, 40_001)),
        ("record_latency", (12, 70_000)),
        ("record_queue_time", (4, 69_000)),
        ("record_queue_time", (9, 70_000)),
        ("record_sent", (7, 70_000)),
    ]
    for name, args in calls:
        getattr(c, name)(*args)
        c.batch_splits += 1
    now[0] = 70_000
    snapshot = c.snapshot()
    assert snapshot["batch-split-total"] == len(calls)
    assert snapshot["request-latency-max"] == 12.0
    assert (snapshot["record-queue-time-avg"], snapshot["record-queue-time-max"]) == (6.5, 9.0)
    assert snapshot["records-per-request-avg"] == 7.0  # the first request's window has gone
    assert c.records_sent_total == 10
    assert c.record_errors_total == 2
    assert c.snapshot()["compression-rate-avg"] == 0.0  # the last window: none recorded
    now[0] = 0
    assert c.snapshot()["compression-rate-avg"] == 0.5


def run_scenario() -> dict[str, float]:
    """A Sender sending, retrying, failing and sending again over three windows."""
    h = make(retry_backoff_ms=100, retry_backoff_max_ms=100)
    futures = h.send("t", 0, n=3)
    h.run()
    (request,) = h.produce_requests()
    h.clock.advance(7)
    h.client.respond(ok(request, base_offset=10))
    h.run()
    assert [f.result(0).offset for f in futures] == [10, 11, 12]
    h.clock.advance(WINDOW_MS)
    (retried,) = h.send("t", 0, value=b"x" * 300)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, code=errors.NotLeaderOrFollowerError.code))
    h.run()
    h.clock.advance(100)
    h.run()
    (request,) = h.produce_requests()
    h.clock.advance(3)
    h.client.respond(ok(request, base_offset=20))
    h.run()
    assert retried.result(0).offset == 20
    h.clock.advance(WINDOW_MS + 5)
    (failed,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    h.client.respond(ok(request, code=errors.InvalidRecordError.code))
    h.run()
    assert failed.done()
    return h.sender.metrics.snapshot()


def test_a_senders_metrics_count_what_it_sent_retried_and_failed() -> None:
    in_c = run_scenario()
    assert in_c["record-send-total"] == 4
    assert in_c["record-error-total"] == 1
    assert in_c["record-retry-rate"] > 0
    assert in_c["request-latency-max"] > 0
