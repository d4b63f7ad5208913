"""kill -9 chaos: ``kclient-broker --log-dir`` SIGKILLed and restarted on its log dir while
idempotent producers (kclient and confluent-kafka) write; then every acknowledged record
must be in the log exactly once, at the offset its producer was told.

Used by ``integration/broker/test_chaos.py`` (a few kills) and ``benchmarks/kill9_soak.py``
(many). The schedule of kills comes from a seeded ``random.Random``: a failure names its
seed, and ``KCLIENT_CHAOS_SEED=N`` replays the same schedule (timing still varies).
"""

from __future__ import annotations

import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import confluent_kafka

from integration.broker.clients import read_line
from integration.peers import LOOPBACK, QUICK_READ, from_start, stop_process
from kclient import KafkaProducer, RecordMetadata

Acked = dict[tuple[int, int], bytes]  # (partition, offset) -> value


def free_port_run(n: int, attempts: int = 50) -> int:
    """A port P such that P..P+n-1 are all free on 127.0.0.1 right now."""
    for _ in range(attempts):
        with socket.socket() as probe:
            probe.bind((LOOPBACK, 0))
            base = int(probe.getsockname()[1])
        if base + n > 65535:
            continue
        socks = []
        try:
            for port in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((LOOPBACK, port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no run of {n} free ports found")


class BrokerProcess:
    """``kclient-broker`` on fixed ports and a log dir, killed and started again."""

    def __init__(self, log_dir: Path, brokers: int, partitions: int) -> None:
        self.log_dir = log_dir
        self.brokers = brokers
        self.partitions = partitions
        self.port = free_port_run(brokers)
        self.bootstrap = ",".join(f"{LOOPBACK}:{self.port + i}" for i in range(brokers))
        self.proc: subprocess.Popen[bytes] | None = None
        self.restart_s: list[float] = []

    def start(self) -> None:
        started = time.monotonic()
        deadline = started + 30
        while True:  # the ports may still be held for a moment after a kill
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "kclient.broker",
                    "--listen",
                    f"{LOOPBACK}:{self.port}",
                    "--brokers",
                    str(self.brokers),
                    "--log-dir",
                    str(self.log_dir),
                    "--num-partitions",
                    str(self.partitions),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            try:
                line = read_line(proc, timeout_s=20)
            except TimeoutError:
                stop_process(proc)
                raise
            if "bootstrap.servers=" in line:
                self.proc = proc
                self.restart_s.append(time.monotonic() - started)
                return
            proc.wait(10)
            self._close_pipes(proc)
            if time.monotonic() > deadline:
                raise RuntimeError(f"kclient-broker did not start: {line!r}")
            time.sleep(0.2)

    def kill(self) -> None:
        proc = self.proc
        assert proc is not None
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        self._close_pipes(proc)
        self.proc = None

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc)
            self._close_pipes(self.proc)
            self.proc = None

    @staticmethod
    def _close_pipes(proc: subprocess.Popen[bytes]) -> None:
        if proc.stdout is not None:
            proc.stdout.close()


class Writer:
    """A producer thread that writes distinct values and records what was acknowledged."""

    def __init__(self, name: str, bootstrap: str, topic: str) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.topic = topic
        self.acked: Acked = {}
        self.failed: list[str] = []
        self.sent = 0
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"chaos-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def value(self) -> bytes:
        value = f"{self.name}-{self.sent}".encode()
        self.sent += 1
        return value

    def on_ack(self, partition: int, offset: int, value: bytes) -> None:
        with self.lock:
            self.acked[(partition, offset)] = value

    def on_fail(self, error: object) -> None:
        with self.lock:
            self.failed.append(str(error))

    def wait_for_acks(self, n: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        target = len(self.acked) + n
        while len(self.acked) < target and time.monotonic() < deadline:
            time.sleep(0.02)
        return len(self.acked) >= target

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        raise NotImplementedError


class FreshProducers(Writer):
    """A new kclient producer after every restart: it must get a producer id no earlier
    producer had, or its first records are answered as an old producer's duplicates."""

    def write_some(self, n: int) -> None:
        producer = KafkaProducer(
            {"bootstrap.servers": self.bootstrap, "enable.idempotence": True, "acks": "all"}
        )
        try:
            futures = [
                (v, producer.send(self.topic, value=v)) for v in (self.value() for _ in range(n))
            ]
            for value, future in futures:
                error = future.exception(60)
                if error is None:
                    metadata = future.result()
                    self.on_ack(metadata.partition, metadata.offset, value)
                else:
                    self.on_fail(repr(error))
        finally:
            producer.close(10)

    def _run(self) -> None:
        pass


class ConfluentWriter(Writer):
    def _run(self) -> None:
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "reconnect.backoff.max.ms": 200,
                "topic.metadata.refresh.interval.ms": 500,
            }
        )

        def delivered(err: object, msg: confluent_kafka.Message) -> None:
            if err is None:
                self.on_ack(msg.partition(), msg.offset(), msg.value())
            else:
                self.on_fail(err)

        while not self._stop.is_set():
            if len(producer) < 2000:
                producer.produce(self.topic, value=self.value(), on_delivery=delivered)
                producer.poll(0)
            else:
                producer.poll(0.01)
        remaining = producer.flush(60)
        if remaining:
            self.on_fail(f"{remaining} records undelivered after the final flush")


class KclientWriter(Writer):
    def _run(self) -> None:
        producer = KafkaProducer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "reconnect.backoff.max.ms": 200,
                "delivery.timeout.ms": 120_000,
                "metadata.max.age.ms": 500,
            }
        )
        outstanding = threading.Semaphore(2000)

        def done(value: bytes) -> Callable[[RecordMetadata | None, BaseException | None], None]:
            def callback(metadata: RecordMetadata | None, error: BaseException | None) -> None:
                outstanding.release()
                if error is None and metadata is not None:
                    self.on_ack(metadata.partition, metadata.offset, value)
                else:
                    self.on_fail(error)

            return callback

        try:
            while not self._stop.is_set():
                if outstanding.acquire(timeout=0.05):
                    value = self.value()
                    producer.send(self.topic, value=value, callback=done(value))
            producer.flush(60)
        except Exception as exc:  # recorded, then reported by the check
            self.on_fail(repr(exc))
        finally:
            producer.close(10)


@dataclass
class ChaosResult:
    seed: int
    kills: int
    acked: int
    lost: list[tuple[int, int]] = field(default_factory=list)
    replaced: list[tuple[int, int]] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    restart_s: list[float] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.replaced or self.duplicated or self.failed)

    def summary(self) -> str:
        return (
            f"seed {self.seed}: {self.kills} kills, {self.acked} acknowledged records, "
            f"{len(self.lost)} lost (e.g. {self.lost[:3]}), {len(self.replaced)} replaced "
            f"(e.g. {self.replaced[:3]}), {len(self.duplicated)} duplicated "
            f"(e.g. {self.duplicated[:3]}), {len(self.failed)} producer errors "
            f"(e.g. {self.failed[:2]})"
        )


def read_back(
    bootstrap: str, topic: str, partitions: int, expected: int
) -> list[tuple[int, int, bytes]]:
    """Every record of the topic as (partition, offset, value), read with confluent-kafka."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "chaos-verify",
            "enable.auto.commit": False,
            **QUICK_READ,
        }
    )
    consumer.assign(from_start(topic, partitions))
    out: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + 60
    quiet_until = 0.0
    try:
        while time.monotonic() < deadline:
            msgs = consumer.consume(5000, 0.3)
            out.extend(
                (msg.partition(), msg.offset(), msg.value()) for msg in msgs if msg.error() is None
            )
            if msgs:
                quiet_until = time.monotonic() + 1.0
            elif len(out) >= expected and time.monotonic() > quiet_until:
                break
    finally:
        consumer.close()
    return out


def run_chaos(
    work_dir: Path,
    *,
    seed: int,
    kills: int,
    brokers: int = 3,
    partitions: int = 3,
    up_s: tuple[float, float] = (0.3, 1.5),
    down_s: tuple[float, float] = (0.0, 0.5),
) -> ChaosResult:
    """Kill the broker process ``kills`` times at seeded random moments while a kclient
    and a confluent-kafka idempotent producer write, then check every acknowledgement."""
    rng = random.Random(seed)
    topic = "chaos"
    broker = BrokerProcess(work_dir / "logs", brokers, partitions)
    writers: list[Writer] = [
        KclientWriter("kclient", broker.bootstrap, topic),
        ConfluentWriter("confluent", broker.bootstrap, topic),
    ]
    fresh = FreshProducers("fresh", broker.bootstrap, topic)
    broker.start()
    try:
        for w in writers:
            w.start()
        for w in writers:
            w.wait_for_acks(100, 30)
        for _ in range(kills):
            time.sleep(rng.uniform(*up_s))
            broker.kill()
            time.sleep(rng.uniform(*down_s))
            broker.start()
            fresh.write_some(20)
            for w in writers:  # each producer got through before the next kill
                w.wait_for_acks(50, 60)
        for w in writers:
            w.stop()
        stored = read_back(broker.bootstrap, topic, partitions, sum(len(w.acked) for w in writers))
    finally:
        for w in writers:
            w.stop()
        broker.stop()
    at = {(p, o): v for p, o, v in stored}
    result = ChaosResult(seed, kills, sum(len(w.acked) for w in writers))
    result.restart_s = broker.restart_s[1:]
    counts: dict[bytes, int] = {}
    for _, _, value in stored:
        counts[value] = counts.get(value, 0) + 1
    result.duplicated = [v for v, n in counts.items() if n > 1]
    for w in writers:
        result.failed += [f"{w.name}: {e}" for e in w.failed]
        for where, value in w.acked.items():
            if where not in at:
                result.lost.append(where)
            elif at[where] != value:
                result.replaced.append(where)
    return result
