"""An exactly-once batch job as a user submits it to a Spark cluster (``spark-submit
--master spark://...``): ``ROWS`` ids in ``TASKS`` tasks through Python UDFs (the value:
the id; the key: 200 bytes), then ``write_dataframe(exactly_once=True)``. Prints
``written <records> <tasks>``.

``spark-submit ... spark_eos_job.py BOOTSTRAP TOPIC SINK_ID ROWS TASKS MARKER``

For the test that kills an executor mid-write: the first attempt of task 0, four fifths
through its rows, writes its process id to the file ``MARKER`` and stalls, so the test
knows which executor to kill and when. The rows before are on the broker by then, but for
the last 64 KiB (300 rows) or so: the UDFs' worker buffers what it returns to the JVM.
"""

from __future__ import annotations

import os
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as sql

from kclient.spark import write_dataframe


def main(  # noqa: PLR0917 (the command line's arguments)
    bootstrap: str, topic: str, sink_id: str, rows: int, tasks: int, marker: str
) -> None:
    stall_at = rows // tasks * 4 // 5  # in task 0

    def slowly(value: int) -> str:
        from pyspark import TaskContext

        context = TaskContext.get()
        if value == stall_at and context is not None and context.attemptNumber() == 0:
            with open(marker + ".tmp", "w") as f:
                f.write(str(os.getpid()))
            os.replace(marker + ".tmp", marker)
            time.sleep(120)  # killed meanwhile
        return str(value)

    spark = SparkSession.builder.appName(f"kclient-eos-{sink_id}").getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    slow = sql.udf(slowly, "string", useArrow=False)
    pad = sql.udf(lambda value: f"{value % 7:0200d}", "string", useArrow=False)
    df = spark.range(rows, numPartitions=tasks).select(
        pad("id").alias("key"), slow("id").alias("value")
    )
    # The other tasks' transactions stay open, prepared, until task 0's retry is done and
    # the driver commits them all: with the stall, the kill and a loaded machine that once
    # took longer than the default transaction.timeout.ms (60 s), and the coordinator
    # aborted one (the job then fails, as it should). Ten minutes (the broker allows 15).
    result = write_dataframe(
        df,
        topic,
        exactly_once=True,
        sink_id=sink_id,
        bootstrap_servers=bootstrap,
        transaction_timeout_ms=600_000,
    )
    print(f"written {result.records_written} {result.tasks}", flush=True)
    spark.stop()


if __name__ == "__main__":
    args = sys.argv[1:7]
    main(args[0], args[1], args[2], int(args[3]), int(args[4]), args[5])
