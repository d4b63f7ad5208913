"""The PySpark sink end to end: Spark local[2] → kclient in the Python workers → the
embedded broker → read back with confluent-kafka.

Every DataFrame is built from Spark SQL expressions, so no test function is shipped to
the workers; only ``kclient.spark`` runs there.
"""

from __future__ import annotations

import json
import re
import sys
import time
from pathlib import Path

import pytest
from pyspark.errors import PythonException
from pyspark.sql import DataFrame, SparkSession

from integration.peers import free_port
from integration.spark.verify import Headers, checksum, consume_all
from kclient.broker import EmbeddedBroker
from kclient.errors import ConfigError
from kclient.spark import KafkaSink, SinkResult, SinkSchemaError, foreach_batch, write_dataframe

pytestmark = pytest.mark.filterwarnings(
    # pyspark 4.x warns about pandas 3 each time mapInArrow is planned; not ours to fix
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)

ROWS = 200_000

HEADERS_SQL = """
CASE id % 3
  WHEN 0 THEN NULL
  WHEN 1 THEN array(named_struct('key', 'trace', 'value', cast(cast(id AS STRING) AS BINARY)))
  ELSE array(named_struct('key', 'trace', 'value', cast(cast(id AS STRING) AS BINARY)),
             named_struct('key', 'nil', 'value', cast(NULL AS BINARY)),
             named_struct('key', 'empty', 'value', cast('' AS BINARY)))
END AS headers
"""


def expected_headers(i: int) -> Headers:
    trace = ("trace", str(i).encode())
    return () if i % 3 == 0 else (trace,) if i % 3 == 1 else (trace, ("nil", None), ("empty", b""))


def keyed_rows(spark: SparkSession, n: int, partitions: int) -> DataFrame:
    """Keys (every fifth null), binary values (a few null: tombstones), 0-3 headers."""
    return spark.range(n, numPartitions=partitions).selectExpr(
        "CASE WHEN id % 5 = 0 THEN NULL ELSE concat('key-', id % 1000) END AS key",
        "CASE WHEN id % 1000 = 7 THEN NULL "
        "ELSE cast(concat('value-', id, '-', repeat('x', cast(id % 40 AS INT))) AS BINARY) "
        "END AS value",
        HEADERS_SQL,
        "id * 2 AS ignored",
    )


def expected_keyed_rows(n: int) -> list[tuple[bytes | None, bytes | None, Headers]]:
    return [
        (
            None if i % 5 == 0 else f"key-{i % 1000}".encode(),
            None if i % 1000 == 7 else f"value-{i}-{'x' * (i % 40)}".encode(),
            expected_headers(i),
        )
        for i in range(n)
    ]


def test_200k_rows_with_keys_values_and_headers_arrive_exactly_once(
    spark: SparkSession, kafka_broker: EmbeddedBroker
) -> None:
    kafka_broker.create_topic("orders", partitions=3)
    bootstrap = kafka_broker.bootstrap_servers

    result = write_dataframe(keyed_rows(spark, ROWS, 4), "orders", bootstrap_servers=bootstrap)

    assert result == SinkResult(records_written=ROWS, tasks=4)
    records = consume_all(bootstrap, "orders", 3, ROWS)
    assert checksum((r.key, r.value, r.headers) for r in records) == checksum(
        expected_keyed_rows(ROWS)
    )
    assert {r.partition for r in records} == {0, 1, 2}
    partition_of_key: dict[bytes, set[int]] = {}
    for r in records:
        if r.key is not None:
            partition_of_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(p) == 1 for p in partition_of_key.values())  # a key stays on one partition


def test_topic_column_routes_rows_to_two_topics(
    spark: SparkSession, kafka_broker: EmbeddedBroker
) -> None:
    for topic in ("audit", "events"):
        kafka_broker.create_topic(topic, partitions=2)
    df = spark.range(1000, numPartitions=2).selectExpr(
        "CASE WHEN id % 4 = 0 THEN 'audit' ELSE 'events' END AS topic",
        "cast(id AS STRING) AS value",
    )

    assert (
        write_dataframe(df, bootstrap_servers=kafka_broker.bootstrap_servers).records_written
        == 1000
    )

    audit = consume_all(kafka_broker.bootstrap_servers, "audit", 2, 250)
    events = consume_all(kafka_broker.bootstrap_servers, "events", 2, 750)
    assert sorted(int(r.value or b"") for r in audit) == list(range(0, 1000, 4))
    assert sorted(int(r.value or b"") for r in events) == [i for i in range(1000) if i % 4]


def test_topic_argument_wins_over_the_topic_column(
    spark: SparkSession, kafka_broker: EmbeddedBroker
) -> None:
    kafka_broker.create_topic("chosen", partitions=1)
    df = spark.range(10, numPartitions=1).selectExpr("'elsewhere' AS topic", "'v' AS value")

    write_dataframe(df, "chosen", bootstrap_servers=kafka_broker.bootstrap_servers)

    assert len(consume_all(kafka_broker.bootstrap_servers, "chosen", 1, 10)) == 10
    assert "elsewhere" not in kafka_broker.topics()


def test_partition_and_timestamp_columns_place_and_stamp_each_record(
    spark: SparkSession, kafka_broker: EmbeddedBroker
) -> None:
    kafka_broker.create_topic("placed", partitions=3)
    df = spark.range(300, numPartitions=2).selectExpr(
        "cast(id AS STRING) AS key",  # the partition column wins over the key's hash
        "cast(id AS STRING) AS value",
        "cast(id % 3 AS INT) AS partition",
        "timestamp_millis(1700000000123 + id) AS timestamp",
    )

    write_dataframe(df, "placed", bootstrap_servers=kafka_broker.bootstrap_servers)

    records = consume_all(kafka_broker.bootstrap_servers, "placed", 3, 300)
    assert len(records) == 300
    for r in records:
        i = int(r.value or b"")
        assert (r.partition, r.timestamp_ms) == (i % 3, 1_700_000_000_123 + i)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("concat('é-', id)", lambda i: f"é-{i}".encode()),
        (
            "unhex(concat('00FF', lpad(hex(id), 4, '0')))",
            lambda i: b"\x00\xff" + i.to_bytes(2, "big"),
        ),
    ],
    ids=["string-as-utf8", "binary-as-is"],
)
def test_string_and_binary_columns_are_written_as_bytes(
    spark: SparkSession, kafka_broker: EmbeddedBroker, sql: str, expected: object
) -> None:
    kafka_broker.create_topic("typed", partitions=1)
    df = spark.range(100, numPartitions=2).selectExpr(f"{sql} AS key", f"{sql} AS value")

    write_dataframe(df, "typed", bootstrap_servers=kafka_broker.bootstrap_servers)

    records = consume_all(kafka_broker.bootstrap_servers, "typed", 1, 100)
    want = [expected(i) for i in range(100)]  # type: ignore[operator]
    assert sorted(r.value or b"" for r in records) == sorted(want)
    assert all(r.key == r.value for r in records)


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (["id AS value"], "column 'value' must be string or binary, but it is bigint"),
        (["'v' AS payload"], "column 'value' (string or binary) is required"),
        (
            ["'v' AS value", "array('a') AS headers"],
            "column 'headers' must be array<struct<key:string,value:binary>>, "
            "but it is array<string>",
        ),
        (
            ["'v' AS value", "id AS timestamp"],
            "column 'timestamp' must be timestamp, but it is bigint",
        ),
    ],
    ids=["value-bigint", "value-missing", "headers-array-of-strings", "timestamp-bigint"],
)
def test_a_wrong_column_fails_before_any_task_runs(
    spark: SparkSession, columns: list[str], message: str
) -> None:
    tracker = spark.sparkContext.statusTracker()
    df = spark.range(10).selectExpr(*columns)
    jobs_before = set(tracker.getJobIdsForGroup())

    with pytest.raises(SinkSchemaError) as info:
        write_dataframe(df, "t", bootstrap_servers=f"127.0.0.1:{free_port()}")

    assert message in str(info.value)
    assert set(tracker.getJobIdsForGroup()) == jobs_before  # nothing was started
    df.count()  # while a job that does run is seen by the same check
    assert set(tracker.getJobIdsForGroup()) != jobs_before


def test_a_broker_that_is_down_fails_the_job_with_the_kafka_error(spark: SparkSession) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens here
    df = spark.range(100, numPartitions=2).selectExpr("cast(id AS STRING) AS value")
    start = time.monotonic()

    with pytest.raises(PythonException) as info:
        write_dataframe(
            df,
            "t",
            bootstrap_servers=address,
            max_block_ms=2000,
            request_timeout_ms=1000,
            delivery_timeout_ms=1500,
        )

    assert time.monotonic() - start < 60
    message = str(info.value)
    assert "KafkaTimeoutError" in message
    assert address in message


@pytest.mark.embedded_kafka(message_max_bytes=10_000)
def test_the_first_delivery_error_fails_the_task_with_the_kafka_error(
    spark: SparkSession, kafka_broker: EmbeddedBroker
) -> None:
    kafka_broker.create_topic("small", partitions=1)
    # Accepted by the producer (max.request.size is 1 MB), refused by the broker. Each
    # record is larger than batch.size, so each is a batch of its own that cannot be split.
    df = spark.range(4, numPartitions=1).selectExpr("repeat('x', 20000) AS value")

    with pytest.raises(PythonException) as info:
        write_dataframe(df, "small", bootstrap_servers=kafka_broker.bootstrap_servers)

    message = str(info.value)
    assert "SinkDeliveryError: 4 of 4 records of this task were not delivered" in message
    assert "first error: RecordTooLargeError" in message
    assert "message.max.bytes" in message


def test_foreach_partition_with_kafka_sink(
    spark: SparkSession, kafka_broker: EmbeddedBroker
) -> None:
    kafka_broker.create_topic("rows", partitions=2)
    df = spark.range(500, numPartitions=3).selectExpr(
        "concat('key-', id) AS key",
        "cast(concat('value-', id) AS BINARY) AS value",
        HEADERS_SQL,
        "cast(id % 2 AS INT) AS partition",
        "timestamp_millis(1600000000000 + id) AS timestamp",
    )

    df.foreachPartition(KafkaSink("rows", bootstrap_servers=kafka_broker.bootstrap_servers))

    records = consume_all(kafka_broker.bootstrap_servers, "rows", 2, 500)
    assert sorted(
        (r.key, r.value, r.headers, r.partition, r.timestamp_ms) for r in records
    ) == sorted(
        (
            f"key-{i}".encode(),
            f"value-{i}".encode(),
            expected_headers(i),
            i % 2,
            1_600_000_000_000 + i,
        )
        for i in range(500)
    )


def test_structured_streaming_foreach_batch_writes_every_micro_batch(
    spark: SparkSession, kafka_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    kafka_broker.create_topic("stream", partitions=2)
    source = tmp_path / "in"
    source.mkdir()
    for part, ids in enumerate((range(0, 300), range(300, 500))):
        lines = (json.dumps({"key": f"k{i % 7}", "value": f"event-{i}"}) for i in ids)
        (source / f"part-{part}.json").write_text("\n".join(lines) + "\n")

    query = (
        spark.readStream.schema("key STRING, value STRING")
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.foreachBatch(
            foreach_batch("stream", bootstrap_servers=kafka_broker.bootstrap_servers)
        )
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(90), "the streaming query did not finish"
    finally:
        query.stop()
    assert query.exception() is None
    assert len([p for p in query.recentProgress if p["numInputRows"]]) == 2  # two micro-batches

    records = consume_all(kafka_broker.bootstrap_servers, "stream", 2, 500)
    assert sorted(r.value or b"" for r in records) == sorted(
        f"event-{i}".encode() for i in range(500)
    )


def test_workers_whose_python_lacks_kclient_fail_with_how_to_fix_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A Python without site-packages stands in for an executor Python without kclient."""
    no_site = tmp_path / "python-without-site-packages"
    no_site.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    no_site.chmod(0o755)
    context = spark.sparkContext
    saved, context.pythonExec = context.pythonExec, str(no_site)
    try:
        df = spark.range(1).selectExpr("'v' AS value")
        with pytest.raises(ConfigError) as info:
            write_dataframe(df, "never-written", bootstrap_servers="127.0.0.1:1")
    finally:
        context.pythonExec = saved
    text = str(info.value)
    # kclient itself, or (when the worker finds this checkout on its path) a dependency
    assert re.search(
        rf"Spark's Python workers \({re.escape(repr(str(no_site)))}\) cannot import "
        r"'(kclient|crc32c|lz4|pyarrow)[\w.]*'",
        text,
    ), text
    assert "PYSPARK_PYTHON" in text and sys.executable in text
