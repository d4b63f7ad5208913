"""Record futures of ``kclient.aio`` settled one pass per produced batch.

Java's counterpart is ``ProducerBatch.completeFutureAndFireCallbacks``: a batch's outcome
is one ``ProduceRequestResult`` and its records' futures read it. Here each record
``send`` queued gets an asyncio future; the records are grouped by the batch they went
into (its ``ProduceResult``), and only the group's first record watches the batch. When
the batch completes, one call settles every future of the group: no callback, partial or
record future is kept per record (a group holds the asyncio future and four ints), so
there is less to run and less for the garbage collector to walk.

A record that moved to another batch (the batch was split after ``MESSAGE_TOO_LARGE``)
or has an error of its own is settled on its own, when its new batch completes.

Owned by the event loop's thread: records complete inside the Sender's step, on the loop
(``loop_sender``); every method runs there.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from kclient.sender.future import (
    FutureRecordMetadata,
    ProduceResult,
    RecordMetadata,
    record_error,
    record_metadata,
)

_new_metadata = tuple.__new__
_InvalidStateError = asyncio.InvalidStateError


class BatchCompletions:
    """The asyncio futures of records still in flight, grouped by batch."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._create_future: Callable[[], asyncio.Future[Any]] = loop.create_future
        if type(loop).create_future is asyncio.BaseEventLoop.create_future:
            # what it does, without its Python frame
            self._create_future = functools.partial(asyncio.Future, loop=loop)
        self._groups: dict[ProduceResult, list[Any]] = {}
        """Per batch: (future, offset delta, timestamp ms, key size, value size) per record,
        flat."""

    def track(self, record: FutureRecordMetadata) -> asyncio.Future[RecordMetadata]:
        """The asyncio future of ``record`` (just queued by ``KafkaProducer.send``)."""
        future: asyncio.Future[RecordMetadata] = self._create_future()
        result = record._produce_result
        rows = self._groups.get(result)
        if rows is None:
            if result.done or result.superseded:  # not expected: completions come later
                record.add_done_callback(functools.partial(_settle_one, future))
                return future
            rows = self._groups[result] = []
            record.add_done_callback(functools.partial(self._settle, result))
        rows.extend(
            (
                future,
                record._offset_delta,
                record._timestamp_ms,
                record._key_size,
                record._value_size,
            )
        )
        return future

    def _settle(self, result: ProduceResult, _watched: FutureRecordMetadata) -> None:
        """``result``'s batch completed (or was split): settle its records' futures."""
        rows = iter(self._groups.pop(result))
        if result.superseded or result.record_errors is not None:
            for future, delta, timestamp_ms, key_size, value_size in zip(
                rows, rows, rows, rows, rows, strict=True
            ):
                record = FutureRecordMetadata(result, delta, timestamp_ms, key_size, value_size)
                record.add_done_callback(functools.partial(_settle_one, future))
            return
        error = result.error
        if error is not None:
            for future, *_ in zip(rows, rows, rows, rows, rows, strict=True):
                if not future.done():  # not cancelled by its caller
                    future.set_exception(error)
            return
        tp = result.tp
        topic, partition = tp.topic, tp.partition
        base_offset = result.base_offset
        log_append_time_ms = result.log_append_time_ms
        for future, delta, timestamp_ms, key_size, value_size in zip(
            rows, rows, rows, rows, rows, strict=True
        ):
            metadata = _new_metadata(
                RecordMetadata,
                (
                    topic,
                    partition,
                    base_offset + delta if base_offset >= 0 else -1,
                    log_append_time_ms if log_append_time_ms >= 0 else timestamp_ms,
                    key_size,
                    value_size,
                ),
            )
            try:
                future.set_result(metadata)
            except _InvalidStateError:  # cancelled by its caller
                pass


def _settle_one(future: asyncio.Future[Any], record: FutureRecordMetadata) -> None:
    """One record's future, from its own (done) record future."""
    if future.done():
        return
    result = record._follow()
    error = record_error(result, record._offset_delta)
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(
            record_metadata(
                result,
                record._offset_delta,
                record._timestamp_ms,
                record._key_size,
                record._value_size,
            )
        )
