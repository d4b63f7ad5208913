"""The PySpark sink: write a DataFrame's rows to Kafka with kclient (its public names are
re-exported by ``kclient.spark``).

The counterpart of Spark's own Kafka sink (``KafkaWriter`` checks the schema on the
driver, ``KafkaWriteTask`` sends one partition, ``InternalKafkaProducerPool`` shares
producers between tasks). Three ways in:

* ``write_dataframe(df, topic=None, **producer_config) -> SinkResult`` for batch DataFrames.
  Schema and settings are checked on the driver before any task runs; rows reach the
  executors' Python workers as Arrow batches (``mapInArrow``), read column by column, so
  there is no ``Row`` object per record.
* ``df.foreachPartition(KafkaSink(topic=None, **producer_config))`` with ``Row`` iterators.
* ``df.writeStream.foreachBatch(foreach_batch(topic=None, **producer_config))`` for
  Structured Streaming.

Columns follow Spark's Kafka sink: ``value`` (string or binary, required), ``key`` (string
or binary), ``topic`` (string; required unless the ``topic`` argument is given, and the
argument wins), ``partition`` (int), ``headers`` (array<struct<key: string, value:
binary>>), ``timestamp`` (timestamp). Strings are sent as UTF-8; other columns are ignored.

With a ``topic`` argument, each Arrow batch goes to the producer in one ``send_batch``
call, and ``Row`` iterators in calls of 10,000 rows; rows routed by a ``topic`` column
are sent one by one. The
sink's producers use ``batch.size`` 1000000 (``SINK_BATCH_SIZE``, librdkafka's default)
unless the settings give one.

Threads: ``write_dataframe`` and ``foreach_batch`` run on the driver. ``KafkaSink`` runs in
a task of a Python worker process; that task's thread calls ``send`` and the producer's
I/O thread runs the delivery callbacks. Each worker process keeps one producer per
distinct configuration (``ProducerCache``), reused by its successive tasks and closed by
a reaper thread after ``producer_idle_s`` seconds unused. Every task flushes before it
ends and fails with the first delivery error, so Spark retries it; a producer that failed
a task is closed and the retry gets a new one. Delivery is therefore **at least once**: a
retried task sends its whole partition again.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import chain, repeat
from typing import Any

from kclient.config import ProducerConfig
from kclient.errors import ConfigError, IllegalStateError, KafkaError
from kclient.spark.columns import (
    COLUMNS,
    SinkSchemaError,
    arrow_columns,
    epoch_ms,
    to_bytes,
    validate_schema,
)
from kclient.spark.producers import PRODUCER_CACHE, ProducerLease

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_IDLE_S = 60.0
#: The sink's ``batch.size`` unless one is given (librdkafka's default): a sink writes in
#: bulk, and 16 KiB batches (Java's default) cost the producer's thread a request's work
#: per ~140 records of 100 B.
SINK_BATCH_SIZE = 1_000_000
_BATCH_SIZE_NAMES = frozenset({"batch.size", "batch_size"})
_SERIALIZERS = frozenset(
    {"key.serializer", "value.serializer", "key_serializer", "value_serializer"}
)


class SinkDeliveryError(KafkaError):
    """A record of this task was not delivered; the task fails so that Spark retries it."""


@dataclass(frozen=True)
class SinkResult:
    """What ``write_dataframe`` wrote: records acknowledged, and the number of tasks
    (one per DataFrame partition) that wrote them."""

    records_written: int
    tasks: int


# ---- one task ------------------------------------------------------------------------------


class _Task:
    """One task's writes: leases the producer at its first record, collects the first
    delivery error (callbacks run on the producer's I/O thread), flushes at the end."""

    def __init__(self, sink: KafkaSink) -> None:
        self._sink = sink
        self._entry: ProducerLease | None = None
        self.sent = 0
        self.failed = 0
        self.first_error: BaseException | None = None
        #: the outcomes of the task's ``send_batch`` calls, read once flushed
        self.results: list[Any] = []

    def producer(self) -> Any:
        if self._entry is None:
            self._entry = PRODUCER_CACHE.acquire(
                self._sink.producer_config, self._sink.producer_idle_s
            )
        return self._entry.producer

    def send_fn(self) -> Callable[..., Any]:
        send: Callable[..., Any] = self.producer().send
        return send

    def on_delivery(self, _metadata: object, exc: BaseException | None) -> None:
        if exc is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = exc

    def finish(self) -> None:
        """Flush; raise ``SinkDeliveryError`` with the first Kafka error if any record failed."""
        if self._entry is not None:
            self._entry.producer.flush()
        for result in self.results:
            errors = result.exceptions(0)  # flushed: every row is done
            self.failed += len(errors)
            if errors and self.first_error is None:
                self.first_error = next(iter(errors.values()))
        if self.first_error is not None:
            error = self.first_error
            raise SinkDeliveryError(
                f"{self.failed} of {self.sent} records of this task were not delivered; "
                f"first error: {type(error).__name__}: {error}"
            ) from error

    def release(self, failed: bool) -> None:
        if self._entry is not None:
            entry, self._entry = self._entry, None
            PRODUCER_CACHE.release(entry, retire=failed)


class _BatchingSend:
    """Takes ``send``'s arguments row by row and hands them to ``producer.send_batch``
    ``ROWS_PER_CALL`` rows at a time (one topic per call); the results go to ``results``."""

    ROWS_PER_CALL = 10_000

    def __init__(self, producer: Any, results: list[Any]) -> None:
        self._producer = producer
        self._results = results
        self._topic: str | None = None
        self._columns: tuple[list[Any], ...] = ([], [], [], [], [])

    def __call__(
        self,
        topic: str,
        value: Any,
        key: Any,
        *,
        headers: Any,
        partition: Any,
        timestamp_ms: Any,
        callback: Any = None,
    ) -> None:
        if topic != self._topic:
            self.close()
            self._topic = topic
        values, keys, all_headers, partitions, stamps = self._columns
        values.append(value)
        keys.append(key)
        all_headers.append(headers)
        partitions.append(partition)
        stamps.append(timestamp_ms)
        if len(values) >= self.ROWS_PER_CALL:
            self.close()

    def close(self) -> None:
        """Hand over the rows taken so far."""
        values, keys, headers, partitions, stamps = self._columns
        if values:
            self._results.append(
                self._producer.send_batch(
                    self._topic,
                    values,
                    keys if any(k is not None for k in keys) else None,
                    headers if any(h is not None for h in headers) else None,
                    partitions if any(p is not None for p in partitions) else None,
                    stamps if any(t is not None for t in stamps) else None,
                )
            )
            self._columns = ([], [], [], [], [])


# ---- the sink ------------------------------------------------------------------------------


class KafkaSink:
    """Writes the rows of one partition; picklable, so Spark ships it to the executors.

    ``df.foreachPartition(KafkaSink(topic="t", bootstrap_servers="host:9092"))``. The
    producer settings are checked here, on the driver; ``producer_idle_s`` is how long a
    worker keeps an unused producer open. Column rules: see the module docstring.
    """

    def __init__(
        self,
        topic: str | None = None,
        *,
        producer_idle_s: float = DEFAULT_PRODUCER_IDLE_S,
        **producer_config: Any,
    ) -> None:
        if topic is not None and (not isinstance(topic, str) or not topic):
            raise ConfigError(f"topic must be a non-empty string or None, got {topic!r}")
        if producer_idle_s <= 0:
            raise ConfigError(f"producer_idle_s must be positive, got {producer_idle_s!r}")
        serializers = sorted(_SERIALIZERS & producer_config.keys())
        if serializers:
            raise ConfigError(
                f"{serializers[0]!r} cannot be set for the Spark sink: it sends the 'key' and "
                "'value' columns as they are (binary, or strings as UTF-8); convert the "
                "columns in the DataFrame instead"
            )
        if not _BATCH_SIZE_NAMES & producer_config.keys():
            producer_config = {"batch.size": SINK_BATCH_SIZE, **producer_config}
        ProducerConfig(producer_config)  # a bad setting fails here, before any task runs
        self.topic = topic
        self.producer_idle_s = float(producer_idle_s)
        self.producer_config = producer_config

    def _run(self, send_all: Callable[[_Task], None]) -> int:
        task = _Task(self)
        failed = True
        try:
            send_all(task)
            task.finish()
            failed = False
        finally:
            task.release(failed)
        return task.sent

    # ---- foreachPartition: Row objects ---------------------------------------------------

    def __call__(self, rows: Iterable[Any]) -> None:
        """``foreachPartition`` entry point: ``rows`` are ``pyspark.sql.Row`` objects."""
        it = iter(rows)
        first = next(it, None)
        if first is None:
            return  # an empty partition needs no producer

        def send_all(task: _Task) -> None:
            if self.topic is None:  # a topic column routes the rows: one send each
                task.sent = self.send_rows(task.send_fn(), chain((first,), it), task.on_delivery)
                return
            batching = _BatchingSend(task.producer(), task.results)
            task.sent = self.send_rows(batching, chain((first,), it), task.on_delivery)
            batching.close()

        self._run(send_all)

    def send_rows(
        self, send: Callable[..., Any], rows: Iterable[Any], callback: Callable[[Any, Any], None]
    ) -> int:
        """Call ``send`` (``KafkaProducer.send``) for each ``Row``; returns the count."""
        n = 0
        send_row: Callable[[Any], Any] | None = None
        for n, row in enumerate(rows, 1):  # noqa: B007
            if send_row is None:
                send_row = self._row_sender(list(row.__fields__), send, callback)
            send_row(row)
        return n

    def _row_sender(
        self, names: list[str], send: Callable[..., Any], callback: Callable[[Any, Any], None]
    ) -> Callable[[Any], Any]:
        if "value" not in names:
            raise SinkSchemaError(f"column 'value' is required; the rows have: {names}")
        if self.topic is None and "topic" not in names:
            raise SinkSchemaError(
                f"column 'topic' is required when no topic argument is given; the rows have: "
                f"{names}"
            )
        at = {name: names.index(name) for name in COLUMNS if name in names}
        i_value = at["value"]
        i_key = at.get("key")
        i_topic = at.get("topic") if self.topic is None else None
        i_part = at.get("partition")
        i_headers = at.get("headers")
        i_ts = at.get("timestamp")
        fixed_topic = self.topic

        def send_row(row: Any) -> Any:
            topic = fixed_topic if i_topic is None else row[i_topic]
            if topic is None:
                raise SinkSchemaError("a row has a null 'topic' and no topic argument was given")
            hdrs = None if i_headers is None else row[i_headers]
            return send(
                topic,
                to_bytes(row[i_value]),
                None if i_key is None else to_bytes(row[i_key]),
                headers=[(h[0], None if h[1] is None else bytes(h[1])) for h in hdrs]
                if hdrs
                else None,
                partition=None if i_part is None else row[i_part],
                timestamp_ms=None if i_ts is None else epoch_ms(row[i_ts]),
                callback=callback,
            )

        return send_row

    # ---- write_dataframe: Arrow batches ------------------------------------------------

    def write_arrow(self, batches: Iterator[Any]) -> Iterator[Any]:
        """``mapInArrow`` entry point: sends every row, then yields one row with the count."""
        import pyarrow as pa

        def send_all(task: _Task) -> None:
            for batch in batches:
                if not batch.num_rows:
                    continue
                if self.topic is None:  # a topic column routes the rows: one send each
                    task.sent += self.send_batch(task.send_fn(), batch, task.on_delivery)
                else:
                    task.results.append(self.send_columns(task.producer(), batch))
                    task.sent += int(batch.num_rows)

        sent = self._run(send_all)
        yield pa.RecordBatch.from_pydict({"records": [sent]})

    def send_columns(self, producer: Any, batch: Any) -> Any:
        """Hand a ``pyarrow.RecordBatch`` to ``producer.send_batch`` (the sink's topic);
        returns its ``SendBatchResult``. The Arrow columns go as they are (``send_batch``
        reads their buffers); headers become Python lists."""
        assert self.topic is not None
        values, keys, partitions, headers, stamps = arrow_columns(batch, lists=False)
        return producer.send_batch(self.topic, values, keys, headers, partitions, stamps)

    def send_batch(
        self, send: Callable[..., Any], batch: Any, callback: Callable[[Any, Any], None]
    ) -> int:
        """Call ``send`` (``KafkaProducer.send``) for each row of a ``pyarrow.RecordBatch``;
        returns the count. Each column becomes a Python list once, then one call per row."""
        values, key_list, part_list, header_list, stamp_list = arrow_columns(batch, lists=True)
        keys: Iterable[Any] = repeat(None) if key_list is None else key_list
        partitions: Iterable[Any] = repeat(None) if part_list is None else part_list
        headers: Iterable[Any] = repeat(None) if header_list is None else header_list
        stamps: Iterable[Any] = repeat(None) if stamp_list is None else stamp_list
        if self.topic is not None:
            topics: Iterable[str] = repeat(self.topic)
        else:
            col = batch.column("topic")
            if col.null_count:
                raise SinkSchemaError("a row has a null 'topic' and no topic argument was given")
            topics = col.to_pylist()
        for topic, value, key, part, hdrs, ts in zip(
            topics,
            values,
            keys,
            partitions,
            headers,
            stamps,
            strict=False,  # absent columns are repeat(None); values is a list of every row
        ):
            send(
                topic, value, key, headers=hdrs, partition=part, timestamp_ms=ts, callback=callback
            )
        return int(batch.num_rows)


# ---- driver entry points -------------------------------------------------------------------


_MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")


def collect_from_workers(frame: Any) -> list[Any]:
    """``frame.collect()``, where a worker's Python that cannot import kclient (or one of
    its dependencies) fails with a ConfigError saying which Python and how to fix it,
    instead of a ModuleNotFoundError deep in a Java stack trace."""
    try:
        return list(frame.collect())
    except Exception as exc:
        missing = _MISSING_MODULE.search(str(exc))
        if missing is None or type(exc).__name__ != "PythonException":
            raise
        try:
            worker_python = frame.sparkSession.sparkContext.pythonExec
        except Exception:  # only for the message
            worker_python = "?"
        raise ConfigError(
            f"Spark's Python workers ({worker_python!r}) cannot import {missing.group(1)!r}: "
            "pip install 'kclient-kafka[spark]' in the Python that runs the executors, and point "
            "PYSPARK_PYTHON (or 'spark.pyspark.python') at it before the SparkSession starts"
            f" (in local mode, e.g. PYSPARK_PYTHON={sys.executable})"
        ) from exc


def _write(sink: KafkaSink, df: Any) -> SinkResult:
    if df.isStreaming:
        raise IllegalStateError(
            "write_dataframe takes a batch DataFrame; write a streaming one with "
            "df.writeStream.foreachBatch(foreach_batch(...)).start()"
        )
    columns = validate_schema(df.schema, sink.topic)
    counts = collect_from_workers(df.select(*columns).mapInArrow(sink.write_arrow, "records long"))
    result = SinkResult(sum(int(r["records"]) for r in counts), len(counts))
    log.info("wrote %d records to Kafka in %d tasks", result.records_written, result.tasks)
    return result


def write_dataframe(
    df: Any,
    topic: str | None = None,
    *,
    producer_idle_s: float = DEFAULT_PRODUCER_IDLE_S,
    exactly_once: bool = False,
    sink_id: str | None = None,
    batch_id: int | None = None,
    **producer_config: Any,
) -> SinkResult:
    """Write a batch DataFrame to Kafka; returns how many records and tasks there were.

    Raises ``SinkSchemaError`` or ``ConfigError`` before any task runs; a failed task
    fails the job with the Kafka error in the message. At least once: see the module doc.
    With ``exactly_once=True`` and a ``sink_id`` (and the ``topic`` argument), all rows
    become visible to read_committed consumers once, or none do (``kclient.spark.eos``).
    ``batch_id`` (exactly once only) names the load, e.g. a date as 20261125, so that
    running the job again after a crash is safe: a load already committed is skipped
    (``records_written`` 0), one the crash left recorded is finished without rewriting,
    one left unfinished is written again; ids must grow from load to load. Without it
    every call is a new load.
    """
    if exactly_once:
        from kclient.spark.eos_task import write_exactly_once

        return write_exactly_once(
            df, topic, sink_id, producer_idle_s, producer_config, batch_id=batch_id
        )
    if batch_id is not None:
        raise ConfigError(
            "batch_id applies to exactly_once=True only (it names an exactly-once load)"
        )
    return _write(KafkaSink(topic, producer_idle_s=producer_idle_s, **producer_config), df)


def foreach_batch(
    topic: str | None = None,
    *,
    producer_idle_s: float = DEFAULT_PRODUCER_IDLE_S,
    exactly_once: bool = False,
    sink_id: str | None = None,
    **producer_config: Any,
) -> Callable[[Any, int], None]:
    """A ``writeStream.foreachBatch`` function that writes each micro-batch to Kafka.

    Settings are checked now; the schema at every micro-batch, before its tasks run.
    With ``exactly_once=True`` and a ``sink_id`` (the same across restarts from the
    checkpoint) each micro-batch's rows become visible to read_committed consumers exactly
    once, through task retries and driver restarts (``kclient.spark.eos``).
    """
    if exactly_once:
        from kclient.spark.eos_task import foreach_batch_exactly_once

        return foreach_batch_exactly_once(topic, sink_id, producer_idle_s, producer_config)
    sink = KafkaSink(topic, producer_idle_s=producer_idle_s, **producer_config)

    def write(batch_df: Any, _batch_id: int) -> None:
        _write(sink, batch_df)

    return write
