"""Primitive types: varints at their boundaries, strings, bytes, arrays, errors on bad input."""

from __future__ import annotations

import uuid
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kclient.errors import ProtocolDecodeError, ProtocolEncodeError
from kclient.protocol.types import (
    MAX_UINT32,
    MAX_UINT64,
    DecodeError,
    Reader,
    uvarint_bytes,
    write_array_length,
    write_bytes,
    write_raw_tagged_fields,
    write_string,
    write_uuid,
    write_uvarint,
    write_varint,
    write_varlong,
)

with warnings.catch_warnings():  # kafka-python's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.util import decode_varint as kp_decode_varint
    from kafka.record.util import encode_varint as kp_encode_varint

PROPERTY = settings(max_examples=300, derandomize=True, database=None, deadline=None)

# Every 7-bit boundary, one below and one above.
UVARINT_EDGES = sorted(
    {v for k in range(1, 11) for v in ((1 << 7 * k) - 1, 1 << 7 * k) if v <= MAX_UINT64} | {0, 1}
)


@pytest.mark.parametrize("value", UVARINT_EDGES)
def test_unsigned_varint_length_changes_exactly_at_seven_bit_boundaries(value: int) -> None:
    encoded = uvarint_bytes(value)
    assert len(encoded) == max(1, (value.bit_length() + 6) // 7)
    assert all(b & 0x80 for b in encoded[:-1]) and not encoded[-1] & 0x80
    reader = Reader(encoded)
    assert reader.uvarlong() == value
    assert reader.remaining() == 0


@pytest.mark.parametrize(
    ("value", "wire"),
    [(0, "00"), (-1, "01"), (1, "02"), (-64, "7f"), (63, "7e"), (64, "8001"), (-65, "8101")],
)
def test_zigzag_varint_matches_the_protocol_guide(value: int, wire: str) -> None:
    out = bytearray()
    write_varint(out, value)
    assert out.hex() == wire
    assert Reader(out).varint() == value


@PROPERTY
@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_round_trips_and_agrees_with_kafka_python(value: int) -> None:
    out = bytearray()
    write_varint(out, value)
    kp = bytearray()
    kp_encode_varint(value, kp.append)
    assert out == kp
    assert Reader(out).varint() == value
    assert kp_decode_varint(bytes(out), 0) == (value, len(out))


@PROPERTY
@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trips_over_the_whole_int64_range(value: int) -> None:
    out = bytearray()
    write_varlong(out, value)
    assert len(out) <= 10
    reader = Reader(out)
    assert reader.varlong() == value
    assert reader.remaining() == 0


@pytest.mark.parametrize("value", [-(2**31) - 1, 2**31])
def test_varint_refuses_values_outside_int32(value: int) -> None:
    with pytest.raises(ProtocolEncodeError, match="varint"):
        write_varint(bytearray(), value)


def test_varlong_refuses_values_outside_int64() -> None:
    with pytest.raises(ProtocolEncodeError, match="varlong"):
        write_varlong(bytearray(), 2**63)


def test_unsigned_varint_over_32_bits_is_a_decode_error_at_its_offset() -> None:
    data = b"\x00" + uvarint_bytes(MAX_UINT32 + 1)
    reader = Reader(data, pos=1)
    with pytest.raises(ProtocolDecodeError, match=r"unsigned varint at byte offset 1.*32 bits"):
        reader.uvarint()


def test_endless_varint_is_refused_after_its_maximum_length() -> None:
    with pytest.raises(ProtocolDecodeError, match="longer than 5 bytes"):
        Reader(b"\xff" * 64).varint()
    with pytest.raises(ProtocolDecodeError, match="longer than 10 bytes"):
        Reader(b"\xff" * 64).varlong()


def test_varint_cut_short_names_what_and_where() -> None:
    with pytest.raises(DecodeError) as info:
        Reader(b"\x01\x02\x81", pos=2).varint()
    assert info.value.offset == 2
    assert "varint" in str(info.value)


@pytest.mark.parametrize(
    ("method", "data", "what"),
    [
        ("int8", b"", "int8"),
        ("int16", b"\x00", "int16"),
        ("int32", b"\x00\x00\x00", "int32"),
        ("int64", b"\x00" * 7, "int64"),
        ("uint16", b"\x00", "uint16"),
        ("uint32", b"\x00", "uint32"),
        ("float64", b"\x00", "float64"),
        ("boolean", b"", "boolean"),
        ("uuid", b"\x00" * 15, "uuid"),
    ],
)
def test_truncated_fixed_width_reads_raise_decode_errors(
    method: str, data: bytes, what: str
) -> None:
    reader = Reader(b"\xaa" + data, pos=1)
    with pytest.raises(ProtocolDecodeError, match=rf"{what} at byte offset 1: needs"):
        getattr(reader, method)()


def test_fixed_width_values_are_big_endian() -> None:
    reader = Reader(
        bytes.fromhex("ff 7fff 00000001 ffffffffffffffff ffff ffffffff 3ff0000000000000")
    )
    assert reader.int8() == -1
    assert reader.int16() == 0x7FFF
    assert reader.int32() == 1
    assert reader.int64() == -1
    assert reader.uint16() == 0xFFFF
    assert reader.uint32() == MAX_UINT32
    assert reader.float64() == 1.0


@PROPERTY
@given(st.text(max_size=40), st.booleans(), st.booleans())
def test_strings_round_trip_in_every_form(text: str, compact: bool, nullable: bool) -> None:
    out = bytearray()
    write_string(out, text, compact=compact, nullable=nullable)
    reader = Reader(out)
    read = {
        (False, False): reader.string,
        (False, True): reader.nullable_string,
        (True, False): reader.compact_string,
        (True, True): reader.compact_nullable_string,
    }[(compact, nullable)]
    assert read() == text
    assert reader.remaining() == 0


def test_null_strings_use_minus_one_or_compact_zero() -> None:
    out = bytearray()
    write_string(out, None, compact=False, nullable=True)
    write_string(out, None, compact=True, nullable=True)
    assert out == b"\xff\xff\x00"
    reader = Reader(out)
    assert reader.nullable_string() is None
    assert reader.compact_nullable_string() is None
    with pytest.raises(ProtocolEncodeError, match="non-nullable"):
        write_string(bytearray(), None, compact=True, nullable=False)


def test_null_in_a_non_nullable_string_is_a_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError, match="non-nullable"):
        Reader(b"\xff\xff").string()
    with pytest.raises(ProtocolDecodeError, match="non-nullable"):
        Reader(b"\x00").compact_string()


def test_invalid_utf8_is_a_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError, match="invalid UTF-8"):
        Reader(b"\x00\x02\xc3\x28").string()


def test_oversized_classic_string_is_refused_on_encode() -> None:
    with pytest.raises(ProtocolEncodeError, match="32767"):
        write_string(bytearray(), "x" * 40_000, compact=False, nullable=False)


def test_bytes_views_are_zero_copy_slices_of_the_input() -> None:
    data = bytearray()
    write_bytes(data, b"payload", compact=True, nullable=False)
    frame = bytes(data)
    view = Reader(frame).bytes_view(compact=True, nullable=False, what="records")
    assert view is not None and view.obj is frame
    assert bytes(view) == b"payload"


def test_a_bogus_length_fails_fast_without_allocating() -> None:
    # 2 GiB claimed, 3 bytes present: refused before any slice or list is made.
    with pytest.raises(ProtocolDecodeError, match="needs 2147483647 bytes, 3 left"):
        Reader(b"\x7f\xff\xff\xffabc").bytes_view(compact=False, nullable=True, what="bytes")
    with pytest.raises(ProtocolDecodeError, match=r"claims 2147483647 items.*4 bytes left"):
        Reader(b"\x7f\xff\xff\xff\x00\x00\x00\x00").array_length(
            compact=False, nullable=False, min_item_size=4, what="array"
        )


def test_arrays_null_and_counts() -> None:
    out = bytearray()
    write_array_length(out, None, compact=False, nullable=True)
    write_array_length(out, None, compact=True, nullable=True)
    write_array_length(out, 0, compact=True, nullable=False)
    assert out == b"\xff\xff\xff\xff\x00\x01"
    reader = Reader(out)
    assert reader.array_length(compact=False, nullable=True, min_item_size=1, what="a") == -1
    assert reader.array_length(compact=True, nullable=True, min_item_size=1, what="a") == -1
    assert reader.array_length(compact=True, nullable=False, min_item_size=1, what="a") == 0
    with pytest.raises(ProtocolDecodeError, match="non-nullable array"):
        Reader(b"\x00").array_length(compact=True, nullable=False, min_item_size=1, what="a")


def test_uuid_round_trip() -> None:
    value = uuid.UUID("01a200af-bbc6-7c40-b77f-6216afa61ad9")
    out = bytearray()
    write_uuid(out, value)
    assert Reader(out).uuid() == value


def test_tagged_fields_are_written_in_ascending_tag_order_and_read_back() -> None:
    out = bytearray()
    write_raw_tagged_fields(out, {300: b"zz", 1: b"a"})
    assert out.hex() == "02" + "01" + "01" + "61" + "ac02" + "02" + "7a7a"
    fields = Reader(out).raw_tagged_fields()
    assert [(tag, bytes(raw)) for tag, _, raw in fields] == [(1, b"a"), (300, b"zz")]


def test_tagged_fields_out_of_order_or_duplicated_are_refused() -> None:
    with pytest.raises(ProtocolDecodeError, match="not ascending"):
        Reader(bytes.fromhex("02 05 00 05 00")).raw_tagged_fields()
    with pytest.raises(ProtocolDecodeError, match="not ascending"):
        Reader(bytes.fromhex("02 05 00 01 00")).raw_tagged_fields()


def test_write_uvarint_refuses_negative_values() -> None:
    with pytest.raises(ProtocolEncodeError, match="unsigned varint"):
        write_uvarint(bytearray(), -1)


def test_reader_accepts_any_byte_buffer() -> None:
    assert Reader(bytearray(b"\x00\x07")).int16() == 7
    assert Reader(memoryview(b"\x00\x07").cast("c")).int16() == 7  # type: ignore[arg-type]
