"""Independent Kafka clients driving the embedded broker: confluent-kafka, kafka-python,
aiokafka and kcat. Each helper produces or consumes one partition and returns records as
``(key, value, headers)`` tuples so that what went in can be compared with what came out.
Every loop is bounded; kcat runs are stopped through their handle.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import selectors
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, cast

import confluent_kafka
import pytest

from integration.peers import QUICK_READ, from_start, kcat_binary, kcat_env, stop_process
from kclient.broker import EmbeddedCluster

Headers = list[tuple[str, bytes | None]]
Rec = tuple[bytes | None, bytes | None, Headers]

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def dataset(n: int = 40, tag: str = "") -> list[Rec]:
    """Keys, null keys, binary values, an empty value, headers (none, one, two)."""
    out: list[Rec] = []
    for i in range(n):
        key = None if i % 3 == 0 else f"key-{i}".encode()
        value = bytes([i % 256]) * (i % 7) + f"value-{tag}-{i}".encode() * 8 + b"\x00\xff"
        if i == 5:
            value = b""
        headers: Headers = []
        if i % 2:
            headers.append(("trace", f"t{i}".encode()))
        if i % 4 == 1:
            headers.append(("empty", b""))
        out.append((key, value, headers))
    return out


def text_dataset(tag: str = "") -> list[Rec]:
    """Printable, tab-free records for kcat, in four runs of equal shape (kcat sets
    headers per invocation): null keys, keys with a header, keys, null keys with headers."""
    shapes: list[tuple[bool, Headers]] = [
        (False, []),
        (True, [("source", b"kcat")]),
        (True, []),
        (False, [("a", b"1"), ("b", b"two")]),
    ]
    out: list[Rec] = []
    for run, (keyed, headers) in enumerate(shapes):
        for i in range(8):
            n = run * 8 + i
            key = f"key-{n}".encode() if keyed else None
            # compressible: librdkafka sends a batch uncompressed when that is smaller
            value = f"value {tag} {n} \u00e9 " * 12
            out.append((key, value.encode(), list(headers)))
    return out


# ---- confluent-kafka ---------------------------------------------------------------


def confluent_produce(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str, idempotent: bool
) -> list[int]:
    """Produce to partition 0; returns the acknowledged offsets."""
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "compression.type": codec,
            "enable.idempotence": idempotent,
            "acks": "all",
            "linger.ms": 5,
        }
    )
    offsets: list[int] = []
    errors: list[str] = []

    def delivered(err: object, msg: confluent_kafka.Message) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            offsets.append(msg.offset())

    for key, value, headers in records:
        producer.produce(
            topic,
            value=value,
            key=key,
            headers=headers or None,
            partition=0,
            on_delivery=delivered,
        )
    assert producer.flush(30) == 0, "not every record was acknowledged"
    assert not errors, errors
    return offsets


def confluent_consume(bootstrap: str, topic: str, n: int, timeout_s: float = 20.0) -> list[Rec]:
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            **QUICK_READ,
        }
    )
    consumer.assign(from_start(topic, 1))
    out: list[Rec] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < n and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is not None:
                    raise confluent_kafka.KafkaException(msg.error())
                out.append((msg.key(), msg.value(), list(msg.headers() or [])))
    finally:
        consumer.close()
    return out


# ---- kafka-python ------------------------------------------------------------------


def kafka_python_produce(bootstrap: str, topic: str, records: Sequence[Rec], codec: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks=1,
        linger_ms=5,
    )
    try:
        futures = [
            producer.send(topic, value=value, key=key, headers=headers, partition=0)
            for key, value, headers in records
        ]
        producer.flush(timeout=30)
        for f in futures:
            f.get(timeout=10)
    finally:
        producer.close(timeout=5)


def kafka_python_consume(bootstrap: str, topic: str, n: int, timeout_s: float = 20.0) -> list[Rec]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        out: list[Rec] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < n and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=200).values():
                out.extend((m.key, m.value, list(m.headers)) for m in batch)
        return out
    finally:
        consumer.close()


# ---- aiokafka ----------------------------------------------------------------------


def aiokafka_produce(bootstrap: str, topic: str, records: Sequence[Rec], codec: str) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            linger_ms=5,
            acks="all",
            enable_idempotence=True,
        )
        await producer.start()
        try:
            futures = [
                await producer.send(topic, value=value, key=key, headers=headers, partition=0)
                for key, value, headers in records
            ]
            await asyncio.wait_for(asyncio.gather(*futures), timeout=30)
        finally:
            await producer.stop()

    asyncio.run(run())


# ---- kcat --------------------------------------------------------------------------


def kcat(
    args: list[str], new_librdkafka: bool, stdin: bytes = b"", timeout_s: float = 30.0
) -> bytes:
    binary = kcat_binary()
    assert binary is not None, "kcat is not installed (scripts/test installs Debian's kcat)"
    proc = subprocess.Popen(
        [binary, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=kcat_env(new_librdkafka),
    )
    try:
        out, err = proc.communicate(stdin, timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode == 0, f"kcat {args} exited {proc.returncode}: {err.decode()}"
    return out


def kcat_librdkafka_version(new_librdkafka: bool) -> str:
    """The librdkafka version kcat runs with (``kcat -V``)."""
    out = kcat(["-V"], new_librdkafka).decode()
    return out.split("librdkafka ", 1)[1].split()[0]


def kcat_produce(
    bootstrap: str, topic: str, records: Sequence[Rec], codec: str, new_librdkafka: bool
) -> None:
    """``kcat -P``, one run per stretch of records with the same headers and key-ness."""
    runs: list[list[Rec]] = []
    for rec in records:
        if runs and runs[-1][0][2] == rec[2] and (runs[-1][0][0] is None) == (rec[0] is None):
            runs[-1].append(rec)
        else:
            runs.append([rec])
    for run in runs:
        args = ["-P", "-b", bootstrap, "-t", topic, "-p", "0", "-z", codec, "-X", "acks=all"]
        for name, value in run[0][2]:
            args += ["-H", f"{name}={(value or b'').decode()}"]
        if run[0][0] is None:
            lines = b"".join((r[1] or b"") + b"\n" for r in run)
        else:
            args += ["-K", "\t"]
            lines = b"".join((r[0] or b"") + b"\t" + (r[1] or b"") + b"\n" for r in run)
        kcat(args, new_librdkafka, stdin=lines)


def kcat_consume(bootstrap: str, topic: str, n: int, new_librdkafka: bool) -> list[Rec]:
    out = kcat(
        [
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "beginning",
            "-c",
            str(n),
            "-e",
            "-Z",
            "-f",
            "%k\t%s\t%h\n",
        ],
        new_librdkafka,
    )
    records: list[Rec] = []
    for line in out.decode().splitlines():
        key, value, header_text = line.split("\t")
        headers: Headers = []
        if header_text and header_text != "NULL":
            for pair in header_text.split(","):
                name, _, val = pair.partition("=")
                headers.append((name, val.encode()))
        records.append((None if key == "NULL" else key.encode(), value.encode(), headers))
    return records


# ---- raw frames ------------------------------------------------------------------------


# ---- the kclient-broker command line ------------------------------------------------


def read_line(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> str:
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout_s):
            raise TimeoutError(f"no output from the broker within {timeout_s} s")
        return proc.stdout.readline().decode()
    finally:
        sel.close()


@contextmanager
def cli_broker(*args: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "kclient.broker", "--listen", "127.0.0.1:0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        line = read_line(proc)
        assert "bootstrap.servers=" in line, line
        yield proc, line.strip().split("bootstrap.servers=", 1)[1]
    finally:
        stop_process(proc)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


# ---- confluent-kafka with any settings (TLS, SASL), and the broker's log ---------------

Record = tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]
"""(partition, key, value, headers)"""


def confluent_produce_records(
    settings: dict[str, Any], topic: str, records: list[Record], flush_s: float = 60.0
) -> list[str]:
    """Produce ``(partition, key, value, headers)`` records; returns the delivery errors
    (plus one entry per record still undelivered after ``flush_s``)."""
    producer = confluent_kafka.Producer({"acks": "all", "linger.ms": 5, **settings})
    failures: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(str(err))

    for partition, key, value, headers in records:
        producer.produce(
            topic,
            value=value,
            key=key,
            headers=cast(Any, headers) or None,
            partition=partition,
            on_delivery=delivered,
        )
        producer.poll(0)
    left = producer.flush(flush_s)
    return failures + ["not delivered"] * left


def confluent_consume_records(
    settings: dict[str, Any], topic: str, partitions: int, n: int, timeout_s: float = 60.0
) -> list[Record]:
    """Read ``n`` records (assign, from the beginning of each partition: the embedded
    broker has no group coordinator), in per-partition offset order."""
    consumer = confluent_kafka.Consumer(
        {
            "group.id": "verify-with-settings",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            **QUICK_READ,
            **settings,
        }
    )
    consumer.assign(from_start(topic, partitions))
    out: list[tuple[int, int, Record]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(out) < n and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                if msg.error() is not None:
                    raise confluent_kafka.KafkaException(msg.error())
                partition, offset = cast(int, msg.partition()), cast(int, msg.offset())
                headers = cast(list[tuple[str, bytes | None]], list(msg.headers() or []))
                out.append((partition, offset, (partition, msg.key(), msg.value(), headers)))
    finally:
        consumer.close()
    return [record for _, _, record in sorted(out, key=lambda item: item[:2])]


def wait_for_log(
    caplog: pytest.LogCaptureFixture, text: str, timeout_s: float = 10.0
) -> logging.LogRecord:
    """The broker's log record containing ``text`` (written by a Processor thread)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for record in caplog.records:
            if text in record.getMessage():
                return record
        time.sleep(0.02)
    raise AssertionError(f"no log line with {text!r}: {[r.getMessage() for r in caplog.records]}")


_topic_numbers = itertools.count()


def new_topic(cluster: EmbeddedCluster, prefix: str, partitions: int = 1) -> str:
    """A topic name not used before in this process, created on ``cluster``."""
    name = f"{prefix}-{next(_topic_numbers)}"
    cluster.create_topic(name, partitions=partitions)
    return name
