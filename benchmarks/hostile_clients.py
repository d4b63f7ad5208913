"""What hostile or broken clients cost the embedded broker: its memory, and an honest
producer's latency, while they run.

    .venv/bin/python benchmarks/hostile_clients.py [--seconds 5] [--attackers 8] [--quotas]

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
* *connection churn*: connect, send half a request header, close;
* *produce flood*: on one connection per thread, tiny Produce requests one after another
  (each sent once the last is answered, ``throttle_time_ms`` ignored);
* *metadata flood*: the same with Metadata requests for every topic;
* *fetch loop*: the same with Fetch requests reading the honest producer's partition from
  offset 0 (up to 50 MB each).

With ``--quotas`` every case runs twice, against a broker without quotas and one with
default quotas for every client id (``QUOTA_FLAGS``: 10 % of a thread's time, 1 MB/s of
Produce, 5 MB/s of Fetch), and the table gets a column saying which.

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
from kclient.protocol import ApiKey  # noqa: E402
from kclient.protocol.frame import encode_request  # noqa: E402
from kclient.testing import hostile  # noqa: E402
from kclient.testing.broker_process import broker_process  # noqa: E402
from kclient.testing.hostile import produce_request, read_frame  # noqa: E402


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


#: the broker flags of ``--quotas``: default quotas for every client id
QUOTA_FLAGS = (
    "--quota-request-percentage",
    "10",
    "--quota-producer-byte-rate",
    "1000000",
    "--quota-consumer-byte-rate",
    "5000000",
)


def flood_loop(
    frame_for: Callable[[str], bytes],
) -> Callable[[tuple[str, int], str, threading.Event], int]:
    """One connection sending the same request again as soon as it is answered
    (reconnecting if the broker closes it)."""

    def run(address: tuple[str, int], topic: str, stop: threading.Event) -> int:
        frame = frame_for(topic)
        sent = 0
        while not stop.is_set():
            sent += _flood_one_connection(address, frame, stop)
        return sent

    return run


def _flood_one_connection(address: tuple[str, int], frame: bytes, stop: threading.Event) -> int:
    sent = 0
    try:
        with socket.create_connection(address, timeout=10) as sock:
            while not stop.is_set():
                sock.sendall(frame)
                read_frame(sock)
                sent += 1
    except OSError:
        time.sleep(0.01)
    return sent


def request_frame(api_key: int, version: int, body: dict[str, Any]) -> bytes:
    return b"".join(encode_request(api_key, version, 1, "hostile", body))


def fetch_body(topic: str) -> dict[str, Any]:
    """Fetch v12 of the whole partition 0 of ``topic``, up to 50 MB, at once."""
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 50 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": 0,
                        "current_leader_epoch": -1,
                        "fetch_offset": 0,
                        "log_start_offset": -1,
                        "partition_max_bytes": 50 << 20,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


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
        # an empty batch each time: refused cheaply, so the cost is the request itself
        "produce flood": flood_loop(lambda _topic: produce_request("flood-target", b"")),
        "metadata flood": flood_loop(
            lambda _topic: request_frame(
                ApiKey.METADATA, 12, {"topics": None, "allow_auto_topic_creation": False}
            )
        ),
        "fetch loop": flood_loop(lambda t: request_frame(ApiKey.FETCH, 12, fetch_body(t))),
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


def run_case(name: str, seconds: float, attackers: int, quotas: bool) -> dict[str, object]:
    topic = f"honest-{uuid.uuid4().hex[:6]}"
    ctx = multiprocessing.get_context("fork")
    with broker_process(*(QUOTA_FLAGS if quotas else ())) as broker:
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
        "quotas": quotas,
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
    parser.add_argument(
        "--quotas",
        action="store_true",
        help="run every case without and with default quotas (QUOTA_FLAGS)",
    )
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    args = parser.parse_args()
    names = args.cases.split(",") if args.cases else list(build_cases("t"))
    modes = (False, True) if args.quotas else (False,)
    rows = [
        run_case(name, args.seconds, args.attackers, quotas) for name in names for quotas in modes
    ]
    print(
        f"\nembedded broker (own process); honest producer: 100 B, acks=all, linger 0, one "
        f"send at a time for {args.seconds:g} s; {args.attackers} attacker threads\n"
    )
    if args.quotas:
        print(f"quotas: kclient-broker {' '.join(QUOTA_FLAGS)}\n")
    print(
        "| attack | quotas | broker peak RSS MB | broker RSS at end MB | honest sends/s | "
        "p50 µs | p99 µs | max ms | read all back s | bad requests sent | broker alive |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(
            f"| {r['case']} | {'yes' if r['quotas'] else 'no'} | {r['peak_mb']:.0f} | "
            f"{r['end_mb']:.0f} | {r['sends_s']:,.0f} | "
            f"{r['p50_us']:,.0f} | {r['p99_us']:,.0f} | {r['max_ms']:,.0f} | "
            f"{r['fetch_s']:.2f} | {r['attacks']:,} | "
            f"{'yes' if r['alive'] else 'NO'} |"
        )
    return 0 if all(r["alive"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
