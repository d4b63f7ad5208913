"""KafkaProducer.send_batch: many records in one call (``SendBatchResult`` in
``kclient/sender/bulk.py``; Arrow and list columns in ``kclient/sender/columns.py``).

``ProducerBatches`` is a base class of ``KafkaProducer`` (``kafka_producer.py``),
holding only ``send_batch`` and its common case, ``_append_rows`` (bytes, no serializers,
headers or partitioner: whole runs of rows through ``RecordAccumulator.append_bulk``);
any other row goes through ``KafkaProducer.send``. Callers' threads.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kclient.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
    SerializationError,
)
from kclient.producer import record_args
from kclient.sender import bulk, columns
from kclient.sender.bulk import SendBatchResult

if TYPE_CHECKING:
    from kclient.producer.interceptors import ProducerInterceptors
    from kclient.sender import transaction_manager
    from kclient.sender.accumulator import RecordAccumulator
    from kclient.sender.batch import Callback, Header
    from kclient.sender.future import FutureRecordMetadata
    from kclient.sender.topic_queues import TopicQueues


class ProducerBatches:
    """``KafkaProducer.send_batch`` (see the module docstring)."""

    if TYPE_CHECKING:  # set by KafkaProducer.__init__
        _accumulator: RecordAccumulator
        _queues: dict[str, TopicQueues]
        _txn: transaction_manager.TransactionManager | None
        _unusable: str | KafkaError | None
        _partitioner: Callable[[str, bytes | None, int], int] | None
        _ignore_keys: bool
        _serializers: bool
        _max_block_ms: int
        _max_record_bytes: int
        _time_ns: Callable[[], int]
        _interceptors: ProducerInterceptors | None

        def send(
            self,
            topic: str,
            value: Any = None,
            key: Any = None,
            *,
            headers: Sequence[Header] | None = None,
            partition: int | None = None,
            timestamp_ms: int | None = None,
            callback: Callback | None = None,
        ) -> FutureRecordMetadata: ...

        def _send_general(  # noqa: PLR0917 (as KafkaProducer's)
            self,
            topic: str,
            value: Any,
            key: Any,
            headers: Sequence[Header] | None,
            partition: int | None,
            timestamp_ms: int | None,
            callback: Callback | None,
            serialize: bool = True,
        ) -> FutureRecordMetadata: ...

        def _raise_unusable(self) -> None: ...

        def _wait_on_metadata(
            self, topic: str, partition: int | None
        ) -> tuple[TopicQueues, int]: ...

    def send_batch(  # noqa: PLR0917 (the signature the issue fixes, positional as written)
        self,
        topic: str,
        values: Any,
        keys: Any = None,
        headers: Any = None,
        partitions: Any = None,
        timestamps: Any = None,
        *,
        serialize: bool = True,
    ) -> SendBatchResult:
        """Queue one record per item of ``values``; returns one ``SendBatchResult`` for all.

        ``values`` and the optional ``keys``, ``headers`` (a list of headers per record),
        ``partitions`` and ``timestamps`` (ms) columns are sequences or Arrow arrays, one
        item per record (None items: no key, no headers, the partitioner's choice, now).
        Each record goes as ``send`` would send it (serializers, partitioner, ordering per
        partition, idempotence, ``buffer.memory``). A record refused at once (too large,
        not serializable, a bad partition) is reported for its row and the others go on;
        when metadata or buffer memory is not available within ``max.block.ms``, the rows
        not yet queued are reported failed with that ``KafkaTimeoutError``. Raises
        ``IllegalStateError`` after close and, for the whole call, bad columns
        (``TypeError``/``ValueError``, naming the argument). Arrow binary and string
        columns (large variants, slices, chunked; pyarrow's or any exporting the Arrow C
        data interface) are read in place from their buffers when the C accelerator is
        built; Arrow integer and timestamp columns as int64 (an
        Arrow ``partitions`` null: the partitioner's choice). ``serialize=False``: the
        keys and values are bytes already and skip ``key.serializer``/``value.serializer``
        (as aiokafka's ``BatchBuilder`` takes them).
        """
        if topic.__class__ is not str:
            topic = record_args.checked_topic(topic)
        values = columns.bytes_column("values", values, None)
        rows = len(values)
        keys = columns.bytes_column("keys", keys, rows)
        headers = bulk.column("headers", headers, rows)
        partitions = columns.int_column("partitions", partitions, rows, -1)
        if self._unusable is not None:
            self._raise_unusable()
        now_ms = self._time_ns() // 1_000_000
        times: Any = columns.int_column("timestamps", timestamps, rows, now_ms)
        if times is None:
            times = array("q", (now_ms,)) * rows
        elif times.__class__ is list:
            times = [now_ms if t is None else t for t in times]
        result = SendBatchResult(topic, values, keys, times)
        fast = (
            headers is None
            and self._interceptors is None  # else each row through send (on_send per record)
            and self._partitioner is None
            and not (self._serializers and serialize)
            # in a transaction, when a send would be allowed (else send says why not);
            # new batches add their partitions to it as send's do
            and (self._txn is None or self._txn.may_send())
        )
        missing: dict[int, KafkaTimeoutError] = {}  # partitions found missing, and why
        row = 0
        while row < rows:
            if fast:
                row = self._append_rows(
                    topic, values, keys, times, partitions, result=result, start=row
                )
                if row >= rows:
                    break
            explicit = bulk.partition_of(partitions, row)
            if explicit in missing:  # waited for once already in this call
                result.refused(row, missing[explicit])
                row += 1
                continue
            try:  # this row the general way (it converts, partitions or refuses it)
                key = None if keys is None else keys[row]
                row_headers = None if headers is None else headers[row]
                if serialize:  # send's C common case first
                    future = self.send(
                        topic,
                        values[row],
                        key,
                        headers=row_headers,
                        partition=explicit,
                        timestamp_ms=times[row],
                    )
                else:  # bytes already: past the serializers
                    future = self._send_general(
                        topic, values[row], key, row_headers, explicit, times[row], None, False
                    )
                result.queued(row, future)
            except (RecordTooLargeError, SerializationError, ValueError, TypeError) as exc:
                result.refused(row, exc)
            except KafkaError as exc:  # metadata or memory not there: the rest cannot go
                if isinstance(exc, IllegalStateError) and row == 0:
                    raise
                if (
                    isinstance(exc, KafkaTimeoutError)
                    and explicit is not None
                    and self._queues.get(topic) is not None
                ):  # a partition the topic does not have: its rows only, without waiting again
                    missing[explicit] = exc
                    result.refused(row, exc)
                    row += 1
                    continue
                for rest in range(row, rows):
                    result.refused(rest, exc)
                break
            row += 1
        return result

    def _append_rows(
        self,
        topic: str,
        values: list[Any],
        keys: list[Any] | None,
        timestamps: list[Any],
        explicit: list[Any] | None,
        *,
        result: SendBatchResult,
        start: int,
    ) -> int:
        """``send_batch``'s common case (bytes, no serializers, headers or partitioner):
        rows from ``start`` to their partitions (``explicit[row]``, else the key's, else
        sticky) through ``RecordAccumulator.append_bulk``, without ``send``'s per-record
        work, until a row needs the general path; returns that row (``len(values)`` when
        all went)."""
        rows = len(values)
        queues = self._queues.get(topic)
        if queues is None or not queues.num_partitions:
            try:
                queues, _ = self._wait_on_metadata(topic, None)
            except KafkaTimeoutError as exc:
                for rest in range(start, rows):
                    result.refused(rest, exc)
                return rows
        end = bulk.first_irregular_row(values, keys, timestamps, start, self._max_record_bytes - 82)
        partitions: array[int] | None = None
        if explicit is not None or (keys is not None and not self._ignore_keys):
            partitions = array("q", (-1,)) * rows  # -1: the topic's sticky partition
            end = columns.keyed_partitions(
                None if self._ignore_keys else keys,
                explicit,
                queues.num_partitions,
                start,
                end,
                partitions,
            )  # stops at a bad explicit partition: send says what is wrong with it
        error = self._accumulator.append_bulk(
            queues,
            partitions,
            timestamps,
            keys,
            values,
            start,
            end,
            result._results,
            result._deltas,
            self._max_block_ms,
        )
        if error is not None:  # buffer.memory stayed full: the rows left cannot go
            for row in range(start, rows):
                if result._results[row] is None:
                    result.refused(row, error)
            return rows
        return end
