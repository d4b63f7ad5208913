"""What hostile or broken clients cost the embedded broker: its memory, and an honest
producer's latency, while they run.

    .venv/bin/python benchmarks/hostile_clients.py [--seconds 5] [--attackers 8]

For each case a fresh ``python -m kclient.broker`` (in-memory logs, its own process) serves
one honest kclient producer that sends 100-byte records one at a time (acks=all, linger 0,
waiting for each acknowledgement) for ``--seconds``, while ``--attackers`` threads of another
process do the case's bad thing to the same broker over and over:

* *none*: nothing (the baseline);
* *stalled prefixes*: announce a 100 MiB request, send 1000 bytes, stall;
* *bad batches*: Produce requests whose batch lies about its record count, has bytes after
  its last record, or says gzip but is not (``kclient.testing.hostile``);
* *zstd bombs*: Produce requests of a 32 KiB zstd batch that expands to 1 GiB;
* *tiny entries*: 6 MB Produce requests of 1,000,000 empty partition entries (past
  ``max.request.items``);
* *connection churn*: connect, send half a request header, close.

It prints, per case: the broker's peak RSS (``VmHWM``) and its RSS at the end, the honest
producer's acknowledged sends per second and its send→ack p50/p99/max, the seconds a
confluent-kafka consumer takes to fetch everything it wrote (the attack still running),
how many bad requests the attackers got through, and whether the broker is still alive.
Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import multiprocessing
import socket
import statistics
import struct
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kclient import KafkaProducer  # noqa: E402
from kclient.testing import hostile  # noqa: E402
from kclient.testing.broker_process import broker_process  # noqa: E402
from kclient.testing.hostile import produce_request  # noqa: E402


def status_mb(pid: int, field: str) -> float:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def send_and_read(address: tuple[str, int], frame: bytes, *, read: bool = True) -> None:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(frame)
        if read:
            sock.recv(65536)


def attempt(address: tuple[str, int], frame: bytes, *, read: bool) -> int:
    """1 once the frame went (the broker may close the connection on it), else 0."""
    try:
        send_and_read(address, frame, read=read)
    except OSError:
        return 0
    return 1


def stalled_prefix(address: tuple[str, int], stop: threading.Event) -> int:
    with socket.create_connection(address, timeout=10) as sock:
        sock.sendall(struct.pack(">i", 100 * 1024 * 1024) + b"\x00" * 1000)
        stop.wait()
    return 1


def attack_loop(
    frames: list[bytes], *, read: bool = True
) -> Callable[[tuple[str, int], str, threading.Event], int]:
    def run(address: tuple[str, int], topic: str, stop: threading.Event) -> int:
        sent = 0
        while not stop.is_set():
            sent += sum(attempt(address, frame, read=read) for frame in frames)
        return sent

    return run


def build_cases(
    topic: str,
) -> dict[str, Callable[[tuple[str, int], str, threading.Event], int] | None]:
    return {
        "none": None,
        "stalled prefixes": lambda address, _topic, stop: stalled_prefix(address, stop),
        "bad batches": attack_loop(
            [
                produce_request(topic, hostile.count_mismatch_batch()),
                produce_request(topic, hostile.trailing_bytes_batch()),
                produce_request(topic, hostile.bad_gzip_batch()),
            ]
        ),
        "zstd bombs": attack_loop([produce_request(topic, hostile.zstd_bomb_batch())]),
        "tiny entries": attack_loop([produce_request(topic, None, 1_000_000)], read=False),
        "connection churn": attack_loop([b"\x00\x00\x00\x20\x00\x03"], read=False),
    }


def honest(bootstrap: str, topic: str, seconds: float) -> list[float]:
    latencies: list[float] = []
    with KafkaProducer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        producer.send(topic, b"warm-up").result(30)
        value = b"v" * 100
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.perf_counter()
            producer.send(topic, value).result(30)
            latencies.append(time.perf_counter() - start)
    return latencies


def attackers_main(  # noqa: PLR0917 (a multiprocessing target's positional args)
    name: str, address: tuple[str, int], topic: str, threads: int, stop: Any, count: Any
) -> None:
    """The attacker process: ``threads`` threads running the case until ``stop`` is set."""
    attack = build_cases(topic)[name]
    assert attack is not None
    local_stop = threading.Event()

    def run() -> None:
        sent = attack(address, topic, local_stop)
        with count.get_lock():
            count.value += sent

    workers = [threading.Thread(target=run, daemon=True) for _ in range(threads)]
    for t in workers:
        t.start()
    stop.wait()
    local_stop.set()
    for t in workers:
        t.join(15)


def read_back_s(bootstrap: str, topic: str, n: int) -> float:
    """Seconds for a confluent-kafka consumer to fetch the topic's first ``n`` records."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"g-{uuid.uuid4()}",
            "enable.auto.commit": False,
        }
    )
    start = time.perf_counter()
    try:
        consumer.assign(
            [confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)]
        )
        seen = 0
        deadline = time.monotonic() + 60
        while seen < n and time.monotonic() < deadline:
            seen += sum(1 for m in consumer.consume(10_000, 0.2) if not m.error())
    finally:
        consumer.close()
    return time.perf_counter() - start


def run_case(name: str, seconds: float, attackers: int) -> dict[str, object]:
    topic = f"honest-{uuid.uuid4().hex[:6]}"
    ctx = multiprocessing.get_context("fork")
    with broker_process() as broker:
        host, port = broker.bootstrap_servers.rsplit(":", 1)
        address = (host, int(port))
        stop = ctx.Event()
        count = ctx.Value("q", 0)
        process = None
        if build_cases(topic)[name] is not None:  # attackers in a process of their own
            process = ctx.Process(
                target=attackers_main, args=(name, address, topic, attackers, stop, count)
            )
            process.start()
            time.sleep(0.5)  # let the attack start before the clock does
        latencies = honest(broker.bootstrap_servers, topic, seconds)
        fetch_s = read_back_s(broker.bootstrap_servers, topic, len(latencies) + 1)
        stop.set()
        if process is not None:
            process.join(20)
            if process.is_alive():
                process.kill()
                process.join(5)
        alive = broker.proc.poll() is None
        peak = status_mb(broker.pid, "VmHWM") if alive else float("nan")
        end = status_mb(broker.pid, "VmRSS") if alive else float("nan")
    latencies.sort()
    return {
        "case": name,
        "peak_mb": peak,
        "end_mb": end,
        "sends_s": len(latencies) / seconds,
        "p50_us": statistics.median(latencies) * 1e6,
        "p99_us": latencies[int(len(latencies) * 0.99)] * 1e6,
        "max_ms": latencies[-1] * 1e3,
        "fetch_s": fetch_s,
        "attacks": count.value,
        "alive": alive,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--attackers", type=int, default=8)
    args = parser.parse_args()
    rows = [run_case(name, args.seconds, args.attackers) for name in build_cases("t")]
    print(
        f"\nembedded broker (own process); honest producer: 100 B, acks=all, linger 0, one "
        f"send at a time for {args.seconds:g} s; {args.attackers} attacker threads\n"
    )
    print(
        "| attack | broker peak RSS MB | broker RSS at end MB | honest sends/s | p50 µs | "
        "p99 µs | max ms | read all back s | bad requests sent | broker alive |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['case']} | {r['peak_mb']:.0f} | {r['end_mb']:.0f} | {r['sends_s']:,.0f} | "
            f"{r['p50_us']:,.0f} | {r['p99_us']:,.0f} | {r['max_ms']:,.0f} | "
            f"{r['fetch_s']:.2f} | {r['attacks']:,} | "
            f"{'yes' if r['alive'] else 'NO'} |"
        )
    return 0 if all(r["alive"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
