"""Producer throughput and latency: kclient, kafka-python, aiokafka and confluent-kafka.

    .venv/bin/python benchmarks/producer_perf.py [--messages 1000000] [--size 100]
                                                 [--latency-sends 1000] [--clients ...]

One tansu broker (in-memory storage, 127.0.0.1) serves every client in one run. Each
client runs in its own Python process, so CPU seconds are that client's alone
(``getrusage``: user + system, all threads). For each codec (none, then lz4):
``--messages`` records of ``--size`` bytes to a fresh one-partition topic, acks=1,
linger 5 ms, 1 MiB batches, idempotence off (``--defaults``: each client at its own
defaults instead, only ``bootstrap.servers`` set), one ``send``/``produce`` call per record
(``--callback``: with a delivery callback each, counted), in ``--rounds`` rounds where the
clients take turns
(``kclient send_batch``: ``send_batch`` calls of 10,000 records; ``aiokafka send_batch``:
its ``create_batch``/``send_batch`` path, 1 MiB batches);
the clock runs from the first send to the end of flush. Every record is then read back
with a confluent-kafka consumer (``assign``) and checked: each sequence number exactly
once. Then ``--latency-sends`` sequential sends with linger 0, each waiting for its
acknowledgement, give send→ack latency percentiles, in ``--latency-rounds`` rounds where
the clients take turns (the machine's speed drifts; each client's p50 is also divided by
confluent-kafka's of the same round). Two rows use no client at all, as floors: one thread
writing a pre-encoded ProduceRequest and blocking for the answer, and the same request
handed to a second thread through a wakeup fd, as any Python producer with an I/O thread
must. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CLIENTS = [
    "kclient",
    "kclient send_batch",
    "kafka-python",
    "aiokafka",
    "aiokafka send_batch",
    "confluent-kafka",
]
CODECS = ["none", "lz4"]
FLOORS = ["floor: no client, one thread", "floor: no client, two Python threads"]
# The target: p50 <= 300 µs where confluent-kafka measured 178 µs on this machine.
TARGET_RATIO = 300 / 178


def payload(i: int, size: int) -> bytes:
    head = b"%010d|" % i
    return head + b"x" * max(size - len(head), 0)


def cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# ---- throughput, one function per client (run in a worker process) ------------------


class Options(NamedTuple):
    """How a throughput run sets its client up.

    ``defaults``: only ``bootstrap.servers`` (and the codec) is set, every other setting is
    the client's own default (kclient: Java's; confluent-kafka: librdkafka's); otherwise
    acks=1, linger 5 ms, 1 MiB batches, idempotence off for every client. ``callback``:
    every record gets a delivery callback (each client's own form) that counts the
    successes; the run fails unless it counted every record."""

    defaults: bool = False
    callback: bool = False


class Delivered:
    """The per-record delivery callback of ``--callback`` runs: counts what succeeded.
    One instance per run, the same work for every client (a call, a test, an add)."""

    def __init__(self) -> None:
        self.count = 0

    def kclient(self, metadata: object, error: object) -> None:
        if error is None:
            self.count += 1

    def confluent(self, error: object, message: object) -> None:
        if error is None:
            self.count += 1

    def future(self, future: Any) -> None:
        if future.exception() is None:
            self.count += 1

    def value(self, _metadata: object) -> None:
        self.count += 1

    def check(self, n: int) -> None:
        if self.count != n:
            raise RuntimeError(f"{self.count} of {n} delivery callbacks reported success")


def kclient_producer(bootstrap: str, topic: str, codec: str, *, opts: Options) -> Any:
    """The throughput runs' kclient producer, with the topic's metadata already in hand."""
    from kclient import KafkaProducer

    tuned: dict[str, object] = {
        "acks": 1,
        "linger_ms": 5,
        "batch_size": 1 << 20,
        "enable_idempotence": False,
    }
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=codec,
        **({} if opts.defaults else tuned),
    )
    producer.partitions_for(topic)  # metadata before the clock starts, as for the others
    return producer


def run_kclient(
    bootstrap: str, topic: str, n: int, size: int, codec: str, *, opts: Options
) -> None:
    values = [payload(i, size) for i in range(n)]
    producer = kclient_producer(bootstrap, topic, codec, opts=opts)
    if not opts.callback:
        _timed(lambda: _send_each(producer.send, topic, values), producer.flush, producer.close)
        return
    delivered = Delivered()

    def send_all() -> None:
        send, callback = producer.send, delivered.kclient
        for v in values:
            send(topic, v, callback=callback)

    _timed(send_all, producer.flush, producer.close)
    delivered.check(n)


def run_kclient_batch(
    bootstrap: str, topic: str, n: int, size: int, codec: str, *, opts: Options
) -> None:
    """kclient's ``send_batch``: the same records in calls of 10,000."""
    values = [payload(i, size) for i in range(n)]
    producer = kclient_producer(bootstrap, topic, codec, opts=opts)

    def send_all() -> None:
        for start in range(0, n, 10_000):
            producer.send_batch(topic, values[start : start + 10_000])

    _timed(send_all, producer.flush, producer.close)


def _send_each(send: Callable[..., object], topic: str, values: list[bytes]) -> None:
    for v in values:
        send(topic, v)


def run_kafka_python(
    bootstrap: str, topic: str, n: int, size: int, codec: str, *, opts: Options
) -> None:
    from kafka import KafkaProducer

    values = [payload(i, size) for i in range(n)]
    tuned: dict[str, object] = {
        "acks": 1,
        "linger_ms": 5,
        "batch_size": 1 << 20,
        "max_request_size": 2 << 20,
    }
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        **({} if opts.defaults else tuned),
    )
    producer.partitions_for(topic)
    if not opts.callback:
        _timed(lambda: _send_each(producer.send, topic, values), producer.flush, producer.close)
        return
    delivered = Delivered()

    def send_all() -> None:
        send, callback = producer.send, delivered.value
        for v in values:
            send(topic, v).add_callback(callback)

    _timed(send_all, producer.flush, producer.close)
    delivered.check(n)


async def aiokafka_producer(bootstrap: str, topic: str, codec: str, *, opts: Options) -> Any:
    """The throughput runs' aiokafka producer, started, with the topic's metadata."""
    from aiokafka import AIOKafkaProducer

    tuned: dict[str, object] = {
        "acks": 1,
        "linger_ms": 5,
        "max_batch_size": 1 << 20,
        "max_request_size": 2 << 20,
        "enable_idempotence": False,
    }
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        **({} if opts.defaults else tuned),
    )
    await producer.start()
    await producer.partitions_for(topic)
    return producer


def run_aiokafka(
    bootstrap: str, topic: str, n: int, size: int, codec: str, *, opts: Options
) -> None:

    values = [payload(i, size) for i in range(n)]
    delivered = Delivered()

    async def main() -> None:
        producer = await aiokafka_producer(bootstrap, topic, codec, opts=opts)
        start_s, start_cpu = time.perf_counter(), cpu_s()
        if opts.callback:
            for v in values:
                (await producer.send(topic, v)).add_done_callback(delivered.future)
        else:
            for v in values:
                await producer.send(topic, v)
        await producer.flush()
        await asyncio.sleep(0)  # the done callbacks of the last batch
        _report(start_s, start_cpu)
        await producer.stop()

    asyncio.run(main())
    if opts.callback:
        delivered.check(n)


def run_aiokafka_batch(
    bootstrap: str, topic: str, n: int, size: int, codec: str, *, opts: Options
) -> None:
    """aiokafka's ``create_batch``/``send_batch`` path: records appended to a BatchBuilder
    until it is full, each full batch sent to partition 0."""

    values = [payload(i, size) for i in range(n)]

    async def main() -> None:
        producer = await aiokafka_producer(bootstrap, topic, codec, opts=opts)
        start_s, start_cpu = time.perf_counter(), cpu_s()
        futures = []
        batch = producer.create_batch()
        for v in values:
            if batch.append(key=None, value=v, timestamp=None) is None:
                futures.append(await producer.send_batch(batch, topic, partition=0))
                batch = producer.create_batch()
                batch.append(key=None, value=v, timestamp=None)
        futures.append(await producer.send_batch(batch, topic, partition=0))
        await asyncio.gather(*futures)
        _report(start_s, start_cpu)
        await producer.stop()

    asyncio.run(main())


def run_confluent(
    bootstrap: str, topic: str, n: int, size: int, codec: str, *, opts: Options
) -> None:
    import confluent_kafka

    values = [payload(i, size) for i in range(n)]
    settings: dict[str, object] = {"bootstrap.servers": bootstrap, "compression.type": codec}
    if not opts.defaults:
        settings.update(
            {
                "acks": 1,
                "linger.ms": 5,
                "batch.size": 1 << 20,
                "enable.idempotence": False,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
    producer = confluent_kafka.Producer(settings)
    producer.list_topics(topic, timeout=30)
    delivered = Delivered()
    extra = {"on_delivery": delivered.confluent} if opts.callback else {}

    def produce_all() -> None:
        produce, poll = producer.produce, producer.poll
        for v in values:
            while True:
                try:
                    produce(topic, v, **extra)
                    break
                except BufferError:  # queue.buffering.max.messages: serve deliveries, retry
                    poll(0.005)
            poll(0)

    _timed(produce_all, lambda: producer.flush(300), lambda: None)
    if opts.callback:
        delivered.check(n)


def _timed(
    send_all: Callable[[], object], flush: Callable[[], object], close: Callable[[], object]
) -> None:
    start_s, start_cpu = time.perf_counter(), cpu_s()
    send_all()
    flush()
    _report(start_s, start_cpu)
    close()


def _report(start_s: float, start_cpu: float) -> None:
    print(
        json.dumps({"seconds": time.perf_counter() - start_s, "cpu": cpu_s() - start_cpu}),
        flush=True,
    )


# ---- latency -----------------------------------------------------------------------------


def latency_kclient(bootstrap: str, topic: str, sends: int, size: int) -> list[float]:
    from kclient import KafkaProducer

    with KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=0, enable_idempotence=False
    ) as p:
        return _sequential(lambda v: p.send(topic, v).result(30), sends, size)


def latency_kafka_python(bootstrap: str, topic: str, sends: int, size: int) -> list[float]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
    try:
        return _sequential(lambda v: producer.send(topic, v).get(30), sends, size)
    finally:
        producer.close()


def latency_aiokafka(bootstrap: str, topic: str, sends: int, size: int) -> list[float]:
    from aiokafka import AIOKafkaProducer

    async def main() -> list[float]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=0)
        await producer.start()
        try:
            out = []
            for i in range(sends + 100):
                start = time.perf_counter_ns()
                await producer.send_and_wait(topic, payload(i, size))
                if i >= 100:
                    out.append((time.perf_counter_ns() - start) / 1000)
            return out
        finally:
            await producer.stop()

    return asyncio.run(main())


def latency_confluent(bootstrap: str, topic: str, sends: int, size: int) -> list[float]:
    import confluent_kafka

    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 0, "enable.idempotence": False}
    )

    def one(value: bytes) -> None:
        done: list[int] = []
        producer.produce(topic, value, on_delivery=lambda err, msg: done.append(1))
        while not done:
            producer.poll(1)

    return _sequential(one, sends, size)


def _sequential(send_and_wait: Callable[[bytes], object], sends: int, size: int) -> list[float]:
    out = []
    for i in range(sends + 100):  # the first 100 warm up connections and caches
        start = time.perf_counter_ns()
        send_and_wait(payload(i, size))
        if i >= 100:
            out.append((time.perf_counter_ns() - start) / 1000)
    return out


# ---- latency floors: no producer at all ---------------------------------------------------


def _produce_frame(topic: str, size: int) -> bytearray:
    """One pre-encoded ProduceRequest (v9, acks=1) carrying one record of ``size`` bytes."""
    from kclient.protocol import ApiKey
    from kclient.protocol.frame import encode_request, frame_bytes
    from kclient.record.builder import RecordBatchBuilder

    builder = RecordBatchBuilder()
    builder.append(int(time.time() * 1000), None, payload(0, size), ())
    body = {
        "transactional_id": None,
        "acks": 1,
        "timeout_ms": 30_000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": builder.build()}]}
        ],
    }
    return bytearray(frame_bytes(encode_request(ApiKey.PRODUCE, 9, 0, "floor", body)))


class _FrameReader:
    """Reads whole response frames from a socket; checks the first one for a produce error."""

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.buf = bytearray()
        self.checked = False

    def frames(self) -> int:
        """Reads what the socket has; returns how many whole frames completed."""
        chunk = self.sock.recv(65536)
        if not chunk:
            raise RuntimeError("the broker closed the connection")
        self.buf += chunk
        count = 0
        while len(self.buf) >= 4:
            end = 4 + int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < end:
                break
            if not self.checked:
                self._check(bytes(self.buf[4:end]))
            del self.buf[:end]
            count += 1
        return count

    def _check(self, frame: bytes) -> None:
        from kclient.protocol import ApiKey
        from kclient.protocol.frame import decode_response

        _, body = decode_response(ApiKey.PRODUCE, 9, frame)
        error = body["responses"][0]["partition_responses"][0]["error_code"]
        if error:
            raise RuntimeError(f"the broker refused the floor's produce request: error {error}")
        self.checked = True


def latency_floor_one_thread(bootstrap: str, topic: str, sends: int, size: int) -> list[float]:
    """No client: one thread writes a pre-encoded ProduceRequest and blocks for the answer."""
    import socket

    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    frame = _produce_frame(topic, size)
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = _FrameReader(sock)
        correlation = 0

        def one(_value: bytes) -> None:
            nonlocal correlation
            correlation += 1
            frame[8:12] = correlation.to_bytes(4, "big")
            sock.sendall(frame)
            while not reader.frames():
                pass

        return _sequential(one, sends, size)


def latency_floor_two_threads(bootstrap: str, topic: str, sends: int, size: int) -> list[float]:
    """No client, but a producer's shape: the caller hands a pre-encoded ProduceRequest to
    an I/O thread (a wakeup fd, as kclient's Sender), which writes it, reads the answer and
    releases the caller's lock. The least any Python producer with an I/O thread pays."""
    import selectors
    import socket
    import threading

    from kclient.waker import Waker

    host, port = bootstrap.split(",", maxsplit=1)[0].rsplit(":", 1)
    frame = _produce_frame(topic, size)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setblocking(False)
    waker = Waker()
    selector = selectors.DefaultSelector()
    selector.register(waker.fileno(), selectors.EVENT_READ, None)
    selector.register(sock, selectors.EVENT_READ, sock)
    handoff: list[threading.Lock | None] = []
    handoff_lock = threading.Lock()
    reader = _FrameReader(sock)
    failure: list[BaseException] = []

    def io_thread() -> None:
        waiting: list[threading.Lock] = []
        correlation = 0
        try:
            while True:
                for key, _ in selector.select(1.0):
                    if key.data is None:
                        waker.drain()
                        with handoff_lock:
                            jobs = handoff[:]
                            handoff.clear()
                        for job in jobs:
                            if job is None:
                                return
                            correlation += 1
                            frame[8:12] = correlation.to_bytes(4, "big")
                            sock.sendall(frame)  # small: the socket buffer takes it whole
                            waiting.append(job)
                    else:
                        for _ in range(reader.frames()):
                            waiting.pop(0).release()
        except BaseException as exc:  # surfaced by the caller below
            failure.append(exc)
            for job in waiting:
                job.release()

    thread = threading.Thread(target=io_thread, daemon=True)
    thread.start()

    def one(_value: bytes) -> None:
        gate = threading.Lock()
        gate.acquire()
        with handoff_lock:
            handoff.append(gate)
        waker.wake()
        if not gate.acquire(timeout=30) or failure:
            raise RuntimeError(f"the floor's I/O thread failed: {failure}")

    try:
        return _sequential(one, sends, size)
    finally:
        with handoff_lock:
            handoff.append(None)
        waker.wake()
        thread.join(5)
        selector.close()
        sock.close()
        waker.close()


THROUGHPUT = {
    "kclient": run_kclient,
    "kclient send_batch": run_kclient_batch,
    "kafka-python": run_kafka_python,
    "aiokafka": run_aiokafka,
    "aiokafka send_batch": run_aiokafka_batch,
    "confluent-kafka": run_confluent,
}
LATENCY = {
    "kclient": latency_kclient,
    "kafka-python": latency_kafka_python,
    "aiokafka": latency_aiokafka,
    "confluent-kafka": latency_confluent,
    FLOORS[0]: latency_floor_one_thread,
    FLOORS[1]: latency_floor_two_threads,
}


# ---- the parent: broker, topics, verification, tables -------------------------------------


def verify(bootstrap: str, topic: str, n: int) -> str:
    """Read the partition back; 'all' if every sequence number arrived exactly once."""
    import confluent_kafka

    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"verify-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    seen = bytearray(n)
    count = duplicates = 0
    deadline = time.monotonic() + 300
    at_end = False
    try:
        while (count < n or not at_end) and time.monotonic() < deadline:
            messages = consumer.consume(10_000, 1.0)
            for message in messages:
                if message.error():
                    at_end = message.error().code() == confluent_kafka.KafkaError._PARTITION_EOF
                    continue
                at_end = False
                index = int(message.value()[:10])
                if seen[index]:
                    duplicates += 1
                seen[index] = 1
                count += 1
    finally:
        consumer.close()
    missing = n - sum(seen)
    if missing == 0 and duplicates == 0:
        return "all"
    return f"{missing} missing, {duplicates} duplicated"


def worker(args: argparse.Namespace) -> None:
    if args.mode == "throughput":
        opts = Options(defaults=args.defaults, callback=args.callback)
        THROUGHPUT[args.client](
            args.bootstrap, args.topic, args.messages, args.size, args.codec, opts=opts
        )
    else:
        lat = LATENCY[args.client](args.bootstrap, args.topic, args.latency_sends, args.size)
        print(json.dumps({"latencies": lat}), flush=True)


def run_worker(
    client: str, mode: str, topic: str, args: argparse.Namespace, *, bootstrap: str, codec: str
) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--worker",
        "--client", client,
        "--mode", mode,
        "--bootstrap", bootstrap,
        "--topic", topic,
        "--messages", str(args.messages),
        "--size", str(args.size),
        "--latency-sends", str(args.latency_sends),
        "--codec", codec,
        *(["--defaults"] if args.defaults else []),
        *(["--callback"] if args.callback else []),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1800, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"{client} {mode} failed:\n{done.stdout}\n{done.stderr}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


class _Embedded:
    """The embedded broker running in a child process (see kclient.testing.broker_process)."""

    def __init__(self, bootstrap_servers: str) -> None:
        self.bootstrap_servers = bootstrap_servers

    def create_topic(self, name: str, partitions: int) -> None:
        from kclient.cli.admin import ClusterReader

        reader = ClusterReader(self.bootstrap_servers)
        try:
            reader.create_topic(name, partitions)
        finally:
            reader.close()


@contextlib.contextmanager
def _broker(kind: str) -> Iterator[Any]:
    if kind == "tansu":
        from integration.peers import run_tansu

        with run_tansu() as tansu:
            yield tansu
        return
    from kclient.testing.broker_process import broker_process

    with broker_process() as broker:
        yield _Embedded(broker.bootstrap_servers)


def print_throughput(
    args: argparse.Namespace,
    rates: dict[tuple[str, str], list[float]],
    rows: dict[tuple[str, str], list[tuple[float, float, str]]],
) -> None:
    """The throughput table: the median over rounds, each round's rate, and the median
    over rounds of the rate / confluent-kafka's of the same round and codec."""
    setup = (
        "each client at its own defaults (only bootstrap.servers set)"
        if args.defaults
        else "acks=1, linger 5 ms, 1 MiB batches, idempotence off"
    )
    callback = ", a delivery callback per record" if args.callback else ""
    print(f"\n{args.messages:,} records x {args.size} B, one partition, {setup}{callback};")
    print(f"one send per record; {args.rounds} round(s), clients take turns; every record read")
    print("back. 'x confluent': median over rounds of msgs/s / confluent-kafka's that round.\n")
    print("| client | codec | msgs/s (median) | per round | x confluent | CPU s | delivered |")
    print("|---|---|---:|---|---:|---:|---|")
    for (client, codec), mine in rates.items():
        theirs = rates.get(("confluent-kafka", codec))
        ratio = ""
        if theirs:
            ratio = f"{statistics.median(a / b for a, b in zip(mine, theirs, strict=True)):.2f}"
        runs = rows[(client, codec)]
        cells = [
            client,
            codec,
            f"{statistics.median(mine):,.0f}",
            ", ".join(f"{r / 1000:,.0f}k" for r in mine),
            ratio,
            f"{statistics.median(cpu for _, cpu, _ in runs):.2f}",
            "all" if all(c == "all" for _, _, c in runs) else "; ".join(c for _, _, c in runs),
        ]
        print("| " + " | ".join(cells) + " |")


def write_json(
    path: Path,
    rates: dict[tuple[str, str], list[float]],
    latency_rows: list[tuple[str, float, float, list[float], float | None]],
) -> None:
    """The numbers of both tables as JSON: per client and codec the median rate and the
    median of the per-round ratios to confluent-kafka's; per latency client p50, p99 and
    the same ratio of p50s."""
    throughput: dict[str, dict[str, dict[str, Any]]] = {}
    for (client, codec), mine in rates.items():
        theirs = rates.get(("confluent-kafka", codec))
        ratio = (
            statistics.median(a / b for a, b in zip(mine, theirs, strict=True)) if theirs else None
        )
        throughput.setdefault(client, {})[codec] = {
            "msgs_per_s": statistics.median(mine),
            "per_round": mine,
            "x_confluent": ratio,
        }
    latency = {
        client: {"p50_us": p50, "p99_us": p99, "p50_per_round_us": per, "x_confluent": ratio}
        for client, p50, p99, per, ratio in latency_rows
    }
    path.write_text(json.dumps({"throughput": throughput, "latency": latency}, indent=1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--latency-sends", type=int, default=1000)
    parser.add_argument("--clients", nargs="+", default=CLIENTS, choices=CLIENTS)
    parser.add_argument("--latency-rounds", type=int, default=3)
    parser.add_argument(
        "--no-floors", action="store_true", help="skip the no-client latency floors"
    )
    parser.add_argument(
        "--broker",
        choices=["tansu", "embedded"],
        default="tansu",
        help="tansu, or kclient's embedded broker in a child process (default: tansu)",
    )
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--latency-only", action="store_true", help="skip the throughput part")
    only.add_argument("--throughput-only", action="store_true", help="skip the latency part")
    parser.add_argument("--codecs", nargs="+", default=CODECS, choices=CODECS)
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="every client at its own defaults (only bootstrap.servers and the codec set)",
    )
    parser.add_argument(
        "--callback",
        action="store_true",
        help="a delivery callback on every record (each client's own form), counted",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="throughput rounds; the clients take turns in each (ratios are per round)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="also write the medians and ratios to PATH (read by hot_path_targets.py)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--client", help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--codec", default="none", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return

    rates: dict[tuple[str, str], list[float]] = {}
    rows: dict[tuple[str, str], list[tuple[float, float, str]]] = {}
    latency_rows = []
    with _broker(args.broker) as tansu:
        for round_number in range(0 if args.latency_only else args.rounds):
            for codec in args.codecs:
                for client in args.clients:
                    topic = f"perf-{client}-{codec}-{uuid.uuid4().hex[:8]}".replace(" ", "-")
                    tansu.create_topic(topic, 1)
                    result = run_worker(
                        client,
                        "throughput",
                        topic,
                        args,
                        bootstrap=tansu.bootstrap_servers,
                        codec=codec,
                    )
                    checked = verify(tansu.bootstrap_servers, topic, args.messages)
                    rate = args.messages / result["seconds"]
                    rates.setdefault((client, codec), []).append(rate)
                    rows.setdefault((client, codec), []).append(
                        (result["seconds"], result["cpu"], checked)
                    )
                    print(
                        f"# round {round_number + 1}: {client} {codec}: {rate:,.0f} msgs/s, "
                        f"verified: {checked}",
                        file=sys.stderr,
                    )
        latency_clients = [] if args.throughput_only else [c for c in args.clients if c in LATENCY]
        if latency_clients and not args.no_floors:
            latency_clients += FLOORS
        per_round: dict[str, list[float]] = {client: [] for client in latency_clients}
        pooled: dict[str, list[float]] = {client: [] for client in latency_clients}
        for round_number in range(args.latency_rounds):  # clients alternate: drift hits all
            for client in latency_clients:
                topic = f"lat-{uuid.uuid4().hex[:8]}"
                tansu.create_topic(topic, 1)
                lat = run_worker(
                    client, "latency", topic, args, bootstrap=tansu.bootstrap_servers, codec="none"
                )["latencies"]
                per_round[client].append(statistics.median(lat))
                pooled[client] += lat
                print(
                    f"# round {round_number + 1}: {client} latency p50 "
                    f"{per_round[client][-1]:.0f} us",
                    file=sys.stderr,
                )
        reference = per_round.get("confluent-kafka")
        for client in latency_clients:
            lat = sorted(pooled[client])
            p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
            ratio = None
            if reference:  # per round, then the median: both measured minutes apart at most
                ratio = statistics.median(
                    mine / theirs for mine, theirs in zip(per_round[client], reference, strict=True)
                )
            latency_rows.append((client, statistics.median(lat), p99, per_round[client], ratio))

    if args.json:
        write_json(args.json, rates, latency_rows)
    print(f"\nbroker: {args.broker}")
    if rows:
        print_throughput(args, rates, rows)
    if not latency_rows:
        return
    print(
        f"\nsend→ack latency, {args.latency_rounds} rounds x {args.latency_sends} sequential "
        "sends, linger 0, acks=1 (clients alternate each round; p50 and p99 over all rounds;"
    )
    print("'x confluent' is the median over rounds of p50 / confluent-kafka's p50 that round):\n")
    print("| client | p50 µs | p99 µs | p50 per round µs | x confluent |")
    print("|---|---:|---:|---|---:|")
    for client, p50, p99, rounds, ratio in latency_rows:
        per = ", ".join(f"{x:,.0f}" for x in rounds)
        shown = "" if ratio is None else f"{ratio:.2f}"
        print(f"| {client} | {p50:,.0f} | {p99:,.0f} | {per} | {shown} |")
    print(
        f"\nThe issue's target, p50 <= 300 µs where confluent-kafka measured 178 µs, is "
        f"<= {TARGET_RATIO:.2f} x confluent-kafka in the same run. The floors use no client: "
        "a pre-encoded ProduceRequest written by one thread, or handed to a second (I/O) "
        "thread as a Python producer must."
    )


if __name__ == "__main__":
    main()
