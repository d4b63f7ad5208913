"""BufferPool: Java's ``BufferPool``, the ``buffer.memory`` bound.

Python allocates the bytes itself, so this pool only *accounts* for memory: a new batch
reserves ``max(batch.size, record size)`` bytes and gives them back when the batch is done.
When the pool is empty, ``allocate`` blocks — fairly, first come first served, as in Java —
for at most ``max.block.ms`` and then raises ``BufferExhaustedError``.

Thread safety: ``allocate`` runs on callers' threads (``KafkaProducer.send``),
``deallocate`` on the Sender thread; both take the pool's lock. Deadlines come from the
injected clock; the condition wait itself is a seam (``wait``) so tests can time out
without sleeping.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable

from kclient.clock import Clock
from kclient.errors import BufferExhaustedError, IllegalStateError, RecordTooLargeError
from kclient.sender.future import new_lock

WaitFn = Callable[[threading.Condition, int], object]
"""``wait(condition, timeout_ms)``: block on a held condition for up to ``timeout_ms``."""


def _real_wait(condition: threading.Condition, timeout_ms: int) -> object:
    return condition.wait(timeout_ms / 1000.0)


class BufferPool:
    """``buffer.memory`` bytes shared by all batches; FIFO-fair blocking allocation."""

    __slots__ = (
        "_available",
        "_clock",
        "_closed",
        "_lock",
        "_wait",
        "_waiters",
        "total_bytes",
        "wait_time_ns_total",
    )

    def __init__(self, total_bytes: int, clock: Clock, wait: WaitFn | None = None) -> None:
        self.total_bytes = total_bytes
        self._clock = clock
        self._wait = wait or _real_wait
        self._lock = new_lock()  # see future.new_lock
        self._available = total_bytes
        self._waiters: collections.deque[threading.Condition] = collections.deque()
        self._closed = False
        self.wait_time_ns_total = 0
        """Total time callers spent blocked in ``allocate`` (the bufferpool-wait-time metric)."""

    def allocate(self, size: int, max_time_to_block_ms: int) -> None:
        """Reserve ``size`` bytes, blocking up to ``max_time_to_block_ms`` for memory.

        Raises ``RecordTooLargeError`` when ``size`` exceeds ``buffer.memory`` altogether,
        ``BufferExhaustedError`` when the memory did not free up in time, and
        ``IllegalStateError`` when the producer was closed meanwhile.
        """
        if size > self.total_bytes:
            raise RecordTooLargeError(
                f"a batch of {size} bytes is larger than 'buffer.memory' ({self.total_bytes} bytes)"
            )
        with self._lock:
            if self._closed:
                raise IllegalStateError("producer closed while allocating buffer memory")
            if not self._waiters and self._available >= size:
                self._available -= size
                return
            self._allocate_blocking(size, max_time_to_block_ms)

    def try_allocate(self, size: int) -> bool:
        """Reserve ``size`` bytes if they are free now and nobody waits before us; False
        (nothing reserved) otherwise, and when ``allocate`` would raise."""
        with self._lock:
            if self._closed or self._waiters or size > self._available:
                return False
            self._available -= size
            return True

    def _allocate_blocking(self, size: int, max_time_to_block_ms: int) -> None:
        # Called with the lock held. Only the head of ``_waiters`` takes memory, so a
        # large request is not starved by a stream of small ones.
        condition = threading.Condition(self._lock)
        self._waiters.append(condition)
        start_ns = self._clock.monotonic_ns()
        deadline_ms = self._clock.monotonic_ms() + max_time_to_block_ms
        accumulated = 0
        try:
            while True:
                if self._waiters[0] is condition and self._available > 0:
                    take = min(size - accumulated, self._available)
                    self._available -= take
                    accumulated += take
                if accumulated >= size:
                    return
                if self._closed:
                    raise IllegalStateError("producer closed while waiting for buffer memory")
                remaining_ms = deadline_ms - self._clock.monotonic_ms()
                if remaining_ms <= 0:
                    raise BufferExhaustedError(
                        f"could not allocate {size} bytes within 'max.block.ms' "
                        f"({max_time_to_block_ms} ms): 'buffer.memory' ({self.total_bytes} "
                        f"bytes) is full; the broker is not keeping up or unreachable"
                    )
                self._wait(condition, remaining_ms)
        except BaseException:
            self._available += accumulated
            raise
        finally:
            self._waiters.remove(condition)
            self.wait_time_ns_total += self._clock.monotonic_ns() - start_ns
            if self._waiters and (self._available > 0 or self._closed):
                self._waiters[0].notify()

    def deallocate(self, size: int) -> None:
        """Return ``size`` bytes and wake the first waiter."""
        with self._lock:
            self._available += size
            if self._available > self.total_bytes:
                self._available -= size
                raise IllegalStateError(f"deallocated {size} bytes that were never allocated")
            if self._waiters:
                self._waiters[0].notify()

    def close(self) -> None:
        """Wake every blocked ``allocate``; they fail with IllegalStateError."""
        with self._lock:
            self._closed = True
            for condition in self._waiters:
                condition.notify()

    @property
    def available_bytes(self) -> int:
        """Bytes free right now (the buffer-available-bytes metric)."""
        return self._available

    @property
    def queued(self) -> int:
        """Callers blocked waiting for memory (the accumulator treats > 0 as 'exhausted')."""
        return len(self._waiters)
