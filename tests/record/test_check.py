"""The broker's record walk (``kclient.record.check``): every defect Kafka's ``DefaultRecord``
refuses is found, with the record it is in; valid records give their greatest timestamp
and the first record at or after a target timestamp. Runs with C and with Python (see
conftest.py); the last tests compare the two on damaged bytes."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kclient.record import CompressionType, _accel
from kclient.record.builder import PyRecordBatchBuilder
from kclient.record.check import check_records, py_check_records
from kclient.record.varint import encode_varint

BASE_TS = 1_700_000_000_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

Header = tuple[bytes | None, bytes | None]


def field(data: bytes | None) -> bytes:
    return encode_varint(-1) if data is None else encode_varint(len(data)) + data


def record(
    offset_delta: int,
    ts_delta: int = 0,
    key: bytes | None = b"k",
    value: bytes | None = b"value",
    headers: Sequence[Header] = (),
    *,
    length_change: int = 0,
    header_count: int | None = None,
) -> bytes:
    """One record, written field by field (``length_change`` makes its length lie)."""
    body = b"\x00" + encode_varint(ts_delta) + encode_varint(offset_delta)
    body += field(key) + field(value)
    body += encode_varint(len(headers) if header_count is None else header_count)
    for name, header_value in headers:
        body += field(name) + field(header_value)
    return encode_varint(len(body) + length_change) + body


def section(*records: bytes) -> bytes:
    return b"".join(records)


def test_valid_records_give_their_greatest_timestamp() -> None:
    data = section(
        record(0, 5), record(1, 9, key=None, headers=[(b"h", None), (b"\xc3\xa9", b"x")]),
        record(2, -3, value=None),
    )  # fmt: skip
    result = check_records(data, 3, BASE_TS)
    assert result.problem is None
    assert result.max_timestamp == BASE_TS + 9
    assert (result.found_index, result.found_timestamp) == (-1, -1)  # no target asked


def test_records_built_by_the_producer_pass() -> None:
    builder = PyRecordBatchBuilder(CompressionType.NONE, 1 << 20)
    for i in range(200):
        builder.append(BASE_TS + i, b"key-%d" % i, b"v" * i, [("h", b"1")] if i % 3 else [])
    batch = builder.build()
    result = check_records(memoryview(batch)[61:], 200, BASE_TS)
    assert result.problem is None
    assert result.max_timestamp == BASE_TS + 199


@pytest.mark.parametrize(
    ("target", "expected"),
    [(BASE_TS, (0, BASE_TS + 5)), (BASE_TS + 6, (1, BASE_TS + 9)), (BASE_TS + 9, (1, BASE_TS + 9)),
     (BASE_TS + 10, (-1, -1))],
)  # fmt: skip
def test_the_first_record_at_or_after_a_timestamp(target: int, expected: tuple[int, int]) -> None:
    data = section(record(0, 5), record(1, 9), record(2, 7))
    result = check_records(data, 3, BASE_TS, target)
    assert (result.found_index, result.found_timestamp) == expected


def test_timestamps_wrap_as_a_java_long() -> None:
    data = section(record(0, 0), record(1, 2))
    assert check_records(data, 2, INT64_MAX - 1).max_timestamp == INT64_MAX - 1  # +2 wraps
    assert check_records(data, 2, -1).max_timestamp == 1


def test_no_timestamps_give_minus_one() -> None:
    data = section(record(0, 0), record(1, -5))
    assert check_records(data, 2, -1).max_timestamp == -1
    assert check_records(data, 2, -5).max_timestamp == -1


DEFECTS: dict[str, tuple[bytes, int, int, str]] = {
    # name: (records, count, index of the record at fault or -1, what the message says)
    "fewer records than the count": (
        section(record(0), record(1)), 3, -1, "the records end after 2 of the 3",
    ),
    "more records than the count": (
        section(record(0), record(1), record(2)), 2, -1, "bytes are left after the 2 records",
    ),
    "bytes after the last record": (
        section(record(0)) + b"\x00\x01\x02", 1, -1, "3 bytes are left after the 1 records",
    ),
    "a count no bytes could hold": (
        section(record(0)), 1000, -1, "record count 1000 is impossible",
    ),
    "a negative count": (section(record(0)), -1, -1, "record count -1 is impossible"),
    "offset deltas with a gap": (
        section(record(0), record(2)), 2, 1, "record 1: offset delta 2, expected 1",
    ),
    "offset deltas not from zero": (section(record(1)), 1, 0, "offset delta 1, expected 0"),
    "a length past the end": (
        section(record(0), record(1, length_change=4)), 2, 1, "record 1: length",
    ),
    "a length below the minimum": (encode_varint(3) + b"\x00" * 8, 1, 0, "record 0: length 3"),
    "a length longer than the fields": (
        section(record(0, length_change=1), b"\x00"), 1, 0, "but its fields take",
    ),
    "a key past the record": (
        section(record(0, key=b"k", value=b"v", length_change=-2)), 1, 0, "record 0:",
    ),
    "a key length below -1": (
        encode_varint(6) + b"\x00\x00\x00" + encode_varint(-2) + b"\x02\x00", 1, 0,
        "key length -2 does not fit",
    ),
    "a varint of six bytes": (
        encode_varint(12) + b"\x00\x00" + b"\x80\x80\x80\x80\x80\x01" + b"\x01\x01\x00\x00",
        1, 0, "offset delta varint is longer than 5 bytes",
    ),
    "a varint beyond 32 bits": (
        encode_varint(10) + b"\x00\x00" + b"\xff\xff\xff\xff\x7f" + b"\x01\x01\x00", 1, 0,
        "does not fit in 32 bits",
    ),
    "a negative header count": (section(record(0, header_count=-1)), 1, 0, "header count -1"),
    "a header count past the record": (
        section(record(0, header_count=50)), 1, 0, "header count 50 does not fit",
    ),
    "a null header key": (
        section(record(0, headers=[(None, b"x"), (b"abcdef", b"")])), 1, 0,
        "header 0 has key length -1",
    ),
    "a header key that is not UTF-8": (
        section(record(0, headers=[(b"ok", None), (b"\xff\xfe", None)])), 1, 0,
        "header 1 key is not UTF-8",
    ),
    "an overlong UTF-8 header key": (
        section(record(0, headers=[(b"\xc0\xaf", None)])), 1, 0, "header 0 key is not UTF-8",
    ),
    "a UTF-16 surrogate in a header key": (
        section(record(0, headers=[(b"\xed\xa0\x80", None)])), 1, 0, "key is not UTF-8",
    ),
    "a header value length below -1": (
        section(record(0, headers=[(b"h", b"")]))[:-1] + encode_varint(-3), 1, 0,
        "header 0 value length -3",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_defects_are_found_with_the_record_they_are_in(name: str) -> None:
    data, count, index, message = DEFECTS[name]
    result = check_records(data, count, BASE_TS)
    assert result.problem is not None, name
    assert result.problem[0] == index
    assert message in result.problem[1]
    assert (result.max_timestamp, result.found_index) == (-1, -1)


def test_a_problem_in_a_later_record_names_that_record() -> None:
    data = section(*(record(i) for i in range(40)), record(40, headers=[(b"\x80", None)]))
    result = check_records(data, 41, BASE_TS)
    assert result.problem is not None
    assert result.problem[0] == 40
    assert result.problem[1].startswith("record 40: header 0 key is not UTF-8")


def test_large_sections_are_walked_too() -> None:
    """Sections of 64 KiB and more are walked without the GIL in C: same answers."""
    records = [record(i, i, value=b"x" * 100) for i in range(2000)]
    data = section(*records)
    assert len(data) > 64 * 1024
    assert check_records(data, 2000, BASE_TS).max_timestamp == BASE_TS + 1999
    bad = section(*records[:1500], record(1500, headers=[(None, None)]), *records[1501:])
    problem = check_records(bytearray(bad), 2000, BASE_TS).problem
    assert problem is not None and problem[0] == 1500


# ---- C against the Python reference ------------------------------------------------------

VALID = section(
    record(0, 3, headers=[(b"first", b"one"), (b"second", None)]),
    record(1, -2, key=None, value=None, headers=[(b"third", b"two")]),
    record(2, 70000, key=b"k" * 130, value=b""),
)


@pytest.mark.skipif(not _accel.ACCELERATED, reason="the C extension is not built")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=4),
    st.integers(-1, 5),
    st.integers(0, 3),
    st.integers(INT64_MIN, INT64_MAX),
    st.none() | st.integers(INT64_MIN, INT64_MAX),
)
def test_c_and_python_agree_on_damaged_records(
    damage: list[tuple[int, int]], count: int, cut: int, base_ts: int, target: int | None
) -> None:
    data = bytearray(VALID)
    for position, byte in damage:
        data[position] = byte
    data = data[: len(data) - cut]
    from kclient.record.check import _c_check_records

    assert _c_check_records is not None
    assert tuple(_c_check_records(bytes(data), count, base_ts, target)) == tuple(
        py_check_records(bytes(data), count, base_ts, target)
    )


@pytest.mark.skipif(not _accel.ACCELERATED, reason="the C extension is not built")
@pytest.mark.parametrize("name", sorted(DEFECTS))
def test_c_and_python_give_the_same_message(name: str) -> None:
    from kclient.record.check import _c_check_records

    data, count, _, _ = DEFECTS[name]
    assert _c_check_records is not None
    assert tuple(_c_check_records(data, count, BASE_TS, None)) == tuple(
        py_check_records(data, count, BASE_TS)
    )
