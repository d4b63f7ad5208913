"""The exactly-once sink on a Spark standalone cluster, as users outgrow one machine: a
master and two workers started from pyspark's own classes (``SparkStandalone``), the job
submitted with ``spark-submit --master spark://...`` (``spark_eos_job``), executors in
JVMs of their own with their own Python workers, writing into Apache Kafka 4.4. One
executor JVM is SIGKILLed while the tasks write; its tasks run again elsewhere and a
read_committed reader (Kafka's Java consumer and confluent-kafka) sees every row once.

kclient reaches the executors the simplest way a one-machine cluster allows: they run the
test's own interpreter (``spark.pyspark.python``, the venv kclient is installed in). On
separate machines the same venv (or a wheel installed into each one's Python) is needed.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from integration.apache_kafka.test_spark_exactly_once import NEWEST, java_values, once_each
from integration.spark.test_exactly_once import COMMITTED, values
from kclient.cli.admin import ClusterReader
from kclient.testing.apache_kafka import ApacheKafka
from kclient.testing.spark_standalone import SparkStandalone

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("spark_eos_job.py")
ROWS = 8000
TASKS = 4
PARTITIONS = 3
JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
RUN_TIMEOUT_S = 240.0


def submit(cluster: SparkStandalone, args: list[str], log: Path) -> subprocess.Popen[bytes]:
    conf = {
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.executor.memory": "512m",
        "spark.driver.memory": "512m",
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": JAVA_OPTIONS,
        "spark.executor.extraJavaOptions": JAVA_OPTIONS,
        "spark.sql.execution.arrow.maxRecordsPerBatch": "200",  # the sink sends as rows come
    }
    command = [cluster.spark_submit, "--master", cluster.master_url]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    with log.open("wb") as out:
        return subprocess.Popen(
            [*command, str(JOB), *args],
            cwd=ROOT,
            env=cluster.env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def records_on_the_broker(bootstrap: str, topic: str) -> int:
    reader = ClusterReader(bootstrap)
    try:
        return sum(reader.end_offsets(topic).values())  # read_uncommitted: open ones count
    finally:
        reader.close()


def kill_an_executor_once_rows_arrive(
    cluster: SparkStandalone, driver: subprocess.Popen[bytes], bootstrap: str, topic: str
) -> int:
    """SIGKILL worker 1's executor JVM as soon as the tasks' rows reach the broker."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while time.monotonic() < deadline:
        assert driver.poll() is None, "the job ended before an executor could be killed"
        executors = cluster.executor_pids(1)
        if executors and records_on_the_broker(bootstrap, topic) > 0:
            os.kill(executors[0], signal.SIGKILL)
            return executors[0]
        time.sleep(0.05)
    raise TimeoutError("no rows reached the broker")


@NEWEST
@pytest.mark.slow
@pytest.mark.timeout(400)
def test_an_executor_killed_mid_write_on_a_standalone_cluster_commits_each_row_once(
    apache_kafka: ApacheKafka, tmp_path: Path
) -> None:
    topic = f"eos-{uuid.uuid4().hex[:8]}"
    apache_kafka.create_topic(topic, PARTITIONS)
    bootstrap = apache_kafka.bootstrap_servers
    log = tmp_path / "driver.log"
    with SparkStandalone(workers=2, cores=1, memory="1g") as cluster:
        driver = submit(cluster, [bootstrap, topic, f"cluster-{topic}", str(ROWS), str(TASKS)], log)
        try:
            killed = kill_an_executor_once_rows_arrive(cluster, driver, bootstrap, topic)
            driver.wait(RUN_TIMEOUT_S)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                driver.wait(30)
        output = log.read_text(errors="replace")
        assert driver.returncode == 0, f"the job failed:\n{output[-5000:]}\n{cluster.log_tail()}"
    assert f"written {ROWS} {TASKS}" in output
    assert re.search(r"Lost executor \d+", output), f"executor {killed} was not lost mid-job"
    assert Counter(values(bootstrap, topic, ROWS, COMMITTED)) == once_each(ROWS)
    assert java_values(apache_kafka, topic) == once_each(ROWS)
