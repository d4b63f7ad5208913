import io
import re

from kclient.cli.producer_perf import Stats, Throttler, percentiles
from kclient.testing import MockClock

WINDOW = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency\.$"
)
TOTAL = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.$"
)


def test_window_and_total_lines_use_kafkas_format() -> None:
    clock = MockClock()
    out = io.StringIO()
    stats = Stats(num_records=10, out=out, clock=clock)
    for i in range(10):
        clock.advance(1000)
        stats.record(i, latency_ms=i + 1, size=100, now_ms=clock.monotonic_ms())
    stats.print_total()
    lines = out.getvalue().splitlines()
    windows = [WINDOW.match(line) for line in lines[:-1]]
    assert len(windows) == 2 and all(windows)
    first = windows[0]
    assert first is not None
    assert first.group(1) == "5"  # five records per 5 s window
    assert first.group(2) == "1.0"
    total = TOTAL.match(lines[-1])
    assert total is not None
    assert total.group(1) == "10"
    assert float(total.group(2)) == 1.0
    assert total.group(5) == "10.00"  # max latency
    assert (total.group(6), total.group(9)) == ("6", "10")  # 50th and 99.9th


def test_percentiles_index_like_kafka() -> None:
    assert percentiles(list(range(1, 101)), (0.5, 0.99)) == [51, 100]
    assert percentiles([], (0.5,)) == [0]


def test_throttler_paces_to_the_target_rate() -> None:
    clock = MockClock()
    throttler = Throttler(100.0, clock.monotonic_ms(), clock)
    for sent in range(1, 201):
        throttler.throttle_if_needed(sent)
    assert clock.monotonic_ms() == 2000  # 200 records at 100/s
    unlimited = Throttler(-1, clock.monotonic_ms(), clock)
    unlimited.throttle_if_needed(10**6)
    assert clock.monotonic_ms() == 2000
