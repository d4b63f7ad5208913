"""Fault injection for tests of clients against the embedded broker.

``LostAnswers`` is read by the Processor threads (Kafka's network threads) just before a
response goes out, and written from any thread through ``EmbeddedCluster.lose_answers``.
"""

from __future__ import annotations

import threading


class LostAnswers:
    """A testing aid: the answers to the next requests of chosen APIs are lost.

    Such a request is handled as usual (a Produce is written) but, instead of its answer,
    the connection is closed, as when the network fails right after the broker acted: the
    client cannot tell whether the request took effect and must retry. Shared by a
    broker's Processors; ``lose`` may be called from any thread.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[int, int] = {}

    def lose(self, api_key: int, count: int) -> None:
        """Lose the answers to the next ``count`` requests of ``api_key`` (adds up)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        with self._lock:
            left = self._counts.get(api_key, 0) + count
            if left:
                self._counts[api_key] = left

    def pending(self, api_key: int | None = None) -> int:
        """Answers still to be lost (for one API, or all)."""
        with self._lock:
            if api_key is None:
                return sum(self._counts.values())
            return self._counts.get(api_key, 0)

    def take(self, api_key: int) -> bool:
        """True (and one fewer to lose) if this API's answer is to be lost."""
        if not self._counts:  # the usual case: no lock
            return False
        with self._lock:
            left = self._counts.get(api_key, 0)
            if not left:
                return False
            if left == 1:
                del self._counts[api_key]
            else:
                self._counts[api_key] = left - 1
            return True
