"""PySpark sink: write a DataFrame's rows to Kafka with kclient.

Three ways in:

* ``write_dataframe(df, topic=None, **producer_config) -> SinkResult`` for batch DataFrames.
  The schema is checked on the driver before any task runs; rows travel to the executors'
  Python workers as Arrow batches (``mapInArrow``), so there is no per-row ``Row`` object.
* ``df.foreachPartition(KafkaSink(topic=None, **producer_config))`` with ``Row`` iterators.
* ``df.writeStream.foreachBatch(foreach_batch(topic=None, **producer_config))`` for
  Structured Streaming.

Columns follow Spark's own Kafka sink: ``value`` (string or binary, required), ``key``
(string or binary), ``topic`` (string; required unless the ``topic`` argument is given,
and the argument wins), ``partition`` (int), ``headers``
(array<struct<key: string, value: binary>>), ``timestamp`` (timestamp).

Each Python worker keeps one producer per distinct configuration, reused across tasks and
closed after ``sink.producer.idle.s`` seconds without use (default 60). Every task flushes
its records before it ends and fails with the first delivery error, so Spark retries it.
Delivery is therefore **at least once**: a retried task sends its partition again.
"""

from __future__ import annotations

import atexit
import datetime as _dt
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kclient.errors import KafkaError

IDLE_SETTING = "sink.producer.idle.s"
DEFAULT_IDLE_S = 60.0
COLUMNS = ("key", "value", "topic", "partition", "headers", "timestamp")


class SinkSchemaError(KafkaError, ValueError):
    """A DataFrame column is missing or has a type the Kafka sink cannot write."""


class SinkDeliveryError(KafkaError):
    """A record of this task was not delivered; the task fails so that Spark retries it."""


@dataclass(frozen=True)
class SinkResult:
    """What ``write_dataframe`` wrote: total records and the number of tasks that ran."""

    records_written: int
    tasks: int


def validate_schema(schema: Any, topic: str | None) -> None:
    """Check a ``pyspark.sql.types.StructType`` against the sink's columns (on the driver)."""
    from pyspark.sql import types as T

    fields = {f.name: f.dataType for f in schema.fields}

    def expect(name: str, ok: bool, wanted: str) -> None:
        if not ok:
            got = fields[name].simpleString()
            raise SinkSchemaError(f"column '{name}' must be {wanted}, but it is {got}")

    if "value" not in fields:
        have = ", ".join(fields) or "none"
        raise SinkSchemaError(f"column 'value' (string or binary) is required; columns: {have}")
    text_or_bytes = (T.StringType, T.BinaryType)
    expect("value", isinstance(fields["value"], text_or_bytes), "string or binary")
    if "key" in fields:
        expect("key", isinstance(fields["key"], text_or_bytes), "string or binary")
    if "topic" in fields:
        expect("topic", isinstance(fields["topic"], T.StringType), "string")
    elif topic is None:
        raise SinkSchemaError("no topic: add a string column 'topic' or pass topic='name'")
    if "partition" in fields:
        ints = (T.IntegerType, T.ShortType, T.ByteType, T.LongType)
        expect("partition", isinstance(fields["partition"], ints), "int")
    if "timestamp" in fields:
        expect("timestamp", isinstance(fields["timestamp"], T.TimestampType), "timestamp")
    if "headers" in fields:
        h = fields["headers"]
        ok = (
            isinstance(h, T.ArrayType)
            and isinstance(h.elementType, T.StructType)
            and [f.name for f in h.elementType.fields] == ["key", "value"]
            and isinstance(h.elementType.fields[0].dataType, T.StringType)
            and isinstance(h.elementType.fields[1].dataType, T.BinaryType)
        )
        expect("headers", ok, "array<struct<key:string,value:binary>>")


# ---- one producer per worker process per configuration -------------------------------


class _ProducerCache:
    """Producers shared by the tasks of one Python worker, closed when idle."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[tuple[str, str], ...], list[Any]] = {}  # key -> [p, last]
        self._reaper: threading.Thread | None = None
        atexit.register(self.close_all)

    def get(self, config: Mapping[str, Any], idle_s: float) -> Any:
        from kclient import KafkaProducer

        key = tuple(sorted((k, repr(v)) for k, v in config.items()))
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = [KafkaProducer(dict(config)), time.monotonic(), idle_s]
                self._entries[key] = entry
                self._start_reaper()
            entry[1] = time.monotonic()
            return entry[0]

    def touch(self, producer: Any) -> None:
        with self._lock:
            for entry in self._entries.values():
                if entry[0] is producer:
                    entry[1] = time.monotonic()

    def _start_reaper(self) -> None:
        if self._reaper is None or not self._reaper.is_alive():
            self._reaper = threading.Thread(
                target=self._reap, name="kclient-spark-idle-close", daemon=True
            )
            self._reaper.start()

    def _reap(self) -> None:
        while True:
            time.sleep(1.0)
            now = time.monotonic()
            with self._lock:
                idle = [k for k, e in self._entries.items() if now - e[1] >= e[2]]
                closing = [self._entries.pop(k)[0] for k in idle]
                empty = not self._entries
            for producer in closing:
                producer.close()
            if empty:
                with self._lock:
                    if not self._entries:
                        self._reaper = None
                        return

    def close_all(self) -> None:
        with self._lock:
            producers = [e[0] for e in self._entries.values()]
            self._entries.clear()
        for producer in producers:
            producer.close()


_CACHE = _ProducerCache()


class _TaskErrors:
    """Collects the first delivery error of one task (callbacks run on the sender thread)."""

    def __init__(self) -> None:
        self.first: BaseException | None = None
        self.failed = 0

    def callback(self, _metadata: object, exc: BaseException | None) -> None:
        if exc is not None:
            self.failed += 1
            if self.first is None:
                self.first = exc

    def raise_if_failed(self, sent: int) -> None:
        if self.first is not None:
            raise SinkDeliveryError(
                f"{self.failed} of {sent} records were not delivered; first error: {self.first}"
            ) from self.first


def _to_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _epoch_ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.astimezone()
        return int(value.timestamp() * 1000)
    return int(value)


def _headers(value: Any) -> list[tuple[str, bytes | None]] | None:
    if not value:
        return None
    out: list[tuple[str, bytes | None]] = []
    for item in value:
        key, val = (item["key"], item["value"])
        out.append((key, _to_bytes(val)))
    return out


class KafkaSink:
    """A picklable writer; ``df.foreachPartition(KafkaSink(topic="t", bootstrap_servers=...))``."""

    def __init__(self, topic: str | None = None, **producer_config: Any) -> None:
        self.topic = topic
        self.idle_s = float(producer_config.pop(IDLE_SETTING, DEFAULT_IDLE_S))
        self.producer_config = producer_config

    def _producer(self) -> Any:
        return _CACHE.get(self.producer_config, self.idle_s)

    def _finish(self, producer: Any, errors: _TaskErrors, sent: int) -> None:
        producer.flush()
        _CACHE.touch(producer)
        errors.raise_if_failed(sent)

    def __call__(self, rows: Iterable[Any]) -> None:
        """foreachPartition entry point: ``rows`` are ``pyspark.sql.Row`` objects."""
        producer = self._producer()
        errors = _TaskErrors()
        send = producer.send
        sent = 0
        for row in rows:
            fields = row.asDict()
            topic = self.topic or fields.get("topic")
            if topic is None:
                raise SinkSchemaError("a row has a null 'topic' and no topic argument was given")
            send(
                topic,
                value=_to_bytes(fields.get("value")),
                key=_to_bytes(fields.get("key")),
                headers=_headers(fields.get("headers")),
                partition=fields.get("partition"),
                timestamp_ms=_epoch_ms(fields.get("timestamp")),
                callback=errors.callback,
            )
            sent += 1
        self._finish(producer, errors, sent)

    def write_arrow(self, batches: Iterator[Any]) -> Iterator[Any]:
        """mapInArrow entry point: sends every row, yields one row with the count."""
        import pyarrow as pa

        producer = self._producer()
        errors = _TaskErrors()
        sent = 0
        for batch in batches:
            sent += self._send_arrow_batch(producer, batch, errors.callback)
        self._finish(producer, errors, sent)
        yield pa.RecordBatch.from_pydict({"records": [sent]})

    def _send_arrow_batch(
        self, producer: Any, batch: Any, callback: Callable[[Any, Any], None]
    ) -> int:
        import pyarrow as pa
        import pyarrow.compute as pc

        n = batch.num_rows
        names = batch.schema.names

        def column(name: str, binary: bool = False) -> list[Any]:
            if name not in names:
                return [None] * n
            col = batch.column(names.index(name))
            if binary and pa.types.is_string(col.type):
                col = pc.cast(col, pa.binary())
            return list(col.to_pylist())

        values = column("value", binary=True)
        keys = column("key", binary=True)
        partitions = column("partition")
        headers = column("headers")
        if "timestamp" in names:
            ts_col = batch.column(names.index("timestamp"))
            divisor = {"s": 1 / 1000, "ms": 1, "us": 1000, "ns": 1_000_000}[ts_col.type.unit]
            raw = pc.cast(ts_col, pa.int64()).to_pylist()
            stamps = [None if t is None else int(t // divisor) for t in raw]
        else:
            stamps = [None] * n
        if self.topic is not None:
            topics = [self.topic] * n
        else:
            topics = column("topic")
            if None in topics:
                raise SinkSchemaError("a row has a null 'topic' and no topic argument was given")
        send = producer.send
        for topic, value, key, part, hdrs, ts in zip(
            topics, values, keys, partitions, headers, stamps, strict=True
        ):
            send(
                topic,
                value=value,
                key=key,
                headers=[(h["key"], h["value"]) for h in hdrs] if hdrs else None,
                partition=part,
                timestamp_ms=ts,
                callback=callback,
            )
        return int(n)


def write_dataframe(df: Any, topic: str | None = None, **producer_config: Any) -> SinkResult:
    """Write a batch DataFrame to Kafka; returns how many records and tasks there were."""
    validate_schema(df.schema, topic)
    sink = KafkaSink(topic, **producer_config)
    present = [c for c in COLUMNS if c in df.columns]
    counts = df.select(*present).mapInArrow(sink.write_arrow, "records long").collect()
    return SinkResult(records_written=sum(int(r["records"]) for r in counts), tasks=len(counts))


def foreach_batch(topic: str | None = None, **producer_config: Any) -> Callable[[Any, int], None]:
    """A ``foreachBatch`` function for Structured Streaming that writes each micro-batch."""

    def write(batch_df: Any, _batch_id: int) -> None:
        write_dataframe(batch_df, topic, **producer_config)

    return write
