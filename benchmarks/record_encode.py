"""Record batch encode/decode throughput: kclient.record (C and pure Python) vs kafka-python.

Builds and reads v2 record batches of 100-byte values with 10-byte keys, in 16 KiB and
1 MiB batches, uncompressed and lz4, with kclient's ``RecordBatchBuilder`` /
``iter_batches`` — once with its C accelerator (``kclient.record._speedups``) and once
with its pure-Python implementation (what ``KCLIENT_PURE_PYTHON=1`` runs) — and with
kafka-python's ``DefaultRecordBatchBuilder`` / ``MemoryRecords``. Trials alternate and the
best trial of each counts (the least disturbed by other work on the machine); time is the
process's CPU time, so other busy processes slow a trial less than they would its
wall-clock time. MB/s counts key + value bytes.

    .venv/bin/python benchmarks/record_encode.py [--trials 7] [--mib 8] [--codecs none,lz4]

Prints a Markdown table and the machine it ran on. Without the extension built, the C
column is left out.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import TypeVar

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kclient.record import CompressionType, RecordBatchBuilder, _accel, iter_batches

KEY = b"k" * 10
VALUE = b"v" * 100
TIMESTAMP_MS = 1_700_000_000_000


C_BUILT = _accel.ACCELERATED
T = TypeVar("T")


@contextmanager
def implementation(accelerated: bool) -> Iterator[None]:
    """Run kclient's C (True) or pure-Python (False) record code meanwhile."""
    saved = _accel.ACCELERATED
    _accel.ACCELERATED = accelerated
    try:
        yield
    finally:
        _accel.ACCELERATED = saved


def kclient_build(codec: CompressionType, batch_size: int, total: int) -> tuple[int, list[bytes]]:
    """Build batches until ``total`` records are in them; returns (records, batches)."""
    records = 0
    batches = []
    key, value, ts = KEY, VALUE, TIMESTAMP_MS
    while records < total:
        builder = RecordBatchBuilder(codec, batch_size)
        append = builder.append
        while append(ts, key, value) >= 0:
            pass
        records += builder.record_count
        batches.append(builder.build())
    return records, batches


def kafka_python_build(
    codec: CompressionType, batch_size: int, total: int
) -> tuple[int, list[bytes]]:
    records = 0
    batches = []
    key, value, ts = KEY, VALUE, TIMESTAMP_MS
    while records < total:
        builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, batch_size)
        append = builder.append
        offset = 0
        while append(offset, ts, key, value, []) is not None:
            offset += 1
        records += offset
        batches.append(bytes(builder.build()))
    return records, batches


def kclient_read(data: bytes) -> int:
    records = 0
    for batch in iter_batches(data):
        for record in batch.records():
            if record.value is not None:
                records += 1
    return records


def kafka_python_read(data: bytes) -> int:
    records = 0
    memory_records = MemoryRecords(data)
    while memory_records.has_next():
        batch = memory_records.next_batch()
        assert batch is not None
        for record in batch:
            if record.value is not None:
                records += 1
    return records


def best_of(trials: int, runs: list[Callable[[], int]]) -> list[float]:
    """Run each callable ``trials`` times, alternating; the best records/s of each."""
    best = [0.0] * len(runs)
    for _ in range(trials):
        for index, run in enumerate(runs):
            start = time.process_time()
            records = run()
            rate = records / (time.process_time() - start)
            best[index] = max(best[index], rate)
    return best


def kclient_runs(run: Callable[[], T]) -> list[Callable[[], T]]:
    """``run`` with the C code (when built), then with the pure-Python code."""

    def with_impl(accelerated: bool) -> Callable[[], T]:
        def timed() -> T:
            with implementation(accelerated):
                return run()

        return timed

    return [with_impl(True), with_impl(False)] if C_BUILT else [with_impl(False)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=7, help="best of N per cell")
    parser.add_argument("--mib", type=float, default=8.0, help="MiB of records per trial")
    parser.add_argument("--codecs", default="none,lz4", help="comma-separated codec names")
    parser.add_argument("--batch-sizes", default="16384,1048576", help="comma-separated bytes")
    args = parser.parse_args(argv)

    record_bytes = len(KEY) + len(VALUE)
    total = int(args.mib * 1024 * 1024 / record_bytes)
    rows = []
    for codec_name in args.codecs.split(","):
        codec = CompressionType.from_name(codec_name)
        for batch_size in (int(size) for size in args.batch_sizes.split(",")):
            label = (
                f"{batch_size // 1024} KiB" if batch_size < 1 << 20 else f"{batch_size >> 20} MiB"
            )
            # kclient's implementations write the same bytes; all three read the same records.
            built = [
                run()
                for run in kclient_runs(lambda: kclient_build(codec, batch_size, total)[1])  # noqa: B023
            ]
            assert all(batches == built[0] for batches in built)
            data = b"".join(kafka_python_build(codec, batch_size, total)[1])
            counts = [run() for run in kclient_runs(lambda: kclient_read(data))]  # noqa: B023
            assert counts == [kafka_python_read(data)] * len(counts)
            build_rates = best_of(
                args.trials,
                [
                    *kclient_runs(lambda: kclient_build(codec, batch_size, total)[0]),  # noqa: B023
                    lambda: kafka_python_build(codec, batch_size, total)[0],  # noqa: B023
                ],
            )
            read_rates = best_of(
                args.trials,
                [*kclient_runs(lambda: kclient_read(data)), lambda: kafka_python_read(data)],  # noqa: B023
            )
            for op, rates in (("build", build_rates), ("read", read_rates)):
                rows.append((op, codec_name, label, rates))

    def mb(rate: float) -> str:
        return f"{rate * record_bytes / 1e6:,.1f}"

    names = ["kclient C", "kclient Python"] if C_BUILT else ["kclient Python"]
    names.append("kafka-python")
    print(
        "| op | codec | batch | "
        + " | ".join(f"{name} rec/s | {name} MB/s" for name in names)
        + " | "
        + " | ".join(f"{name} / kafka-python" for name in names[:-1])
        + " |"
    )
    print("|---|---|---|" + "---:|" * (3 * len(names) - 1))
    for op, codec_name, label, rates in rows:
        cells = [f"{rate:,.0f} | {mb(rate)}" for rate in rates]
        ratios = [f"{rate / rates[-1]:.2f}x" for rate in rates[:-1]]
        print(f"| {op} | {codec_name} | {label} | " + " | ".join(cells + ratios) + " |")
    print()
    print(
        f"{len(KEY)}-byte keys, {len(VALUE)}-byte values, no headers; {args.mib:g} MiB of "
        f"records per trial, best of {args.trials} (CPU time); MB/s = key + value bytes."
    )
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.machine()}, nproc={os.cpu_count()}, "
        f"kafka-python {metadata.version('kafka-python')}, lz4 {metadata.version('lz4')}, "
        f"crc32c {metadata.version('crc32c')}; C accelerator built: {C_BUILT}"
    )
    print(f"Command: {shlex.join([os.path.basename(sys.executable), *sys.argv])}")


if __name__ == "__main__":
    main()
