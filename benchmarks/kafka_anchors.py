"""The speed anchors on Apache Kafka 4.4: the Java producer, kclient and confluent-kafka.

    .venv/bin/python benchmarks/kafka_anchors.py [--messages 1000000] [--rounds 3]
        [--partitions 1 6] [--batches defaults 1MiB] [--clients ...] [--quick]

One Apache Kafka 4.4.0 node (KRaft, combined mode, ``kclient.testing.apache_kafka``) on
127.0.0.1 serves every producer of one run. Its JVM runs as ``kafka-server-start.sh``
runs it (1 GiB heap, G1, the full JIT), not with the test harness's quick-start flags.
Each producer writes ``--messages`` records of 100-byte values (no key) to a fresh topic
of 1 and of 6 partitions, in its own process, twice: at its own defaults, and with 1 MiB
batches (``batch.size=1048576``; linger stays each client's default, 5 ms for all three).
The producers:

- **Java producer**: ``org.apache.kafka.tools.ProducerPerformance`` from ``kafka-tools``
  4.4.0 (``--record-size 100 --throughput -1``), its JVM run as
  ``kafka-producer-perf-test.sh`` runs it; the rate is its final summary line (the clock
  runs from its first send to its last acknowledgement: JIT warm-up included, metadata
  too), its records/s (its MB/s are MiB: the table's MB are 10^6 bytes for all);
- **kclient send()**: ``KafkaProducer.send(topic, value)`` per record, then ``flush()``;
  **+ callback**: the same with ``callback=`` a function counting the errors;
- **kclient send_batch()**: ``send_batch(topic, values)`` in calls of 10,000 records;
- **kclient.aio send()**: ``await producer.send(topic, value)`` per record, then
  ``await flush()``;
- **confluent-kafka produce()**: ``produce(topic, value)`` and ``poll(0)`` per record (on
  ``BufferError``, ``poll(0.005)`` until it takes the record), then ``flush()``;
  **+ callback**: with ``on_delivery=``.

Defaults: the Java producer and kclient acks=all with idempotence, 16 KiB batches;
confluent-kafka (librdkafka) acks=all without idempotence, batches up to 1 MB or 10,000
records. The Python clients' clock runs from the first send (metadata fetched before) to
the end of flush; values are made before. Every run is checked: the topic's end offsets
must add up to ``--messages``. Rounds alternate the producers (the machine's speed
drifts); "x Java" is the median over rounds of rate / the Java producer's rate on the
same topic shape and batch setting in that round; "x confluent" the same against
confluent-kafka's ``produce()`` (the ``+ callback`` row: against its ``+ callback``).
Before the first round the broker is warmed up with a Java producer run (its JIT
compiles the produce path). Prints Markdown.
``--quick``: 20,000 records, one round, the 6-partition topic only, no warm-up and the
test harness's quick-start broker: CI's smoke test, its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.producer_perf import _report, _send_each, _timed, payload  # noqa: E402

KAFKA_VERSION = "4.4.0"
SIZE = 100
MIB = 1 << 20
BATCHES: dict[str, dict[str, int]] = {"defaults": {}, "1MiB": {"batch.size": MIB}}
JAVA = "Java producer"
CLIENTS = [
    JAVA,
    "kclient send()",
    "kclient send() + callback",
    "kclient send_batch()",
    "kclient.aio send()",
    "confluent-kafka produce()",
    "confluent-kafka produce() + callback",
]
#: The broker's JVM as ``kafka-server-start.sh`` starts it (KAFKA_HEAP_OPTS and
#: KAFKA_JVM_PERFORMANCE_OPTS), replacing the test harness's C1-only, small-heap flags.
BROKER_JVM = (
    "-Xms1g",
    "-Xmx1g",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
    "-Djava.net.preferIPv4Stack=true",
)
#: ProducerPerformance's JVM as ``kafka-producer-perf-test.sh`` starts it.
TOOL_JVM = ("-Xmx512M", *BROKER_JVM[2:])
SUMMARY = re.compile(r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\)", re.MULTILINE)


# ---- the broker ------------------------------------------------------------------------


@contextlib.contextmanager
def apache_kafka(*, quick: bool = False) -> Iterator[Any]:
    """One Apache Kafka 4.4.0 node with the JVM flags of ``kafka-server-start.sh``
    (``quick``: the test harness's, which start it sooner and run it slower)."""
    from kclient.testing.apache_kafka import ApacheKafka

    kafka = ApacheKafka(KAFKA_VERSION, brokers=1, start_timeout_s=120.0)
    if not quick:  # the harness's flags favour a quick start; a benchmark wants the broker
        kafka.jvm_options = BROKER_JVM  # users run (these come after, so they win)
    with kafka:
        yield kafka


def stop_on_sigterm() -> None:
    """SIGTERM (a test's timeout) unwinds like Ctrl-C: the broker and Spark are stopped."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"signal {signum}"))


def records_in(bootstrap: str, topic: str) -> int:
    """The sum of the topic's end offsets (a fresh topic: the records written)."""
    from kclient.cli.admin import ClusterReader

    reader = ClusterReader(bootstrap)
    try:
        return sum(reader.end_offsets(topic).values())
    finally:
        reader.close()


# ---- the Java producer -----------------------------------------------------------------


def java_producer(bootstrap: str, topic: str, n: int, props: dict[str, int]) -> dict[str, float]:
    """ProducerPerformance's final summary: seconds, records/s and MB/s as it prints them."""
    from kclient.testing.apache_kafka import kafka_jars
    from kclient.testing.maven import require_java

    command = [
        require_java(),
        *TOOL_JVM,
        "-cp",
        f"{kafka_jars(KAFKA_VERSION)}/*",
        "org.apache.kafka.tools.ProducerPerformance",
        "--bootstrap-server", bootstrap,
        "--topic", topic,
        "--num-records", str(n),
        "--record-size", str(SIZE),
        "--throughput", "-1",
    ]  # fmt: skip
    if props:
        command += ["--command-property", *(f"{k}={v}" for k, v in props.items())]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    summary = parse_summary(done.stdout, n) if done.returncode == 0 else None
    if summary is None:
        raise RuntimeError(f"ProducerPerformance failed ({done.returncode}):\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")  # fmt: skip
    rate = summary[0]  # its MB/s are MiB/s: the table's are 10^6 bytes for every producer
    return {"seconds": n / rate, "rate": rate, "mb_s": rate * SIZE / 1e6}


def parse_summary(output: str, n: int) -> tuple[float, float] | None:
    """(records/s, MB/s) of ProducerPerformance's final line for ``n`` records (its
    interim lines every 5 s count fewer), or None when there is none."""
    final = [row for row in SUMMARY.findall(output) if int(row[0]) == n]
    return (float(final[-1][1]), float(final[-1][2])) if final else None


# ---- the Python producers (each in a worker process) -------------------------------------


def kclient_producer(bootstrap: str, topic: str, props: dict[str, int]) -> Any:
    from kclient import KafkaProducer

    producer = KafkaProducer({"bootstrap.servers": bootstrap, **props})
    producer.partitions_for(topic)  # metadata before the clock starts
    return producer


def run_kclient(bootstrap: str, topic: str, values: list[bytes], props: dict[str, int]) -> None:
    producer = kclient_producer(bootstrap, topic, props)
    _timed(lambda: _send_each(producer.send, topic, values), producer.flush, producer.close)


def run_kclient_callback(
    bootstrap: str, topic: str, values: list[bytes], props: dict[str, int]
) -> None:
    producer = kclient_producer(bootstrap, topic, props)
    errors: list[BaseException] = []

    def delivered(metadata: Any, error: BaseException | None) -> None:
        if error is not None:
            errors.append(error)

    def send_all() -> None:
        send = producer.send
        for value in values:
            send(topic, value, callback=delivered)

    _timed(send_all, producer.flush, producer.close)
    if errors:
        raise RuntimeError(f"{len(errors)} records failed: {errors[0]!r}")


def run_kclient_batch(
    bootstrap: str, topic: str, values: list[bytes], props: dict[str, int]
) -> None:
    producer = kclient_producer(bootstrap, topic, props)

    def send_all() -> None:
        for start in range(0, len(values), 10_000):
            producer.send_batch(topic, values[start : start + 10_000])

    _timed(send_all, producer.flush, producer.close)


def run_kclient_aio(bootstrap: str, topic: str, values: list[bytes], props: dict[str, int]) -> None:
    from benchmarks.producer_perf import cpu_s
    from kclient.aio import AIOKafkaProducer

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **props)
        await producer.start()
        await producer.partitions_for(topic)
        start_s, start_cpu = time.perf_counter(), cpu_s()
        send = producer.send
        for value in values:
            await send(topic, value)
        await producer.flush()
        _report(start_s, start_cpu)
        await producer.stop()

    asyncio.run(main())


def confluent_producer(bootstrap: str, topic: str, props: dict[str, int]) -> Any:
    import confluent_kafka

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **props})
    producer.list_topics(topic, timeout=30)
    return producer


def run_confluent(
    bootstrap: str, topic: str, values: list[bytes], props: dict[str, int], callback: bool = False
) -> None:
    producer = confluent_producer(bootstrap, topic, props)
    errors: list[Any] = []

    def delivered(error: Any, message: Any) -> None:
        if error is not None:
            errors.append(error)

    def produce_all() -> None:
        produce, poll = producer.produce, producer.poll
        extra = {"on_delivery": delivered} if callback else {}
        for value in values:
            while True:
                try:
                    produce(topic, value, **extra)
                    break
                except BufferError:  # its queue is full: serve callbacks until there is room
                    poll(0.005)
            poll(0)

    _timed(produce_all, lambda: producer.flush(300), lambda: None)
    if errors:
        raise RuntimeError(f"{len(errors)} records failed: {errors[0]!r}")


def run_confluent_callback(
    bootstrap: str, topic: str, values: list[bytes], props: dict[str, int]
) -> None:
    run_confluent(bootstrap, topic, values, props, callback=True)


PYTHON = {
    "kclient send()": run_kclient,
    "kclient send() + callback": run_kclient_callback,
    "kclient send_batch()": run_kclient_batch,
    "kclient.aio send()": run_kclient_aio,
    "confluent-kafka produce()": run_confluent,
    "confluent-kafka produce() + callback": run_confluent_callback,
}


def aio_props(props: dict[str, int]) -> dict[str, int]:
    """kclient.aio takes aiokafka's keyword names: ``batch.size`` is ``max_batch_size``."""
    return {("max_batch_size" if k == "batch.size" else k): v for k, v in props.items()}


def worker(args: argparse.Namespace) -> None:
    props = dict(BATCHES[args.batch])
    if args.client == "kclient.aio send()":
        props = aio_props(props)
    values = [payload(i, SIZE) for i in range(args.messages)]
    PYTHON[args.client](args.bootstrap, args.topic, values, props)


def run_python(client: str, bootstrap: str, topic: str, n: int, batch: str) -> dict[str, float]:
    command = [
        sys.executable, __file__, "--worker",
        "--client", client,
        "--batch", batch,
        "--bootstrap", bootstrap,
        "--topic", topic,
        "--messages", str(n),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{client} ({batch}) failed:\n{done.stdout}\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(lines[-1])
    result["rate"] = n / result["seconds"]
    result["mb_s"] = result["rate"] * SIZE / 1e6
    return result


# ---- the parent: rounds and the table ----------------------------------------------------


@dataclass(frozen=True)
class Case:
    client: str
    partitions: int
    batch: str


def measure(kafka: Any, case: Case, n: int) -> dict[str, float]:
    topic = f"anchor-{case.partitions}p-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, case.partitions)
    bootstrap = kafka.bootstrap_servers
    if case.client == JAVA:
        result = java_producer(bootstrap, topic, n, BATCHES[case.batch])
    else:
        result = run_python(case.client, bootstrap, topic, n, case.batch)
    written = records_in(bootstrap, topic)
    if written != n:
        raise RuntimeError(f"{case}: {written} records in the topic, {n} sent")
    return result


def table(results: dict[Case, list[dict[str, float]]]) -> list[str]:
    """The Markdown table: medians, and the per-round ratios' medians (see the doc)."""
    lines = [
        "| producer | partitions | batches | records/s | MB/s | x Java | x confluent |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for case, runs in results.items():
        rate = statistics.median(r["rate"] for r in runs)
        mb_s = statistics.median(r["mb_s"] for r in runs)
        partner = _CONFLUENT_PARTNER.get(case.client, "")
        java = _ratio(runs, results.get(Case(JAVA, case.partitions, case.batch)))
        confluent = _ratio(runs, results.get(Case(partner, case.partitions, case.batch)))
        lines.append(
            f"| {case.client} | {case.partitions} | {case.batch} | {rate:,.0f} | {mb_s:.1f} "
            f"| {java} | {confluent} |"
        )
    return lines


#: Which confluent-kafka row a kclient row's "x confluent" divides by.
_CONFLUENT_PARTNER = {
    "kclient send()": "confluent-kafka produce()",
    "kclient send() + callback": "confluent-kafka produce() + callback",
    "kclient send_batch()": "confluent-kafka produce()",
    "kclient.aio send()": "confluent-kafka produce()",
}


def _ratio(runs: list[dict[str, float]], theirs: list[dict[str, float]] | None) -> str:
    """The median over rounds of rate / their rate that round ("" without them)."""
    if not theirs:
        return ""
    per_round = [r["rate"] / t["rate"] for r, t in zip(runs, theirs, strict=True)]
    return f"{statistics.median(per_round):.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--partitions", type=int, nargs="+", default=[1, 6])
    parser.add_argument("--batches", nargs="+", default=list(BATCHES), choices=list(BATCHES))
    parser.add_argument("--clients", nargs="+", default=CLIENTS, choices=CLIENTS)
    parser.add_argument(
        "--quick",
        action="store_true",
        help="20,000 records, one round, 6 partitions only, no warm-up, the harness's broker (CI)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--batch", default="defaults", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if args.quick:
        args.messages, args.rounds = 20_000, 1
        if args.partitions == parser.get_default("partitions"):
            args.partitions = [6]
    stop_on_sigterm()

    cases = [
        Case(client, partitions, batch)
        for partitions in args.partitions
        for batch in args.batches
        for client in args.clients
    ]
    results: dict[Case, list[dict[str, float]]] = {case: [] for case in cases}
    load_before = os.getloadavg()
    started = time.monotonic()
    with apache_kafka(quick=args.quick) as kafka:
        if not args.quick:  # the broker's JIT compiles its produce path first
            measure(kafka, Case(JAVA, 6, "defaults"), min(args.messages, 500_000))
        for round_number in range(args.rounds):
            for case in cases:
                result = measure(kafka, case, args.messages)
                results[case].append(result)
                print(
                    f"# round {round_number + 1}: {case.client}, {case.partitions} partitions, "
                    f"{case.batch}: {result['rate']:,.0f} records/s",
                    file=sys.stderr,
                    flush=True,
                )
    command = shlex.join([".venv/bin/python", "benchmarks/kafka_anchors.py", *sys.argv[1:]])
    print(f"\n`{command}`\n")
    print(
        f"Apache Kafka {KAFKA_VERSION}, one node on 127.0.0.1; {args.messages:,} records x "
        f"{SIZE} B values, no keys, per run; {args.rounds} round(s), medians; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
        f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after "
        f"({time.monotonic() - started:.0f} s).\n"
    )
    print("\n".join(table(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
