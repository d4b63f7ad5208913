"""The local SparkSession every Spark test uses (the test process's and the stream
driver's): 127.0.0.1 only, no UI, small shuffles, and a driver JVM tuned for short runs.

The JVM flags matter on a small machine: with C2, the JIT compiler's threads compete with
Spark's start-up for the two cores; ``-XX:TieredStopAtLevel=1`` (the C1 compiler only)
halved the stream driver's run (73 s -> 38 s, then 47 s -> 18 s back to back, 2026-11-26
on the 2-core CI machine). They apply when the JVM is launched: PySpark passes the
builder's settings to spark-submit only for the first session of a process.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

#: The driver JVM's options (the executors run in it too, in local mode).
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def local_session(
    app_name: str, master: str = "local[2]", log_level: str = "ERROR", **conf: str
) -> SparkSession:
    """A ``master`` session with the shared settings and ``conf`` (Spark's names)."""
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", DRIVER_JAVA_OPTIONS)
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level)
    return spark
