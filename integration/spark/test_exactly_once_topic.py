"""The exactly-once sink into a topic that does not exist yet (issue 31, item 2), with
Spark ``local[2]`` and the embedded broker: where the cluster creates topics on first use
the sink creates it on the driver and writes, as the at-least-once sink does; where it does
not, the sink fails before any task runs, naming the topic (before: 72 s, then
``OFFSET_COMMIT ... did not complete in time``)."""

from __future__ import annotations

import time
import uuid

import pytest
from pyspark.sql import SparkSession

from integration.producer.verify import consume_all
from kclient import errors
from kclient.broker import EmbeddedBroker
from kclient.spark import write_dataframe

pytestmark = pytest.mark.filterwarnings(
    "ignore:PySpark does not yet fully support pandas:FutureWarning"
)


def _rows(spark: SparkSession) -> object:
    return spark.range(100, numPartitions=2).selectExpr("cast(id AS STRING) AS value")


def test_a_topic_the_cluster_creates_on_first_use_is_created_and_written(
    spark: SparkSession,
) -> None:
    with EmbeddedBroker(num_partitions=1) as broker:
        topic = f"eos-new-{uuid.uuid4().hex[:8]}"
        result = write_dataframe(
            _rows(spark),
            topic,
            exactly_once=True,
            sink_id=f"s-{uuid.uuid4().hex[:8]}",
            bootstrap_servers=broker.bootstrap_servers,
        )
        assert result.records_written == 100
        assert topic in broker.topics()
        read = consume_all(
            broker.bootstrap_servers,
            topic,
            1,
            100,
            60,
            settings={"isolation.level": "read_committed"},
        )
        assert sorted(int(r.value or b"") for r in read) == list(range(100))


def test_a_topic_the_cluster_will_not_create_fails_before_any_task(spark: SparkSession) -> None:
    with EmbeddedBroker(auto_create_topics=False) as broker:
        start = time.monotonic()
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="'nowhere'.*create it"):
            write_dataframe(
                _rows(spark),
                "nowhere",
                exactly_once=True,
                sink_id="s-nowhere",
                bootstrap_servers=broker.bootstrap_servers,
            )
        assert time.monotonic() - start < 10
        assert "nowhere" not in broker.topics()
