"""Broker-side validation of a produced batch: microseconds per batch, per codec.

    .venv/bin/python benchmarks/log_validation.py [--batch-bytes 16384] [--size 100] [--rounds 5]

Batches of ``--size``-byte records (half random hex, half repeated text: about 2:1 for
the codecs) filling ``--batch-bytes`` uncompressed, as kclient's producer builds them.
Each is validated the way the embedded broker validates a Produce partition
(``kclient.broker.log_validator.validate_records``: header, CRC, decompression within
max.message.bytes, the record walk, the max timestamp). Columns, in microseconds per
batch (best of ``--rounds``, each round at least 0.2 s of calls):

* *header + CRC*: what the broker checked before the record walk (iter_batches with the
  CRC), the baseline;
* *validate (C walk)*: the full validation with the C record walk;
* *validate (Python walk)*: the same with ``KCLIENT_PURE_PYTHON``'s walk;
* *decode records*: for scale, decoding every record into objects
  (``RecordBatch.records()``, C decoder), what a consumer-side check would cost.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kclient.broker.config import DEFAULT_MESSAGE_MAX_BYTES  # noqa: E402
from kclient.broker.log_validator import validate_records  # noqa: E402
from kclient.record import RecordBatchBuilder, _accel, iter_batches  # noqa: E402

CODECS = ("none", "lz4", "zstd", "gzip", "snappy")


def make_batch(codec: str, batch_bytes: int, size: int) -> tuple[bytes, int]:
    builder = RecordBatchBuilder(codec, batch_bytes)
    now_ms = int(time.time() * 1000)
    i = 0
    while True:
        half = size // 2
        value = os.urandom(half // 2).hex().encode()[:half] + b"x" * (size - half)
        if builder.append(now_ms + i, None, value) < 0:
            break
        i += 1
    return builder.build(), i


def per_call_us(fn: Callable[[], object], rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        calls = 0
        start = time.perf_counter()
        while True:
            fn()
            calls += 1
            elapsed = time.perf_counter() - start
            if elapsed >= 0.2:
                break
        best = min(best, elapsed / calls)
    return best * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-bytes", type=int, default=16384)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    if not _accel.ACCELERATED:
        sys.exit("build the C accelerator first (setup.py build_ext --inplace)")
    print(
        f"{args.size} B records, batches of {args.batch_bytes} B uncompressed, "
        f"best of {args.rounds}; microseconds per batch\n"
    )
    print(
        "| codec | records | batch bytes | header + CRC | validate (C walk) "
        "| validate (Python walk) | decode records |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for codec in CODECS:
        data, count = make_batch(codec, args.batch_bytes, args.size)

        def header_crc(data: bytes = data) -> None:
            for _ in iter_batches(memoryview(bytearray(data)), validate_crc=True):
                pass

        def validate(data: bytes = data) -> None:
            validate_records(
                memoryview(bytearray(data)),
                max_batch_bytes=DEFAULT_MESSAGE_MAX_BYTES,
                produce_version=9,
            )

        def decode(data: bytes = data) -> None:
            for batch in iter_batches(data):
                for _ in batch.records():
                    pass

        base = per_call_us(header_crc, args.rounds)
        fast = per_call_us(validate, args.rounds)
        _accel.ACCELERATED = False
        try:
            slow = per_call_us(validate, args.rounds)
        finally:
            _accel.ACCELERATED = True
        decoded = per_call_us(decode, args.rounds)
        print(
            f"| {codec} | {count} | {len(data):,} | {base:.1f} | {fast:.1f} | {slow:.1f} "
            f"| {decoded:.1f} |"
        )


if __name__ == "__main__":
    main()
