"""Record batches as a broken or hostile client sends them, for the broker's tests."""

from __future__ import annotations

import zstandard
from crc32c import crc32c

from kclient.record.compression import CompressionType
from kclient.record.layout import ATTRIBUTES_OFFSET, CRC, CRC_OFFSET, HEADER, HEADER_SIZE
from kclient.record.varint import encode_varint

NOW_MS = 1_700_000_000_000  # conftest.NOW_MS


def record(
    offset_delta: int, value: bytes = b"value", ts_delta: int = 0, key: bytes = b"k"
) -> bytes:
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta)
    body += encode_varint(len(key)) + key + encode_varint(len(value)) + value + b"\x00"
    return encode_varint(len(body)) + body


def raw_batch(
    records: bytes,
    count: int,
    *,
    codec: CompressionType = CompressionType.NONE,
    last_offset_delta: int | None = None,
    max_timestamp: int = NOW_MS,
) -> bytes:
    """A v2 batch around a records section exactly as given, with a valid CRC."""
    header = bytearray(
        HEADER.pack(
            0, HEADER_SIZE - 12 + len(records), -1, 2, 0, int(codec),
            count - 1 if last_offset_delta is None else last_offset_delta,
            NOW_MS, max_timestamp, -1, -1, -1, count,
        )
    )  # fmt: skip
    batch = header + records
    CRC.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
    return bytes(batch)


def zstd_bomb(records: int, value_size: int) -> bytes:
    """A small zstd frame of ``records`` records of ``value_size`` zero bytes each, made
    without holding them all (no content size in the frame, as Java writes it)."""
    compressor = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    value = b"\x00" * value_size
    parts = [compressor.compress(record(i, value)) for i in range(records)]
    parts.append(compressor.flush())
    return b"".join(parts)
