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

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import confluent_kafka
import pytest

from integration.apache_kafka.test_spark_exactly_once import NEWEST, java_values, once_each
from integration.spark.test_exactly_once import COMMITTED, UNCOMMITTED, values
from kclient.testing.apache_kafka import ApacheKafka
from kclient.testing.spark_standalone import SparkStandalone

ROOT = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("spark_eos_job.py")
ROWS = 40_000  # task 0 stalls at row 8000
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


def parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def records_on_broker(bootstrap: str, topic: str) -> int:
    """The topic's high watermarks added up: records written, in transactions or not."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return sum(
            consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 10)[1]
            for p in range(PARTITIONS)
        )
    finally:
        consumer.close()


def wait_until_writes_settle(bootstrap: str, topic: str) -> None:
    """Until the broker holds records and their count has not grown for 3 s (at most 60 s):
    the stalled task's producer has sent the rows it was handed, however slow the machine
    (on a loaded one 1.5 s without growth came before the first row had arrived)."""
    start = time.monotonic()
    last, since = -1, start
    while time.monotonic() - start < 60.0:
        count = records_on_broker(bootstrap, topic)
        now = time.monotonic()
        if count != last:
            last, since = count, now
        elif count > 0 and now - since >= 3.0:
            return
        time.sleep(0.25)


def kill_the_stalled_executor(
    cluster: SparkStandalone,
    driver: subprocess.Popen[bytes],
    marker: Path,
    bootstrap: str,
    topic: str,
) -> int:
    """SIGKILL the executor JVM whose Python worker stalled in task 0 (its ancestor), once
    the task's first rows had time to reach the broker."""
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while not marker.exists():
        assert driver.poll() is None, "the job ended before task 0 stalled"
        assert time.monotonic() < deadline, "task 0 did not stall"
        time.sleep(0.05)
    wait_until_writes_settle(bootstrap, topic)  # the sink's producer sends what it has
    executors = {pid for worker in (1, 2) for pid in cluster.executor_pids(worker)}
    worker = pid = int(marker.read_text())
    while pid not in executors:
        assert pid > 1, f"Python worker {worker} runs in no executor of {executors}"
        pid = parent(pid)
    os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):  # the stalled worker, were it left over
        os.kill(worker, signal.SIGKILL)
    return pid


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
        marker = tmp_path / "stalled"
        args = [bootstrap, topic, f"cluster-{topic}", str(ROWS), str(TASKS), str(marker)]
        driver = submit(cluster, args, log)
        try:
            killed = kill_the_stalled_executor(cluster, driver, marker, bootstrap, topic)
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
    # the killed attempt's rows reached the broker, in a transaction it never ended: the
    # retry's InitProducerId aborted it, so only read_uncommitted sees them
    assert len(values(bootstrap, topic, ROWS + 1, UNCOMMITTED)) > ROWS
    assert java_values(apache_kafka, topic) == once_each(ROWS)
