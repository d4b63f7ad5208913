"""Rough throughput of the codec on the broker's and the client's hottest message.

Not collected by pytest. Run: .venv/bin/python tests/protocol/bench_produce.py

Encodes and decodes a ProduceRequest v9 with 1 topic x 3 partitions x 64 KiB of records
(records go by reference on encode and come back as zero-copy views on decode). Then the
producer's round trip in its common shape (``produce_fast``: a one-partition request of a
170-byte batch and its answer), Python reference and C side by side, and through
``frame.encode_request``/``decode_response`` (whichever ``produce_fast`` runs).
"""

from __future__ import annotations

import functools
import timeit
from collections.abc import Callable

from kclient.protocol import ApiKey, produce_fast
from kclient.protocol.frame import (
    _encode_request,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    frame_bytes,
)


def _best_us(fn: Callable[[], object], number: int = 2000) -> float:
    # best of 7 runs: the least disturbed by other processes
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e6


def main() -> None:
    records = [bytes(64 * 1024) for _ in range(3)]
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [
            {
                "name": "bench-topic",
                "partition_data": [{"index": i, "records": r} for i, r in enumerate(records)],
            }
        ],
    }
    frame = frame_bytes(encode_request(ApiKey.PRODUCE, 9, 1, "bench", body))[4:]
    encode = functools.partial(encode_request, ApiKey.PRODUCE, 9, 1, "bench", body)
    decode = functools.partial(decode_request, frame)

    def both() -> None:
        encode()
        decode()

    for label, fn in (("encode", encode), ("decode", decode), ("encode+decode", both)):
        best = _best_us(fn) / 1e6
        print(f"{label:>14}: {1 / best:>10,.0f}/s  ({best * 1e6:.2f} µs each)")
    one_partition()


def one_partition() -> None:
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": "lat", "partition_data": [{"index": 0, "records": bytes(170)}]}],
    }
    part = {
        "index": 0,
        "error_code": 0,
        "base_offset": 1234,
        "log_append_time_ms": -1,
        "log_start_offset": 0,
    }
    answer = {"responses": [{"name": "lat", "partition_responses": [part]}], "throttle_time_ms": 0}
    frame = bytearray(frame_bytes(encode_response(ApiKey.PRODUCE, 9, 1, answer))[4:])
    c = produce_fast._c if produce_fast.C_ACCELERATED else None
    print(f"\none partition, v9, 170-byte batch (C in use: {produce_fast.C_ACCELERATED})")
    print(f"{'':>22} {'Python':>8} {'C':>8}  (µs per call)")
    rows: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = [
        (
            "encode_produce",
            lambda: produce_fast.encode_produce_py(9, 1, "bench", body, _encode_request),
            (lambda: c.encode_produce(9, 1, "bench", body, _encode_request)) if c else None,
        ),
        (
            "decode_produce",
            lambda: produce_fast.decode_produce_py(9, frame),
            (lambda: c.decode_produce(9, frame)) if c else None,
        ),
    ]
    for label, py, in_c in rows:
        c_us = f"{_best_us(in_c, 20_000):8.2f}" if in_c else f"{'-':>8}"
        print(f"{label:>22} {_best_us(py, 20_000):8.2f} {c_us}")
    request = _best_us(lambda: encode_request(ApiKey.PRODUCE, 9, 1, "bench", body), 20_000)
    response = _best_us(lambda: decode_response(ApiKey.PRODUCE, 9, frame), 20_000)
    print(f"{'frame.encode_request':>22} {request:8.2f}  (the one in use)")
    print(f"{'frame.decode_response':>22} {response:8.2f}  (the one in use)")


if __name__ == "__main__":
    main()
