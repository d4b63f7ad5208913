"""``kclient demo``: the main job, end to end.

Starts an embedded 3-broker cluster (or uses ``--bootstrap-server``), creates a topic with 6
partitions, produces keyed records with a progress line, reads every record back through
Fetch to check count and checksum, and prints a summary. Exits 1 if anything was lost.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from kclient.cli.admin import ClusterReader
from kclient.cli.producer_perf import percentiles
from kclient.settings import COMPRESSION_TYPES

LATENCY_SAMPLE_EVERY = 10


@dataclass
class _Tally:
    """Acks, errors and sampled latencies; updated on the sender thread."""

    acked: int = 0
    errors: int = 0
    first_error: str | None = None
    partitions: set[int] = field(default_factory=set)
    latencies_us: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self, metadata: Any, exc: BaseException | None) -> None:
        with self.lock:
            if exc is not None:
                self.errors += 1
                if self.first_error is None:
                    self.first_error = str(exc)
                return
            self.acked += 1
            self.partitions.add(metadata.partition)

    def timed(self, sent_ns: int) -> Any:
        def done(metadata: Any, exc: BaseException | None) -> None:
            self.ack(metadata, exc)
            if exc is None:
                with self.lock:
                    self.latencies_us.append((time.perf_counter_ns() - sent_ns) // 1000)

        return done


def record_for(i: int, value_size: int) -> tuple[bytes, bytes]:
    key = b"user-%06d" % (i % 100_000)
    head = b"%010d:" % i
    value = head + b"x" * max(0, value_size - len(head))
    return key, value[:value_size] if value_size >= len(head) else value


def record_crc(key: bytes | None, value: bytes | None) -> int:
    return zlib.crc32(value or b"", zlib.crc32(key or b""))


class _Progress:
    def __init__(self, total: int, out: IO[str]) -> None:
        self.total = total
        self.out = out
        self.tty = out.isatty()
        self.started = time.perf_counter()
        self.last = 0.0
        self.next_line_pct = 10

    def update(self, done: int, force: bool = False) -> None:
        now = time.perf_counter()
        if not force and now - self.last < 0.2:
            return
        self.last = now
        rate = done / max(now - self.started, 1e-9)
        pct = 100 * done // max(self.total, 1)
        if self.tty:
            bar = "#" * (pct // 4) + "." * (25 - pct // 4)
            self.out.write(f"\r[{bar}] {pct:3d}% {done:,}/{self.total:,} records {rate:,.0f}/s")
            self.out.flush()
        elif pct >= self.next_line_pct or force:
            self.next_line_pct = pct + 10
            print(f"{pct}% {done:,}/{self.total:,} records {rate:,.0f}/s", file=self.out)

    def finish(self) -> None:
        self.update(self.total, force=True)
        if self.tty:
            self.out.write("\n")


@contextlib.contextmanager
def _cluster(args: argparse.Namespace, err: IO[str]) -> Iterator[str]:
    """The bootstrap servers: the given ones, or an embedded cluster in a child process.

    The cluster runs in its own process so that the producer measured here does not share
    its interpreter lock with the brokers.
    """
    if args.bootstrap_server:
        yield args.bootstrap_server
        return
    from kclient.testing.broker_process import broker_process

    with broker_process("--brokers", str(args.brokers), "--no-auto-create-topics") as cluster:
        print(
            f"embedded cluster of {args.brokers} brokers at {cluster.bootstrap_servers}", file=err
        )
        yield cluster.bootstrap_servers


def run(args: argparse.Namespace, out: IO[str], err: IO[str]) -> int:
    from kclient import KafkaProducer

    with _cluster(args, err) as bootstrap:
        reader = ClusterReader(bootstrap, client_id="kclient-demo-verify")
        try:
            created = reader.create_topic(args.topic, args.partitions, args.replication_factor)
            print(
                f"topic {args.topic!r} {'created' if created else 'exists'} "
                f"with {len(reader.leaders(args.topic))} partitions",
                file=err,
            )
            starts = reader.end_offsets(args.topic)
            tally = _Tally()
            progress = _Progress(args.records, err)
            producer: Any = KafkaProducer(
                {
                    "bootstrap.servers": bootstrap,
                    "client.id": "kclient-demo",
                    "linger.ms": args.linger_ms,
                    "batch.size": args.batch_size,
                    "compression.type": args.compression,
                    "acks": args.acks,
                }
            )
            started = time.perf_counter()
            sent_bytes = 0
            sent_sum = 0
            try:
                for i in range(args.records):
                    key, value = record_for(i, args.value_size)
                    sent_bytes += len(key) + len(value)
                    sent_sum = (sent_sum + record_crc(key, value)) & 0xFFFFFFFFFFFFFFFF
                    callback = (
                        tally.timed(time.perf_counter_ns())
                        if i % LATENCY_SAMPLE_EVERY == 0
                        else tally.ack
                    )
                    producer.send(args.topic, value=value, key=key, callback=callback)
                    if i & 0x3FF == 0:
                        progress.update(i)
                producer.flush()
                elapsed = time.perf_counter() - started
                progress.finish()
                metrics = producer.metrics()
            finally:
                producer.close()
            ends = reader.end_offsets(args.topic)
            read_count = 0
            read_sum = 0
            for partition, end in sorted(ends.items()):
                for rec in reader.read(args.topic, partition, starts.get(partition, 0), end):
                    read_count += 1
                    read_sum = (read_sum + record_crc(rec.key, rec.value)) & 0xFFFFFFFFFFFFFFFF
        finally:
            reader.close()

    p50, p99, pmax = percentiles(tally.latencies_us, (0.5, 0.99, 1.0))
    ok = (
        tally.errors == 0
        and tally.acked == args.records
        and read_count == tally.acked
        and read_sum == sent_sum
    )
    rows = [
        ("records sent", f"{args.records:,}"),
        ("records acknowledged", f"{tally.acked:,}"),
        ("records read back", f"{read_count:,}"),
        ("checksum", "match" if read_sum == sent_sum else "MISMATCH"),
        ("records/s", f"{args.records / elapsed:,.0f}"),
        ("MB/s", f"{sent_bytes / elapsed / 1e6:,.1f}"),
        ("send→ack p50", f"{p50 / 1000:,.1f} ms"),
        ("send→ack p99", f"{p99 / 1000:,.1f} ms"),
        ("send→ack max", f"{pmax / 1000:,.1f} ms"),
        ("partitions used", f"{len(tally.partitions)} of {args.partitions}"),
        ("retries", f"{int(metrics.get('record-retry-total', 0)):,}"),
        ("errors", f"{tally.errors:,}"),
        ("result", "OK" if ok else "FAILED: records were lost or changed"),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"| {'kclient demo'.ljust(width)} | {'value':>22} |", file=out)
    print(f"|{'-' * (width + 2)}|{'-' * 24}|", file=out)
    for name, cell in rows:
        print(f"| {name.ljust(width)} | {cell:>22} |", file=out)
    if tally.first_error:
        print(f"first error: {tally.first_error}", file=err)
    return 0 if ok else 1


def _at_least(low: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            number = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if number < low:
            raise argparse.ArgumentTypeError(f"must be {low} or more, got {number}")
        return number

    return parse


DESCRIPTION = (
    "The main job, end to end: starts an embedded 3-broker cluster (or uses "
    "--bootstrap-server), creates a topic with 6 partitions, produces keyed records with a "
    "progress line, reads every record back through Fetch to check their count and checksum, "
    "and prints a summary. Exits 1 if any record was lost or changed."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap-server",
        metavar="HOST:PORT[,...]",
        help="run against this cluster instead of an embedded one",
    )
    p.add_argument(
        "--records",
        type=_at_least(0),
        default=1_000_000,
        metavar="N",
        help="records to produce (default: %(default)s)",
    )
    p.add_argument(
        "--value-size",
        type=_at_least(0),
        default=100,
        metavar="BYTES",
        help="bytes per value (default: %(default)s)",
    )
    p.add_argument("--topic", default="kclient-demo", help="topic name (default: %(default)s)")
    p.add_argument(
        "--partitions",
        type=_at_least(1),
        default=6,
        metavar="N",
        help="partitions of the topic (default: %(default)s)",
    )
    p.add_argument(
        "--replication-factor",
        type=_at_least(1),
        default=1,
        metavar="N",
        help="copies of each partition (default: %(default)s)",
    )
    p.add_argument(
        "--brokers",
        type=_at_least(1),
        default=3,
        metavar="N",
        help="brokers of the embedded cluster (default: %(default)s)",
    )
    p.add_argument(
        "--linger-ms",
        type=_at_least(0),
        default=5,
        metavar="MS",
        help="producer linger.ms (default: %(default)s)",
    )
    p.add_argument(
        "--batch-size",
        type=_at_least(1),
        default=256 * 1024,
        metavar="BYTES",
        help="producer batch.size (default: %(default)s)",
    )
    p.add_argument(
        "--acks",
        default="all",
        choices=("all", "-1", "0", "1"),
        help="producer acks (default: %(default)s)",
    )
    p.add_argument(
        "--compression",
        default="none",
        choices=COMPRESSION_TYPES,
        help="producer compression.type (default: %(default)s)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="kclient demo", description=DESCRIPTION)
    add_arguments(p)
    return run(p.parse_args(argv), sys.stdout, sys.stderr)
