"""The C accelerator against the pure-Python reference: same bytes, same records, same errors.

Generated records (every codec, headers, null keys and values, values past the lookup
tables, timestamps anywhere in the 64-bit range) go through both builders, which must agree
on every ``append`` result and on the bytes; generated, damaged and random records
sections go through both decoders, which must agree on the records or on the exact error.
Then the C code's error paths are run many times over to check that they hold on to no
references and no memory.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import tracemalloc
from array import array
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kclient.errors import CorruptRecordError, IllegalStateError
from kclient.record import CompressionType, Record, _accel, batch, builder
from kclient.record.builder import PyRecordBatchBuilder, RecordBatchBuilder

COMPARES_IMPLEMENTATIONS = True  # runs once (see conftest.py)

pytestmark = pytest.mark.skipif(
    not _accel.ACCELERATED, reason="the C accelerator is not built (or KCLIENT_PURE_PYTHON)"
)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT64 = st.integers(INT64_MIN, INT64_MAX)
# KCLIENT_FUZZ_EXAMPLES=100000 for a long fuzzing run of the builders and decoders.
FUZZ_EXAMPLES = int(os.environ.get("KCLIENT_FUZZ_EXAMPLES", "300"))
SETTINGS = settings(
    max_examples=max(200, FUZZ_EXAMPLES // 10),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
Row = tuple[int, Any, Any, Any]


def c_builder_class() -> type[RecordBatchBuilder]:
    cls: type[RecordBatchBuilder] = builder.CRecordBatchBuilder
    return cls


def c_decode(*args: Any) -> list[Record]:
    return list(batch._c_decode_records(*args))


py_decode = batch._py_decode_records


@pytest.mark.parametrize(("setting", "accelerated"), [("1", False), ("0", True)])
def test_kclient_pure_python_turns_the_extension_off(setting: str, accelerated: bool) -> None:
    script = (
        "import sys, kclient.record as r; "
        "print(r.ACCELERATED, 'kclient.record._speedups' in sys.modules)"
    )
    env = {**os.environ, "KCLIENT_PURE_PYTHON": setting}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [str(accelerated), str(accelerated)]


def test_an_extension_built_from_older_sources_is_not_used() -> None:
    script = (
        "import sys, types; "
        "sys.modules['kclient.record._speedups'] = types.ModuleType('kclient.record._speedups'); "
        "import kclient.record as r; print(r.ACCELERATED)"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        env={**os.environ, "KCLIENT_PURE_PYTHON": "0"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert run.stdout.split() == ["False"]
    assert "not built from these sources" in run.stderr


# ---- builders -----------------------------------------------------------------------------

payload = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.binary(max_size=40).map(bytearray),
    st.binary(max_size=40).map(memoryview),
    # past the one-byte (63) and two-byte (8191) varints and the lookup tables (16383)
    st.builds(bytes.__mul__, st.binary(min_size=1, max_size=3), st.integers(20, 30_000)),
)
header_value = st.none() | st.binary(max_size=20) | st.binary(max_size=20).map(bytearray)
header = st.tuples(st.text(max_size=8), header_value)
headers = st.one_of(
    st.just(()),
    st.lists(header, max_size=4),
    st.lists(header, max_size=4).map(tuple),
    st.lists(header, min_size=1, max_size=3).map(lambda hs: [list(h) for h in hs]),  # slow path
)


@st.composite
def timestamps(draw: st.DrawFn) -> list[int]:
    """Around one base (small and negative deltas), or anywhere in the 64-bit range."""
    base = draw(st.one_of(INT64, st.integers(0, 2**44), st.just(-1)))
    near = st.integers(-20_000, 20_000).map(lambda d: min(max(base + d, INT64_MIN), INT64_MAX))
    return draw(st.lists(st.one_of(near, near, INT64), min_size=1, max_size=30))


@st.composite
def rows(draw: st.DrawFn) -> list[Row]:
    return [(ts, draw(payload), draw(payload), draw(headers)) for ts in draw(timestamps())]


def run_builder(
    cls: type[RecordBatchBuilder],
    rows: list[Row],
    codec: CompressionType,
    batch_size: int,
    producer: tuple[int, int, int] | None,
) -> list[object]:
    """Everything a caller can observe of a builder fed ``rows``."""
    b = cls(codec, batch_size, base_offset=7, partition_leader_epoch=3)
    seen: list[object] = [b.is_full(), b.size_in_bytes, b.batch_size, b.closed]
    for ts, key, value, hdrs in rows:
        seen.append(b.append(ts, key, value, hdrs))
        seen.append((b.record_count, b.size_in_bytes, b.is_full()))
        seen.append((b.base_timestamp, b.max_timestamp))
    if producer is not None:
        b.set_producer_state(*producer)
    seen.append(b.build())
    seen.append((b.size_in_bytes, b.closed, b.is_full(), b.record_count))
    return seen


@SETTINGS
@given(
    rows(),
    st.sampled_from(list(CompressionType)),
    st.one_of(st.integers(0, 300), st.integers(300, 200_000)),
    st.none() | st.tuples(st.integers(0, 2**40), st.integers(0, 32767), st.integers(0, 2**31 - 1)),
)
@example(
    [(INT64_MAX, None, b"", []), (INT64_MIN, b"", None, [("", None)]), (0, None, None, ())],
    CompressionType.NONE,
    0,
    None,
)
def test_builders_write_the_same_bytes(
    rows: list[Row],
    codec: CompressionType,
    batch_size: int,
    producer: tuple[int, int, int] | None,
) -> None:
    ours = run_builder(c_builder_class(), rows, codec, batch_size, producer)
    assert ours == run_builder(PyRecordBatchBuilder, rows, codec, batch_size, producer)
    # and the records read back as written (timestamps wrap back into place)
    data = ours[-2]
    assert isinstance(data, bytes)
    accepted = [
        row for row, delta in zip(rows, ours[4 : 4 + 3 * len(rows) : 3], strict=True) if delta != -1
    ]
    if not accepted:
        assert data == b""
        return
    (read,) = batch.iter_batches(data)
    records = list(read.records())
    assert [(r.timestamp, r.key, r.value, r.headers) for r in records] == [
        (
            ts,
            None if key is None else bytes(key),
            None if value is None else bytes(value),
            [(name, None if v is None else bytes(v)) for name, v in hdrs],
        )
        for ts, key, value, hdrs in accepted
    ]


def test_c_builder_copies_bytes_like_values_at_append() -> None:
    """The one documented difference: the pure builder keeps a reference until build()."""
    value = bytearray(b"before")
    c = c_builder_class()()
    c.append(0, None, value)
    value[:] = b"AFTER!"
    (read,) = batch.iter_batches(c.build())
    assert [r.value for r in read.records()] == [b"before"]


# ---- decoders -----------------------------------------------------------------------------


def outcome(decode: Callable[..., list[Record]], *args: Any) -> tuple[str, object]:
    """The records, or the error: CorruptRecordError's text, or IndexError (records end
    early: records() words that one itself). Nothing else may escape."""
    try:
        return "ok", decode(*args)
    except CorruptRecordError as exc:
        return "CorruptRecordError", str(exc)
    except IndexError:
        return "IndexError", ""


def assert_decoders_agree(
    data: bytes, count: int, base_offset: int, base_ts: int, log_append_time: int | None
) -> tuple[str, object]:
    args = (count, base_offset, base_ts, log_append_time, Record)
    ours = outcome(c_decode, data, *args)
    assert ours == outcome(py_decode, data, *args)
    assert ours == outcome(c_decode, memoryview(data), *args)  # as records() passes it
    return ours


def records_section(rows: list[Row]) -> tuple[bytes, int]:
    b = PyRecordBatchBuilder(CompressionType.NONE, 1 << 30)
    for ts, key, value, hdrs in rows:
        b.append(ts, key, value, hdrs)
    return b.build()[61:], b.record_count


bases = st.one_of(st.integers(-5, 2**40), INT64, st.sampled_from([INT64_MIN, INT64_MAX]))


@SETTINGS
@given(rows(), bases, bases, st.none() | INT64)
def test_decoders_agree_on_valid_records(
    rows: list[Row], base_offset: int, base_ts: int, log_append_time: int | None
) -> None:
    data, count = records_section(rows)
    kind, records = assert_decoders_agree(data, count, base_offset, base_ts, log_append_time)
    assert kind == "ok" and isinstance(records, list) and len(records) == count
    assert all(type(r) is Record for r in records)
    assert all(INT64_MIN <= r.offset <= INT64_MAX for r in records)
    assert all(INT64_MIN <= r.timestamp <= INT64_MAX for r in records)


# Bytes that mean something in a varint: 0, +-1, the one-byte limits, continuation bits.
EDGE_BYTES = st.one_of(
    st.sampled_from([0x00, 0x01, 0x02, 0x7E, 0x7F, 0x80, 0x81, 0xFF]), st.integers(0, 255)
)
SMALL_ROWS = st.lists(
    st.tuples(
        st.integers(0, 2**20),
        st.none() | st.binary(max_size=12),
        st.none() | st.binary(max_size=12),
        st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=6)), max_size=2),
    ),
    min_size=1,
    max_size=5,
)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    SMALL_ROWS,
    st.lists(st.tuples(st.integers(0, 10_000), EDGE_BYTES, st.booleans()), max_size=4),
    st.integers(0, 10_000),
    st.integers(-1, 2),
    st.tuples(bases, bases),
)
def test_decoders_agree_on_damaged_records(
    rows: list[Row],
    flips: list[tuple[int, int, bool]],
    cut: int,
    count_change: int,
    base_offset_and_timestamp: tuple[int, int],
) -> None:
    base_offset, base_ts = base_offset_and_timestamp
    clean, count = records_section(rows)
    data = bytearray(clean)
    for position, byte, insert in flips:  # overwrite a byte, or insert one
        data[position % len(data) : position % len(data) + (not insert)] = bytes([byte])
    if cut % 3 == 0:  # and a third of the time, cut short
        del data[len(data) - cut % (len(data) + 1) :]
    assert_decoders_agree(bytes(data), count + count_change, base_offset, base_ts, None)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 40), bases, bases, st.none() | INT64)
@example(b"\x0c\x00\x00\x00\x00\x00\x00", 1, 0, 0, None)  # one empty record
@example(b"\xff" * 11, 1, 0, 0, None)  # a varint longer than 10 bytes
@example(b"\x80", 1, 0, 0, None)  # a two-byte varint cut short
@example(b"\x10\x00\x00\x00\x00\x00\x02\x01\xff", 1, 0, 0, None)  # headers run off
@example(b"\x12\x00\x00\x00\x00\x00\x02\x02\xff\x00", 1, 0, 0, None)  # header key not UTF-8
@example(b"\x10\x00\x00\x00\x01\x01\x02\x02a\x81\x00", 1, 0, 0, None)  # null value past the end
@example(b"\x80" * 10, 1, 0, 0, None)  # a too-long varint that also ends the data
def test_decoders_agree_on_random_bytes(
    data: bytes, count: int, base_offset: int, base_ts: int, log_append_time: int | None
) -> None:
    assert_decoders_agree(data, count, base_offset, base_ts, log_append_time)


def test_decoders_agree_on_every_single_byte_change() -> None:
    """Each byte of a records section with every kind of field, set to each of 256 values."""
    data, count = records_section(
        [
            (5, b"key", b"v" * 70, [("h", b"x"), ("null", None), ("", b"")]),
            (3, None, b"", [("\u00e9", None)]),
            (9000, b"", None, []),
        ]
    )
    for position in range(len(data)):
        for byte in range(256):
            damaged = data[:position] + bytes([byte]) + data[position + 1 :]
            assert_decoders_agree(damaged, count, 0, 0, None)


def test_decoder_argument_checks() -> None:
    with pytest.raises(TypeError):
        c_decode(b"", 0, 0, 0, None)
    with pytest.raises(TypeError, match="tuple subclass"):
        c_decode(b"", 0, 0, 0, None, dict)
    with pytest.raises(TypeError, match="int or None"):
        c_decode(b"", 0, 0, 0, "x", Record)
    with pytest.raises(TypeError):
        c_decode("text", 0, 0, 0, None, Record)
    assert c_decode(b"", 0, 0, 0, None, Record) == []
    assert c_decode(bytearray(), 0, 0, 0, None, Record) == []


def test_a_huge_record_count_allocates_nothing_up_front() -> None:
    with pytest.raises(IndexError):
        c_decode(b"\x0c" + b"\x00" * 6, 2**31 - 1, 0, 0, None, Record)


# ---- references and memory ------------------------------------------------------------------


def exercise_error_paths() -> None:
    """Every error path (and the slow paths) of the C builder and decoder, once."""
    key = KEY
    c = c_builder_class()()
    c.append(1, key, HEADER_VALUE, [("header", HEADER_VALUE)])
    c.append(1, key, HEADER_VALUE, [["header", bytearray(HEADER_VALUE)]])  # Python encoder
    for bad_headers in ([("h", "text")], [(b"h", b"")], [("h",)], [("\ud800", b"")], 5):
        with pytest.raises((TypeError, UnicodeEncodeError)):
            c.append(1, key, b"v", bad_headers)
    with pytest.raises(OverflowError):
        c.append(2**64, key, b"v")
    with pytest.raises(TypeError):
        c.append(1.5, key, b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        c.append(1, 5, b"v")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        c.append(1, key, b"v", (), unknown=1)  # type: ignore[call-arg]
    small = c_builder_class()(CompressionType.NONE, 0)
    small.append(1, bytearray(key), memoryview(key))
    assert small.append(1, bytearray(key), memoryview(key), [("header", HEADER_VALUE)]) == -1
    assert small.append(1, key, "text", [["header", HEADER_VALUE]]) == -1  # type: ignore[arg-type]
    c.append(1, key, "text")  # type: ignore[arg-type]
    c.append(1, "text", key)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value must be bytes"):
        c.build()
    with pytest.raises(IllegalStateError):
        c.append(1, key, b"v")
    small.build()
    for data, count in CORRUPT:
        with suppress(CorruptRecordError, IndexError):
            c_decode(data, count, 0, 0, LOG_APPEND_TIME, Record)
    c_decode(VALID, VALID_COUNT, 0, 0, LOG_APPEND_TIME, Record)


KEY = b"a key that is referenced only here"
HEADER_VALUE = b"a header value referenced only here"
LOG_APPEND_TIME = 2**62 + 12345  # an int object of its own
VALID, VALID_COUNT = records_section(
    [
        (1, b"key", b"value", [("first", b"one"), ("second", None)]),
        (2, None, None, [("third", b"two")]),
    ]
)
# Every byte of VALID replaced by a few values, each a different damage; and the count off.
CORRUPT = [
    (VALID[:position] + bytes([byte]) + VALID[position + 1 :], VALID_COUNT)
    for position in range(len(VALID))
    for byte in (0x00, 0x01, 0x02, 0x08, 0x7F, 0x80, 0xFF)
] + [(VALID[:-1], VALID_COUNT), (VALID, VALID_COUNT + 1), (VALID + b"\x00", VALID_COUNT)]


def test_error_paths_hold_no_references() -> None:
    exercise_error_paths()  # warm caches (UTF-8 of names, interned strings)
    watched = [KEY, HEADER_VALUE, LOG_APPEND_TIME, Record, str, bytes, CorruptRecordError]
    gc.collect()  # what earlier tests left for the collector (records in cycles) goes first
    before = [sys.getrefcount(obj) for obj in watched]
    for _ in range(100):
        exercise_error_paths()
    gc.collect()
    assert [sys.getrefcount(obj) for obj in watched] == before


def test_error_paths_hold_no_memory() -> None:
    for _ in range(20):
        exercise_error_paths()
    gc.collect()
    blocks = sys.getallocatedblocks()  # exact count of small objects: one leak per round shows
    for _ in range(100):
        exercise_error_paths()
    gc.collect()
    assert sys.getallocatedblocks() - blocks < 20
    tracemalloc.start()  # every PyMem allocation, large buffers included (but slower)
    try:
        start, _ = tracemalloc.get_traced_memory()
        for _ in range(20):
            exercise_error_paths()
        gc.collect()
        end, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert end - start < 8_000  # leaking a buffer (over 512 bytes) each round would pass it


# ---- append_rows: send_batch's bulk path --------------------------------------------------

bytes_or_none = st.none() | st.binary(max_size=40) | st.binary(min_size=100, max_size=400)


@SETTINGS
@given(
    columns=st.lists(st.tuples(bytes_or_none, bytes_or_none), min_size=1, max_size=40),
    stamps=timestamps(),
    batch_size=st.integers(0, 3000),
    keyless=st.booleans(),
    picked=st.booleans(),
)
def test_append_rows_builds_what_append_builds(
    columns: list[tuple[bytes | None, bytes | None]],
    stamps: list[int],
    batch_size: int,
    keyless: bool,
    picked: bool,
) -> None:
    n = len(columns)
    keys: list[bytes | None] | None = None if keyless else [k for k, _ in columns]
    values = [v for _, v in columns]
    times = [stamps[i % len(stamps)] for i in range(n)]
    rows = list(range(n - 1, -1, -2)) if picked else None  # every other row, backwards
    order = rows if rows is not None else list(range(n))
    one_by_one = PyRecordBatchBuilder(batch_size=batch_size)
    expected_deltas = [0] * n
    taken = 0
    for row in order:
        delta = one_by_one.append(times[row], None if keys is None else keys[row], values[row])
        if delta < 0:
            break
        expected_deltas[row] = delta
        taken += 1
    expected_bytes = one_by_one.build()
    for cls in (c_builder_class(), PyRecordBatchBuilder):
        bulk = cls(batch_size=batch_size)
        results: list[Any] = [None] * n
        deltas = array("q", [0]) * n
        got = bulk.append_rows(times, keys, values, rows, 0, len(order), results, deltas, "r")
        assert got == taken
        assert list(deltas) == expected_deltas
        assert results == ["r" if row in order[:taken] else None for row in range(n)]
        assert bulk.record_count == taken
        assert bulk.build() == expected_bytes


def test_append_rows_bytes_match_append_for_the_c_builder() -> None:
    keys: list[bytes | None] = [b"k", None, b"", b"x" * 300]
    values: list[bytes | None] = [b"v", b"w" * 70, None, b""]
    times = [5, 4, 2**40, -1]
    one_by_one = c_builder_class()(batch_size=10_000)
    for i in range(4):
        one_by_one.append(times[i], keys[i], values[i])
    bulk = c_builder_class()(batch_size=10_000)
    assert (
        bulk.append_rows(times, keys, values, None, 0, 4, [None] * 4, array("q", [0]) * 4, None)
        == 4
    )
    assert bulk.build() == one_by_one.build()


def test_append_rows_refuses_what_is_not_bytes_and_after_build() -> None:
    bulk = c_builder_class()(batch_size=10_000)
    with pytest.raises(TypeError, match="row 1: value must be bytes or None, got str"):
        bulk.append_rows(
            [1, 1], None, [b"a", "b"], None, 0, 2, [None] * 2, array("q", [0]) * 2, None
        )
    assert bulk.record_count == 1  # the row before it went in
    bulk.build()
    with pytest.raises(IllegalStateError):
        bulk.append_rows([1], None, [b"a"], None, 0, 1, [None], array("q", [0]), None)


def test_append_rows_wants_int64_deltas() -> None:
    bulk = c_builder_class()(batch_size=10_000)
    with pytest.raises(TypeError, match=r"deltas must be an array\('q'\)"):
        bulk.append_rows([1], None, [b"a"], None, 0, 1, [None], [0], None)
    with pytest.raises(IndexError, match="deltas has no item 1"):
        bulk.append_rows([1, 1], None, [b"a", b"b"], None, 0, 2, [None] * 2, array("q", [0]), None)
