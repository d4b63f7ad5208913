"""RecordBatchBuilder: what the producer relies on (Java: MemoryRecordsBuilder behaviour)."""

from __future__ import annotations

import pytest
from crc32c import crc32c

from kclient.errors import ConfigError, IllegalStateError, UnsupportedCodecError
from kclient.record import (
    CompressionType,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    iter_batches,
)

TS = 1_700_000_000_000

# Two records: (TS, b"key", b"value") and (TS + 5, None, b"v2", two headers), uncompressed.
GOLDEN = bytes.fromhex(
    "0000000000000000"  # baseOffset 0
    "00000059"  # batchLength 89
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic 2
    "5665115f"  # crc
    "0000"  # attributes: no codec, CreateTime, not transactional
    "00000001"  # lastOffsetDelta 1
    "0000018bcfe56800"  # baseTimestamp 1700000000000
    "0000018bcfe56805"  # maxTimestamp 1700000000005
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000002"  # 2 records
    # record 0: length 14, attributes, tsDelta 0, offsetDelta 0, key "key", value "value", 0 headers
    "1c"
    "00"
    "00"
    "00"
    "06"
    "6b6579"
    "0a"
    "76616c7565"
    "00"
    # record 1: length 24, tsDelta 5, offsetDelta 1, null key, value "v2", 2 headers
    "30"
    "00"
    "0a"
    "02"
    "01"
    "04"
    "7632"
    "04"
    "0a"
    "7472616365"
    "04"
    "0102"  # "trace": b"\x01\x02"
    "0a"
    "656d707479"
    "01"  # "empty": None
)


def golden_builder() -> RecordBatchBuilder:
    builder = RecordBatchBuilder(CompressionType.NONE, 16384)
    assert builder.append(TS, b"key", b"value") == 0
    assert builder.append(TS + 5, None, b"v2", [("trace", b"\x01\x02"), ("empty", None)]) == 1
    return builder


def test_crc32c_is_castagnoli() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the published CRC-32C check value


def test_golden_uncompressed_batch() -> None:
    data = golden_builder().build()
    assert data == GOLDEN
    (batch,) = iter_batches(data)
    assert batch.crc == 0x5665115F == crc32c(GOLDEN[21:])
    assert list(batch.records()) == [
        Record(0, TS, b"key", b"value", []),
        Record(1, TS + 5, None, b"v2", [("trace", b"\x01\x02"), ("empty", None)]),
    ]


def test_size_in_bytes_is_exact_for_uncompressed_batches() -> None:
    builder = golden_builder()
    assert builder.size_in_bytes == len(GOLDEN)
    builder.build()
    assert builder.size_in_bytes == len(GOLDEN)


def test_first_record_is_accepted_whatever_its_size() -> None:
    builder = RecordBatchBuilder(CompressionType.NONE, batch_size=100)
    assert builder.append(TS, b"k", b"x" * 1000) == 0
    assert builder.append(TS, None, b"") == -1
    assert builder.record_count == 1
    assert builder.is_full()
    (batch,) = iter_batches(builder.build())
    assert [r.value for r in batch.records()] == [b"x" * 1000]


def test_fills_up_to_batch_size_then_reports_full() -> None:
    builder = RecordBatchBuilder(CompressionType.NONE, batch_size=1000)
    deltas = []
    while (delta := builder.append(TS, b"0123456789", b"v" * 100)) >= 0:
        deltas.append(delta)
    assert deltas == list(range(len(deltas)))
    record_size = 2 + 1 + 1 + 1 + 1 + 10 + 2 + 100 + 1  # varint length 116 takes 2 bytes
    assert 1000 - record_size < builder.size_in_bytes <= 1000
    assert builder.append(TS, None, b"x" * 2000) == -1  # still full, nothing changed
    assert builder.record_count == len(deltas)
    data = builder.build()
    assert len(data) == builder.size_in_bytes
    assert [r.offset for r in RecordBatch(data).records()] == deltas


def test_empty_batch_is_not_full_and_builds_to_nothing() -> None:
    builder = RecordBatchBuilder()
    assert not builder.is_full()
    assert builder.build() == b""
    assert builder.closed and builder.is_full()


def test_append_after_build_raises() -> None:
    builder = golden_builder()
    first = builder.build()
    for args in (
        (TS, b"k", b"v"),
        (TS, None, b"x" * 100_000),  # would not fit either: still an error, not -1
        (TS, b"k", b"v", [("h", b"")]),
    ):
        with pytest.raises(IllegalStateError, match="already built"):
            builder.append(*args)
    assert builder.build() is first  # build() again returns the same bytes
    empty = RecordBatchBuilder()
    empty.build()
    with pytest.raises(IllegalStateError):
        empty.append(TS, b"k", b"v")


def test_header_fields_and_producer_state() -> None:
    builder = RecordBatchBuilder(
        CompressionType.NONE,
        base_offset=42,
        partition_leader_epoch=7,
        producer_id=1000,
        producer_epoch=3,
        base_sequence=10,
    )
    builder.append(TS + 9, b"a", b"1")
    builder.append(TS, b"b", b"2")  # out of order: max timestamp is still TS + 9
    builder.set_producer_state(2000, 4, 99)  # assigned at drain time, overrides
    (batch,) = iter_batches(builder.build())
    assert (batch.base_offset, batch.partition_leader_epoch) == (42, 7)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (2000, 4, 99)
    assert (batch.first_timestamp, batch.max_timestamp) == (TS + 9, TS + 9)
    assert (batch.last_offset_delta, batch.last_offset, batch.next_offset) == (1, 43, 44)
    assert [(r.offset, r.timestamp) for r in batch.records()] == [(42, TS + 9), (43, TS)]
    assert not batch.is_transactional and not batch.is_control and batch.timestamp_type == 0
    with pytest.raises(IllegalStateError, match="producer state"):
        builder.set_producer_state(1, 1, 1)


def test_transactional_batches_need_a_producer_id() -> None:
    builder = RecordBatchBuilder(is_transactional=True)
    builder.append(TS, b"k", b"v")
    with pytest.raises(IllegalStateError, match="set_producer_state"):
        builder.build()
    builder.set_producer_state(5, 0, 0)
    (batch,) = iter_batches(builder.build())
    assert batch.is_transactional and batch.attributes == 0x10 and batch.producer_id == 5


def test_records_beyond_the_lookup_tables() -> None:
    """Big values, big and negative timestamp deltas and null keys take the general path."""
    big = bytes(range(256)) * 200  # 51,200 bytes
    rows = [
        (TS, None, b"first"),
        (TS + 20_000, None, big),  # delta past the table, null key, long value
        (TS - 3, b"k" * 20_000, None),  # negative delta, long key, null value
        (TS + 1, None, None),
        (TS - 10**9, b"", b""),  # very early
    ]
    builder = RecordBatchBuilder(CompressionType.NONE, batch_size=10**6)
    for index, (ts, key, value) in enumerate(rows):
        assert builder.append(ts, key, value) == index
    data = builder.build()
    assert len(data) == builder.size_in_bytes
    records = list(RecordBatch(data).records())
    assert [(r.timestamp, r.key, r.value) for r in records] == rows
    assert RecordBatch(data).max_timestamp == TS + 20_000


def test_more_records_than_the_offset_delta_table() -> None:
    builder = RecordBatchBuilder(CompressionType.NONE, batch_size=10**7)
    for index in range(20_000):
        assert builder.append(TS + index // 100, None, index.to_bytes(2, "big")) == index
    records = list(RecordBatch(builder.build()).records())
    assert [r.offset for r in records] == list(range(20_000))
    assert records[-1].value == (19_999).to_bytes(2, "big")
    assert records[-1].timestamp == TS + 199


def test_non_bytes_key_is_reported_with_its_record() -> None:
    builder = RecordBatchBuilder()
    builder.append(TS, b"k", b"v")
    builder.append(TS, "text", b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="record 1: key must be bytes or None, got str"):
        builder.build()


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ([(b"name", b"v")], "header key must be str"),
        ([("name", "text")], "value must be bytes or None"),
        ([("name",)], "pair"),
    ],
)
def test_bad_headers_are_rejected_at_append(headers: object, message: str) -> None:
    builder = RecordBatchBuilder()
    with pytest.raises(TypeError, match=message):
        builder.append(TS, b"k", b"v", headers)  # type: ignore[arg-type]
    assert builder.record_count == 0


def test_codec_and_level_checks() -> None:
    assert RecordBatchBuilder("lz4").compression is CompressionType.LZ4
    assert RecordBatchBuilder(4, compression_level=-5).compression is CompressionType.ZSTD
    with pytest.raises(UnsupportedCodecError, match="valid ids"):
        RecordBatchBuilder(7)
    with pytest.raises(UnsupportedCodecError, match="none, gzip, snappy, lz4, zstd"):
        RecordBatchBuilder("brotli")
    with pytest.raises(ConfigError, match=r"compression.gzip.level=10 .* 1..9"):
        RecordBatchBuilder(CompressionType.GZIP, compression_level=10)
    with pytest.raises(ConfigError, match="batch.size"):
        RecordBatchBuilder(CompressionType.NONE, batch_size=-1)


def test_the_active_implementation_is_built(implementation: str) -> None:
    from kclient.record import builder as builder_module

    builder = RecordBatchBuilder()
    assert isinstance(builder, RecordBatchBuilder)
    expected = {"c": "CRecordBatchBuilder", "python": "PyRecordBatchBuilder"}[implementation]
    assert type(builder) is getattr(builder_module, expected)


def test_keyword_arguments() -> None:
    builder = RecordBatchBuilder(CompressionType.NONE, 16384)
    assert builder.append(timestamp_ms=TS, key=b"key", value=b"value") == 0
    assert builder.append(TS + 5, None, b"v2", headers=[("trace", b"\x01\x02"), ("empty", None)])
    assert builder.build() == GOLDEN
    with pytest.raises(TypeError):
        RecordBatchBuilder().append(TS, b"k")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        RecordBatchBuilder().append(TS, b"k", b"v", (), "extra")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        RecordBatchBuilder().append(TS, b"k", b"v", header=())  # type: ignore[call-arg]


def test_timestamps_span_the_whole_64_bit_range() -> None:
    """Deltas wrap around as Java's longs do, and the reader wraps them back."""
    extremes = [2**63 - 1, -(2**63), 0, -1, 2**63 - 1, TS]
    builder = RecordBatchBuilder(CompressionType.NONE)
    for index, ts in enumerate(extremes):
        assert builder.append(ts, None, b"v") == index
    assert (builder.base_timestamp, builder.max_timestamp) == (2**63 - 1, 2**63 - 1)
    (batch,) = iter_batches(builder.build())
    assert [r.timestamp for r in batch.records()] == extremes


@pytest.mark.parametrize("ts", [2**63, -(2**63) - 1, 10**30])
def test_a_timestamp_beyond_64_bits_is_refused(ts: int) -> None:
    builder = RecordBatchBuilder()
    for first in (True, False):
        with pytest.raises(OverflowError, match="does not fit in 64 bits"):
            builder.append(ts, b"k", b"v")
        assert (builder.record_count, builder.base_timestamp) == (
            0 if first else 1,
            0 if first else TS,
        )
        builder.append(TS, b"k", b"v")


def test_a_failed_append_changes_nothing() -> None:
    builder = RecordBatchBuilder()
    with pytest.raises(TypeError):
        builder.append(TS, b"k", b"v", [("h", 1)])  # type: ignore[list-item]
    assert (builder.record_count, builder.base_timestamp, builder.max_timestamp) == (0, 0, -1)
    assert builder.size_in_bytes == 61
    assert builder.append(TS + 1, b"k", b"v") == 0
    assert builder.base_timestamp == TS + 1


def test_a_non_bytes_first_value_fails_the_build_then_the_builder_stays_closed() -> None:
    builder = RecordBatchBuilder()
    assert builder.append(TS, b"k", "text") == 0  # type: ignore[arg-type]
    assert builder.append(TS, b"k", b"v") == 1
    assert builder.size_in_bytes == 61 + 12 + 9  # "text" counted as 4 bytes, by len()
    with pytest.raises(TypeError, match="record 0: value must be bytes or None, got str"):
        builder.build()
    assert builder.closed and builder.is_full()
    with pytest.raises(IllegalStateError, match="failed to build"):
        builder.build()
    with pytest.raises(IllegalStateError, match="already built"):
        builder.append(TS, b"k", b"v")
    with pytest.raises(TypeError):  # no len(): refused at once
        RecordBatchBuilder().append(TS, 5, b"v")  # type: ignore[arg-type]


def test_bytes_like_keys_values_and_headers() -> None:
    expected = RecordBatchBuilder()
    expected.append(TS, b"key", b"value", [("h", b"hv")])
    expected.append(TS, b"k2", b"v2", [("a", b""), ("b", None)])
    builder = RecordBatchBuilder()
    builder.append(TS, bytearray(b"key"), memoryview(b"value"), [("h", bytearray(b"hv"))])
    builder.append(TS, b"k2", b"v2", (["a", memoryview(b"")], ("b", None)))  # type: ignore[arg-type]
    assert builder.build() == expected.build()


def test_headers_may_be_any_sequence_and_falsy_means_none() -> None:
    expected = RecordBatchBuilder()
    expected.append(TS, b"k", b"v", [("h", b"1"), ("i", None)])
    expected.append(TS, b"k", b"v")
    expected.append(TS, b"k", b"v")
    builder = RecordBatchBuilder()
    builder.append(TS, b"k", b"v", (("h", b"1"), ("i", None)))
    builder.append(TS, b"k", b"v", None)  # type: ignore[arg-type]
    builder.append(TS, b"k", b"v", [])
    assert builder.build() == expected.build()
    with pytest.raises(UnicodeEncodeError):
        RecordBatchBuilder().append(TS, b"k", b"v", [("\ud800", b"")])


def test_headers_that_build_the_batch_meanwhile() -> None:
    """Caller code run while encoding headers (len()) closes the builder: a clean error."""
    builder = RecordBatchBuilder()
    builder.append(TS, b"k", b"v")

    class Sneaky:
        def __bool__(self) -> bool:
            return True

        def __len__(self) -> int:
            builder.build()
            return 1

        def __iter__(self) -> object:
            return iter([("h", b"v")])

    with pytest.raises(IllegalStateError, match="already built"):
        builder.append(TS, b"k", b"v", Sneaky())  # type: ignore[arg-type]
    assert builder.record_count == 1
    (batch,) = iter_batches(builder.build())
    assert batch.record_count == 1
