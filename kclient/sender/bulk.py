"""``KafkaProducer.send_batch``: many records in one call, one result for all of them.

No Java counterpart (Java sends record by record); the rows go through the same path as
``send`` — serializers, partitioner, accumulator, idempotence, ordering per partition,
``buffer.memory`` blocking, delivery timeout, splitting on MESSAGE_TOO_LARGE — and
``SendBatchResult`` gathers their outcomes: ``result(timeout)`` returns every row's
``RecordMetadata`` in row order or raises ``SendBatchError`` naming each failed row.

Columns are Python sequences (lists, tuples) or Arrow arrays (``pyarrow.Array`` or
``ChunkedArray``); ``kclient.sender.columns`` reads Arrow binary and string arrays in place
(strings as their UTF-8 bytes) and Arrow integer columns as ``array('q')``;
``first_irregular_row`` finds where the bulk path must hand a row to ``send``. The result
is filled on the caller's thread and read on any thread; its records complete on the
Sender thread.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Sequence
from typing import Any

from kclient.errors import KafkaTimeoutError, SendBatchError
from kclient.sender import columns
from kclient.sender.future import (
    FutureRecordMetadata,
    ProduceResult,
    RecordMetadata,
    record_error,
    record_metadata,
)

_ZEROS = bytes(8)


class SendBatchResult:
    """The outcome of one ``send_batch`` call, row by row.

    A row appended on the bulk path is its batch's result and its offset delta (no
    future of its own until one is asked for); a row sent the general way is the future
    ``send`` returned.
    """

    __slots__ = (
        "_deltas",
        "_errors",
        "_futures",
        "_keys",
        "_results",
        "_timestamps",
        "_values",
        "topic",
    )

    def __init__(
        self,
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None,
        timestamps: Sequence[int],
    ) -> None:
        rows = len(values)
        self.topic = topic
        self._values = values
        self._keys = keys
        self._timestamps = timestamps
        self._results: list[ProduceResult | None] = [None] * rows
        #: each bulk-path row's offset delta in its batch (int64s: 8 bytes a row)
        self._deltas = array("q", _ZEROS) * rows if rows else array("q")
        self._futures: dict[int, FutureRecordMetadata] = {}
        #: rows refused before they were queued (too large, not serializable, ...)
        self._errors: dict[int, BaseException] = {}

    def __len__(self) -> int:
        return len(self._results)

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"<SendBatchResult {self.topic!r} rows={len(self)} {state}>"

    # ---- filled by send_batch (the caller's thread) --------------------------------------

    def queued(self, row: int, future: FutureRecordMetadata) -> None:
        self._futures[row] = future

    def refused(self, row: int, error: BaseException) -> None:
        self._errors[row] = error

    # ---- read (any thread) ---------------------------------------------------------------

    def _future(self, row: int) -> FutureRecordMetadata | None:
        future = self._futures.get(row)
        if future is not None:
            return future
        result = self._results[row]
        if result is None:
            return None
        keys = self._keys
        key = None if keys is None else keys[row]
        value = self._values[row]
        return FutureRecordMetadata(
            result,
            self._deltas[row],
            self._timestamps[row],
            -1 if key is None else len(key),
            -1 if value is None else len(value),
        )

    def done(self) -> bool:
        """Whether every queued row is acknowledged or failed (does not wait)."""
        for row in range(len(self._results)):
            future = self._future(row)
            if future is not None and not future.done():
                return False
        return True

    def futures(self) -> list[FutureRecordMetadata | None]:
        """Each row's future, as ``send`` would have returned it (None: refused at once)."""
        return [self._future(row) for row in range(len(self._results))]

    def exceptions(self, timeout: float | None = None) -> dict[int, BaseException]:
        """Wait for every row; the failed rows' exceptions by row index (empty: all
        delivered). Raises ``KafkaTimeoutError`` if rows are still pending at ``timeout``."""
        if self._all_batches_delivered():
            return dict(sorted(self._errors.items()))  # only the rows refused at once
        return self._wait(timeout)[1]

    def _all_batches_delivered(self) -> bool:
        """Whether every queued row's batch is done without an error: checked once per
        batch rather than once per row (False also when one is not done yet)."""
        for result in dict.fromkeys(self._results):
            if result is not None and (
                not result.done or result.error is not None or result.record_errors
            ):
                return False
        return all(f.done() and f.exception(0) is None for f in self._futures.values())

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        """Wait for every row (at most ``timeout`` seconds, None: as long as it takes);
        each row's ``RecordMetadata`` in row order. Raises ``SendBatchError`` when rows
        failed, ``KafkaTimeoutError`` when rows are still pending at ``timeout``."""
        metadata, errors = self._wait(timeout)
        if errors:
            raise SendBatchError(self.topic, errors, metadata)
        return metadata  # type: ignore[return-value]

    get = result

    def _wait(
        self, timeout: float | None
    ) -> tuple[list[RecordMetadata | None], dict[int, BaseException]]:
        deadline = None if timeout is None else time.monotonic() + timeout
        errors = dict(self._errors)
        rows = len(self._results)
        metadata: list[RecordMetadata | None] = [None] * rows
        results, deltas, timestamps = self._results, self._deltas, self._timestamps
        keys, values = self._keys, self._values
        for row in range(rows):
            result = results[row]
            if result is not None and result.done and not result.superseded:
                # the common case, without a future: the batch is done where it is
                delta = deltas[row]
                error = record_error(result, delta)
                if error is not None:
                    errors[row] = error
                    continue
                key = None if keys is None else keys[row]
                value = values[row]
                metadata[row] = record_metadata(
                    result,
                    delta,
                    timestamps[row],
                    -1 if key is None else len(key),
                    -1 if value is None else len(value),
                )
                continue
            future = self._future(row)
            if future is None:
                continue
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            try:
                outcome = future._await(remaining)
            except KafkaTimeoutError:
                pending = sum(1 for f in self.futures()[row:] if f is not None and not f.done())
                raise KafkaTimeoutError(
                    f"{pending} of {rows} records to topic {self.topic!r} not acknowledged "
                    f"within {timeout} s (the timeout of this wait; they are still pending)"
                ) from None
            error = future._error(outcome)
            if error is not None:
                errors[row] = error
            else:
                metadata[row] = future._metadata(outcome)
        return metadata, dict(sorted(errors.items()))


def column(name: str, values: object, rows: int | None) -> list[Any] | None:
    """A ``send_batch`` column read per row (``headers``) as a list (an Arrow array's
    ``to_pylist()``), checked to have ``rows`` items (any number when ``rows`` is None)."""
    if values is None:
        return None
    if columns.is_arrow(values):
        values = values.to_pylist()  # type: ignore[attr-defined]
    return columns.sequence(name, values, rows)


def partition_of(partitions: Sequence[Any] | None, row: int) -> Any:
    """Row ``row``'s explicit partition for ``send`` (None: none; an ``array('q')`` from an
    Arrow column holds -1 for a null)."""
    if partitions is None:
        return None
    chosen = partitions[row]
    return None if chosen == -1 and partitions.__class__ is array else chosen


def first_irregular_row(
    values: Sequence[Any],
    keys: Sequence[Any] | None,
    timestamps: Sequence[Any],
    start: int,
    max_payload: int,
) -> int:
    """The first row from ``start`` that ``send_batch``'s bulk path cannot take as it is
    (not bytes, key and value over ``max_payload`` bytes, a timestamp not an int)."""
    rows = len(values)
    if start == 0 and _all_regular(values, keys, timestamps, max_payload):
        return rows  # checked column by column at C speed
    for row in range(start, rows):
        value = values[row]
        key = None if keys is None else keys[row]
        if (
            (value is not None and value.__class__ is not bytes)
            or (key is not None and key.__class__ is not bytes)
            or timestamps[row].__class__ is not int
            or (0 if value is None else len(value)) + (0 if key is None else len(key)) > max_payload
        ):
            return row
    return rows


_BYTES_OR_NONE = frozenset({bytes, type(None)})


def _longest(column: Sequence[Any]) -> int | None:
    """The longest item's length (a ``BinaryColumn`` knows it), or None when an item of a
    list is not bytes or None."""
    if column.__class__ is not list:
        return int(column.max_size)  # type: ignore[attr-defined]
    if not set(map(type, column)) <= _BYTES_OR_NONE:
        return None
    return max(map(len, filter(None, column)), default=0)


def _all_regular(
    values: Sequence[Any], keys: Sequence[Any] | None, timestamps: Sequence[Any], max_payload: int
) -> bool:
    """Whether every row passes ``first_irregular_row``'s checks (a bound on key + value
    sizes from the longest of each; False may still hold no irregular row)."""
    if timestamps.__class__ is list and set(map(type, timestamps)) != {int}:
        return False
    longest = _longest(values)
    if longest is None:
        return False
    if keys is not None:
        longest_key = _longest(keys)
        if longest_key is None:
            return False
        longest += longest_key
    return longest <= max_payload
