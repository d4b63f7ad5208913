"""``create_batch``/``send_batch`` of ``kclient.aio``: aiokafka's ``BatchBuilder``, and
the completion of one ``send_batch`` call.

No Kafka counterpart (aiokafka's names). A ``BatchBuilder`` is filled on the event loop;
``send_batch`` hands its records to ``KafkaProducer.send_batch`` (the bulk path,
``kclient/sender/bulk.py``: ``RecordAccumulator.append_bulk``, not a ``send`` per
record). ``BatchDelivery`` turns the ``SendBatchResult``s of that call into one asyncio
future: it watches one record per produced batch (not every record), from whichever
thread completes them, and settles the future on the loop once all are done.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence

from kclient.errors import SendBatchError
from kclient.producer import record_args
from kclient.sender.batch import Header
from kclient.sender.bulk import SendBatchResult
from kclient.sender.future import FutureRecordMetadata, RecordMetadata


class BatchBuilder:
    """Records for one ``send_batch`` (aiokafka's ``BatchBuilder``): ``append`` until it
    returns None (full: ``max_batch_size`` bytes, or closed). Kept as columns, the shape
    ``KafkaProducer.send_batch`` takes."""

    def __init__(self, max_size: int) -> None:
        self._max_size = max_size
        self._size = 0
        self._closed = False
        self.timestamps: list[int | None] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[list[Header] | None] = []
        self.has_keys = False
        self.has_headers = False

    def append(
        self,
        *,
        timestamp: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> object | None:
        """Add a record; None when it does not fit (the first record always fits). A key
        or value that is not bytes-like, a bad timestamp or headers raise TypeError or
        ValueError here, as aiokafka's builder does, not later in ``send_batch``."""
        if key is not None and key.__class__ is not bytes:
            key = _bytes_like("key", key)
        if value is not None and value.__class__ is not bytes:
            value = _bytes_like("value", value)
        if timestamp is not None and (timestamp.__class__ is not int or timestamp < 0):
            timestamp = record_args.checked_timestamp(timestamp)
        if headers:
            headers = record_args.checked_headers(headers)
        size = 21 + (len(key) if key else 0) + (len(value) if value else 0)
        if headers:
            size += sum(len(k) + len(v or b"") + 10 for k, v in headers)
        if self._closed or (self._size and self._size + size > self._max_size):
            return None
        self.timestamps.append(timestamp)
        self.keys.append(key)
        self.values.append(value)
        if headers:
            self.has_headers = True
            self.headers.append(list(headers))
        else:
            self.headers.append(None)
        if key is not None:
            self.has_keys = True
        self._size += size
        return _Appended(size, timestamp)

    def record_count(self) -> int:
        return len(self.values)

    def size(self) -> int:
        return self._size

    def close(self) -> None:
        self._closed = True


def _bytes_like(name: str, data: object) -> bytes:
    """``data`` as bytes: copied now, as aiokafka's builder copies it into its buffer, so
    that a bytearray changed after ``append`` does not change the record."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(
        f"BatchBuilder.append: {name} must be bytes or None, got {type(data).__name__} "
        "(a batch holds serialized records: encode it first)"
    )


class _Appended:
    """What ``BatchBuilder.append`` returns (aiokafka gives the record's size and time)."""

    def __init__(self, size: int, timestamp: int | None) -> None:
        self.size = size
        self.timestamp = timestamp
        self.crc = None


class BatchDelivery:
    """One ``send_batch`` call's future: the first record's ``RecordMetadata`` once every
    record is acknowledged, or ``SendBatchError`` naming the rows that failed.

    ``parts`` are the ``SendBatchResult``s of consecutive row ranges (more than one when
    ``buffer.memory`` ran out part-way and the rest went later), each with its first row's
    index in the whole batch. ``call_soon`` brings a completion onto
    the loop (``loop.call_soon_threadsafe``: completions come from the Sender thread).
    """

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        topic: str,
        parts: list[tuple[int, SendBatchResult]],
        call_soon: Callable[[Callable[[], None]], object],
    ) -> None:
        self.future: asyncio.Future[RecordMetadata] = loop.create_future()
        self._topic = topic
        self._parts = parts
        self._call_soon = call_soon
        self._lock = threading.Lock()
        self._waiting = 0
        self._check()

    def _check(self) -> None:
        """On the loop: settle the future, or watch the records still pending."""
        pending = [f for _, part in self._parts for f in _pending(part)]
        if not pending:
            self._settle()
            return
        self._waiting = len(pending)
        for future in pending:
            future.add_done_callback(self._one_done)

    def _one_done(self, _future: FutureRecordMetadata) -> None:
        """Any thread: a watched record completed; the last one checks on the loop."""
        with self._lock:
            self._waiting -= 1
            last = self._waiting == 0
        if last:
            self._call_soon(self._check)

    def _settle(self) -> None:
        if self.future.done():
            return
        parts = self._parts
        if all(not part._errors and part._all_batches_delivered() for _, part in parts):
            first = parts[0][1]._future(0)
            assert first is not None
            self.future.set_result(first.result(0))
            return
        errors: dict[int, BaseException] = {}
        metadata: list[RecordMetadata | None] = []
        for start, part in parts:
            part_metadata, part_errors = _outcome(part)
            metadata.extend(part_metadata)
            errors.update({start + row: error for row, error in part_errors.items()})
        if errors:
            self.future.set_exception(SendBatchError(self._topic, errors, metadata))
        else:
            first_metadata = metadata[0]
            assert first_metadata is not None
            self.future.set_result(first_metadata)


def _outcome(
    part: SendBatchResult,
) -> tuple[list[RecordMetadata | None], dict[int, BaseException]]:
    """Every row's metadata (None where it failed) and the failed rows' errors."""
    try:
        return list(part.result(0)), {}
    except SendBatchError as exc:
        return exc.metadata, exc.errors


def _pending(part: SendBatchResult) -> list[FutureRecordMetadata]:
    """A future per produced batch not done yet (its last record: a batch completes as
    one), every record of a batch that was split, and every record sent the general way."""
    pending: list[FutureRecordMetadata] = []
    results = part._results
    rows: list[int] = []
    for result in dict.fromkeys(results):  # each batch once, in row order
        if result is None or (result.done and not result.superseded):
            continue
        if result.superseded:  # split: its records are in new batches now
            rows.extend(row for row, r in enumerate(results) if r is result)
        else:
            rows.append(len(results) - 1 - results[::-1].index(result))
    for row in rows:
        future = part._future(row)
        if future is not None and not future.done():
            pending.append(future)
    pending.extend(f for f in part._futures.values() if not f.done())
    return pending
