"""IncompleteBatches: Java's ``IncompleteBatches`` — every batch not completed yet.

Batches are added by callers' threads (``send`` creating a batch) and removed by the
Sender thread when they complete; ``flush`` and ``close`` read it from their own threads.
Every method takes the one lock.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from kclient.sender.batch import ProducerBatch
from kclient.sender.future import new_lock


class IncompleteBatches:
    """A thread-safe set of the batches that have not completed, for flush and close."""

    __slots__ = ("_batches", "_last_batch_id", "_lock")

    def __init__(self) -> None:
        self._lock = new_lock()
        self._batches: set[ProducerBatch] = set()
        self._last_batch_id = 0

    def add(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.add(batch)
            self._last_batch_id = max(self._last_batch_id, batch.flush_id)

    def remove(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.discard(batch)

    def replace(self, batch: ProducerBatch, children: Iterable[ProducerBatch]) -> None:
        """A split: the children stand in for their parent."""
        with self._lock:
            self._batches.discard(batch)
            self._batches.update(children)

    @property
    def last_batch_id(self) -> int:
        """The id of the newest batch created so far (flush waits up to it)."""
        with self._lock:
            return self._last_batch_id

    def copy(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._batches)

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._batches)

    def await_completion(self, up_to_batch_id: int, timeout_s: float | None) -> bool:
        """Wait until every batch with an id up to ``up_to_batch_id`` completed.

        Split batches keep their parent's id, so they are waited for too. False on timeout.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._lock:
                pending = [b for b in self._batches if b.flush_id <= up_to_batch_id]
            if not pending:
                return True
            for batch in pending:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                batch.result.wait(remaining)
