"""Producers shared by the successive tasks of a Spark worker process (Spark's producer
pool): one per distinct configuration, closed after an idle time or when a task fails."""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kclient.producer import KafkaProducer


class ProducerLease:
    __slots__ = ("idle_s", "key", "last_used_s", "producer", "retired", "users")

    def __init__(self, key: tuple[tuple[str, str], ...], producer: Any, idle_s: float) -> None:
        self.key = key
        self.producer = producer
        self.idle_s = idle_s
        self.users = 0
        self.last_used_s = 0.0
        self.retired = False


class ProducerCache:
    """Producers shared by the successive tasks of one process (Spark's producer pool).

    ``acquire`` leases the producer for a configuration, creating it on first use;
    ``release`` returns it. A producer is closed once unused for its ``idle_s`` (by a
    daemon reaper thread, or by ``close_idle(now_s)``), and at once when released with
    ``retire=True`` by its last user: a task that failed does not hand its producer on.
    ``monotonic`` (seconds) is the clock; ``reaper=False`` leaves closing to the caller.
    """

    def __init__(
        self,
        factory: Callable[[dict[str, Any]], Any],
        monotonic: Callable[[], float] = time.monotonic,
        reaper: bool = True,
    ) -> None:
        self._factory = factory
        self._monotonic = monotonic
        self._use_reaper = reaper
        self.forget()

    def forget(self) -> None:
        """Drop every entry without closing (after ``fork``: they belong to the parent)."""
        self._lock = threading.Lock()
        self._wakeup = threading.Event()
        self._entries: dict[tuple[tuple[str, str], ...], ProducerLease] = {}
        self._reaper: threading.Thread | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def acquire(self, config: Mapping[str, Any], idle_s: float) -> ProducerLease:
        key = tuple(sorted((k, repr(v)) for k, v in config.items()))
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = ProducerLease(key, self._factory(dict(config)), idle_s)
                if self._use_reaper and self._reaper is None:
                    self._reaper = threading.Thread(
                        target=self._reap, name="kclient-spark-producer-reaper", daemon=True
                    )
                    self._reaper.start()
                self._wakeup.set()  # a new, possibly shorter, idle time
            entry.users += 1
            entry.idle_s = idle_s
            return entry

    def release(self, entry: ProducerLease, retire: bool = False) -> None:
        closing = None
        with self._lock:
            entry.users -= 1
            entry.last_used_s = self._monotonic()
            if retire and self._entries.get(entry.key) is entry:
                del self._entries[entry.key]
                entry.retired = True
            if entry.retired and entry.users == 0:
                closing = entry.producer
        if closing is not None:
            closing.close(0)  # fail what is left now: the task's retry sends it again

    def _expire(self, now_s: float) -> tuple[list[Any], float | None]:
        """Under the lock: remove idle entries; also the wait until the next may expire."""
        closing: list[Any] = []
        wait_s: float | None = None
        for key, entry in list(self._entries.items()):
            left_s = entry.idle_s if entry.users else entry.last_used_s + entry.idle_s - now_s
            if left_s <= 0:
                del self._entries[key]
                closing.append(entry.producer)
            elif wait_s is None or left_s < wait_s:
                wait_s = left_s
        return closing, wait_s

    def close_idle(self, now_s: float) -> int:
        """Close the producers unused for their idle time; returns how many were closed."""
        with self._lock:
            closing, _ = self._expire(now_s)
        for producer in closing:
            producer.close()
        return len(closing)

    def _reap(self) -> None:
        while True:
            now_s = self._monotonic()
            with self._lock:
                closing, wait_s = self._expire(now_s)
                if wait_s is None:
                    self._reaper = None  # under the lock: the next acquire starts another
                self._wakeup.clear()
            for producer in closing:
                producer.close()
            if wait_s is None:
                return
            self._wakeup.wait(wait_s)

    def close_all(self) -> None:
        with self._lock:
            producers = [e.producer for e in self._entries.values()]
            self._entries.clear()
            self._wakeup.set()
        for producer in producers:
            producer.close()


PRODUCER_CACHE = ProducerCache(KafkaProducer)
os.register_at_fork(after_in_child=PRODUCER_CACHE.forget)
atexit.register(PRODUCER_CACHE.close_all)
