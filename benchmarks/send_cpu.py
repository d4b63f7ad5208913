"""What one ``send()`` costs the caller's thread, and what it is made of; no broker.

    .venv/bin/python benchmarks/send_cpu.py [--sends 300000] [--size 100] [--rounds 5]

A producer on a ``MockClient`` (no sockets; its ``poll`` blocks as a real client's does,
so the I/O thread does not spin) with linger and buffer memory large enough that nothing
is sent while ``--sends`` records of ``--size`` bytes, keyless, go to one partition with
``send()``; the caller thread's CPU time (``time.thread_time``) per call is the first row.
The second calls the Python ``send`` function instead (``KafkaProducer.send`` as read on
the class; calls on a producer go through C when the accelerator is built). Then
``send_batch`` per row, in calls of 10,000 rows (as the Spark sink makes them) to 2
partitions, keyless and keyed (14-byte keys), the columns as lists of bytes and as Arrow
binary arrays (pyarrow). The other rows time, the same way, pieces a Python ``send``
would run: the C record encoder's ``append``, making the returned future with its
``__init__``, taking and releasing a ``threading.Lock``, reading the clock, and an empty
Python call (the floor of any Python API). Medians
of ``--rounds``. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kclient.clock import SYSTEM_CLOCK  # noqa: E402
from kclient.producer import KafkaProducer  # noqa: E402
from kclient.record import RecordBatchBuilder  # noqa: E402
from kclient.sender.future import FutureRecordMetadata  # noqa: E402
from kclient.testing.client import MockClient, metadata_update_with  # noqa: E402


def per_call_ns(fn: Callable[[], object], calls: int) -> float:
    start = time.thread_time_ns()
    for _ in range(calls):
        fn()
    return (time.thread_time_ns() - start) / calls


class BlockingMockClient(MockClient):
    """A ``MockClient`` whose ``poll`` blocks up to its timeout (or a ``wakeup``), as the
    real client does in ``select``: the plain mock returns at once, and its I/O thread,
    spinning, would contend for the GIL and the topic lock with the thread measured."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._woken = threading.Event()

    def poll(self, timeout_ms: int, now_ms: int) -> list[Any]:
        responses = super().poll(timeout_ms, now_ms)
        if not responses:
            self._woken.wait(min(timeout_ms, 100) / 1000)
            self._woken.clear()
        return responses

    def wakeup(self) -> None:
        super().wakeup()
        self._woken.set()


def idle_producer(partitions: int) -> KafkaProducer:
    """A producer that sends nothing while measured (linger, memory and timeouts large)."""
    client = BlockingMockClient(SYSTEM_CLOCK, metadata_update_with(1, {"t": partitions}))
    return KafkaProducer(
        bootstrap_servers="127.0.0.1:9092",
        linger_ms=600_000,
        delivery_timeout_ms=900_000,
        batch_size=1 << 20,
        buffer_memory=1 << 31,
        acks=1,
        enable_idempotence=False,
        kafka_client=client,
    )


def send_ns(sends: int, size: int, *, python_frame: bool = False) -> float:
    """``send()`` as users call it (through C when the accelerator is built), or with
    ``python_frame`` the Python ``send`` function (what ``KafkaProducer.send`` reads as on
    the class): the same work plus its Python frame."""
    producer = idle_producer(1)
    try:
        value = b"v" * size
        producer.send("t", value)  # metadata known, first batch open
        if python_frame:
            python_send = KafkaProducer.send
            return per_call_ns(lambda: python_send(producer, "t", value), sends)
        send = producer.send
        return per_call_ns(lambda: send("t", value), sends)
    finally:
        producer.close(0)


def send_batch_ns(rows: int, size: int, keyed: bool, arrow: bool) -> float:
    """Caller-thread CPU per row of ``send_batch`` calls of 10,000 rows (as the Spark sink
    makes them), 14-byte keys when ``keyed``, to 2 partitions."""
    values = [b"%010d" % i + b"v" * (size - 10) for i in range(rows)]
    keys = [b"key-%010d" % i for i in range(rows)] if keyed else None
    chunks: list[tuple[Any, Any]] = []
    for start in range(0, rows, 10_000):
        vs = values[start : start + 10_000]
        ks = None if keys is None else keys[start : start + 10_000]
        if arrow:
            import pyarrow as pa

            chunks.append((pa.array(vs, pa.binary()), None if ks is None else pa.array(ks)))
        else:
            chunks.append((vs, ks))
    producer = idle_producer(2)
    try:
        producer.send_batch("t", [b"warm"])
        start_ns = time.thread_time_ns()
        for vs, ks in chunks:
            producer.send_batch("t", vs, ks)
        return (time.thread_time_ns() - start_ns) / rows
    finally:
        producer.close(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sends", type=int, default=300_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    value = b"v" * args.size
    builder = RecordBatchBuilder(batch_size=1 << 40)
    lock = threading.Lock()

    def lock_pair() -> None:
        lock.acquire()
        lock.release()

    pieces: dict[str, Callable[[], object]] = {
        "the record encoder's append (C)": lambda: builder.append(1, None, value, ()),
        "making the future": lambda: FutureRecordMetadata(None, 1, 2, -1, 100),  # type: ignore[arg-type]
        "the topic lock, acquire + release": lock_pair,
        "reading the clock (time_ns // 1e6)": lambda: time.time_ns() // 1_000_000,
        "an empty Python call": lambda: None,
    }
    bulk = {
        f"`send_batch`, {'keyed' if keyed else 'keyless'}, {'Arrow' if arrow else 'lists'}, "
        "per row": (keyed, arrow)
        for keyed in (False, True)
        for arrow in (False, True)
    }
    rows: dict[str, list[float]] = {
        "`send()`, whole": [],
        "`send()` through its Python function": [],
        **{name: [] for name in bulk},
        **{name: [] for name in pieces},
    }
    for _ in range(args.rounds):
        rows["`send()`, whole"].append(send_ns(args.sends, args.size))
        rows["`send()` through its Python function"].append(
            send_ns(args.sends, args.size, python_frame=True)
        )
        for name, (keyed, arrow) in bulk.items():
            rows[name].append(send_batch_ns(args.sends, args.size, keyed, arrow))
        for name, fn in pieces.items():
            rows[name].append(per_call_ns(fn, args.sends))
    print(f"\n`.venv/bin/python benchmarks/send_cpu.py {' '.join(sys.argv[1:])}`\n".rstrip())
    print(f"\n{args.sends:,} calls x {args.rounds} rounds, {args.size} B values; medians\n")
    print("| what | ns per call (caller thread CPU) |")
    print("|---|---:|")
    for name, runs in rows.items():
        print(f"| {name} | {statistics.median(runs):,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
