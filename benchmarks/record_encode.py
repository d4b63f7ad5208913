"""Record batch encode/decode throughput: kclient.record vs kafka-python, in one run.

Builds and reads v2 record batches of 100-byte values with 10-byte keys, in 16 KiB and
1 MiB batches, uncompressed and lz4, with kclient's ``RecordBatchBuilder`` /
``iter_batches`` and kafka-python's ``DefaultRecordBatchBuilder`` / ``MemoryRecords``.
Trials of the two libraries alternate and the best trial of each counts (the least
disturbed by other work on the machine); time is the process's CPU time, so other busy
processes slow a trial less than they would its wall-clock time. MB/s counts key + value
bytes.

    .venv/bin/python benchmarks/record_encode.py [--trials 7] [--mib 4] [--codecs none,lz4]

Prints a Markdown table and the machine it ran on.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from importlib import metadata

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kclient.record import CompressionType, RecordBatchBuilder, iter_batches

KEY = b"k" * 10
VALUE = b"v" * 100
TIMESTAMP_MS = 1_700_000_000_000


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
            build_rates = best_of(
                args.trials,
                [
                    lambda: kclient_build(codec, batch_size, total)[0],  # noqa: B023
                    lambda: kafka_python_build(codec, batch_size, total)[0],  # noqa: B023
                ],
            )
            # Both libraries read the same bytes; check they agree before timing.
            _, batches = kafka_python_build(codec, batch_size, total)
            data = b"".join(batches)
            assert kclient_read(data) == kafka_python_read(data) > 0
            read_rates = best_of(
                args.trials,
                [lambda: kclient_read(data), lambda: kafka_python_read(data)],  # noqa: B023
            )
            for op, (ours, theirs) in (("build", build_rates), ("read", read_rates)):
                rows.append((op, codec_name, label, ours, theirs))

    def mb(rate: float) -> str:
        return f"{rate * record_bytes / 1e6:,.1f}"

    print(
        "| op | codec | batch | kclient rec/s | kclient MB/s | kafka-python rec/s "
        "| kafka-python MB/s | kclient / kafka-python |"
    )
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for op, codec_name, label, ours, theirs in rows:
        print(
            f"| {op} | {codec_name} | {label} | {ours:,.0f} | {mb(ours)} | {theirs:,.0f} "
            f"| {mb(theirs)} | {ours / theirs:.2f}x |"
        )
    print()
    print(
        f"{len(KEY)}-byte keys, {len(VALUE)}-byte values, no headers; {args.mib:g} MiB of "
        f"records per trial, best of {args.trials} (CPU time); MB/s = key + value bytes."
    )
    print(
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.machine()}, nproc={os.cpu_count()}, "
        f"kafka-python {metadata.version('kafka-python')}, lz4 {metadata.version('lz4')}, "
        f"crc32c {metadata.version('crc32c')}"
    )
    print(f"Command: {shlex.join([os.path.basename(sys.executable), *sys.argv])}")


if __name__ == "__main__":
    main()
