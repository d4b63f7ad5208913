"""``kclient.spark.validate_schema``: every column and type rule of the Spark Kafka sink.

Runs on the driver before any task, so these need only ``pyspark.sql.types`` (no JVM).
"""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from kclient.spark import COLUMNS, HEADERS_TYPE, SinkSchemaError, validate_schema

HEADERS = T.ArrayType(
    T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
)


def schema(**columns: T.DataType) -> T.StructType:
    return T.StructType([T.StructField(name, dtype) for name, dtype in columns.items()])


def error_for(s: T.StructType, topic: str | None = "events") -> str:
    with pytest.raises(SinkSchemaError) as info:
        validate_schema(s, topic)
    return str(info.value)


# ---- value ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [T.StringType(), T.BinaryType()])
def test_value_may_be_string_or_binary(dtype: T.DataType) -> None:
    assert validate_schema(schema(value=dtype), "events") == ["value"]


def test_missing_value_names_the_column_its_types_and_the_columns_there_are() -> None:
    message = error_for(schema(payload=T.StringType(), id=T.LongType()))
    assert "column 'value' (string or binary) is required" in message
    assert "payload, id" in message


@pytest.mark.parametrize(
    ("dtype", "shown"),
    [
        (T.IntegerType(), "int"),
        (T.LongType(), "bigint"),
        (T.ArrayType(T.ByteType()), "array<tinyint>"),
        (schema(a=T.StringType()), "struct<a:string>"),
        (T.MapType(T.StringType(), T.StringType()), "map<string,string>"),
    ],
)
def test_value_of_another_type_is_refused_with_both_types(dtype: T.DataType, shown: str) -> None:
    message = error_for(schema(value=dtype))
    assert f"column 'value' must be string or binary, but it is {shown}" in message
    assert "to_json" in message  # how to fix it


def test_the_value_column_name_is_case_sensitive() -> None:
    assert "column 'value' (string or binary) is required" in error_for(
        schema(Value=T.StringType())
    )


# ---- key --------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [T.StringType(), T.BinaryType()])
def test_key_may_be_string_or_binary(dtype: T.DataType) -> None:
    assert validate_schema(schema(key=dtype, value=T.BinaryType()), "t") == ["key", "value"]


@pytest.mark.parametrize(("dtype", "shown"), [(T.LongType(), "bigint"), (T.DoubleType(), "double")])
def test_key_of_another_type_is_refused(dtype: T.DataType, shown: str) -> None:
    message = error_for(schema(key=dtype, value=T.StringType()))
    assert f"column 'key' must be string or binary, but it is {shown}" in message


# ---- topic ------------------------------------------------------------------------------


def test_topic_column_is_required_without_a_topic_argument() -> None:
    message = error_for(schema(value=T.StringType()), topic=None)
    assert "column 'topic' (string) is required when no topic argument is given" in message
    assert "columns: value" in message


def test_topic_column_is_read_without_a_topic_argument() -> None:
    s = schema(value=T.StringType(), topic=T.StringType())
    assert validate_schema(s, None) == ["topic", "value"]


def test_topic_column_must_be_string() -> None:
    message = error_for(schema(value=T.StringType(), topic=T.IntegerType()), topic=None)
    assert "column 'topic' must be string, but it is int" in message


def test_topic_argument_wins_and_the_column_is_neither_checked_nor_read() -> None:
    s = schema(value=T.StringType(), topic=T.IntegerType())
    assert validate_schema(s, "events") == ["value"]


# ---- partition --------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [T.ByteType(), T.ShortType(), T.IntegerType(), T.LongType()])
def test_partition_may_be_any_integer_type(dtype: T.DataType) -> None:
    s = schema(value=T.StringType(), partition=dtype)
    assert validate_schema(s, "t") == ["value", "partition"]


@pytest.mark.parametrize(
    ("dtype", "shown"),
    [(T.StringType(), "string"), (T.DoubleType(), "double"), (T.DecimalType(10, 0), "decimal")],
)
def test_partition_of_another_type_is_refused(dtype: T.DataType, shown: str) -> None:
    message = error_for(schema(value=T.StringType(), partition=dtype))
    assert f"column 'partition' must be int, but it is {shown}" in message


# ---- timestamp --------------------------------------------------------------------------


def test_timestamp_may_be_a_timestamp() -> None:
    s = schema(value=T.StringType(), timestamp=T.TimestampType())
    assert validate_schema(s, "t") == ["value", "timestamp"]


@pytest.mark.parametrize(
    ("dtype", "shown"),
    [
        (T.TimestampNTZType(), "timestamp_ntz"),
        (T.LongType(), "bigint"),
        (T.DateType(), "date"),
        (T.StringType(), "string"),
    ],
)
def test_timestamp_of_another_type_is_refused(dtype: T.DataType, shown: str) -> None:
    message = error_for(schema(value=T.StringType(), timestamp=dtype))
    assert f"column 'timestamp' must be timestamp, but it is {shown}" in message


# ---- headers ----------------------------------------------------------------------------


def test_headers_may_be_an_array_of_key_value_structs() -> None:
    s = schema(value=T.StringType(), headers=HEADERS)
    assert validate_schema(s, "t") == ["value", "headers"]


def test_headers_may_hold_nulls() -> None:
    element = T.StructType(
        [
            T.StructField("key", T.StringType(), nullable=False),
            T.StructField("value", T.BinaryType(), nullable=True),
        ]
    )
    s = schema(value=T.StringType(), headers=T.ArrayType(element, containsNull=True))
    assert validate_schema(s, "t") == ["value", "headers"]


@pytest.mark.parametrize(
    "dtype",
    [
        T.ArrayType(
            T.StructType(
                [T.StructField("key", T.StringType()), T.StructField("value", T.StringType())]
            )
        ),
        T.ArrayType(
            T.StructType(
                [T.StructField("name", T.StringType()), T.StructField("value", T.BinaryType())]
            )
        ),
        T.ArrayType(
            T.StructType(
                [T.StructField("value", T.BinaryType()), T.StructField("key", T.StringType())]
            )
        ),
        T.ArrayType(T.StructType([T.StructField("key", T.StringType())])),
        T.ArrayType(T.StringType()),
        T.MapType(T.StringType(), T.BinaryType()),
        T.StructType(
            [T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())]
        ),
    ],
    ids=["value-string", "name-not-key", "swapped", "no-value", "strings", "map", "not-array"],
)
def test_headers_of_another_shape_are_refused(dtype: T.DataType) -> None:
    message = error_for(schema(value=T.StringType(), headers=dtype))
    assert f"column 'headers' must be {HEADERS_TYPE}, but it is {dtype.simpleString()}" in message


# ---- all together -------------------------------------------------------------------------


def test_every_column_is_read_in_a_fixed_order_and_others_are_ignored() -> None:
    s = schema(
        timestamp=T.TimestampType(),
        headers=HEADERS,
        extra=T.DoubleType(),
        partition=T.IntegerType(),
        value=T.BinaryType(),
        key=T.StringType(),
        topic=T.StringType(),
    )
    assert validate_schema(s, None) == list(COLUMNS)


def test_the_first_broken_rule_is_reported_for_an_empty_schema() -> None:
    assert "the DataFrame has columns: none" in error_for(T.StructType([]))
