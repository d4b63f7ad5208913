"""Time, injected. Only the top of a loop reads the clock; everything below takes ``now_ms``.

Kafka's ``Time`` / ``SystemTime``. Tests use ``kclient.testing.MockClock``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from kclient.record import _accel


class Clock(Protocol):
    """The clock seam. ``sleep`` may be a no-op advance in mocks."""

    def time_ms(self) -> int:
        """Wall-clock milliseconds since the epoch (record timestamps)."""
        ...

    def monotonic_ms(self) -> int:
        """Monotonic milliseconds (deadlines, backoff, linger)."""
        ...

    def monotonic_ns(self) -> int:
        """Monotonic nanoseconds (latency measurement)."""
        ...

    def sleep_ms(self, duration_ms: int) -> None:
        """Sleep (a mock clock advances instead)."""
        ...


class SystemClock:
    """The real clock."""

    def time_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ms(self) -> int:
        return time.monotonic_ns() // 1_000_000

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()

    def sleep_ms(self, duration_ms: int) -> None:
        if duration_ms > 0:
            time.sleep(duration_ms / 1000.0)


def _c_monotonic_ms() -> Callable[[], int] | None:
    """``kclient._clock.monotonic_ms`` (the same clock without a Python frame), if built and
    the accelerator runs (not ``KCLIENT_PURE_PYTHON``)."""
    if not _accel.ACCELERATED:
        return None
    try:
        from kclient import _clock
    except ImportError:  # not built
        return None
    return _clock.monotonic_ms


_monotonic_ms = _c_monotonic_ms()
if _monotonic_ms is not None:
    SystemClock.monotonic_ms = staticmethod(_monotonic_ms)  # type: ignore[method-assign,assignment]

SYSTEM_CLOCK = SystemClock()
