"""Produce through Apis: batches Kafka's LogValidator refuses are refused with its error codes
(per-record ``record_errors`` with Produce v8+), and nothing of them is stored."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.protocol import ApiKey
from kclient.record.compression import CompressionType, compress
from kclient.record.varint import encode_varint
from kclient.testing.hostile import raw_batch, record, zstd_bomb

from .conftest import NOW_MS


def batch_at_now(records: bytes, count: int, **kwargs: Any) -> bytes:
    return raw_batch(records, count, timestamp_ms=NOW_MS, **kwargs)


INVALID_RECORD = errors.InvalidRecordError.code
CORRUPT_MESSAGE = errors.CorruptMessageError.code
MESSAGE_TOO_LARGE = errors.MessageTooLargeError.code


def stored(h: Any) -> int:
    return int(h.controller.partition("t", 0).log.high_watermark)


@pytest.fixture
def h(make_harness: Any) -> Any:
    harness = make_harness()
    harness.controller.create_topic("t", 1)
    return harness


def test_a_count_above_the_records_is_invalid_and_not_stored(h: Any) -> None:
    """On main this was acknowledged (error 0) and stored."""
    result = h.produce("t", batch_at_now(record(0) + record(1), 3))
    assert result["error_code"] == INVALID_RECORD
    assert "the records end after 2 of the 3" in result["error_message"]
    assert stored(h) == 0


def test_a_count_below_the_records_is_invalid(h: Any) -> None:
    result = h.produce("t", batch_at_now(record(0) + record(1) + record(2), 2))
    assert result["error_code"] == INVALID_RECORD
    assert "bytes are left after the 2 records" in result["error_message"]
    assert stored(h) == 0


def test_bytes_after_the_last_record_are_invalid(h: Any) -> None:
    """On main this was acknowledged (error 0) and stored."""
    result = h.produce("t", batch_at_now(record(0) + b"\x00" * 9, 1))
    assert result["error_code"] == INVALID_RECORD
    assert "9 bytes are left after the 1 records" in result["error_message"]
    assert stored(h) == 0


def test_a_gzip_batch_that_is_not_gzip_is_corrupt(h: Any) -> None:
    """On main this was acknowledged (error 0); consumers then failed to decompress it."""
    payload = record(0) + record(1)  # records, not a gzip stream
    result = h.produce("t", batch_at_now(payload, 2, codec=CompressionType.GZIP))
    assert result["error_code"] == CORRUPT_MESSAGE
    assert "gzip data does not decompress" in result["error_message"]
    assert stored(h) == 0


def test_a_truncated_gzip_stream_is_corrupt(h: Any) -> None:
    payload = compress(CompressionType.GZIP, record(0) + record(1))[:-6]
    result = h.produce("t", batch_at_now(payload, 2, codec=CompressionType.GZIP))
    assert result["error_code"] == CORRUPT_MESSAGE
    assert stored(h) == 0


def test_a_zstd_bomb_over_the_limit_is_too_large_and_not_stored(h: Any) -> None:
    """32 KiB of zstd that expands to 256 MiB: refused once 1 MiB (max.message.bytes) is
    passed. On main it was acknowledged and stored (ListOffsets then decompressed it)."""
    bomb = zstd_bomb(256, 1 << 20)
    assert len(bomb) < 64 * 1024
    result = h.produce("t", batch_at_now(bomb, 256, codec=CompressionType.ZSTD))
    assert result["error_code"] == MESSAGE_TOO_LARGE
    assert "max.message.bytes (1048588)" in result["error_message"]
    assert stored(h) == 0


def test_the_limit_is_the_topics_max_message_bytes(make_harness: Any) -> None:
    h = make_harness()
    h.controller.create_topic("t", 1, configs={"max.message.bytes": "200000"})
    fits = zstd_bomb(1, 150_000)
    assert h.produce("t", batch_at_now(fits, 1, codec=CompressionType.ZSTD))["error_code"] == 0
    over = zstd_bomb(1, 250_000)
    result = h.produce("t", batch_at_now(over, 1, codec=CompressionType.ZSTD))
    assert result["error_code"] == MESSAGE_TOO_LARGE
    assert "max.message.bytes (200000)" in result["error_message"]
    assert stored(h) == 1


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_every_codec_is_walked_after_decompression(h: Any, codec: str) -> None:
    kind = CompressionType.from_name(codec)
    good = batch_at_now(compress(kind, record(0) + record(1)), 2, codec=kind)
    assert h.produce("t", good)["error_code"] == 0
    gap = batch_at_now(compress(kind, record(0) + record(2)), 2, codec=kind)
    result = h.produce("t", gap)
    assert result["error_code"] == INVALID_RECORD
    assert "offset delta 2, expected 1" in result["error_message"]
    assert stored(h) == 2


def test_a_bad_record_is_named_in_record_errors_with_produce_v8(h: Any) -> None:
    batch = batch_at_now(record(0) + record(1) + record(5), 3)
    result = h.produce("t", batch, version=9)
    assert result["error_code"] == INVALID_RECORD
    assert [e["batch_index"] for e in result["record_errors"]] == [2]
    assert "offset delta 5, expected 2" in result["record_errors"][0]["batch_index_error_message"]
    assert "record batch at byte 0: record 2: offset delta 5" in result["error_message"]
    assert stored(h) == 0


def test_before_produce_v8_only_the_error_code_comes_back(h: Any) -> None:
    body = h.call(
        ApiKey.PRODUCE,
        7,
        {
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [
                {
                    "name": "t",
                    "partition_data": [
                        {"index": 0, "records": batch_at_now(record(0) + record(5), 2)}
                    ],
                }
            ],
        },
    )
    part = body["responses"][0]["partition_responses"][0]
    assert part["error_code"] == INVALID_RECORD
    assert stored(h) == 0


def test_a_header_key_that_is_not_utf8_is_a_record_error(h: Any) -> None:
    body = b"\x00\x00\x02" + encode_varint(1) + b"k" + encode_varint(1) + b"v"
    body += encode_varint(1) + encode_varint(2) + b"\xff\xfe" + encode_varint(-1)
    bad = encode_varint(len(body)) + body
    result = h.produce("t", batch_at_now(record(0) + bad, 2))
    assert result["error_code"] == INVALID_RECORD
    assert result["record_errors"][0]["batch_index"] == 1
    assert "header 0 key is not UTF-8" in result["error_message"]


def test_two_batches_for_one_partition_are_invalid(h: Any, make_batch: Any) -> None:
    result = h.produce("t", make_batch([b"a"]) + make_batch([b"b"]))
    assert result["error_code"] == INVALID_RECORD
    assert "must be one record batch" in result["error_message"]
    assert stored(h) == 0


def test_an_inconsistent_last_offset_delta_is_invalid(h: Any) -> None:
    result = h.produce("t", batch_at_now(record(0) + record(1), 2, last_offset_delta=5))
    assert result["error_code"] == INVALID_RECORD
    assert stored(h) == 0


def test_a_lying_max_timestamp_is_set_to_the_records(h: Any) -> None:
    """Kafka sets the batch's maxTimestamp from its records: ListOffsets trusts it."""
    batch = batch_at_now(record(0, ts_delta=5) + record(1, ts_delta=70), 2, max_timestamp=1)
    assert h.produce("t", batch)["error_code"] == 0
    (stored_batch,) = h.controller.partition("t", 0).log.iter_batches()
    assert stored_batch.max_timestamp == NOW_MS + 70  # and its CRC still holds (iter checks)


def test_valid_batches_of_the_producer_still_pass(h: Any, make_batch: Any) -> None:
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        batch = make_batch([b"x" * 100] * 50, compression=codec, headers=[("h", b"1")])
        assert h.produce("t", batch)["error_code"] == 0
    assert stored(h) == 250
