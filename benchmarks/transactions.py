"""Transactional throughput: kclient and confluent-kafka, 1, 100 and 10,000 records per
transaction, against one tansu broker (or kclient's embedded broker) in one run.

    .venv/bin/python benchmarks/transactions.py [--records 1:500 100:20000 10000:200000]
                                                [--rounds 3] [--size 100]
                                                [--broker tansu|embedded] [--log-dir]
                                                [--producers N]

``--broker embedded`` runs kclient's embedded broker (``python -m kclient.broker``, in
memory, one broker; ``--log-dir``: on disk, in a temporary directory) in its own process
instead of tansu; topics are auto-created.

``--producers N`` runs N transactional producers of a client at once (N processes, each
into a topic of its own, all starting their first transaction at the same moment): the
table then shows their records and transactions per second together (N x TOTAL records
over the time the slowest took) and their CPU seconds summed. What they share is the
broker's transaction coordinator.

``--records SIZE:TOTAL`` sets how many records (``TOTAL``) are written in transactions of
``SIZE`` records. Each client runs in its own Python process against tansu (in-memory
storage, 127.0.0.1), into a fresh one-partition topic: init_transactions (not timed),
then begin_transaction, ``SIZE`` sends of ``--size``-byte values and commit_transaction,
until ``TOTAL`` records are committed; the clock runs from the first begin to the last
commit. Both clients use acks=all (transactions need it), linger 5 ms and 1 MiB batches.
The clients take turns for ``--rounds`` rounds (the machine's speed drifts); the table
shows the median over rounds, and "kclient / confluent" is the median of the per-round
ratios. Every run is checked afterwards: the partition's end offset must be the records
plus one COMMIT marker per transaction, and a confluent-kafka ``read_committed`` consumer
must read every record exactly once. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CLIENTS = ["kclient", "confluent-kafka"]
DEFAULT_RECORDS = ["1:500", "100:20000", "10000:200000"]


def payload(i: int, size: int) -> bytes:
    head = b"%010d|" % i
    return head + b"x" * max(size - len(head), 0)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---- one function per client, run in a worker process -----------------------------------


def wait_until(start_at: float) -> None:
    """Parallel producers begin their first transaction at the same moment."""
    time.sleep(max(0.0, start_at - time.time()))


def run_kclient(
    bootstrap: str, topic: str, per_txn: int, total: int, size: int, *, start_at: float
) -> None:
    from kclient import KafkaProducer

    values = [payload(i, size) for i in range(total)]
    producer = KafkaProducer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-kclient-{uuid.uuid4()}",
            "linger.ms": 5,
            "batch.size": 1 << 20,
        }
    )
    producer.init_transactions(timeout=60)
    producer.partitions_for(topic)
    wait_until(start_at)
    send = producer.send
    start_s, start_cpu = time.perf_counter(), cpu_s()
    for first in range(0, total, per_txn):
        producer.begin_transaction()
        for value in values[first : first + per_txn]:
            send(topic, value)
        producer.commit_transaction(timeout=60)
    _report(start_s, start_cpu, start_at)
    producer.close()


def run_confluent(
    bootstrap: str, topic: str, per_txn: int, total: int, size: int, *, start_at: float
) -> None:
    import confluent_kafka

    values = [payload(i, size) for i in range(total)]
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-confluent-{uuid.uuid4()}",
            "linger.ms": 5,
            "batch.size": 1 << 20,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    producer.init_transactions(60)
    producer.list_topics(topic, timeout=30)
    wait_until(start_at)
    produce, poll = producer.produce, producer.poll
    start_s, start_cpu = time.perf_counter(), cpu_s()
    for first in range(0, total, per_txn):
        producer.begin_transaction()
        for value in values[first : first + per_txn]:
            try:
                produce(topic, value)
            except BufferError:
                poll(0.005)
                produce(topic, value)
            poll(0)
        producer.commit_transaction(60)
    _report(start_s, start_cpu, start_at)


RUNS = {"kclient": run_kclient, "confluent-kafka": run_confluent}


def _report(start_s: float, start_cpu: float, start_at: float) -> None:
    seconds = time.perf_counter() - start_s
    late_s = max(0.0, time.time() - seconds - start_at - 0.05)  # began after the others
    print(
        json.dumps({"seconds": seconds, "cpu": cpu_s() - start_cpu, "late_s": late_s}),
        flush=True,
    )


# ---- checking what was written -------------------------------------------------------------


def verify(bootstrap: str, topic: str, total: int, transactions: int) -> str:
    """'all' if the log holds every record and one COMMIT marker per transaction, and a
    read_committed consumer reads each record exactly once."""
    import confluent_kafka

    from kclient.cli.admin import ClusterReader

    reader = ClusterReader(bootstrap)
    try:
        end = reader.end_offsets(topic)[0]
    finally:
        reader.close()
    if end != total + transactions:
        return f"end offset {end}, expected {total} records + {transactions} markers"
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    seen = bytearray(total)
    count = duplicates = 0
    deadline = time.monotonic() + 300
    at_end = False
    try:
        while (count < total or not at_end) and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 1.0):
                if message.error():
                    at_end = message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF
                    continue
                at_end = False
                index = int(message.value()[:10])
                duplicates += seen[index]
                seen[index] = 1
                count += 1
    finally:
        consumer.close()
    missing = total - sum(seen)
    return "all" if missing == duplicates == 0 else f"{missing} missing, {duplicates} duplicated"


# ---- driver ---------------------------------------------------------------------------------


class EmbeddedBrokerProcess:
    """kclient's embedded broker in a process of its own (topics auto-created)."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def create_topic(self, name: str, partitions: int) -> None:
        """Auto-created (one partition) by the clients' first Metadata request."""
        assert partitions == 1


@contextlib.contextmanager
def run_embedded(
    log_dir: bool = False, broker_log: str | None = None
) -> Iterator[EmbeddedBrokerProcess]:
    command = [sys.executable, "-m", "kclient.broker", "--listen", "127.0.0.1:0"]
    if broker_log:
        command += ["--log-level", "INFO"]
    temporary = tempfile.TemporaryDirectory(prefix="kclient-bench-") if log_dir else None
    if temporary is not None:
        command += ["--log-dir", temporary.name]
    stderr = open(broker_log, "w") if broker_log else subprocess.DEVNULL  # noqa: SIM115
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if "bootstrap.servers=" not in line:
            raise RuntimeError(f"the embedded broker did not start: {line!r}")
        yield EmbeddedBrokerProcess(line.strip().split("bootstrap.servers=", 1)[1])
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()
        if temporary is not None:
            temporary.cleanup()
        if not isinstance(stderr, int):
            stderr.close()


def run_workers(
    client: str, bootstrap: str, topics: list[str], *, per_txn: int, total: int, size: int
) -> dict[str, float]:
    """One worker process per topic, started together; their wall time (the slowest's)
    and their CPU seconds summed."""
    start_at = time.time() + 3.0 + 0.3 * len(topics)  # after every init_transactions
    procs = [
        subprocess.Popen(
            [
                sys.executable, __file__, "--worker",
                "--client", client, "--bootstrap", bootstrap, "--topic", topic,
                "--per-txn", str(per_txn), "--total", str(total), "--size", str(size),
                "--start-at", repr(start_at),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for topic in topics
    ]  # fmt: skip
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=1800)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        lines = [line for line in out.splitlines() if line.startswith("{")]
        if proc.returncode != 0 or not lines:
            for other in procs:
                if other.poll() is None:
                    other.kill()
                    other.communicate()
            raise RuntimeError(f"{client} failed:\n{out}\n{err}")
        results.append(json.loads(lines[-1]))
    if max(r["late_s"] for r in results) > 0:
        print(f"# warning: a {client} worker started late", file=sys.stderr)
    return {
        "seconds": max(r["seconds"] for r in results),
        "cpu": sum(r["cpu"] for r in results),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", nargs="+", default=DEFAULT_RECORDS, metavar="SIZE:TOTAL")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--clients", nargs="+", default=CLIENTS, choices=CLIENTS)
    parser.add_argument("--broker", default="tansu", choices=["tansu", "embedded"])
    parser.add_argument("--log-dir", action="store_true", help="embedded broker on disk")
    parser.add_argument("--broker-log", metavar="PATH", help="embedded broker's INFO log here")
    parser.add_argument("--producers", type=int, default=1, help="parallel producers per client")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--per-txn", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--total", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--start-at", type=float, default=0.0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        RUNS[args.client](
            args.bootstrap, args.topic, args.per_txn, args.total, args.size, start_at=args.start_at
        )
        return

    from integration.peers import run_tansu

    broker_name = "tansu" if args.broker == "tansu" else "kclient's embedded broker"
    if args.broker == "embedded":
        broker_name += " on disk" if args.log_dir else " in memory"
    n = args.producers
    workloads = [tuple(int(x) for x in spec.split(":")) for spec in args.records]
    rates: dict[tuple[int, str], list[float]] = {}
    cpus: dict[tuple[int, str], list[float]] = {}
    checks: dict[tuple[int, str], set[str]] = {}
    with (
        run_tansu()
        if args.broker == "tansu"
        else run_embedded(args.log_dir, args.broker_log) as tansu
    ):
        for round_number in range(args.rounds):
            for per_txn, total in workloads:
                total -= total % per_txn
                transactions = total // per_txn
                for client in args.clients:
                    run_id = uuid.uuid4().hex[:8]
                    topics = [f"txn-{client}-{per_txn}-{run_id}-{i}" for i in range(n)]
                    for topic in topics:
                        tansu.create_topic(topic, 1)
                    result = run_workers(
                        client,
                        tansu.bootstrap_servers,
                        topics,
                        per_txn=per_txn,
                        total=total,
                        size=args.size,
                    )
                    checked = ", ".join(
                        sorted(
                            {
                                verify(tansu.bootstrap_servers, t, total, transactions)
                                for t in topics
                            }
                        )
                    )
                    key = (per_txn, client)
                    rates.setdefault(key, []).append(n * total / result["seconds"])
                    cpus.setdefault(key, []).append(result["cpu"])
                    checks.setdefault(key, set()).add(checked)
                    print(
                        f"# round {round_number + 1}: {client}, {per_txn} per transaction: "
                        f"{rates[key][-1]:,.0f} records/s, verified: {checked}",
                        file=sys.stderr,
                    )

    producers = f"{n} producers at once, each into its own topic" if n > 1 else "one producer"
    print(
        f"\n{args.rounds} rounds; {producers}; records of {args.size} B into one partition of "
        f"{broker_name} (127.0.0.1), acks=all, linger 5 ms, 1 MiB batches; medians over "
        "rounds; records and CPU per producer times the producers.\n"
    )
    clients = list(args.clients)
    head = " | ".join(f"{c} records/s | {c} txn/s | {c} CPU s" for c in clients)
    both = set(CLIENTS) <= set(clients)
    ratio = "kclient / confluent" if both else ""
    print(f"| records per transaction | records | {head} | {ratio} | verified |")
    print("|---:|---:|" + "---:|---:|---:|" * len(clients) + "---:|---|")
    for per_txn, total in workloads:
        total -= total % per_txn
        cells = [f"{per_txn:,}", f"{n} x {total:,}" if n > 1 else f"{total:,}"]
        for client in clients:
            rate = statistics.median(rates[(per_txn, client)])
            cells += [
                f"{rate:,.0f}",
                f"{rate / per_txn:,.1f}",
                f"{statistics.median(cpus[(per_txn, client)]):.2f}",
            ]
        shown = ""
        if both:
            ours, theirs = rates[(per_txn, "kclient")], rates[(per_txn, "confluent-kafka")]
            shown = f"{statistics.median(k / c for k, c in zip(ours, theirs, strict=True)):.2f}"
        verified = sorted(set().union(*(checks[(per_txn, c)] for c in clients)))
        cells += [shown, ", ".join(verified)]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
