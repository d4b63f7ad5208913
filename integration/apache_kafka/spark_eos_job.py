"""An exactly-once batch job as a user submits it to a Spark cluster (``spark-submit
--master spark://...``): ``ROWS`` ids in ``TASKS`` tasks, slowed by a UDF (a millisecond
per row) so that a test can kill an executor while the tasks write, then
``write_dataframe(exactly_once=True)``. Prints ``written <records> <tasks>``.

``spark-submit ... spark_eos_job.py BOOTSTRAP TOPIC SINK_ID ROWS TASKS``
"""

from __future__ import annotations

import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as sql

from kclient.spark import write_dataframe


def slowly(value: int) -> str:
    time.sleep(0.001)
    return str(value)


def main(bootstrap: str, topic: str, sink_id: str, rows: int, tasks: int) -> None:
    spark = SparkSession.builder.appName(f"kclient-eos-{sink_id}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    slow = sql.udf(slowly, "string", useArrow=False)
    df = spark.range(rows, numPartitions=tasks).select(slow("id").alias("value"))
    result = write_dataframe(
        df, topic, exactly_once=True, sink_id=sink_id, bootstrap_servers=bootstrap
    )
    print(f"written {result.records_written} {result.tasks}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
