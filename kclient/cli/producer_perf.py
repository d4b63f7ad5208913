"""``kclient-producer-perf``: kafka-producer-perf-test.sh for kclient.

Same options and the same output lines as Kafka's ProducerPerformance, so scripts that
parse it keep working: a window line every 5 s and a final line with percentiles.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from kclient.cli.properties import load_properties, parse_pairs
from kclient.clock import SYSTEM_CLOCK, Clock
from kclient.errors import ConfigError, KafkaError

REPORTING_INTERVAL_MS = 5000
MAX_LATENCY_SAMPLES = 500_000


class Stats:
    """Kafka's ProducerPerformance.Stats: windows, totals and sampled latencies."""

    def __init__(
        self,
        num_records: int,
        out: IO[str],
        clock: Clock = SYSTEM_CLOCK,
        reporting_interval_ms: int = REPORTING_INTERVAL_MS,
    ) -> None:
        self.clock = clock
        self.out = out
        self.start_ms = clock.monotonic_ms()
        self.window_start_ms = self.start_ms
        self.reporting_interval_ms = reporting_interval_ms
        self.sampling = max(1, num_records // min(max(num_records, 1), MAX_LATENCY_SAMPLES))
        self.latencies: list[int] = []
        self.count = 0
        self.bytes = 0
        self.total_latency_ms = 0
        self.max_latency_ms = 0
        self.window_count = 0
        self.window_bytes = 0
        self.window_total_latency_ms = 0
        self.window_max_latency_ms = 0
        self.lock = threading.Lock()

    def record(self, iteration: int, latency_ms: int, size: int, now_ms: int) -> None:
        with self.lock:
            self.count += 1
            self.bytes += size
            self.total_latency_ms += latency_ms
            self.max_latency_ms = max(self.max_latency_ms, latency_ms)
            self.window_count += 1
            self.window_bytes += size
            self.window_total_latency_ms += latency_ms
            self.window_max_latency_ms = max(self.window_max_latency_ms, latency_ms)
            if iteration % self.sampling == 0:
                self.latencies.append(latency_ms)
            if now_ms - self.window_start_ms >= self.reporting_interval_ms:
                self._print_window(now_ms)
                self.window_start_ms = now_ms
                self.window_count = 0
                self.window_bytes = 0
                self.window_total_latency_ms = 0
                self.window_max_latency_ms = 0

    def callback(self, iteration: int, start_ms: int, size: int) -> Callable[[Any, Any], None]:
        def done(_metadata: Any, exc: BaseException | None) -> None:
            if exc is not None:
                print(f"error: {exc}", file=sys.stderr)
                return
            now_ms = self.clock.monotonic_ms()
            self.record(iteration, now_ms - start_ms, size, now_ms)

        return done

    def _print_window(self, now_ms: int) -> None:
        elapsed_ms = max(now_ms - self.window_start_ms, 1)
        rate = 1000.0 * self.window_count / elapsed_ms
        mb = 1000.0 * self.window_bytes / elapsed_ms / (1024.0 * 1024.0)
        avg = self.window_total_latency_ms / max(self.window_count, 1)
        print(
            f"{self.window_count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
            f"{avg:.1f} ms avg latency, {float(self.window_max_latency_ms):.1f} ms max latency.",
            file=self.out,
            flush=True,
        )

    def print_total(self) -> None:
        elapsed_ms = max(self.clock.monotonic_ms() - self.start_ms, 1)
        rate = 1000.0 * self.count / elapsed_ms
        mb = 1000.0 * self.bytes / elapsed_ms / (1024.0 * 1024.0)
        avg = self.total_latency_ms / max(self.count, 1)
        p50, p95, p99, p999 = percentiles(self.latencies, (0.5, 0.95, 0.99, 0.999))
        print(
            f"{self.count} records sent, {rate:f} records/sec ({mb:.2f} MB/sec), "
            f"{avg:.2f} ms avg latency, {float(self.max_latency_ms):.2f} ms max latency, "
            f"{p50} ms 50th, {p95} ms 95th, {p99} ms 99th, {p999} ms 99.9th.",
            file=self.out,
            flush=True,
        )


def percentiles(latencies: list[int], points: Sequence[float]) -> list[int]:
    """Kafka's way: sort the samples and index at ``int(len * p)``."""
    if not latencies:
        return [0 for _ in points]
    ordered = sorted(latencies)
    return [ordered[min(int(len(ordered) * p), len(ordered) - 1)] for p in points]


class Throttler:
    """Kafka's ThroughputThrottler: sleep so that sends average ``target`` per second."""

    def __init__(self, target_per_s: float, start_ms: int, clock: Clock = SYSTEM_CLOCK) -> None:
        self.target = target_per_s
        self.start_ms = start_ms
        self.clock = clock

    def throttle_if_needed(self, sent: int) -> None:
        if self.target <= 0:
            return
        elapsed_ms = self.clock.monotonic_ms() - self.start_ms
        ahead_ms = int(sent * 1000 / self.target) - elapsed_ms
        if ahead_ms > 0:
            self.clock.sleep_ms(ahead_ms)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="kclient-producer-perf",
        description="Measure producer throughput and latency (kafka-producer-perf-test.sh).",
    )
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True)
    size = p.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int)
    size.add_argument("--payload-file")
    p.add_argument("--payload-delimiter", default="\\n")
    p.add_argument(
        "--throughput", type=float, required=True, help="records/s; -1 for no throttling"
    )
    p.add_argument("--producer-props", nargs="+", metavar="K=V", default=[], action="extend")
    p.add_argument("--producer.config", dest="producer_config")
    p.add_argument("--print-metrics", action="store_true")
    return p


def load_payloads(path: str, delimiter: str) -> list[bytes]:
    separator = delimiter.encode().decode("unicode_escape").encode("utf-8")
    try:
        data = Path(path).read_bytes()  # payloads go byte for byte, UTF-8 or not
    except OSError as exc:
        raise ConfigError(f"--payload-file {path!r} cannot be read: {exc.strerror or exc}") from exc
    payloads = [p for p in data.split(separator) if p]
    if not payloads:
        raise ConfigError(f"--payload-file {path!r} holds no payloads")
    return payloads


def run(args: argparse.Namespace, out: IO[str]) -> int:
    from kclient import KafkaProducer

    if args.num_records <= 0:
        raise ConfigError("--num-records must be positive")
    props: dict[str, object] = {}
    if args.producer_config:
        props.update(load_properties(args.producer_config))
    props.update(parse_pairs(args.producer_props, "--producer-props"))
    if "bootstrap.servers" not in props:
        raise ConfigError("--producer-props bootstrap.servers=HOST:PORT is required")
    rng = random.Random(0)
    if args.record_size is not None:
        if args.record_size < 0:
            raise ConfigError("--record-size must not be negative")
        fixed: bytes | None = bytes(rng.randrange(65, 91) for _ in range(args.record_size))
        payloads: list[bytes] = []
    else:
        fixed = None
        payloads = load_payloads(args.payload_file, args.payload_delimiter)
    producer: Any = KafkaProducer(props)
    stats = Stats(args.num_records, out)
    throttler = Throttler(args.throughput, stats.start_ms)
    clock = SYSTEM_CLOCK
    try:
        for i in range(args.num_records):
            value = fixed if fixed is not None else payloads[rng.randrange(len(payloads))]
            send_ms = clock.monotonic_ms()
            producer.send(args.topic, value=value, callback=stats.callback(i, send_ms, len(value)))
            throttler.throttle_if_needed(i + 1)
        producer.flush()
        stats.print_total()
        if args.print_metrics:
            for name, metric in sorted(producer.metrics().items()):
                print(f"{name:<60} : {metric}", file=out)
    finally:
        producer.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run(args, sys.stdout)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KafkaError as exc:  # no broker, a refused topic, a fatal producer error
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
