"""MockClock: Kafka's MockTime. Advances only when told (or when something sleeps on it)."""

from __future__ import annotations


class MockClock:
    """A deterministic clock. ``sleep_ms`` advances time instead of sleeping."""

    def __init__(self, start_ms: int = 1_700_000_000_000, auto_tick_ms: int = 0) -> None:
        self._wall_ms = start_ms
        self._mono_ns = 0
        self.auto_tick_ms = auto_tick_ms

    def time_ms(self) -> int:
        self._auto()
        return self._wall_ms

    def monotonic_ms(self) -> int:
        self._auto()
        return self._mono_ns // 1_000_000

    def monotonic_ns(self) -> int:
        self._auto()
        return self._mono_ns

    def sleep_ms(self, duration_ms: int) -> None:
        self.advance(duration_ms)

    def advance(self, duration_ms: int) -> None:
        """Move both clocks forward by ``duration_ms``."""
        if duration_ms < 0:
            raise ValueError(f"cannot move a clock backwards ({duration_ms} ms)")
        self._wall_ms += duration_ms
        self._mono_ns += duration_ms * 1_000_000

    def _auto(self) -> None:
        if self.auto_tick_ms:
            self.advance(self.auto_tick_ms)
