"""CoordinatorTimer: keyed timers of a coordinator, run by the broker's purgatory.

Kafka's ``CoordinatorTimer`` (coordinator-common): ``schedule(key, delay_ms, operation)``
replaces whatever was scheduled under ``key``; ``cancel(key)`` drops it. The group
coordinator keys its join, sync and heartbeat deadlines this way (``("join", group)``,
``("heartbeat", group, member)``) instead of Kafka's older DelayedJoin/DelayedHeartbeat
operations; the behaviour is the same.

Each timer is a ``DelayedOperation`` in the broker's ``DelayedOperationPurgatory`` that
only ever completes by expiring, so it fires on the purgatory's expiration reaper thread
(or in ``expire_due``, which unit tests call after advancing a ``MockClock``). A firing
operation takes the coordinator's lock and runs only if it is still the one scheduled
under its key, so a timer replaced or cancelled while it was about to fire does nothing.
Thread-safe: ``schedule``/``cancel`` are called with the coordinator's lock held.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from typing import Any

from kclient.broker.purgatory import DelayedOperation, DelayedOperationPurgatory

log = logging.getLogger(__name__)


class CoordinatorTimer:
    """Timers by key for one coordinator, over ``purgatory``'s clock and reaper."""

    def __init__(
        self,
        purgatory: DelayedOperationPurgatory,
        lock: threading.RLock,
        monotonic_ns: Callable[[], int],
    ) -> None:
        self._purgatory = purgatory
        self._lock = lock
        self._monotonic_ns = monotonic_ns
        self._ops: dict[Hashable, DelayedOperation] = {}

    def schedule(self, key: Hashable, delay_ms: int, operation: Callable[[], Any]) -> None:
        """Run ``operation`` (under the coordinator's lock) in ``delay_ms``, replacing
        any timer of ``key``."""
        self.cancel(key)
        deadline_ns = self._monotonic_ns() + max(0, delay_ms) * 1_000_000
        op: DelayedOperation | None = None

        def fire(expired: bool) -> None:
            if not expired:
                return
            with self._lock:
                if self._ops.get(key) is not op:
                    return  # replaced or cancelled meanwhile
                del self._ops[key]
                try:
                    operation()
                except Exception:
                    log.exception("coordinator timer %r failed", key)

        op = DelayedOperation(deadline_ns, lambda: False, fire)
        self._ops[key] = op
        self._purgatory.try_complete_else_watch(op, ())

    def cancel(self, key: Hashable) -> None:
        op = self._ops.pop(key, None)
        if op is not None:
            op.cancel()

    def cancel_if(self, predicate: Callable[[Any], bool]) -> None:
        """Cancel every timer whose key ``predicate`` accepts."""
        for key in [k for k in self._ops if predicate(k)]:
            self.cancel(key)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._ops

    def cancel_all(self) -> None:
        """Drop every timer (the coordinator is shutting down)."""
        for op in self._ops.values():
            op.cancel()
        self._ops.clear()
