"""Spark's own Kafka sink against kclient's ``write_dataframe``, into Apache Kafka 4.4.

    .venv/bin/python benchmarks/spark_kafka_sink.py [--rows 1000000] [--rounds 3]
        [--partitions 6] [--quick] [--spark-kafka-version 4.2.0] [--fetch]

The sink a Spark user has without kclient: ``df.write.format("kafka")`` from
``org.apache.spark:spark-sql-kafka-0-10_2.13`` (the Java producer inside Spark's JVM, at
its defaults), its jars fetched from Maven Central by :mod:`kclient.testing.maven` and
handed to the session with ``spark.jars`` (no Ivy, no ``--packages``). It is taken at
the installed pyspark's version when Maven Central has it, else at the newest version
of the same major release there (pyspark 4.3.0's is not on Central: 4.2.0 is used and
named in the output). Against it: ``write_dataframe`` at least once and with
``exactly_once=True`` (kclient's defaults otherwise).

Spark runs ``local[2]`` (its JVM as pyspark starts it), Apache Kafka 4.4.0 one node on
127.0.0.1 as in ``benchmarks/kafka_anchors.py``. The DataFrame (``--rows`` rows of a
14-byte key and a 100-byte binary value, 2 partitions) is cached and counted first, so
the timed part is the sink alone; each writer writes a few rows to another topic first,
so its producers are up. Each write goes to a fresh topic of ``--partitions``
partitions and is read back with confluent-kafka (read_committed): every id exactly
once. Rounds alternate the writers; "x Spark" is the median over rounds of rate /
Spark's sink's rate that round, and "EOS time / ALO time" the median of exactly once's
seconds / at least once's that round (the issue's goal: at most 1.2). ``--quick``:
20,000 rows, one round, no warm-up, the test harness's quick-start broker and its Spark
driver flags (the JIT's first tier: CI's smoke test; its numbers mean little). Prints
Markdown.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import pyspark  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402

from benchmarks.kafka_anchors import KAFKA_VERSION, apache_kafka, stop_on_sigterm  # noqa: E402
from benchmarks.spark_sink import (  # noqa: E402
    KEY_BYTES,
    kclient_exactly_once_writer,
    kclient_writer,
    rows,
    verify,
)

SIZE = 100
SPARK = "Spark's Kafka sink (spark-sql-kafka-0-10)"
ALO = "kclient write_dataframe"
EOS = "kclient write_dataframe exactly_once"
_JAR = re.compile(r"^(.+?)-\d[\w.\-]*\.jar$")


def spark_kafka_versions() -> list[str]:
    """The installed pyspark's version, then the earlier minor releases of its major."""
    major, minor = (int(x) for x in pyspark.__version__.split(".")[:2])
    return [pyspark.__version__, *(f"{major}.{m}.0" for m in range(minor - 1, -1, -1))]


def spark_kafka_jars(version: str | None) -> tuple[str, list[Path]]:
    """(the connector's version, its jars not already in pyspark's own ``jars/``).

    Without ``version``: the newest of :func:`spark_kafka_versions` Maven Central has; one
    already in the local Maven repository is taken without asking Central again."""
    from kclient.testing.maven import classpath

    candidates = [version] if version else spark_kafka_versions()
    local = Path.home() / ".m2/repository/org/apache/spark/spark-sql-kafka-0-10_2.13"
    cached = [v for v in candidates if (local / v / f"spark-sql-kafka-0-10_2.13-{v}.jar").exists()]
    failures = []
    for candidate in cached[:1] or candidates:
        try:
            folder = classpath([f"org.apache.spark:spark-sql-kafka-0-10_2.13:{candidate}"])
        except RuntimeError as exc:
            failures.append(f"{candidate}: {str(exc).splitlines()[0]}")
            continue
        spark_jars = Path(pyspark.__file__).parent / "jars"
        have = {_artifact(p.name) for p in spark_jars.glob("*.jar")}
        return candidate, sorted(p for p in folder.glob("*.jar") if _artifact(p.name) not in have)
    raise SystemExit("spark-sql-kafka-0-10 not fetched from Maven Central:\n" + "\n".join(failures))


def _artifact(jar: str) -> str:
    found = _JAR.match(jar)
    return found.group(1) if found else jar


def spark_writer(df: DataFrame, topic: str, config: dict[str, str]) -> None:
    """Spark's own sink: ``df.write.format("kafka")`` (it reports no count)."""
    (
        df.write.format("kafka")
        .option("kafka.bootstrap.servers", config["bootstrap.servers"])
        .option("topic", topic)
        .save()
    )


WRITERS: dict[str, Callable[[DataFrame, str, dict[str, str]], int | None]] = {
    SPARK: spark_writer,
    ALO: kclient_writer,
    EOS: kclient_exactly_once_writer,
}


#: ``--quick``'s driver JVM flags: the test harness's (integration/spark/session.py), which
#: start Spark sooner and run it slower.
QUICK_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def session(jars: list[Path], *, quick: bool = False) -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = SparkSession.builder
    if quick:
        builder = builder.config("spark.driver.extraJavaOptions", QUICK_JAVA_OPTIONS)
    spark = (
        builder.master("local[2]")
        .appName("kclient-spark-kafka-sink-benchmark")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.jars", ",".join(str(j) for j in jars))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def write_once(
    spark: SparkSession, kafka: Any, writer: str, df: DataFrame, args: argparse.Namespace
) -> float:
    """One timed write of ``df`` by ``writer`` to a fresh topic, read back; its seconds."""
    topic, warm = f"sink-{uuid.uuid4().hex[:8]}", f"warm-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, args.partitions)
    config = {"bootstrap.servers": kafka.bootstrap_servers}
    write = WRITERS[writer]
    if not args.quick:  # (--quick: no warm-up, its numbers mean little anyway)
        kafka.create_topic(warm, args.partitions)
        write(rows(spark, 1000, SIZE, 2), warm, config)
    start = time.perf_counter()
    written = write(df, topic, config)
    seconds = time.perf_counter() - start
    if written is not None and written != args.rows:
        raise RuntimeError(f"{writer}: {written} records reported, {args.rows} rows")
    consumed, ids_ok = verify(kafka.bootstrap_servers, topic, args.partitions, args.rows, 300)
    if not ids_ok:
        raise RuntimeError(f"{writer}: {consumed} records read back, not ids 0..{args.rows - 1}")
    return seconds


def table(results: dict[str, list[float]], n: int) -> list[str]:
    lines = [
        "| writer | seconds | rows/s | MB/s | x Spark | EOS time / ALO time |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for writer, runs in results.items():
        seconds = statistics.median(runs)
        x_spark = statistics.median(s / mine for mine, s in zip(runs, results[SPARK], strict=True))
        eos = ""
        if writer == EOS:
            per_round = [e / a for e, a in zip(runs, results[ALO], strict=True)]
            eos = f"{statistics.median(per_round):.2f}"
        lines.append(
            f"| {writer} | {seconds:.2f} | {n / seconds:,.0f} | "
            f"{n * (KEY_BYTES + SIZE) / seconds / 1e6:.1f} | {x_spark:.2f} | {eos} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--partitions", type=int, default=6, help="topic partitions")
    parser.add_argument("--quick", action="store_true", help="20,000 rows, one round (CI)")
    parser.add_argument(
        "--spark-kafka-version", help="spark-sql-kafka-0-10's version (default: see above)"
    )
    parser.add_argument(
        "--fetch", action="store_true", help="only fetch the connector's jars (CI's set-up)"
    )
    args = parser.parse_args(argv)
    if args.fetch:
        version, jars = spark_kafka_jars(args.spark_kafka_version)
        print(f"spark-sql-kafka-0-10 {version}: {len(jars)} jars for pyspark {pyspark.__version__}")
        return 0
    if args.quick:
        args.rows, args.rounds = 20_000, 1
    stop_on_sigterm()
    version, jars = spark_kafka_jars(args.spark_kafka_version)
    load_before = os.getloadavg()
    started = time.monotonic()
    results: dict[str, list[float]] = {writer: [] for writer in WRITERS}
    spark = session(jars, quick=args.quick)
    try:
        with apache_kafka(quick=args.quick) as kafka:
            df = rows(spark, args.rows, SIZE, 2).cache()
            df.count()
            for round_number in range(args.rounds):
                for writer in WRITERS:
                    seconds = write_once(spark, kafka, writer, df, args)
                    results[writer].append(seconds)
                    print(
                        f"# round {round_number + 1}: {writer}: {args.rows / seconds:,.0f} rows/s",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        spark.stop()
    command = shlex.join([".venv/bin/python", "benchmarks/spark_kafka_sink.py", *sys.argv[1:]])
    print(f"\n`{command}`\n")
    print(
        f"Spark local[2] (pyspark {pyspark.__version__}, spark-sql-kafka-0-10 {version}) -> "
        f"Apache Kafka {KAFKA_VERSION}, one node on 127.0.0.1, a topic of {args.partitions} "
        f"partitions; {args.rows:,} rows x ({KEY_BYTES} B key + {SIZE} B value), 2 DataFrame "
        f"partitions; {args.rounds} round(s), medians; every row read back exactly once; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
        f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after "
        f"({time.monotonic() - started:.0f} s).\n"
    )
    print("\n".join(table(results, args.rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
