"""Record batches as a broken or hostile client sends them, to test a broker with.

Each is RecordBatch v2 with a valid CRC around records that Kafka's ``LogValidator``
refuses: a count that does not match the records, bytes after the last record, a gzip
batch whose payload is not gzip, a zstd "bomb" (a small frame that expands past any
``max.message.bytes``). :func:`raw_batch` and :func:`record` build others, and
:func:`produce_request` puts one in a Produce request (or many empty partition entries:
a request larger in Python objects than on the wire); :func:`read_frame` reads the answer
off a raw socket. Pure functions but ``read_frame``: any thread.
``zstandard`` is needed only by :func:`zstd_bomb`.
"""

from __future__ import annotations

import socket
import struct

from crc32c import crc32c

from kclient.protocol import ApiKey
from kclient.protocol.frame import encode_request
from kclient.record.compression import CompressionType
from kclient.record.layout import (
    ATTRIBUTES_OFFSET,
    CRC,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
)
from kclient.record.varint import encode_varint

__all__ = [
    "bad_gzip_batch",
    "count_mismatch_batch",
    "produce_request",
    "raw_batch",
    "read_frame",
    "record",
    "trailing_bytes_batch",
    "zstd_bomb",
    "zstd_bomb_batch",
]


def record(
    offset_delta: int, value: bytes = b"value", ts_delta: int = 0, key: bytes = b"k"
) -> bytes:
    """One record (no headers) with the given offset and timestamp deltas."""
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta)
    body += encode_varint(len(key)) + key + encode_varint(len(value)) + value + b"\x00"
    return encode_varint(len(body)) + body


def raw_batch(
    records: bytes,
    count: int,
    *,
    codec: CompressionType = CompressionType.NONE,
    last_offset_delta: int | None = None,
    timestamp_ms: int = 0,
    max_timestamp: int | None = None,
) -> bytes:
    """A v2 batch around a records section exactly as given (already compressed when
    ``codec`` says so), announcing ``count`` records, with a valid CRC."""
    header = bytearray(
        HEADER.pack(
            0,
            HEADER_SIZE - LOG_OVERHEAD + len(records),
            -1,
            MAGIC,
            0,
            int(codec),
            count - 1 if last_offset_delta is None else last_offset_delta,
            timestamp_ms,
            timestamp_ms if max_timestamp is None else max_timestamp,
            -1,
            -1,
            -1,
            count,
        )
    )
    batch = header + records
    CRC.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def count_mismatch_batch(timestamp_ms: int = 0) -> bytes:
    """Two records in a batch that announces three (a consistent last offset delta 2)."""
    return raw_batch(record(0) + record(1), 3, timestamp_ms=timestamp_ms)


def trailing_bytes_batch(timestamp_ms: int = 0) -> bytes:
    """One record followed by nine bytes that are no record."""
    return raw_batch(record(0) + b"\x00" * 9, 1, timestamp_ms=timestamp_ms)


def bad_gzip_batch(timestamp_ms: int = 0) -> bytes:
    """A batch marked gzip whose payload is plain records."""
    return raw_batch(
        record(0) + record(1), 2, codec=CompressionType.GZIP, timestamp_ms=timestamp_ms
    )


def zstd_bomb(records: int, value_size: int) -> bytes:
    """A small zstd frame of ``records`` records of ``value_size`` zero bytes each, made
    without holding them all (no content size in the frame, as Java writes it)."""
    import zstandard

    compressor = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    value = b"\x00" * value_size
    parts = [compressor.compress(record(i, value)) for i in range(records)]
    parts.append(compressor.flush())
    return b"".join(parts)


def zstd_bomb_batch(records: int = 1024, value_size: int = 1 << 20, timestamp_ms: int = 0) -> bytes:
    """A zstd batch of about 32 KiB whose records expand to ``records * value_size`` bytes
    (1 GiB by default)."""
    return raw_batch(
        zstd_bomb(records, value_size),
        records,
        codec=CompressionType.ZSTD,
        timestamp_ms=timestamp_ms,
    )


def produce_request(
    topic: str,
    records: bytes | None,
    partitions: int = 1,
    correlation_id: int = 1,
    acks: int = 1,
) -> bytes:
    """A size-prefixed Produce v9 request of ``records`` to partition 0 of ``topic`` and,
    with ``partitions`` > 1, that many more entries of null records (an index and a null:
    six bytes each on the wire)."""
    body = {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 5000,
        "topic_data": [
            {
                "name": topic,
                "partition_data": [
                    {"index": i, "records": records if i == 0 else None} for i in range(partitions)
                ],
            }
        ],
    }
    return b"".join(encode_request(ApiKey.PRODUCE, 9, correlation_id, "hostile", body))


def read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed response from ``sock``, without its size; ConnectionError if the
    broker closes the connection first."""

    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)
