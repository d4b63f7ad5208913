"""Produce futures: Java's ``ProduceRequestResult`` and ``FutureRecordMetadata``.

One ``ProduceResult`` per batch holds the outcome (base offset, log-append time, error)
for every record in it; each record's ``FutureRecordMetadata`` only knows its offset
delta. Completing a batch is therefore one assignment plus one event, not a piece of
work per record — unless someone waits on, or adds a callback to, a particular record
future, which then registers itself as a *watcher* of the batch result and gets notified.

``FutureRecordMetadata`` is a ``concurrent.futures.Future`` (so ``asyncio.wrap_future``,
``concurrent.futures.wait`` and ``as_completed`` work), but it never creates a lock or
condition of its own unless one of those is used on it.

Completion happens on the Sender thread; waiting on any thread.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from kclient.errors import IllegalStateError, KafkaTimeoutError
from kclient.network.cluster import TopicPartition
from kclient.record._accel import ACCELERATED

log = logging.getLogger(__name__)

new_lock: Callable[[], Any] = threading.Lock
"""A ``ProduceResult``'s (and ``IncompleteBatches``' and ``BufferPool``'s) lock:
``kclient.sender._speedups.Lock`` (``threading.Lock``'s API) when the accelerator is
built; else ``threading.Lock``."""
if ACCELERATED:
    from kclient.sender import _speedups

    new_lock = _speedups.Lock

_PENDING = "PENDING"
_FINISHED = "FINISHED"


CREATE_TIME = 0
"""``RecordMetadata.timestamp_type``: the timestamp is the record's (the producer's)."""
LOG_APPEND_TIME = 1
"""``RecordMetadata.timestamp_type``: the timestamp is the broker's log-append time."""


class RecordMetadata(NamedTuple):
    """Where a record landed: Java's ``RecordMetadata``, with aiokafka's fields too.

    ``offset`` is -1 with ``acks=0``. ``timestamp`` is the broker's log-append time when
    the topic uses LogAppendTime, otherwise the record's create time (milliseconds).
    ``serialized_key_size`` / ``serialized_value_size`` are the bytes of the key and value
    after serialization, -1 when null (Java's ``serializedKeySize``/``serializedValueSize``).
    ``timestamp_type`` says which of the two the timestamp is: ``CREATE_TIME`` (0) or
    ``LOG_APPEND_TIME`` (1), as aiokafka's ``RecordMetadata.timestamp_type``;
    ``topic_partition`` and ``log_start_offset`` are aiokafka's names too (properties).
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1
    timestamp_type: int = CREATE_TIME

    @property
    def topic_partition(self) -> TopicPartition:
        """The record's ``TopicPartition(topic, partition)`` (aiokafka's field)."""
        return TopicPartition(self.topic, self.partition)

    @property
    def log_start_offset(self) -> None:
        """aiokafka's field: always None here (as aiokafka reports for brokers before
        Produce v5). kclient does not keep the partition's log start offset of the Produce
        response; it is no record's property and changes with retention."""
        return None


class Watcher(Protocol):
    """What ``ProduceResult.watch`` takes: a record future, or ``kclient.aio``'s watch over
    a batch's group. ``_notify`` runs once the batch completed, ``_watch`` once it was split
    (to follow the records to their new batches)."""

    def _notify(self) -> None: ...

    def _watch(self) -> None: ...


class ProduceResult:
    """The shared outcome of one batch (Java's ``ProduceRequestResult``).

    ``superseded`` is set instead of a result when the batch was split (MESSAGE_TOO_LARGE):
    its record futures have moved to the new batches' results.
    """

    __slots__ = (
        "_finished",
        "_gate",
        "_lock",
        "_watchers",
        "base_offset",
        "done",
        "error",
        "log_append_time_ms",
        "record_errors",
        "split_map",
        "superseded",
        "tp",
    )

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        self.record_errors: dict[int, BaseException] | None = None
        self.done = False
        self.superseded = False
        self.split_map: list[tuple[ProduceResult, int]] = []
        """After a split: ``split_map[offset_delta]`` is the record's new (result, delta)."""
        self._gate: threading.Lock | None = None
        """Created, held, by the first waiter; released when finished (a turnstile: every
        waiter that gets through releases it for the next). Cheaper than an Event."""
        self._finished = False
        self._lock = new_lock()
        self._watchers: list[Watcher] | None = []

    def set(
        self,
        base_offset: int,
        log_append_time_ms: int,
        error: BaseException | None,
        record_errors: dict[int, BaseException] | None = None,
        *,
        finish: bool = False,
        wakeups: list[threading.Lock] | None = None,
    ) -> list[Watcher]:
        """Record the outcome and mark it done; returns the watchers to notify.

        Waiters blocked in ``wait`` wake only at ``finish`` (here, with ``finish=True``),
        after the batch's send callbacks ran — as in Java, where ``get()`` returns after
        the callbacks. With ``wakeups``, the lock to release to wake them is appended there
        instead, for the caller to release later (see ``Sender``: just before it blocks).
        """
        with self._lock:
            if self.done:
                raise IllegalStateError(f"produce result for {self.tp} completed twice")
            self.base_offset = base_offset
            self.log_append_time_ms = log_append_time_ms
            self.error = error
            self.record_errors = record_errors
            self.done = True
            watchers, self._watchers = self._watchers, None
            gate = self._gate
            if finish:
                self._finished = True
        if finish and gate is not None:
            if wakeups is not None:
                wakeups.append(gate)
            else:
                gate.release()
        return watchers or []

    def finish(self, wakeups: list[threading.Lock] | None = None) -> None:
        """Wake the threads blocked in ``wait`` (after callbacks ran); see ``set``."""
        with self._lock:
            self._finished = True
            gate = self._gate
        if gate is not None:
            if wakeups is not None:
                wakeups.append(gate)
            else:
                gate.release()

    def supersede(self, split_map: list[tuple[ProduceResult, int]]) -> list[Watcher]:
        """The batch was split; wake waiters so they follow their record to its new result."""
        with self._lock:
            self.split_map = split_map
            self.superseded = True
            self._finished = True
            watchers, self._watchers = self._watchers, None
            gate = self._gate
        if gate is not None:
            gate.release()
        return watchers or []

    def watch(self, watcher: Watcher) -> bool:
        """Register for notification; False when already done/superseded."""
        with self._lock:
            if self._watchers is None:
                return False
            self._watchers.append(watcher)
            return True

    def wait(self, timeout_s: float | None) -> bool:
        """Block until finished or superseded; False on timeout."""
        with self._lock:
            if self._finished:
                return True
            gate = self._gate
            if gate is None:
                gate = self._gate = threading.Lock()
                gate.acquire()
        if gate.acquire(True, -1 if timeout_s is None else timeout_s):
            gate.release()  # let the next waiter through
            return True
        return False


def record_error(result: ProduceResult, offset_delta: int) -> BaseException | None:
    """The error of the record at ``offset_delta`` of a done batch, or None."""
    if result.record_errors is not None:
        specific = result.record_errors.get(offset_delta)
        if specific is not None:
            return specific
    return result.error


def record_metadata(
    result: ProduceResult, offset_delta: int, timestamp_ms: int, key_size: int, value_size: int
) -> RecordMetadata:
    """The ``RecordMetadata`` of the record at ``offset_delta`` of a delivered batch."""
    offset = result.base_offset + offset_delta if result.base_offset >= 0 else -1
    tp = result.tp
    if result.log_append_time_ms >= 0:
        return RecordMetadata(
            tp.topic,
            tp.partition,
            offset,
            result.log_append_time_ms,
            key_size,
            value_size,
            LOG_APPEND_TIME,
        )
    return RecordMetadata(tp.topic, tp.partition, offset, timestamp_ms, key_size, value_size)


class RecordFutureFields:
    """What a record's future knows of its record: its batch's shared ``produce_result``,
    its ``offset_delta`` there, its ``timestamp_ms`` and its serialized ``key_size`` and
    ``value_size`` (-1: null). ``FutureRecordMetadata``'s base: with the accelerator built,
    ``kclient.sender._speedups.RecordFutureFields``, a C struct the C ``Appender`` fills
    directly (kclient/sender/_fields.c); this class is the reference it follows."""

    __slots__ = ("key_size", "offset_delta", "produce_result", "timestamp_ms", "value_size")

    def __init__(
        self,
        produce_result: ProduceResult,
        offset_delta: int,
        timestamp_ms: int,
        key_size: int = -1,
        value_size: int = -1,
    ) -> None:
        self.produce_result = produce_result
        self.offset_delta = offset_delta
        self.timestamp_ms = timestamp_ms
        self.key_size = key_size
        self.value_size = value_size


if ACCELERATED and not TYPE_CHECKING:
    from kclient.sender._speedups import RecordFutureFields  # the C one


class FutureRecordMetadata(RecordFutureFields, concurrent.futures.Future):  # type: ignore[type-arg]
    """The future ``KafkaProducer.send`` returns; resolves to a ``RecordMetadata``.

    ``result(timeout)`` / ``get(timeout)`` wait; a send failure raises the Kafka error.
    Records cannot be cancelled once handed to the producer (``cancel()`` is False).
    ``FutureRecordMetadata(produce_result, offset_delta, timestamp_ms, key_size,
    value_size)``: the fields are ``RecordFutureFields``' (``Future.__init__`` is not
    called: it would allocate a Condition per future).
    """

    # The base class concurrent.futures.Future is not slotted, so instances keep a __dict__
    # for the lazily created fields; the always-present ones are RecordFutureFields'.

    # ---- lazily created state for concurrent.futures.wait / as_completed / callbacks ----

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond: threading.Condition | None = self.__dict__.get("_cond")
        if cond is None:
            cond = self.__dict__.setdefault("_cond", threading.Condition())
            self._watch()
        return cond

    @property
    def _waiters(self) -> list[Any]:  # type: ignore[override]
        waiters: list[Any] | None = self.__dict__.get("_waiter_list")
        if waiters is None:
            waiters = self.__dict__.setdefault("_waiter_list", [])
            self._watch()
        return waiters

    @property
    def _state(self) -> str:  # type: ignore[override]
        return _FINISHED if self.done() else _PENDING

    def _follow(self) -> ProduceResult:
        """The current result of this record: after splits, the batch it moved to."""
        result = self.produce_result
        while result.superseded:
            result, self.offset_delta = result.split_map[self.offset_delta]
            self.produce_result = result
        return result

    def _watch(self) -> None:
        """Register with the current batch result once (followed across splits)."""
        while True:
            result = self._follow()
            if self.__dict__.get("_watched") is result:
                return
            self.__dict__["_watched"] = result
            if result.watch(self) or not result.superseded:
                return

    def _notify(self) -> None:
        """The batch completed: wake concurrent.futures waiters, run done callbacks."""
        cond = self.__dict__.get("_cond")
        if cond is not None:
            failed = self._error(self.produce_result) is not None
            with cond:
                for waiter in self.__dict__.get("_waiter_list", ()):
                    if failed:
                        waiter.add_exception(self)
                    else:
                        waiter.add_result(self)
                cond.notify_all()
        self._run_callbacks()

    def _run_callbacks(self) -> None:
        callbacks: list[Callable[[FutureRecordMetadata], object]] = self.__dict__.pop(
            "_callbacks", []
        )
        for fn in callbacks:
            self._run_callback(fn)

    def _run_callback(self, fn: Callable[[FutureRecordMetadata], object]) -> None:
        try:
            fn(self)
        except Exception:
            log.exception(
                "exception in a done callback of a produce future for %s", self.produce_result.tp
            )

    # ---- the Future API --------------------------------------------------------------------

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def done(self) -> bool:
        result = self.produce_result
        return result.done or (result.superseded and self._follow().done)

    def _await(self, timeout: float | None) -> ProduceResult:
        result = self.produce_result
        if result.done:
            return result
        result = self._follow()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if not result.wait(remaining) and not result.done:
                raise KafkaTimeoutError(
                    f"no acknowledgement for the record to {result.tp} within {timeout} s "
                    "(the timeout of this wait; the record is still pending)"
                )
            if result.done:
                return result
            result = self._follow()  # superseded by a split: follow the record

    def result(self, timeout: float | None = None) -> RecordMetadata:
        result = self._await(timeout)
        error = self._error(result)
        if error is not None:
            raise error
        return self._metadata(result)

    get = result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._error(self._await(timeout))

    def _error(self, result: ProduceResult) -> BaseException | None:
        return record_error(result, self.offset_delta)

    def _metadata(self, result: ProduceResult) -> RecordMetadata:
        return record_metadata(
            result, self.offset_delta, self.timestamp_ms, self.key_size, self.value_size
        )

    def metadata(self) -> RecordMetadata | None:
        """The metadata if the record was delivered, else None (does not wait)."""
        result = self._follow()
        if not result.done or self._error(result) is not None:
            return None
        return self._metadata(result)

    def add_done_callback(self, fn: Callable[[FutureRecordMetadata], object]) -> None:
        """Call ``fn(future)`` when done (now, if already done); runs on the Sender thread."""
        self.__dict__.setdefault("_callbacks", []).append(fn)
        self._watch()
        if self.produce_result.done:
            self._run_callbacks()  # finished before we registered; each fn runs once

    def set_running_or_notify_cancel(self) -> bool:
        raise IllegalStateError("produce futures are completed by the producer")

    def set_result(self, result: object) -> None:
        raise IllegalStateError("produce futures are completed by the producer")

    def set_exception(self, exception: BaseException | None) -> None:
        raise IllegalStateError("produce futures are completed by the producer")

    def __repr__(self) -> str:
        result = self._follow()
        tp = f"{result.tp.topic}-{result.tp.partition}"
        if not result.done:
            return f"<FutureRecordMetadata {tp} pending>"
        error = self._error(result)
        if error is not None:
            return f"<FutureRecordMetadata {tp} failed: {error!r}>"
        return f"<FutureRecordMetadata {tp} offset={self._metadata(result).offset}>"
