"""The exactly-once Spark sink into Apache Kafka itself (4.4 with transaction version 2,
3.9 with version 1), through the faults the embedded-broker tests inject
(``integration/spark``), whose helpers this module reuses: a Python worker killed after
its rows reached the broker (``local[2,3]`` retries the task), a task failing by an
exception mid-write, and a streaming driver SIGKILLed at each step of the commit and
restarted from its checkpoint (``integration/spark/stream_kills.py``). Read back
``read_committed`` by Kafka's own Java consumer and by confluent-kafka: every row exactly
once."""

from __future__ import annotations

import random
import uuid
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sql

from integration.spark.stream_kills import (
    FILES,
    POINTS,
    ROWS_PER_FILE,
    check_each_row_once_in_order,
    kill_and_restart,
)
from integration.spark.test_exactly_once import (
    COMMITTED,
    PARTITIONS,
    ROWS,
    spark,  # noqa: F401 -- the local[2,3] session whose task 1 of "crashes-once" crashes
    values,
    write_with_a_crashing_task,
)
from kclient.spark import foreach_batch
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)

NEWEST = pytest.mark.parametrize("apache_kafka", VERSIONS[:1], indirect=True, ids=["kafka4.4"])


def java_values(kafka: ApacheKafka, topic: str) -> Counter[bytes]:
    """Every value of ``topic`` as Kafka's Java consumer reads it, read_committed."""
    read = kafka.java_read([topic], timeout_s=60)
    return Counter(r.value or b"" for r in read.of(topic))


def once_each(n: int, start: int = 0) -> Counter[bytes]:
    return Counter(str(i).encode() for i in range(start, start + n))


def new_topic(kafka: ApacheKafka) -> str:
    topic = f"eos-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, PARTITIONS)
    return topic


def test_a_killed_python_worker_is_retried_and_each_row_is_committed_once(
    spark: SparkSession,  # noqa: F811
    apache_kafka: ApacheKafka,
) -> None:
    """``write_dataframe(exactly_once=True)``: task 1's Python worker exits after its rows
    reached the broker; the retry fences the dead attempt's transaction (aborted: only
    read_uncommitted sees its rows) and read_committed sees every row once."""
    topic = new_topic(apache_kafka)
    write_with_a_crashing_task(spark, apache_kafka.bootstrap_servers, topic)
    assert java_values(apache_kafka, topic) == once_each(ROWS)


def test_foreach_batch_with_a_task_failing_mid_write_commits_each_batch_once(
    spark: SparkSession,  # noqa: F811
    apache_kafka: ApacheKafka,
    tmp_path: Path,
) -> None:
    """``foreach_batch(exactly_once=True)`` over two batches, in each of which the first
    attempt of task 1 raises after the sink has taken rows of it (a UDF upstream fails):
    the task is retried; a batch written again (a replayed micro-batch id) is skipped."""
    failed = tmp_path / "failed"
    failed.mkdir()
    per_batch = 3000

    def fail_first_attempt(value: int) -> int:
        from pyspark import TaskContext

        context = TaskContext.get()
        assert context is not None
        first = context.attemptNumber() == 0 and context.partitionId() == 1
        if first and value % per_batch == per_batch // 2:  # half-way through task 1
            (failed / f"{value}").touch()
            raise RuntimeError(f"task 1 fails at {value} on its first attempt")
        return value

    checked = sql.udf(fail_first_attempt, "long", useArrow=False)
    topic = new_topic(apache_kafka)
    write = foreach_batch(
        topic,
        exactly_once=True,
        sink_id=f"fails-{topic}",
        bootstrap_servers=apache_kafka.bootstrap_servers,
    )
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "200")
    try:
        for batch in (0, 1, 1):  # batch 1 replayed
            df = spark.range(batch * per_batch, (batch + 1) * per_batch, numPartitions=3)
            write(df.select(checked("id").cast("string").alias("value")), batch)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    assert len(list(failed.iterdir())) == 2  # one failed attempt per batch
    total = 2 * per_batch
    assert Counter(values(apache_kafka.bootstrap_servers, topic, total, COMMITTED)) == once_each(
        total
    )
    assert java_values(apache_kafka, topic) == once_each(total)


@NEWEST
@pytest.mark.slow
@pytest.mark.timeout(300)  # four Spark driver start-ups, ~10 s each on an idle machine
def test_a_stream_killed_at_every_step_of_the_commit_writes_each_row_once_in_order(
    apache_kafka: ApacheKafka, tmp_path: Path
) -> None:
    """``foreach_batch(exactly_once=True)`` in a Structured Streaming driver SIGKILLed (with
    its JVM and Python workers) at each step of the commit in turn — a task prepared while
    others still write, the batch recorded, the commits half done — and restarted from its
    checkpoint each time: the prepared transactions a dead driver left are committed by the
    next one (an EndTxn for another producer's transaction, on a broker whose finalized
    transaction version is 2), and read_committed sees every row once, in order per key."""
    topic = new_topic(apache_kafka)
    bootstrap = apache_kafka.bootstrap_servers
    killed = kill_and_restart(bootstrap, topic, tmp_path, list(POINTS), random.Random(1717))
    check_each_row_once_in_order(bootstrap, topic, killed)
    total = FILES * ROWS_PER_FILE
    assert java_values(apache_kafka, topic) == once_each(total), f"killed at {killed}"
