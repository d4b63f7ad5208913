"""The Spark Kafka sink's columns: the schema rules checked on the driver, and the Arrow
columns read on the executors (``kclient.spark`` uses both).

Columns follow Spark's Kafka sink: ``value`` (string or binary, required), ``key`` (string
or binary), ``topic`` (string), ``partition`` (int), ``headers`` (array<struct<key: string,
value: binary>>), ``timestamp`` (timestamp). Strings are sent as UTF-8.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable
from itertools import repeat
from typing import Any

from kclient.errors import KafkaError
from kclient.sender.batch import Header

COLUMNS = ("topic", "key", "value", "partition", "headers", "timestamp")
"""The columns the sink reads; any other column is ignored."""
HEADERS_TYPE = "array<struct<key:string,value:binary>>"


class SinkSchemaError(KafkaError, ValueError):
    """A DataFrame column is missing or has a type the Kafka sink cannot write."""


# ---- schema (driver) ----------------------------------------------------------------------


def validate_schema(schema: Any, topic: str | None) -> list[str]:
    """Check a ``pyspark.sql.types.StructType`` against the sink's column rules.

    Returns the columns the sink will read (``topic`` is left out when the ``topic``
    argument is given). Raises ``SinkSchemaError`` naming the column and the type it needs.
    """
    from pyspark.sql import types as T

    fields = {f.name: f.dataType for f in schema.fields}
    have = ", ".join(fields) or "none"
    text_or_bytes = (T.StringType, T.BinaryType)

    def require(name: str, ok: bool, wanted: str, hint: str = "") -> None:
        if not ok:
            got = fields[name].simpleString()
            raise SinkSchemaError(f"column '{name}' must be {wanted}, but it is {got}{hint}")

    if "value" not in fields:
        raise SinkSchemaError(
            f"column 'value' (string or binary) is required; the DataFrame has columns: {have}"
        )
    convert = " (convert it first, e.g. to_json(struct(...)) or .cast('string'))"
    require("value", isinstance(fields["value"], text_or_bytes), "string or binary", convert)
    if "key" in fields:
        require("key", isinstance(fields["key"], text_or_bytes), "string or binary", convert)
    if topic is None:
        if "topic" not in fields:
            raise SinkSchemaError(
                "column 'topic' (string) is required when no topic argument is given; "
                f"the DataFrame has columns: {have}"
            )
        require("topic", isinstance(fields["topic"], T.StringType), "string")
    if "partition" in fields:
        ints = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
        require("partition", isinstance(fields["partition"], ints), "int")
    if "timestamp" in fields:
        require("timestamp", isinstance(fields["timestamp"], T.TimestampType), "timestamp")
    if "headers" in fields:
        h = fields["headers"]
        element = h.elementType if isinstance(h, T.ArrayType) else None
        ok = (
            isinstance(element, T.StructType)
            and [f.name for f in element.fields] == ["key", "value"]
            and isinstance(element.fields[0].dataType, T.StringType)
            and isinstance(element.fields[1].dataType, T.BinaryType)
        )
        require("headers", ok, HEADERS_TYPE)
    return [c for c in COLUMNS if c in fields and not (c == "topic" and topic is not None)]


# ---- column conversion (executors) -------------------------------------------------------


def _bytes_column(col: Any) -> list[bytes | None]:
    """A string or binary Arrow array as bytes (strings as UTF-8, cast without copying)."""
    import pyarrow as pa

    if col.null_count == len(col):
        return [None] * len(col)
    if pa.types.is_string(col.type):
        col = col.cast(pa.binary())
    elif pa.types.is_large_string(col.type):
        col = col.cast(pa.large_binary())
    values: list[bytes | None] = col.to_pylist()
    return values


def _epoch_ms_column(col: Any) -> Iterable[int | None]:
    import pyarrow as pa

    if col.null_count == len(col):
        return repeat(None)
    millis = col.cast(pa.timestamp("ms", col.type.tz), safe=False).cast(pa.int64())
    values: list[int | None] = millis.to_pylist()
    return values


def _headers_column(col: Any) -> Iterable[list[Header] | None]:
    """``array<struct<key, value>>`` as one list of ``(key, value)`` tuples per row."""
    import pyarrow.compute as pc

    flat = col.flatten()  # the headers of every row, in order (null rows contribute none)
    if len(flat) == 0:
        return repeat(None)
    keys, values = flat.flatten()  # nulls where a header itself is null
    if keys.null_count:
        raise SinkSchemaError("column 'headers' holds a header with a null key or a null header")
    pairs: list[Header] = list(zip(keys.to_pylist(), values.to_pylist(), strict=True))
    out: list[list[Header] | None] = []
    append = out.append
    start = 0
    for count in pc.list_value_length(col).to_pylist():
        if count:
            end = start + count
            append(pairs[start:end])
            start = end
        else:
            append(None)
    return out


def arrow_columns(batch: Any, lists: bool) -> tuple[Any, Any, Any, Any, Any]:
    """A ``pyarrow.RecordBatch``'s value, key, partition, headers and timestamp columns
    (None for a column that is absent or all null): as Python lists when ``lists``, else
    as the Arrow arrays ``send_batch`` reads in place (headers as lists either way)."""
    cols = dict(zip(batch.schema.names, batch.columns, strict=True))
    values = cols["value"]
    keys, partitions, stamps = (
        None if col is None or col.null_count == len(col) else col
        for col in (cols.get("key"), cols.get("partition"), cols.get("timestamp"))
    )
    col = cols.get("headers")
    headers = None if col is None else _headers_column(col)
    if lists:
        values = _bytes_column(values)
        keys = None if keys is None else _bytes_column(keys)
        partitions = None if partitions is None else partitions.to_pylist()
        stamps = None if stamps is None else _epoch_ms_column(stamps)
    return (
        values,
        keys,
        partitions,
        headers if isinstance(headers, list) else None,
        stamps,
    )


def to_bytes(value: Any) -> Any:
    return value.encode() if value.__class__ is str else value


def epoch_ms(value: _dt.datetime | None) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.astimezone()  # PySpark gives naive local times
    return int(value.timestamp() * 1000)
