"""``RecordAccumulator.append_bulk``: ``send_batch``'s rows into the accumulator.

No Java counterpart. Rows are grouped by partition and each group fills its partition's
open batch with one call to the builder's ``append_rows`` (C); the row that opens a new
batch goes through ``RecordAccumulator.append`` (memory reservation, ``max.block.ms``).
Runs on the caller's thread, under each topic's lock while it appends.
"""

from __future__ import annotations

from array import array
from collections.abc import MutableSequence, Sequence
from typing import TYPE_CHECKING

from kclient.errors import IllegalStateError, KafkaTimeoutError
from kclient.sender.columns import group_rows
from kclient.sender.future import ProduceResult
from kclient.sender.topic_queues import (
    BATCH_OVERHEAD,
    NO_HEADERS,
    TopicQueues,
    estimate_size_upper_bound,
)

if TYPE_CHECKING:
    from kclient.sender.accumulator import RecordAccumulator

_ZERO = (0,)


def append_bulk(  # noqa: PLR0917 (the accumulator's call passes positionally)
    acc: RecordAccumulator,
    queues: TopicQueues,
    partitions: MutableSequence[int] | None,
    timestamps: Sequence[int],
    keys: Sequence[bytes | None] | None,
    values: Sequence[bytes | None],
    start: int,
    stop: int,
    results: list[ProduceResult | None],
    deltas: MutableSequence[int],
    max_block_ms: int,
) -> KafkaTimeoutError | None:
    """``send_batch``'s rows ``start``..``stop - 1``: each to its partition
    (``partitions[row]``, or -1 / ``partitions`` None: the topic's sticky partition),
    recording its batch result and offset delta. Rows are grouped by partition (order
    kept within each; keyless rows among keyed ones are given their sticky partition
    first, ``StickyPartitioner.assign``); each group fills the open batch in one call
    to the builder's ``append_rows`` (C), and the row that opens a new batch goes
    through ``append``, which waits for memory if need be. Returns None when every row
    went, or the ``KafkaTimeoutError`` that stopped it (``buffer.memory`` stayed full
    for ``max_block_ms``: the rows left have no result). The caller has checked the
    rows' types and sizes."""
    if partitions is not None:
        sticky_rows = partitions[start:stop].count(-1)
        if sticky_rows == stop - start:
            partitions = None  # every row sticky, in order
        elif sticky_rows:
            # keyless rows among keyed ones: they get their sticky partitions now, so
            # that each partition's rows stay in row order whichever group they came from
            with queues.lock:
                assign = queues.sticky.assign
                for row in range(start, stop):
                    if partitions[row] < 0:
                        key = None if keys is None else keys[row]
                        value = values[row]
                        size = estimate_size_upper_bound(key, value, NO_HEADERS)
                        partitions[row] = assign(size - BATCH_OVERHEAD)
    if partitions is None:
        return _append_group(
            acc, queues, -1, None, start, stop, timestamps, keys, values, results, deltas,
            max_block_ms,
        )  # fmt: skip
    order = array("q", _ZERO) * (stop - start)
    for partition, first, last in group_rows(partitions, start, stop, order):
        error = _append_group(
            acc,
            queues,
            partition,
            order,
            first,
            last,
            timestamps,
            keys,
            values,
            results,
            deltas,
            max_block_ms,
        )
        if error is not None:
            return error
    return None


def _append_group(  # noqa: PLR0917
    acc: RecordAccumulator,
    queues: TopicQueues,
    partition: int,
    rows: Sequence[int] | None,
    first: int,
    last: int,
    timestamps: Sequence[int],
    keys: Sequence[bytes | None] | None,
    values: Sequence[bytes | None],
    results: list[ProduceResult | None],
    deltas: MutableSequence[int],
    max_block_ms: int,
) -> KafkaTimeoutError | None:
    i = first
    while i < last:
        with queues.lock:
            if acc.closed:
                raise IllegalStateError("cannot send after the producer is closed")
            sticky = queues.sticky if partition < 0 else None
            dq = queues.deques[sticky.partition if sticky is not None else partition]
            batch = dq[-1] if dq else None
            if batch is not None and batch.records is None:  # open: fill it
                builder = batch.builder
                before = builder.size_in_bytes
                i += builder.append_rows(
                    timestamps, keys, values, rows, i, last, results, deltas, batch.result
                )
                if sticky is not None:
                    sticky.produced_bytes += builder.size_in_bytes - before
                    if sticky.produced_bytes >= sticky.sticky_bytes:
                        sticky.maybe_switch(batch)
                if i >= last:
                    return None
        # this row opens a new batch (possibly on another sticky partition)
        row = i if rows is None else rows[i]
        key = None if keys is None else keys[row]
        value = values[row]
        size = estimate_size_upper_bound(key, value, NO_HEADERS)
        try:
            future = acc.append(
                queues, partition, timestamps[row], key, value, None, None, max_block_ms, size
            )
        except KafkaTimeoutError as exc:
            return exc
        results[row] = future.produce_result
        deltas[row] = future.offset_delta
        i += 1
    return None
