"""Property tests: round trips through every codec, and fuzzed bytes into the reader."""

from __future__ import annotations

import warnings

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kclient.errors import CorruptRecordError, UnsupportedCodecError
from kclient.record import CompressionType, Record, RecordBatchBuilder, iter_batches

with warnings.catch_warnings():  # kafka-python 3.0 uses importlib.resources.read_text
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
Row = tuple[int, "bytes | None", "bytes | None", list[tuple[str, "bytes | None"]]]

payload = st.one_of(
    st.none(),
    st.binary(max_size=120),
    # around the 2-byte varint limit (8191), and past the builder's lookup tables (16384)
    st.builds(bytes.__mul__, st.binary(min_size=1, max_size=2), st.integers(4050, 4150)),
    st.builds(bytes.__mul__, st.binary(min_size=1, max_size=2), st.integers(8500, 8600)),
)
rows = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=2**44),
        payload,
        payload,
        st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=16)), max_size=3),
    ),
    min_size=1,
    max_size=25,
)


def build_all(rows: list[Row], codec: CompressionType, batch_size: int) -> list[bytes]:
    """Append every row, starting a new batch whenever the builder says -1 (as the producer)."""
    batches = []
    builder = RecordBatchBuilder(codec, batch_size)
    for ts, key, value, headers in rows:
        if builder.append(ts, key, value, headers) < 0:
            assert builder.record_count > 0
            batches.append(builder.build())
            builder = RecordBatchBuilder(codec, batch_size)
            assert builder.append(ts, key, value, headers) == 0
        assert builder.size_in_bytes <= batch_size or builder.record_count == 1
    estimated = builder.size_in_bytes
    batches.append(builder.build())
    if codec is CompressionType.NONE:
        assert len(batches[-1]) == estimated
    return batches


@SETTINGS
@given(rows, st.sampled_from(list(CompressionType)), st.integers(min_value=0, max_value=40_000))
def test_round_trip_every_codec(rows: list[Row], codec: CompressionType, batch_size: int) -> None:
    batches = build_all(rows, codec, batch_size)
    data = b"".join(batches)
    read = list(iter_batches(data))
    assert [b.raw.tobytes() for b in read] == batches
    got = [r for batch in read for r in batch.records()]
    assert [(r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (ts, key, value, list(headers)) for ts, key, value, headers in rows
    ]
    for batch in read:
        assert batch.compression is codec
        assert batch.max_timestamp == max(r.timestamp for r in batch.records())
        assert [r.offset for r in batch.records()] == list(range(batch.record_count))
    # and kafka-python, an independent reader, agrees
    theirs = MemoryRecords(data)
    them: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]] = []
    while theirs.has_next():
        them.extend((r.timestamp, r.key, r.value, r.headers) for r in theirs.next_batch())
    assert them == [(r.timestamp, r.key, r.value, r.headers) for r in got]


def _valid_batches() -> bytes:
    parts = []
    for codec in CompressionType:
        builder = RecordBatchBuilder(codec, 1 << 20)
        builder.append(1000, b"key", b"value " * 10, [("h", b"v"), ("n", None)])
        builder.append(999, None, None)
        builder.append(1005, b"k" * 200, b"")
        parts.append(builder.build())
    return b"".join(parts)


VALID = _valid_batches()


def read_everything(data: bytes | bytearray, validate_crc: bool) -> list[Record]:
    """What a consumer of iter_batches does; only kclient errors may escape."""
    out: list[Record] = []
    try:
        for batch in iter_batches(data, validate_crc=validate_crc):
            _ = (batch.compression, batch.last_offset, batch.is_control, repr(batch))
            if validate_crc:
                batch.validate()
            out.extend(batch.records())
    except (CorruptRecordError, UnsupportedCodecError):
        pass
    return out


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
@example(b"\x00" * 11)
@example(b"\x00" * 8 + b"\x7f\xff\xff\xff")
@example(b"\x00" * 8 + b"\x00\x00\x00\x31" + b"\x00" * 4 + b"\x02" + b"\x00" * 44)
def test_random_bytes_raise_only_kclient_errors(data: bytes) -> None:
    read_everything(data, validate_crc=False)
    read_everything(data, validate_crc=True)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=len(VALID) - 1), st.integers(1, 255)),
        min_size=1,
        max_size=6,
    ),
    st.integers(min_value=0, max_value=len(VALID)),
)
def test_mutated_batches_raise_only_kclient_errors(flips: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(VALID)
    for position, xor in flips:
        data[position] ^= xor
    read_everything(data, validate_crc=False)  # past the CRC: the decoders see the damage
    read_everything(data[:cut], validate_crc=False)
    checked = read_everything(data, validate_crc=True)
    assert len(checked) <= 15


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=len(VALID)))
def test_a_truncated_tail_is_skipped(cut: int) -> None:
    sizes = [b.size_in_bytes for b in iter_batches(VALID)]
    whole = 0
    end = 0
    for size in sizes:
        if end + size > cut:
            break
        end += size
        whole += 1
    batches = list(iter_batches(VALID[:cut]))
    assert len(batches) == whole
    assert len([r for b in batches for r in b.records()]) == 3 * whole
