"""Producer metrics: the C recording (``kclient.sender._stats``, built by the test command:
if it is missing the import below fails) against the Python reference, stat by stat and
through a Sender on a mock clock (what ``KafkaProducer.metrics()`` returns)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import kclient.sender._stats as c_stats
from kclient import errors
from kclient.record import ACCELERATED
from kclient.sender import metrics, sender
from kclient.sender.metrics import SAMPLES, WINDOW_MS, PySampledStat, PySenderMetrics
from tests.sender.sender_helpers import make, ok

pytestmark = pytest.mark.usefixtures("both_sender_steps")  # C and Python send steps

IMPLS = ["c", "python"]


def c_stat_type() -> Any:
    assert metrics.CSampledStat.__mro__[1] is c_stats.SampledStat
    return metrics.CSampledStat


def new_stat(impl: str) -> Any:
    return c_stat_type()() if impl == "c" else PySampledStat()


def test_the_c_recording_runs_when_the_accelerator_is_on() -> None:
    assert metrics.C_ACCELERATED == ACCELERATED
    recorder = metrics.SenderMetrics(lambda: 0)
    assert isinstance(recorder, c_stats.SenderStats) == ACCELERATED
    assert isinstance(metrics.SampledStat(), c_stats.SampledStat) == ACCELERATED


def samples_of(stat: Any) -> list[list[float]]:
    return [[float(v) for v in s] for s in stat._samples]


@pytest.mark.parametrize("impl", IMPLS)
def test_windows_roll_and_the_oldest_goes(impl: str) -> None:
    stat = new_stat(impl)
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


@pytest.mark.parametrize("impl", IMPLS)
def test_the_first_value_of_a_window_is_its_max_even_when_negative(impl: str) -> None:
    stat = new_stat(impl)
    stat.record(-3.5, 0)
    stat.record(-7, 1)
    assert stat.max(2) == -3.5
    assert stat.avg(2) == -5.25


@pytest.mark.parametrize("impl", IMPLS)
def test_a_reader_keeps_the_samples_it_read_when_a_window_rolls(impl: str) -> None:
    stat = new_stat(impl)
    stat.record(1, 0)
    held = stat._samples
    stat.record(2, WINDOW_MS)
    stat.record(3, 2 * WINDOW_MS)
    assert [[float(v) for v in s] for s in held] == [[0, 1, 1, 1]]


@pytest.mark.parametrize("impl", IMPLS)
def test_a_value_that_is_no_number_is_a_type_error(impl: str) -> None:
    stat = new_stat(impl)
    with pytest.raises(TypeError):
        stat.record("3", 0)


VALUES = st.one_of(
    st.integers(-(2**40), 2**40), st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False)
)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.tuples(VALUES, st.integers(-1_000, 3 * WINDOW_MS)), min_size=0, max_size=40),
    start_ms=st.integers(0, 2**40),
    reads=st.lists(st.integers(-WINDOW_MS, 5 * WINDOW_MS), min_size=1, max_size=5),
)
def test_c_and_python_stats_agree(
    steps: list[tuple[float, int]], start_ms: int, reads: list[int]
) -> None:
    c, py = new_stat("c"), new_stat("python")
    now = start_ms
    for value, step_ms in steps:  # mostly forward, sometimes a little back
        now += step_ms
        c.record(value, now)
        py.record(value, now)
        assert samples_of(c) == samples_of(py)
    for offset in reads:
        at = now + offset
        assert c.rate_per_s(at) == py.rate_per_s(at)
        assert c.avg(at) == py.avg(at)
        assert c.max(at) == py.max(at)


@pytest.mark.parametrize("samples", [1, 2, 3, 16])
def test_c_and_python_keep_as_many_windows(samples: int) -> None:
    c = c_stat_type()(1_000, samples)
    py = PySampledStat(1_000, samples)
    for i in range(40):
        c.record(i, i * 700)
        py.record(i, i * 700)
        assert samples_of(c) == samples_of(py)
    assert len(c._samples) == samples


def test_a_c_stat_needs_a_window_and_a_sample_count_it_can_keep() -> None:
    with pytest.raises(ValueError, match="window_ms"):
        c_stat_type()(0, 2)
    with pytest.raises(ValueError, match="samples"):
        c_stat_type()(WINDOW_MS, c_stats.MAX_SAMPLES + 1)
    assert c_stat_type()().window_ms == WINDOW_MS
    assert c_stat_type()().samples == SAMPLES


def c_metrics(now_ms: Any) -> Any:
    assert issubclass(metrics.CSenderMetrics, c_stats.SenderStats)
    return metrics.CSenderMetrics(now_ms)


def test_c_and_python_sender_metrics_record_the_same() -> None:
    now = [0]
    c, py = c_metrics(lambda: now[0]), PySenderMetrics(lambda: now[0])
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
        ("record_sent", (7, 70_000)),
    ]
    for name, args in calls:
        getattr(c, name)(*args)
        getattr(py, name)(*args)
        c.batch_splits += 1
        py.batch_splits += 1
        for now[0] in (args[-1], args[-1] + 1_000, args[-1] + 2 * WINDOW_MS):
            assert c.snapshot() == py.snapshot()
    assert c.records_sent_total == py.records_sent_total == 10
    assert c.record_errors_total == py.record_errors_total == 2
    assert c.snapshot()["compression-rate-avg"] == 0.0  # the last window: none recorded
    now[0] = 0
    assert c.snapshot()["compression-rate-avg"] == 0.5


def test_c_sender_metrics_check_their_stats() -> None:
    c = c_metrics(lambda: 0)
    with pytest.raises(TypeError, match="records_sent"):
        c.records_sent = PySampledStat()
    with pytest.raises(TypeError, match="record_sent"):
        c.record_sent(1)
    with pytest.raises(TypeError):
        c.record_sent(1.5, 0)  # a count of records is an int (the total)
    assert c.records_sent_total == 0


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


def test_a_senders_metrics_are_the_same_recorded_in_c_or_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sender, "SenderMetrics", metrics.CSenderMetrics)
    in_c = run_scenario()
    monkeypatch.setattr(sender, "SenderMetrics", PySenderMetrics)
    in_python = run_scenario()
    assert in_c == in_python
    assert in_c["record-send-total"] == 4
    assert in_c["record-error-total"] == 1
    assert in_c["record-retry-rate"] > 0
    assert in_c["request-latency-max"] > 0
