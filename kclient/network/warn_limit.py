"""Repeated warnings, rate-limited: a warning that comes back again and again (a broker
that refuses every reconnection, a topic the cluster keeps saying does not exist) is
logged at WARNING once per ``interval_ms`` per subject; the repeats in between go to DEBUG
and the next WARNING says how many there were. Kafka's clients log every repeat.

Used by the network client's thread and by the metadata's updates (under its lock): one
limiter per owner, never shared between threads without that owner's lock.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable

REPEAT_WARNING_INTERVAL_MS = 30_000


class WarnLimiter:
    """``level(subject, now_ms)``: the level to log this repeat at, and a suffix."""

    def __init__(self, interval_ms: int = REPEAT_WARNING_INTERVAL_MS) -> None:
        self.interval_ms = interval_ms
        self._last_ms: dict[Hashable, int] = {}
        self._suppressed: dict[Hashable, int] = {}

    def level(self, subject: Hashable, now_ms: int) -> tuple[int, str]:
        last_ms = self._last_ms.get(subject)
        if last_ms is not None and now_ms - last_ms < self.interval_ms:
            self._suppressed[subject] = self._suppressed.get(subject, 0) + 1
            return logging.DEBUG, ""
        self._last_ms[subject] = now_ms
        if len(self._last_ms) > 10_000:  # subjects come and go (topics): forget the oldest
            oldest = next(iter(self._last_ms))
            del self._last_ms[oldest]
            self._suppressed.pop(oldest, None)
        count = self._suppressed.pop(subject, 0)
        if count:
            seconds = self.interval_ms // 1000
            return logging.WARNING, f" ({count} more like it in the last {seconds} s at DEBUG)"
        return logging.WARNING, ""

    def forget(self, subject: Hashable) -> None:
        """The condition ended (e.g. the node connected): its next warning is logged."""
        self._last_ms.pop(subject, None)
        self._suppressed.pop(subject, None)
