"""ProducerBatch: Java's ``ProducerBatch`` — records for one partition, sent together.

Created and appended to by callers' threads under the owning topic's accumulator lock;
once drained it belongs to the Sender thread, which sends, retries, splits and completes
it. A batch completes exactly once (``FinalState``); a second completion is a bug and
raises ``IllegalStateError``.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Iterator, MutableSequence, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kclient.errors import IllegalStateError
from kclient.network.cluster import TopicPartition
from kclient.record import set_producer_state
from kclient.record._accel import ACCELERATED
from kclient.sender.future import (
    FutureRecordMetadata,
    ProduceResult,
    RecordMetadata,
    record_error,
    record_metadata,
)

log = logging.getLogger(__name__)

Header = tuple[str, bytes | None]
Callback = Callable[[RecordMetadata | None, BaseException | None], object]
"""``callback(metadata, exception)``: exactly one of the two is None. Runs on the Sender thread."""

NO_SEQUENCE = -1

THUNK = 5
"""``ProducerBatch.thunks`` holds, per record with a callback, five items in a row: the
record's offset delta, timestamp (ms), key size, value size and its callback. Numbers and
one shared list, not a tuple and the record's future per record: kept alive until the batch
completes, those would be objects the cyclic garbage collector walks again and again."""

_new_tuple = tuple.__new__


class BatchBuilder(Protocol):
    """What a batch needs from ``kclient.record.RecordBatchBuilder``."""

    @property
    def record_count(self) -> int: ...
    @property
    def size_in_bytes(self) -> int: ...
    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> int: ...
    def append_rows(  # noqa: PLR0917
        self,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        rows: Sequence[int] | None,
        start: int,
        stop: int,
        results: list[Any],
        deltas: MutableSequence[int],
        result: object,
        /,
    ) -> int: ...
    def is_full(self) -> bool: ...
    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int
    ) -> None: ...
    def build(self) -> bytes: ...


def _refuse(
    timestamp_ms: int, key: bytes | None, value: bytes | None, headers: Sequence[Header] = ()
) -> int:
    return -1


class FinalState(enum.Enum):
    """How a batch ended (Java's ``ProducerBatch.FinalState``)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABORTED = "aborted"


def rewrite_producer_state(
    records: bytes, producer_id: int, epoch: int, base_sequence: int
) -> bytes:
    """Set producer id, epoch and base sequence in a built v2 batch and fix its CRC."""
    buf = bytearray(records)
    set_producer_state(buf, producer_id, epoch, base_sequence)
    return bytes(buf)


class BatchFields:
    """What the ``Appender`` uses of a batch: its record ``builder``, its built ``records``
    (None while it is open) and its ``ProduceResult``, ``result``. ``ProducerBatch``'s base:
    with the accelerator built, ``kclient.sender._speedups.BatchFields``, a C struct the C
    ``Appender`` reads directly (kclient/sender/_fields.c); this class is the reference it
    follows."""

    __slots__ = ("builder", "records", "result")

    builder: BatchBuilder
    records: bytes | None
    result: ProduceResult


if ACCELERATED and not TYPE_CHECKING:
    from kclient.sender._speedups import BatchFields  # the C one


class ProducerBatch(BatchFields):
    """Records for one topic-partition, their callbacks, and the batch's delivery state.

    Times are monotonic milliseconds: ``created_ms`` starts linger and delivery timeout,
    ``retry_at_ms`` ends the retry backoff. The fields the ``Appender`` uses are
    ``BatchFields``'.
    """

    __slots__ = (
        "_append",
        "attempts",
        "base_sequence",
        "created_ms",
        "drained_ms",
        "final_state",
        "flush_id",
        "in_retry",
        "order",
        "producer_epoch",
        "producer_id",
        "reserved_bytes",
        "retry_at_ms",
        "thunks",
        "tp",
        "uncompressed_bytes",
    )

    def __init__(
        self,
        tp: TopicPartition,
        builder: BatchBuilder,
        created_ms: int,
        reserved_bytes: int,
        flush_id: int = 0,
    ) -> None:
        self.tp = tp
        self.builder = builder
        self._append = builder.append
        self.result = ProduceResult(tp)
        self.thunks: list[Any] | None = None
        """The send callbacks: ``THUNK`` items per record (see there), in record order."""
        self.created_ms = created_ms
        self.retry_at_ms = 0
        self.drained_ms = -1
        self.attempts = 0
        self.in_retry = False
        self.final_state: FinalState | None = None
        self.reserved_bytes = reserved_bytes
        self.records = None
        self.uncompressed_bytes = 0
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = NO_SEQUENCE
        self.flush_id = flush_id
        self.order: tuple[int, ...] = (flush_id,)
        """Position among the partition's batches; retries go back in this order."""

    # ---- appending (caller threads, under the topic lock) ---------------------------------

    def try_append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        callback: Callback | None,
    ) -> FutureRecordMetadata | None:
        """Append a record; None when the batch is full (an empty batch takes any record)."""
        delta = self._append(timestamp_ms, key, value, headers)
        if delta < 0:
            return None
        future = FutureRecordMetadata(
            self.result,
            delta,
            timestamp_ms,
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )
        if callback is not None:
            self.add_callback(future, callback)
        return future

    def add_callback(self, future: FutureRecordMetadata, callback: Callback) -> None:
        """Run ``callback`` for the record of ``future`` (appended to this batch) when the
        batch completes. Keeps the record's numbers, not the future (see ``THUNK``)."""
        thunk = (
            future.offset_delta,
            future.timestamp_ms,
            future.key_size,
            future.value_size,
            callback,
        )
        if self.thunks is None:  # None until the first: the batch templates share None
            self.thunks = list(thunk)
        else:
            self.thunks += thunk

    @property
    def record_count(self) -> int:
        return self.builder.record_count

    def is_full(self) -> bool:
        return self.builder.is_full()

    @property
    def estimated_size_bytes(self) -> int:
        return len(self.records) if self.records is not None else self.builder.size_in_bytes

    # ---- Sender thread --------------------------------------------------------------------

    def set_producer_state(self, producer_id: int, epoch: int, base_sequence: int) -> None:
        """Assign the idempotent producer state (rewrites the bytes if already built)."""
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self.base_sequence = base_sequence
        if self.records is None:
            self.builder.set_producer_state(producer_id, epoch, base_sequence)
        else:
            self.records = rewrite_producer_state(self.records, producer_id, epoch, base_sequence)

    def clear_producer_state(self) -> None:
        """Forget the sequence (the batch gets a new one, under a new epoch, when drained)."""
        self.producer_id = -1
        self.producer_epoch = -1
        self.base_sequence = NO_SEQUENCE

    def producer_id_and_epoch_matches(self, producer_id_and_epoch: tuple[int, int]) -> bool:
        return (self.producer_id, self.producer_epoch) == tuple(producer_id_and_epoch)

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + self.builder.record_count - 1

    def close(self) -> bytes:
        """Build the wire bytes once; retries resend the same bytes."""
        if self.records is None:
            self.uncompressed_bytes = self.builder.size_in_bytes
            self.records = self.builder.build()
            self._append = _refuse  # back in a deque for a retry, it takes no more records
        return self.records

    def reenqueued(self, now_ms: int, backoff_ms: int) -> None:
        self.attempts += 1
        self.in_retry = True
        self.retry_at_ms = now_ms + backoff_ms

    def has_reached_delivery_timeout(self, delivery_timeout_ms: int, now_ms: int) -> bool:
        return now_ms - self.created_ms >= delivery_timeout_ms

    @property
    def is_done(self) -> bool:
        return self.final_state is not None

    def complete(
        self,
        base_offset: int,
        log_append_time_ms: int,
        wakeups: list[threading.Lock] | None = None,
    ) -> None:
        """Delivered: every record's future gets its offset; callbacks run here.

        Threads waiting on the futures wake now, or, with ``wakeups``, when the caller
        releases the locks it finds appended there (``ProduceResult.set``).
        """
        self._done(
            FinalState.SUCCEEDED, base_offset, log_append_time_ms, None, None, wakeups=wakeups
        )

    def fail(
        self, error: BaseException, record_errors: dict[int, BaseException] | None = None
    ) -> None:
        """Not delivered: every future (or the records named in ``record_errors``) fails."""
        self._done(FinalState.FAILED, -1, -1, error, record_errors)

    def abort(self, error: BaseException) -> None:
        """Failed without having been sent (close, fatal producer error)."""
        self._done(FinalState.ABORTED, -1, -1, error, None)

    def _done(
        self,
        state: FinalState,
        base_offset: int,
        log_append_time_ms: int,
        error: BaseException | None,
        record_errors: dict[int, BaseException] | None,
        *,
        wakeups: list[threading.Lock] | None = None,
    ) -> None:
        if self.final_state is not None:
            raise IllegalStateError(
                f"batch for {self.tp} is already {self.final_state.value}; "
                f"cannot become {state.value}"
            )
        self.final_state = state
        result = self.result
        thunks = self.thunks
        watchers = result.set(
            base_offset,
            log_append_time_ms,
            error,
            record_errors,
            finish=not thunks,
            wakeups=wakeups,
        )
        if thunks:
            self._run_callbacks(thunks, wakeups)
        for watcher in watchers:
            watcher._notify()

    def _run_callbacks(self, thunks: list[Any], wakeups: list[threading.Lock] | None) -> None:
        """The send callbacks of a done batch, in order, then its waiters' wakeup."""
        result = self.result
        each = iter(thunks)
        rows: Iterator[tuple[Any, ...]] = zip(each, each, each, each, each, strict=True)
        if result.error is None and result.record_errors is None:
            # delivered: each record's metadata (as record_metadata makes it, inline)
            topic, partition = self.tp.topic, self.tp.partition
            base, append_ms = result.base_offset, result.log_append_time_ms
            if base < 0:  # acks=0: no offsets; each record's base + delta is then -1
                none = -1 - base
                rows = ((none, ts, k, v, cb) for _, ts, k, v, cb in rows)
            if append_ms < 0:
                for delta, timestamp_ms, key_size, value_size, callback in rows:
                    try:
                        callback(
                            _new_tuple(
                                RecordMetadata,
                                (
                                    topic,
                                    partition,
                                    base + delta,
                                    timestamp_ms,
                                    key_size,
                                    value_size,
                                    0,
                                ),
                            ),
                            None,
                        )
                    except Exception:  # noqa: PERF203 (zero-cost in 3.11; one per callback)
                        log.exception("exception in a send callback for %s (ignored)", self.tp)
            else:
                for delta, _, key_size, value_size, callback in rows:
                    try:
                        callback(
                            _new_tuple(
                                RecordMetadata,
                                (
                                    topic,
                                    partition,
                                    base + delta,
                                    append_ms,
                                    key_size,
                                    value_size,
                                    1,
                                ),
                            ),
                            None,
                        )
                    except Exception:  # noqa: PERF203 (zero-cost in 3.11; one per callback)
                        log.exception("exception in a send callback for %s (ignored)", self.tp)
        else:
            for delta, timestamp_ms, key_size, value_size, callback in rows:
                exc = record_error(result, delta)
                try:
                    if exc is None:
                        callback(
                            record_metadata(result, delta, timestamp_ms, key_size, value_size),
                            None,
                        )
                    else:
                        callback(None, exc)
                except Exception:
                    log.exception("exception in a send callback for %s (ignored)", self.tp)
        result.finish(wakeups)

    def split(
        self,
        new_builder: Callable[[], BatchBuilder],
        records: Sequence[tuple[int, bytes | None, bytes | None, Sequence[Header]]],
    ) -> list[ProducerBatch]:
        """Re-batch this batch's records (decoded by the caller) into smaller batches.

        Records (their futures follow lazily, through the old result's ``split_map``) and
        callbacks move to the new batches; this batch is superseded, never completed. The
        new batches keep this one's creation time and flush id.
        """
        if len(records) != self.record_count:
            raise IllegalStateError(
                f"split of {self.tp}: {len(records)} records decoded, {self.record_count} sent"
            )
        thunks = self.thunks or []
        callbacks = {thunks[i]: thunks[i + 1 : i + THUNK] for i in range(0, len(thunks), THUNK)}
        batches: list[ProducerBatch] = []
        split_map: list[tuple[ProduceResult, int]] = []
        current: ProducerBatch | None = None
        for index, (timestamp_ms, key, value, headers) in enumerate(records):
            delta = -1
            if current is not None:
                delta = current._append(timestamp_ms, key, value, headers)
            if current is None or delta < 0:
                current = ProducerBatch(self.tp, new_builder(), self.created_ms, 0, self.flush_id)
                current.attempts = self.attempts
                current.order = (*self.order, len(batches))
                batches.append(current)
                delta = current._append(timestamp_ms, key, value, headers)
            split_map.append((current.result, delta))
            moved = callbacks.get(index)
            if moved is not None:  # the callback, at the record's place in its new batch
                if current.thunks is None:
                    current.thunks = [delta, *moved]
                else:
                    current.thunks += (delta, *moved)
        self.final_state = FinalState.ABORTED
        for watcher in self.result.supersede(split_map):
            watcher._watch()
        return batches

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.tp}, records={self.record_count}, "
            f"attempts={self.attempts}, seq={self.base_sequence})"
        )
