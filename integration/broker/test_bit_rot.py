"""Bit rot at rest in a ``kclient-broker --log-dir``: a log closed cleanly, then one bit
flipped inside batch 5 of 10 while the broker was down. Restarted, the broker serves
batches 0-4 only (never the damaged one), takes new records from offset 5, and its log
says what it dropped."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import confluent_kafka

from integration.broker.clients import cli_broker
from integration.peers import QUICK_READ, from_start
from kclient.record.layout import HEADER


def produce_one_batch_each(bootstrap: str, values: list[bytes]) -> list[int]:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    offsets: list[int] = []
    for value in values:
        producer.produce(
            "rot", value=value, on_delivery=lambda err, msg: offsets.append(msg.offset())
        )
        assert producer.flush(10) == 0  # one record, one batch
    return offsets


def read_back(bootstrap: str, expected: int) -> list[tuple[int, bytes | None]]:
    """What a consumer reads from offset 0: ``expected`` records, or what came in 10 s,
    plus whatever else shows up within 0.5 s after."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", **QUICK_READ}
    )
    consumer.assign(from_start("rot", 1))
    out: list[tuple[int, bytes | None]] = []
    deadline = time.monotonic() + 10
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.1):
                assert msg.error() is None, msg.error()  # no CRC error, ever
                out.append((msg.offset(), msg.value()))
            if len(out) >= expected:
                deadline = min(deadline, time.monotonic() + 0.5)
    finally:
        consumer.close()
    return out


def test_a_bit_flipped_at_rest_is_dropped_not_served(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    with cli_broker("--log-dir", str(log_dir)) as (proc, bootstrap):
        values = [b"value-%d" % i for i in range(10)]
        assert produce_one_batch_each(bootstrap, values) == list(range(10))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0

    (segment,) = (log_dir / "rot-0").glob("*.log")
    data = bytearray(segment.read_bytes())
    position = 0
    for _ in range(5):
        position += 12 + HEADER.unpack_from(data, position)[1]
    size = 12 + HEADER.unpack_from(data, position)[1]
    data[position + size - 2] ^= 0x04  # one bit of batch 5's value
    segment.write_bytes(bytes(data))

    with cli_broker("--log-dir", str(log_dir)) as (proc, bootstrap):
        assert read_back(bootstrap, 5) == [(i, b"value-%d" % i) for i in range(5)]
        assert produce_one_batch_each(bootstrap, [b"after"]) == [5]
        assert read_back(bootstrap, 6)[-1] == (5, b"after")
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        assert proc.stderr is not None
        stderr = proc.stderr.read().decode()
    assert "rot-0: dropping offsets 5..9" in stderr, stderr
    assert "CRC" in stderr
