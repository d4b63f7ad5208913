import time

import pytest

from kclient.testing import MockClock


def test_mock_clock_moves_only_when_told() -> None:
    clock = MockClock(start_ms=1000)
    assert clock.monotonic_ms() == 0
    assert clock.time_ms() == 1000
    clock.sleep_ms(250)
    assert clock.monotonic_ms() == 250
    assert clock.time_ms() == 1250
    assert clock.monotonic_ns() == 250_000_000
    with pytest.raises(ValueError):
        clock.advance(-1)


def test_the_system_clock_reads_monotonic_milliseconds_in_c_unless_told_not_to() -> None:
    from kclient import _clock  # built by the test command
    from kclient.clock import SYSTEM_CLOCK
    from kclient.record._accel import ACCELERATED

    read = SYSTEM_CLOCK.monotonic_ms
    assert (read is _clock.monotonic_ms) == ACCELERATED  # KCLIENT_PURE_PYTHON: the method
    for _ in range(3):
        before = time.monotonic_ns() // 1_000_000
        now = read()
        after = time.monotonic_ns() // 1_000_000
        assert type(now) is int and before <= now <= after
