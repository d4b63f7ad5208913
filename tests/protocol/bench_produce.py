"""Rough throughput of the codec on the broker's and the client's hottest message.

Not collected by pytest. Run: .venv/bin/python tests/protocol/bench_produce.py

Encodes and decodes a ProduceRequest v9 with 1 topic x 3 partitions x 64 KiB of records
(records go by reference on encode and come back as zero-copy views on decode).
"""

from __future__ import annotations

import functools
import timeit

from kclient.protocol import ApiKey
from kclient.protocol.frame import decode_request, encode_request, frame_bytes


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
        # best of 7 runs of 2000 calls: the least disturbed by other processes
        best = min(timeit.repeat(fn, number=2000, repeat=7)) / 2000
        print(f"{label:>14}: {1 / best:>10,.0f}/s  ({best * 1e6:.2f} µs each)")


if __name__ == "__main__":
    main()
