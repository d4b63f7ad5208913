"""A Structured Streaming driver for the exactly-once kill test: CSV files (one per
micro-batch) → 3 tasks partitioned by key → ``foreach_batch(exactly_once=True)``.

``python -m integration.spark.eos_stream_driver BOOTSTRAP TOPIC INPUT_DIR CHECKPOINT SINK_ID``
processes every file in the input directory (``availableNow``) from the checkpoint, then
exits 0. The test kills it (SIGKILL to its process group) at the pause points that
``KCLIENT_EOS_PAUSE_AT`` names, and starts it again.
"""

from __future__ import annotations

import sys

from pyspark.sql import DataFrame

from integration.spark.session import local_session
from kclient.spark import foreach_batch


def main(bootstrap: str, topic: str, input_dir: str, checkpoint: str, sink_id: str) -> None:
    spark = local_session("kclient-eos-stream", **{"spark.sql.shuffle.partitions": "3"})
    write = foreach_batch(
        topic,
        exactly_once=True,
        sink_id=sink_id,
        bootstrap_servers=bootstrap,
        transaction_timeout_ms=120_000,
    )

    def by_key(batch: DataFrame, batch_id: int) -> None:
        write(batch.repartition(3, "key"), batch_id)

    rows = (
        spark.readStream.schema("key STRING, seq LONG")
        .option("maxFilesPerTrigger", 1)
        .csv(input_dir)
        .selectExpr("key", "cast(seq AS STRING) AS value")
    )
    query = (
        rows.writeStream.foreachBatch(by_key)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:6])
