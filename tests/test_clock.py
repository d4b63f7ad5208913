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
