"""Delayed operations: Fetch long polls (Kafka's ``DelayedOperationPurgatory`` + ``DelayedFetch``).

A Fetch that cannot be answered yet (fewer than ``min_bytes`` available) is parked here,
watched by the partitions it reads. It completes exactly once, on whichever thread gets
there first:

* the thread that appended to one of its partitions (``check_and_complete``), when the
  operation's ``try_complete`` now succeeds;
* the purgatory's **expiration reaper** thread, at ``max_wait_ms`` (``expire_due``, which
  tests started with ``start(reaper_thread=False)`` call themselves, with a fake clock);
* ``shutdown`` (the broker is stopping), which drops it without an answer.

``try_complete`` is called under no lock of the purgatory; ``on_complete`` runs once.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Hashable, Iterable

log = logging.getLogger(__name__)


class DelayedOperation:
    """An operation that completes when ``try_complete`` says so, or at its deadline."""

    __slots__ = ("_completed", "_lock", "_on_complete", "_try_complete", "deadline_ns", "keys")

    def __init__(
        self,
        deadline_ns: int,
        try_complete: Callable[[], bool],
        on_complete: Callable[[bool], None],
    ) -> None:
        self.deadline_ns = deadline_ns
        self._try_complete = try_complete
        self._on_complete = on_complete
        self._lock = threading.Lock()
        self._completed = False
        self.keys: tuple[Hashable, ...] = ()

    @property
    def is_completed(self) -> bool:
        return self._completed

    def force_complete(self, expired: bool = False) -> bool:
        """Complete now unless already completed; True if this call completed it."""
        with self._lock:
            if self._completed:
                return False
            self._completed = True
        try:
            self._on_complete(expired)
        except Exception:
            log.exception("delayed operation failed to complete")
        return True

    def maybe_complete(self) -> bool:
        """Complete if ``try_complete`` says the operation can be answered now."""
        if self._completed:
            return False
        try:
            ready = self._try_complete()
        except Exception:
            log.exception("delayed operation check failed; completing it")
            ready = True
        return ready and self.force_complete()

    def cancel(self) -> None:
        with self._lock:
            self._completed = True


class DelayedOperationPurgatory:
    """Watchers by key plus an expiration reaper thread."""

    def __init__(self, name: str, monotonic_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self.name = name
        self._monotonic_ns = monotonic_ns
        self._lock = threading.Condition()
        self._watchers: dict[Hashable, list[DelayedOperation]] = {}
        self._timeouts: list[tuple[int, int, DelayedOperation]] = []
        self._seq = itertools.count()
        self._running = False
        self._thread: threading.Thread | None = None

    def start(self, *, reaper_thread: bool = True) -> None:
        """Accept operations. Without the reaper thread nothing expires unless
        ``expire_due`` is called (deterministic tests)."""
        self._running = True
        if reaper_thread:
            self._thread = threading.Thread(
                target=self._reap, name=f"{self.name}-expiration-reaper", daemon=True
            )
            self._thread.start()

    def try_complete_else_watch(self, op: DelayedOperation, keys: Iterable[Hashable]) -> bool:
        """Complete now if possible, else watch ``keys`` until completion or the deadline.

        Returns True when the operation completed right away.
        """
        if op.maybe_complete():
            return True
        op.keys = tuple(keys)
        with self._lock:
            if not self._running:
                op.cancel()
                return False
            for key in op.keys:
                self._watchers.setdefault(key, []).append(op)
            heapq.heappush(self._timeouts, (op.deadline_ns, next(self._seq), op))
            self._lock.notify()
        # an append may have happened between the first check and the watch
        return op.maybe_complete()

    def check_and_complete(self, key: Hashable) -> int:
        """Try to complete the operations watching ``key``; returns how many completed."""
        with self._lock:
            ops = self._watchers.get(key)
            if not ops:
                return 0
            ops = list(ops)
        done = sum(1 for op in ops if op.maybe_complete())
        if done:
            self._purge(key)
        return done

    def watched(self) -> int:
        """Pending operations (tests, metrics)."""
        with self._lock:
            return sum(1 for _, _, op in self._timeouts if not op.is_completed)

    def _purge(self, key: Hashable) -> None:
        with self._lock:
            ops = self._watchers.get(key)
            if ops is None:
                return
            alive = [op for op in ops if not op.is_completed]
            if alive:
                self._watchers[key] = alive
            else:
                del self._watchers[key]

    def expire_due(self) -> int:
        """Complete, as expired, every operation whose deadline has passed by the
        purgatory's ``monotonic_ns``; returns how many this call completed.

        The reaper thread does this as deadlines pass; without it (``start(reaper_thread=
        False)``) the caller decides when.
        """
        with self._lock:
            due = self._pop_due(self._monotonic_ns())
        return self._complete_expired(due)

    def next_deadline_ns(self) -> int | None:
        """The earliest deadline of an operation still pending (None when none is):
        deterministic tests advance their clock to it, then call ``expire_due``."""
        with self._lock:
            while self._timeouts and self._timeouts[0][2].is_completed:
                heapq.heappop(self._timeouts)
            return self._timeouts[0][0] if self._timeouts else None

    def _pop_due(self, now_ns: int) -> list[DelayedOperation]:
        """Take the operations due by ``now_ns`` (and completed ones) off the timeouts.
        Called under the lock."""
        due: list[DelayedOperation] = []
        while self._timeouts and (
            self._timeouts[0][0] <= now_ns or self._timeouts[0][2].is_completed
        ):
            due.append(heapq.heappop(self._timeouts)[2])
        return due

    def _complete_expired(self, due: list[DelayedOperation]) -> int:
        """Complete ``due`` as expired (no lock held); returns how many this completed."""
        completed = 0
        for op in due:
            if op.force_complete(expired=True):
                completed += 1
            for key in op.keys:
                self._purge(key)
        return completed

    def _reap(self) -> None:
        # expire_due's two steps, with the pop in the same critical section as the
        # running check and the wait
        while True:
            with self._lock:
                if not self._running:
                    return
                now_ns = self._monotonic_ns()
                expired = self._pop_due(now_ns)
                if not expired:
                    wait_s = (self._timeouts[0][0] - now_ns) / 1e9 if self._timeouts else 1.0
                    self._lock.wait(min(max(wait_s, 0.0005), 1.0))
                    continue
            self._complete_expired(expired)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Stop the reaper; pending operations are dropped unanswered."""
        with self._lock:
            self._running = False
            for _, _, op in self._timeouts:
                op.cancel()
            self._timeouts.clear()
            self._watchers.clear()
            self._lock.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
