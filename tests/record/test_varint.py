"""Zig-zag varints and the lookup tables the builder encodes from (Java's ByteUtils)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kclient.errors import CorruptRecordError
from kclient.record.varint import (
    ATTR_TIMESTAMP,
    LENGTH_PREFIX,
    SIZED,
    TABLE_SIZE,
    VARINT,
    decode_unsigned,
    decode_varint,
    encode_varint,
    size_of_varint,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (300, b"\xd8\x04"),
        (2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
        (-(2**31), b"\xff\xff\xff\xff\x0f"),
        (-(2**63), b"\xff" * 9 + b"\x01"),
    ],
)
def test_known_encodings(value: int, encoded: bytes) -> None:
    assert encode_varint(value) == encoded
    assert size_of_varint(value) == len(encoded)
    assert decode_varint(encoded, 0) == (value, len(encoded))


@given(INT64, st.binary(max_size=4))
def test_round_trip(value: int, tail: bytes) -> None:
    encoded = encode_varint(value)
    assert size_of_varint(value) == len(encoded)
    assert decode_varint(b"\xaa" + encoded + tail, 1) == (value, 1 + len(encoded))


def test_tables_hold_the_encodings_they_promise() -> None:
    for n in (0, 1, 63, 64, 127, 8191, 8192, TABLE_SIZE - 1):
        assert VARINT[n] == encode_varint(n)
        assert SIZED[n] == (encode_varint(n), size_of_varint(n))
        assert LENGTH_PREFIX[n] == (encode_varint(n), size_of_varint(n) + n)
    for d in (0, 1, 63, 64, TABLE_SIZE - 1):
        # attributes byte + timestamp delta; the size also counts the header-count byte
        assert ATTR_TIMESTAMP[d] == (b"\x00" + encode_varint(d), 2 + size_of_varint(d))
    for table in (VARINT, SIZED, LENGTH_PREFIX, ATTR_TIMESTAMP):
        assert len(table) == TABLE_SIZE  # the builder relies on IndexError past the end


def test_decode_errors_name_the_position() -> None:
    with pytest.raises(CorruptRecordError, match="byte 2 runs past the end"):
        decode_varint(b"\x00\x80", 1)
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes"):
        decode_unsigned(b"\xff" * 11, 0)
    with pytest.raises(CorruptRecordError, match="longer than 10 bytes"):
        decode_unsigned(b"\xff" * 10, 0)  # too long, and the data ends with it too


def test_bits_past_64_are_dropped_as_java_does() -> None:
    # The tenth byte carries bit 63 only; Java's readVarlong shifts the rest out.
    assert decode_unsigned(b"\xff" * 9 + b"\x7f", 0) == (2**64 - 1, 10)
    assert decode_varint(b"\xff" * 9 + b"\x7f", 0) == (-(2**63), 10)
    assert decode_varint(b"\x80" * 9 + b"\x02", 0) == (0, 10)
