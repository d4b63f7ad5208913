"""Cross-implementation: kclient's batches read by kafka-python, and kafka-python's by kclient.

kafka-python (``kafka.record``) is an independent implementation of DefaultRecordBatch; for
snappy it needs ``python-snappy`` (0.7+, itself built on cramjam), for lz4 ``lz4`` and for
zstd ``zstandard``.
"""

from __future__ import annotations

import warnings
from typing import Any

import pytest

with warnings.catch_warnings():  # kafka-python 3.0 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import codec as kafka_codec
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

from kclient.record import (
    CompressionType,
    RecordBatchBuilder,
    iter_batches,
    set_log_append_time,
)

TS = 1_700_000_000_000
Row = tuple[int, "bytes | None", "bytes | None", list[tuple[str, "bytes | None"]]]

ROWS: list[Row] = [
    (TS, b"key-0", b"value " * 40, []),
    (TS + 3, None, b"null key " * 20, [("trace-id", b"abc"), ("nullable", None)]),
    (TS + 1, b"key-2", None, [("ünïcode-ключ", b"\x00\xff")]),  # out of order, null value
    (TS + 9, b"", b"", [("empty", b"")]),
    (TS + 20_000, b"big", b"0123456789abcdef" * 2000, []),  # 32 KB: kclient's general path
    (TS + 10, None, None, []),
]


def test_kafka_python_has_every_codec() -> None:
    """Without these, kafka-python cannot take part; the extras named in the docstring."""
    assert kafka_codec.has_gzip()
    assert kafka_codec.has_snappy(), "kafka-python needs python-snappy>=0.7 for snappy"
    assert kafka_codec.has_lz4()
    assert kafka_codec.has_zstd()


def kclient_batch(codec: CompressionType, rows: list[Row] = ROWS, **kw: Any) -> bytes:
    builder = RecordBatchBuilder(codec, 1 << 20, **kw)
    for index, (ts, key, value, headers) in enumerate(rows):
        assert builder.append(ts, key, value, headers) == index
    return builder.build()


def kafka_python_batch(codec: CompressionType, rows: list[Row] = ROWS) -> bytes:
    builder = DefaultRecordBatchBuilder(2, int(codec), False, -1, -1, -1, 1 << 20)
    for index, (ts, key, value, headers) in enumerate(rows):
        assert builder.append(index, ts, key, value, headers) is not None
    return bytes(builder.build())


def read_with_kafka_python(data: bytes) -> list[DefaultRecordBatch]:
    records = MemoryRecords(data)
    batches = []
    while records.has_next():
        batch = records.next_batch()
        assert isinstance(batch, DefaultRecordBatch)
        assert batch.validate_crc()
        batches.append(batch)
    return batches


@pytest.mark.parametrize("codec", list(CompressionType))
def test_kafka_python_reads_kclient_batches(codec: CompressionType) -> None:
    data = kclient_batch(codec, base_offset=500, producer_id=77, producer_epoch=2, base_sequence=9)
    (batch,) = read_with_kafka_python(data)
    assert batch.compression_type == codec
    assert (batch.base_offset, batch.last_offset_delta) == (500, len(ROWS) - 1)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (77, 2, 9)
    assert batch.first_timestamp == TS
    assert batch.max_timestamp == TS + 20_000
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]
    assert got == [(500 + i, *row) for i, row in enumerate(ROWS)]


@pytest.mark.parametrize("codec", list(CompressionType))
def test_kclient_reads_kafka_python_batches(codec: CompressionType) -> None:
    data = kafka_python_batch(codec)
    (batch,) = iter_batches(data)
    assert batch.compression is codec  # kafka-python keeps the codec: these rows compress
    assert batch.record_count == len(ROWS)
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]
    assert got == [(i, *row) for i, row in enumerate(ROWS)]


def test_uncompressed_bytes_match_kafka_python_except_leader_epoch() -> None:
    """Same records, same bytes; kafka-python writes partitionLeaderEpoch 0, Java and kclient -1."""
    ours = kclient_batch(CompressionType.NONE)
    theirs = kafka_python_batch(CompressionType.NONE)
    assert ours[:12] == theirs[:12]
    assert ours[12:16] == b"\xff\xff\xff\xff" and theirs[12:16] == b"\x00\x00\x00\x00"
    assert ours[16:] == theirs[16:]  # magic, CRC and everything after it


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_kafka_python_sees_log_append_time(codec: CompressionType) -> None:
    data = bytearray(kclient_batch(codec))
    set_log_append_time(data, TS + 123_456)
    (batch,) = read_with_kafka_python(bytes(data))  # its CRC check passes
    assert batch.timestamp_type == 1
    assert {r.timestamp for r in batch} == {TS + 123_456}


def test_many_batches_each_way() -> None:
    ours = b"".join(
        kclient_batch(codec, ROWS[i : i + 3], base_offset=10 * i)
        for i, codec in enumerate(CompressionType)
    )
    read = read_with_kafka_python(ours)
    assert [b.base_offset for b in read] == [0, 10, 20, 30, 40]
    theirs = b"".join(kafka_python_batch(codec, ROWS[:2]) for codec in CompressionType)
    assert [len(list(b.records())) for b in iter_batches(theirs)] == [2] * 5
