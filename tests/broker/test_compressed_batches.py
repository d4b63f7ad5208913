"""A compressed batch must decompress, and not beyond ``max.message.bytes``, before the
broker stores it: a batch whose payload is not its codec's, or a small batch that expands
to gigabytes, is refused and never reaches a consumer."""

from __future__ import annotations

import struct
from typing import Any

import pytest
import zstandard
from crc32c import crc32c

from kclient import errors
from kclient.record import RecordBatchBuilder
from kclient.record.layout import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE
from tests.broker.conftest import NOW_MS, batch


def with_payload(built: bytes, payload: bytes) -> bytes:
    """``built`` (a compressed batch) with its records section replaced, lengths and CRC
    fixed: a well-formed batch whose compressed data is ``payload``."""
    buf = bytearray(built[:HEADER_SIZE] + payload)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return bytes(buf)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_codec_is_accepted_and_read_back(harness: Any, codec: str) -> None:
    harness.controller.create_topic("t", 1)
    values = [b"value %d " % i * 20 for i in range(50)]
    assert harness.produce("t", batch(values, compression=codec))["error_code"] == 0
    records = [
        r.value
        for b in harness.controller.partition("t", 0).log.iter_batches()
        for r in b.records()
    ]
    assert records == values


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_a_payload_that_is_not_the_codecs_is_corrupt_and_not_stored(
    harness: Any, codec: str
) -> None:
    harness.controller.create_topic("t", 1)
    bad = with_payload(batch([b"x"] * 10, compression=codec), b"this is not compressed data" * 4)
    result = harness.produce("t", bad)
    # before: acknowledged (error 0), and consumers then failed to decompress it
    assert result["error_code"] == errors.CorruptMessageError.code
    assert harness.controller.partition("t", 0).log.high_watermark == 0


def test_a_small_batch_that_expands_past_max_message_bytes_is_refused(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    bomb = zstandard.ZstdCompressor(level=19).compress(bytes(256 * 1024 * 1024))
    assert len(bomb) < 64 * 1024
    built = RecordBatchBuilder("zstd", batch_size=1 << 20)
    built.append(NOW_MS, None, b"x", ())
    result = harness.produce("t", with_payload(built.build(), bomb))
    assert result["error_code"] == errors.MessageTooLargeError.code
    assert "max.message.bytes" in (result["error_message"] or "")
    assert harness.controller.partition("t", 0).log.high_watermark == 0
