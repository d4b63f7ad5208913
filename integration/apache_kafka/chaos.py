"""The producer side of ``test_chaos.py``: idempotent writers (sync ``KafkaProducer`` threads
and a ``kclient.aio`` producer on its own event loop) and a transactional writer, each
writing numbered records and recording every outcome with its time; the checks of what
Kafka's own Java consumer read back (``read_committed``) against those outcomes; and a
count of the Metadata requests each producer sent.

Not part of the producer: a test helper. A record's key is ``writer|partition`` and its
value ``writer|partition|sequence`` (``txn|number|index`` for a transaction), so the
read-back alone says who wrote it, where and in which order. Faults are in
:mod:`integration.apache_kafka.faults`; the seed of a run comes from :func:`chaos_seed`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kclient import KafkaProducer, RecordMetadata, errors
from kclient.aio import AIOKafkaProducer
from kclient.testing.apache_kafka_java import JavaReadBack

SEED_ENV = "KCLIENT_CHAOS_SEED"


def chaos_seed() -> int:
    """``$KCLIENT_CHAOS_SEED`` when set (to replay a run), else a fresh one; print it."""
    text = os.environ.get(SEED_ENV)
    seed = int(text) if text else random.randrange(1 << 30)
    print(f"chaos seed {seed} (replay: {SEED_ENV}={seed})")
    return seed


# --- what the producers were told


@dataclass
class Outcome:
    """One record: where it went, when it was sent and how it ended."""

    partition: int
    sequence: int
    sent_s: float
    done_s: float | None = None
    offset: int | None = None
    error: BaseException | None = None


@dataclass
class Writer:
    """An idempotent writer: ``rounds_per_s`` times a second one record to each of
    ``partitions`` partitions of ``topic`` (sequence = round), until ``stop`` is set."""

    name: str
    settings: Mapping[str, Any]
    topic: str
    partitions: int
    rounds_per_s: float
    outcomes: list[Outcome] = field(default_factory=list)
    crashed: BaseException | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, partition: int, sequence: int) -> tuple[bytes, bytes, int]:
        """Key, value and the index of a new outcome."""
        with self.lock:
            self.outcomes.append(Outcome(partition, sequence, time.monotonic()))
            index = len(self.outcomes) - 1
        key = f"{self.name}|{partition}".encode()
        return key, f"{self.name}|{partition}|{sequence}".encode(), index

    def done(
        self, index: int, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        with self.lock:
            outcome = self.outcomes[index]
            outcome.done_s = time.monotonic()
            outcome.error = error
            outcome.offset = metadata.offset if metadata is not None and error is None else None

    def rounds(self, stop: threading.Event) -> Iterator[int]:
        """Round numbers at ``rounds_per_s`` until ``stop`` (a late round is not made up)."""
        interval_s = 1.0 / self.rounds_per_s
        next_s = time.monotonic()
        sequence = 0
        while not stop.is_set():
            yield sequence
            sequence += 1
            next_s = max(next_s + interval_s, time.monotonic() - interval_s)
            stop.wait(max(0.0, next_s - time.monotonic()))

    def run_sync(self, stop: threading.Event, flush_s: float) -> None:
        producer = KafkaProducer({**self.settings, "client.id": self.name})
        try:
            for sequence in self.rounds(stop):
                for partition in range(self.partitions):
                    key, value, index = self.record(partition, sequence)
                    callback = functools.partial(self._callback, index)
                    producer.send(self.topic, value, key, partition=partition, callback=callback)
            producer.flush(timeout=flush_s)
        except BaseException as exc:  # reported by the test
            self.crashed = exc
        finally:
            producer.close(timeout=10)

    def _callback(
        self, index: int, metadata: RecordMetadata | None, error: BaseException | None
    ) -> None:
        self.done(index, metadata, error)

    def run_aio(self, stop: threading.Event, flush_s: float) -> None:
        try:
            asyncio.run(self._aio(stop, flush_s))
        except BaseException as exc:
            self.crashed = exc

    async def _aio(self, stop: threading.Event, flush_s: float) -> None:
        settings = {k.replace(".", "_"): v for k, v in self.settings.items()}
        producer = AIOKafkaProducer(**settings, client_id=self.name)
        await producer.start()
        try:
            interval_s = 1.0 / self.rounds_per_s
            next_s = time.monotonic()
            sequence = 0
            while not stop.is_set():
                for partition in range(self.partitions):
                    key, value, index = self.record(partition, sequence)
                    future = await producer.send(self.topic, value, key, partition)
                    future.add_done_callback(functools.partial(self._aio_done, index))
                sequence += 1
                next_s = max(next_s + interval_s, time.monotonic() - interval_s)
                await asyncio.sleep(max(0.0, next_s - time.monotonic()))
            await asyncio.wait_for(producer.flush(), flush_s)
        finally:
            await producer.stop()

    def _aio_done(self, index: int, future: Any) -> None:
        error = future.exception()
        self.done(index, None if error else future.result(), error)

    def start(
        self, stop: threading.Event, flush_s: float, *, aio: bool = False
    ) -> threading.Thread:
        target = self.run_aio if aio else self.run_sync
        thread = threading.Thread(target=target, args=(stop, flush_s), name=self.name, daemon=True)
        thread.start()
        return thread

    def acked(self) -> int:
        with self.lock:
            return sum(1 for o in self.outcomes if o.offset is not None)


def wait_acked(writers: Sequence[Writer], count: int, timeout_s: float) -> None:
    """Until each writer has ``count`` more records acknowledged (bounded)."""
    targets = [w.acked() + count for w in writers]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(w.acked() >= t for w, t in zip(writers, targets, strict=True)):
            return
        time.sleep(0.05)
    raise AssertionError(f"writers not acknowledged {count} more records within {timeout_s} s")


def check_writers(
    writers: Sequence[Writer], read: JavaReadBack, delivery_timeout_s: float
) -> list[str]:
    """What is wrong, per the module docstring's promises: a writer crashed; a record's
    future is still pending, or completed later than ``delivery.timeout.ms`` after its
    send; a failed one failed untyped; an acknowledged record missing, at another offset,
    or read twice; a writer's records out of order."""
    problems: list[str] = []
    seen: Counter[bytes | None] = Counter(r.value for r in read.records)
    problems += [f"read {n} times: {v!r}" for v, n in seen.items() if n > 1][:10]
    for w in writers:
        if w.crashed is not None:
            problems.append(f"{w.name} crashed: {w.crashed!r}")
        at: dict[tuple[int, int], int] = {}  # (partition, sequence) -> offset read
        order: dict[int, list[int]] = {}
        for r in read.of(w.topic):
            name, written_to, sequence = (r.value or b"").decode().split("|")
            if name == w.name:
                if int(written_to) != r.partition:
                    problems.append(f"{r.value!r} read from partition {r.partition}")
                at[r.partition, int(sequence)] = r.offset
                order.setdefault(r.partition, []).append(int(sequence))
        for partition, sequences in order.items():
            if sequences != sorted(sequences):
                problems.append(f"{w.name}: partition {partition} read out of order")
        for o in w.outcomes:
            where = f"{w.name} partition {o.partition} #{o.sequence}"
            if o.done_s is None:
                problems.append(f"{where}: future still pending")
            elif o.done_s - o.sent_s > delivery_timeout_s + 1.0:
                problems.append(f"{where}: completed after {o.done_s - o.sent_s:.1f} s")
            elif o.error is not None:
                if not isinstance(o.error, errors.KafkaError):
                    problems.append(f"{where}: failed with {o.error!r}")
            elif at.get((o.partition, o.sequence)) != o.offset:
                found = at.get((o.partition, o.sequence))
                problems.append(f"{where}: acknowledged at offset {o.offset}, read at {found}")
    return problems


def slowest_s(writers: Sequence[Writer]) -> float:
    """The longest a record took from ``send`` to its acknowledgement or failure."""
    return max(
        (o.done_s - o.sent_s for w in writers for o in w.outcomes if o.done_s is not None),
        default=0.0,
    )


def failures(writers: Sequence[Writer]) -> list[str]:
    return [f"{w.name}: {o.error!r}" for w in writers for o in w.outcomes if o.error is not None]


# --- Metadata requests, from the network client's DEBUG lines


@contextmanager
def metadata_requests() -> Iterator[Counter[str]]:
    """client.id → how many Metadata requests it sent while the block runs (the network
    client logs each request it writes at DEBUG, in Python and in C alike)."""
    counts: Counter[str] = Counter()
    pattern = re.compile(r"\[kclient clientId=([^\]]*)\] sending METADATA v")

    logger = logging.getLogger("kclient.network.client")

    class Count(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found = pattern.match(record.getMessage())
            if found:
                counts[found.group(1)] += 1
            elif record.levelno >= logging.INFO and logger.parent is not None:
                logger.parent.handle(record)  # what pytest would have kept anyway

    handler = Count(logging.DEBUG)
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False  # the DEBUG lines are counted, not kept
    try:
        yield counts
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate


# --- the transactional writer


@dataclass
class Txn:
    """One transaction: ``size`` records ``txn|number|index`` on partitions
    ``(number + index) % partitions``; meant to commit or abort; how it ended:
    ``committed``, ``aborted`` (both as the producer was told), or ``unknown`` (a fatal
    error: the coordinator completes it either way, never in part)."""

    number: int
    size: int
    wanted: str
    outcome: str = "open"
    errors: list[str] = field(default_factory=list)


@dataclass
class TxnWriter:
    """Transactions one after another until ``stop``; after a fatal error a new producer
    of the same ``transactional.id`` takes over (and fences the old one)."""

    settings: Mapping[str, Any]
    topic: str
    partitions: int
    rng: random.Random
    finish_s: float
    """How long a commit or abort may take, timed-out calls resumed."""
    txns: list[Txn] = field(default_factory=list)
    producers: int = 0
    crashed: BaseException | None = None

    def run(self, stop: threading.Event) -> None:
        producer: KafkaProducer | None = None
        try:
            while not stop.is_set():
                if producer is None:
                    producer = self._new_producer()
                wanted = "commit" if self.rng.random() < 0.7 else "abort"
                txn = Txn(len(self.txns), self.rng.randint(1, 4), wanted)
                self.txns.append(txn)
                if not self._one(producer, txn):
                    producer.close(timeout=5)
                    producer = None
                stop.wait(self.rng.uniform(0.0, 0.05))
        except BaseException as exc:  # reported by the test
            self.crashed = exc
        finally:
            if producer is not None:
                producer.close(timeout=10)

    def start(self, stop: threading.Event) -> threading.Thread:
        thread = threading.Thread(target=self.run, args=(stop,), name="txn-writer", daemon=True)
        thread.start()
        return thread

    def _new_producer(self) -> KafkaProducer:
        producer = KafkaProducer({**self.settings, "client.id": f"txn-{self.producers}"})
        self.producers += 1
        try:
            self._resumed(producer.init_transactions)
        except BaseException:
            producer.close(timeout=5)
            raise
        return producer

    def _resumed(self, operation: Any) -> None:
        """``operation(timeout=...)`` called again after each ``KafkaTimeoutError`` (it
        resumes), up to ``finish_s``."""
        deadline = time.monotonic() + self.finish_s
        while True:
            try:
                operation(timeout=max(0.1, min(5.0, deadline - time.monotonic())))
                return
            except errors.KafkaTimeoutError:  # noqa: PERF203 (a retry loop of seconds)
                if time.monotonic() >= deadline:
                    raise

    def _one(self, producer: KafkaProducer, txn: Txn) -> bool:
        """Run ``txn``; False when the producer is finished (a fatal error)."""
        try:
            producer.begin_transaction()
            for index in range(txn.size):
                value = f"txn|{txn.number}|{index}".encode()
                partition = (txn.number + index) % self.partitions
                producer.send(self.topic, value, b"txn", partition=partition)
            if txn.wanted == "commit":
                self._resumed(producer.commit_transaction)
                txn.outcome = "committed"
            else:
                self._resumed(producer.abort_transaction)
                txn.outcome = "aborted"
            return True
        except errors.TransactionRequiresAbortError as exc:
            txn.errors.append(repr(exc))
            try:
                self._resumed(producer.abort_transaction)
            except errors.KafkaError as again:
                txn.errors.append(repr(again))
                txn.outcome = "unknown"
                return False
            txn.outcome = "aborted"
            return True
        except errors.KafkaError as exc:
            txn.errors.append(repr(exc))
            txn.outcome = "unknown"
            return False


def check_txns(writer: TxnWriter, read: JavaReadBack) -> list[str]:
    """What is wrong: a committed transaction not wholly visible, an aborted one visible at
    all, an unknown one in part, a record read twice, transactions out of order."""
    problems: list[str] = []
    if writer.crashed is not None:
        problems.append(f"the transactional writer crashed: {writer.crashed!r}")
    got: dict[int, Counter[int]] = {}
    last: dict[int, int] = {}
    for r in sorted(read.of(writer.topic), key=lambda r: (r.partition, r.offset)):
        _, number, index = (r.value or b"").decode().split("|")
        got.setdefault(int(number), Counter())[int(index)] += 1
        if int(number) < last.get(r.partition, -1):
            problems.append(f"partition {r.partition}: transaction {number} after {last}")
        last[r.partition] = int(number)
    for txn in writer.txns:
        seen = got.get(txn.number, Counter())
        if any(n > 1 for n in seen.values()):
            problems.append(f"transaction {txn.number}: a record read twice {dict(seen)}")
        visible = set(seen)
        whole = set(range(txn.size))
        outcomes: dict[str, list[set[int]]] = {
            "committed": [whole],
            "aborted": [set()],
            "unknown": [set(), whole],
        }
        allowed = outcomes.get(txn.outcome, [])
        if visible not in allowed:
            problems.append(
                f"transaction {txn.number} ({txn.outcome}, {txn.size} records, errors "
                f"{txn.errors}): read {sorted(visible)}"
            )
    return problems
