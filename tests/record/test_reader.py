"""Reading batches (Java: DefaultRecordBatch / MemoryRecords) and the broker's in-place rewrites."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from crc32c import crc32c

from kclient.errors import CorruptRecordError
from kclient.record import (
    CompressionType,
    RecordBatch,
    RecordBatchBuilder,
    assign_offsets,
    iter_batches,
    set_log_append_time,
    set_partition_leader_epoch,
)

TS = 1_700_000_000_000


def build(values: list[bytes], codec: CompressionType = CompressionType.NONE, **kw: Any) -> bytes:
    builder = RecordBatchBuilder(codec, 1 << 20, **kw)
    for index, value in enumerate(values):
        builder.append(TS + index, b"k%d" % index, value)
    return builder.build()


def with_crc(batch: bytearray) -> bytearray:
    """Recompute the CRC after a test edits the header or records (independently of kclient)."""
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    return batch


FIRST, SECOND, THIRD = (
    build([b"a", b"b"]),
    build([b"c"], CompressionType.LZ4),
    build([b"d", b"e", b"f"]),
)


def three_batches() -> bytes:
    return FIRST + SECOND + THIRD


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_iterates_batches_in_a_buffer(wrap: type) -> None:
    data = three_batches()
    batches = list(iter_batches(wrap(data)))
    assert [b.record_count for b in batches] == [2, 1, 3]
    assert [b.position for b in batches] == [0, len(FIRST), len(FIRST) + len(SECOND)]
    assert [b.size_in_bytes for b in batches] == [len(FIRST), len(SECOND), len(THIRD)]
    assert batches[1].raw.tobytes() == SECOND
    assert [r.value for b in batches for r in b.records()] == [b"a", b"b", b"c", b"d", b"e", b"f"]


def test_a_truncated_trailing_batch_is_skipped() -> None:
    data = three_batches()
    last_start = len(FIRST) + len(SECOND)
    for cut in range(last_start, len(data)):
        batches = list(iter_batches(data[:cut]))
        assert [b.record_count for b in batches] == [2, 1], cut
    assert list(iter_batches(b"")) == []


def test_bad_crc_names_the_batch_offset() -> None:
    data = bytearray(three_batches())
    second = len(FIRST)
    data[second + 70] ^= 0x01  # a byte inside the second batch's records
    with pytest.raises(CorruptRecordError, match=f"batch at byte {second}: CRC mismatch"):
        list(iter_batches(data))
    # without CRC validation the damage shows only when decoding (lz4 data) - or not at all
    assert len(list(iter_batches(data, validate_crc=False))) == 3


def test_unsupported_magic_is_named() -> None:
    data = bytearray(build([b"a"]))
    data[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1 is not supported"):
        list(iter_batches(data))


@pytest.mark.parametrize("length", [-1, -(2**31), 0, 48])
def test_impossible_batch_length(length: int) -> None:
    data = bytearray(build([b"a"]))
    struct.pack_into(">i", data, 8, length)
    with pytest.raises(CorruptRecordError, match=f"batchLength {length} is below the minimum"):
        list(iter_batches(data))


def test_batch_constructor_checks_length_against_buffer() -> None:
    data = build([b"a"])
    with pytest.raises(CorruptRecordError, match="does not match"):
        RecordBatch(data + b"\x00")
    with pytest.raises(CorruptRecordError, match="shorter than the 61-byte"):
        RecordBatch(data[:60])


@pytest.mark.parametrize(
    ("count", "message"),
    [
        (0, "118 bytes are left after the 0 records"),
        (1, "59 bytes are left after the 1 records"),
        (3, "records end before 3 records were read"),
    ],
)
def test_record_count_must_match_the_records(count: int, message: str) -> None:
    data = bytearray(build([b"a" * 50, b"b" * 50]))
    struct.pack_into(">i", data, 57, count)
    (batch,) = iter_batches(with_crc(data))
    with pytest.raises(CorruptRecordError, match=f"record batch at byte 0: {message}"):
        list(batch.records())


@pytest.mark.parametrize("count", [-5, 3, 2**31 - 1])
def test_impossible_record_count_fails_validation(count: int) -> None:
    data = bytearray(build([b"a"]))  # 10 bytes of records: room for at most one
    struct.pack_into(">i", data, 57, count)
    with pytest.raises(CorruptRecordError, match=f"record count {count} is impossible"):
        list(iter_batches(with_crc(data)))
    with pytest.raises(CorruptRecordError, match=f"record count {count} is impossible"):
        list(iter_batches(data, validate_crc=False))


def test_record_length_beyond_the_batch() -> None:
    data = bytearray(build([b"a"]))
    data[61] = 0x7E  # record length varint: 63, far more than is there
    with pytest.raises(CorruptRecordError, match="record 0 at byte 1 has length 63"):
        list(RecordBatch(with_crc(data)).records())


def test_record_fields_must_fill_the_record_length() -> None:
    data = bytearray(build([b"abc"]))
    data[61] -= 2  # length one less than the fields take
    with pytest.raises(CorruptRecordError, match="fields take"):
        list(RecordBatch(with_crc(data)).records())


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id(codec_id: int) -> None:
    data = bytearray(build([b"a"]))
    data[22] = codec_id
    with pytest.raises(CorruptRecordError, match=f"unknown compression codec id {codec_id}"):
        list(iter_batches(with_crc(data)))


def test_corrupt_compressed_records() -> None:
    data = bytearray(build([b"a" * 100, b"b" * 100], CompressionType.GZIP))
    data[-10] ^= 0xFF
    (batch,) = iter_batches(with_crc(data))
    with pytest.raises(CorruptRecordError, match="byte 0: gzip data does not decompress"):
        list(batch.records())


def test_assign_offsets_and_leader_epoch_leave_the_crc_valid() -> None:
    request = bytearray(three_batches())
    view = memoryview(request)
    next_offset = 1000
    for batch in list(iter_batches(request)):  # the broker's loop: one view per batch
        start = batch.position
        batch_view = view[start : start + batch.size_in_bytes]
        assign_offsets(batch_view, next_offset)
        set_partition_leader_epoch(batch_view, 12)
        next_offset += batch.record_count
    batches = list(iter_batches(request))  # CRCs still valid
    assert [b.base_offset for b in batches] == [1000, 1002, 1003]
    assert {b.partition_leader_epoch for b in batches} == {12}
    assert [r.offset for b in batches for r in b.records()] == list(range(1000, 1006))


def test_log_append_time_rewrites_the_crc() -> None:
    data = bytearray(build([b"a", b"b"], CompressionType.ZSTD))
    set_log_append_time(data, TS + 777)
    (batch,) = iter_batches(data)  # CRC valid again
    assert batch.timestamp_type == 1
    assert batch.compression is CompressionType.ZSTD
    assert (batch.first_timestamp, batch.max_timestamp) == (TS, TS + 777)
    assert [r.timestamp for r in batch.records()] == [TS + 777, TS + 777]


@pytest.mark.parametrize(
    "rewrite",
    [
        lambda buf: assign_offsets(buf, 1),
        lambda buf: set_partition_leader_epoch(buf, 1),
        lambda buf: set_log_append_time(buf, TS),
    ],
)
def test_rewrites_refuse_what_is_not_a_batch(rewrite: object) -> None:
    for bad in (bytearray(30), bytearray(61), bytearray(build([b"a"]))[:-1]):
        bad[16] = 2 if len(bad) > 16 else 0
        with pytest.raises(CorruptRecordError, match="cannot"):
            rewrite(bad)  # type: ignore[operator]


def test_records_raises_before_handing_out_any_record() -> None:
    data = bytearray(build([b"a" * 50, b"b" * 50]))
    struct.pack_into(">i", data, 57, 3)  # one record more than there are
    (batch,) = iter_batches(with_crc(data))
    with pytest.raises(CorruptRecordError, match="records end before 3 records were read"):
        batch.records()  # not iterated: the whole batch is checked first


def test_records_iterate_once_each_and_can_stop_early() -> None:
    batch = RecordBatch(build([b"a", b"b", b"c"]))
    records = batch.records()
    assert next(records).value == b"a"
    assert [r.value for r in records] == [b"b", b"c"]
    assert list(records) == []
    assert list(batch.records()) == list(batch.records())  # each call starts over
    assert list(RecordBatch(build([b"x"] * 5000)).records())[-1].offset == 4999


def test_offsets_and_timestamps_wrap_around_64_bits_as_in_java() -> None:
    builder = RecordBatchBuilder(CompressionType.NONE, base_offset=2**63 - 2)
    for ts in (-(2**63), 2**63 - 1, -(2**63) + 5):  # deltas 0, 2**64 - 1 (-1), 5
        builder.append(ts, None, b"v")
    records = list(RecordBatch(builder.build()).records())
    assert [r.offset for r in records] == [2**63 - 2, 2**63 - 1, -(2**63)]
    assert [r.timestamp for r in records] == [-(2**63), 2**63 - 1, -(2**63) + 5]
