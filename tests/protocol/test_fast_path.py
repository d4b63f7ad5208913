"""The generated fast path against the careful path it stands in for.

The public functions fall back to the careful path whenever the fast path raises, so a
bug that makes generated code give up would only cost speed, and could hide there. These
tests call ``Plan.fast_encode``/``fast_decode`` (and the whole-frame ``request_encoder``/
``response_decoder``) directly and hold them to the careful path: the same buffers
(records by reference), the same bodies (key order and value types included), success on
exactly the same inputs — valid, mutated, or with wrong values — and, through the public
functions, the same typed errors with the same messages.
"""

from __future__ import annotations

import copy
import random
import struct
import uuid
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kclient.errors import ProtocolDecodeError, ProtocolEncodeError, UnsupportedVersionError
from kclient.protocol import ApiKey
from kclient.protocol.careful import compile_struct
from kclient.protocol.codec import Plan, plan
from kclient.protocol.codegen import (
    _COMPACT_STRINGS,
    _STRINGS_KEPT,
    _FastPathMiss,
    _min_size,
    _uvarint_at,
)
from kclient.protocol.frame import (
    decode_response,
    encode_request,
    encode_response,
    frame_bytes,
    peek_correlation_id,
)
from kclient.protocol.messages import REQUESTS, RESPONSES
from kclient.protocol.schema import F, Field, Message, message
from kclient.protocol.types import (
    NO_ITEM_LIMIT,
    DecodeError,
    EncodeError,
    Reader,
    Writer,
    uvarint_bytes,
)
from tests.protocol.test_properties import (
    CASES,
    LAYOUTS,
    _case_id,
    _settings,
    bodies,
    mutations,
)


def _message(kind: str, api_key: int) -> Message:
    return REQUESTS[api_key] if kind == "request" else RESPONSES[api_key]


def _shape(value: Any) -> Any:
    """``value`` with types and dict key order made part of what ``==`` compares."""
    if isinstance(value, dict):
        return ("dict", [(k, _shape(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [_shape(v) for v in value])
    if isinstance(value, memoryview):
        return ("memoryview", value.tobytes())
    if isinstance(value, float):  # float64 fields: bytes, so that NaN equals NaN
        return ("float", struct.pack(">d", value))
    return (type(value).__name__, value)


def careful_buffers(kind: str, api_key: int, version: int, body: Any) -> list[Any]:
    writer = Writer()
    plan(_message(kind, api_key), version).encode_careful_into(writer, body)
    return writer.buffers()


def fast_buffers(kind: str, api_key: int, version: int, body: Any) -> list[Any]:
    parts: list[Any] = []
    tail, flushed = plan(_message(kind, api_key), version).fast_encode(bytearray(), parts, body)
    if tail or not parts:
        parts.append(tail)
    assert flushed + len(tail) == len(frame_bytes(parts))
    return parts


def careful_decode(kind: str, api_key: int, version: int, data: bytes) -> tuple[Any, int]:
    reader = Reader(data)
    body = plan(_message(kind, api_key), version).decode_careful(reader)
    return body, reader.pos


def fast_decode(kind: str, api_key: int, version: int, data: bytes) -> tuple[Any, int]:
    body, end = plan(_message(kind, api_key), version).fast_decode(
        memoryview(data), 0, NO_ITEM_LIMIT
    )
    return body, end


def _outcome(fn: Any, *args: Any, careful: bool = False) -> tuple[bool, Any]:
    """(True, result) or (False, exception): the careful path may raise only its typed
    errors, the fast path gives up with anything."""
    try:
        return True, fn(*args)
    except (DecodeError, EncodeError) as exc:
        return False, exc
    except Exception as exc:
        if careful:
            raise
        return False, exc


# ---- valid bodies ---------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "api_key", "version"), LAYOUTS, ids=_case_id)
@_settings(8)
@given(data=st.data())
def test_fast_path_encodes_and_decodes_like_the_careful_path(
    kind: str, api_key: int, version: int, data: st.DataObject
) -> None:
    body = data.draw(bodies(kind, api_key, version))
    expected = careful_buffers(kind, api_key, version, body)
    got = fast_buffers(kind, api_key, version, body)
    assert [bytes(part) for part in got] == [bytes(part) for part in expected]
    for ours, theirs in zip(got, expected, strict=True):
        assert type(ours) is type(theirs)
        if type(ours) is not bytearray:  # records: the caller's very buffer
            assert ours is theirs

    encoded = frame_bytes(expected)
    fast_body, fast_end = fast_decode(kind, api_key, version, encoded)
    careful_body, careful_end = careful_decode(kind, api_key, version, encoded)
    assert fast_end == careful_end == len(encoded)
    assert _shape(fast_body) == _shape(careful_body)


def test_decoded_records_are_views_of_the_input() -> None:
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": b"abc"}]}],
    }
    encoded = frame_bytes(careful_buffers("request", ApiKey.PRODUCE, 9, body))
    decoded, _ = plan(REQUESTS[ApiKey.PRODUCE], 9).fast_decode(
        memoryview(encoded), 0, NO_ITEM_LIMIT
    )
    records = decoded["topic_data"][0]["partition_data"][0]["records"]
    assert isinstance(records, memoryview) and records.obj is encoded
    assert records == b"abc"


# ---- whole frames ---------------------------------------------------------------------------


def _header(api_key: int, version: int, client_id: str) -> bytearray:
    """A request header with zeros for the size and the correlation id, written by hand."""
    data = client_id.encode()
    header = bytearray(struct.pack(">ihhih", 0, api_key, version, 0, len(data)) + data)
    if REQUESTS[api_key].is_flexible(version):
        header.append(0)
    return header


def _response_header_version(api_key: int, version: int) -> int:
    flexible = RESPONSES[api_key].is_flexible(version)
    return 1 if flexible and api_key != ApiKey.API_VERSIONS else 0


@pytest.mark.parametrize(("kind", "api_key", "version"), LAYOUTS, ids=_case_id)
@_settings(6)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_whole_frame_fast_paths_match_the_careful_path(
    kind: str, api_key: int, version: int, data: st.DataObject, seed: int
) -> None:
    body = data.draw(bodies(kind, api_key, version))
    body_plan = plan(_message(kind, api_key), version)
    careful = careful_buffers(kind, api_key, version, body)
    if kind == "request":
        header = _header(api_key, version, "fast")
        got = body_plan.request_encoder()(header, 77, body)
        expected = bytearray(header)
        struct.pack_into(">i", expected, 0, len(header) - 4 + len(frame_bytes(careful)))
        struct.pack_into(">i", expected, 8, 77)
        assert frame_bytes(got) == bytes(expected) + frame_bytes(careful)
        assert header == _header(api_key, version, "fast")  # the template is left alone
        careful_parts = careful[1:] if careful[0] else careful
        assert [p for p in got if type(p) is not bytearray] == [
            p for p in careful_parts if type(p) is not bytearray
        ]
        return
    header_version = _response_header_version(api_key, version)
    prefix = struct.pack(">i", 77) + (b"\x00" if header_version else b"")
    valid = prefix + frame_bytes(careful)
    decode = body_plan.response_decoder(header_version)
    for frame in [valid, *mutations(valid, random.Random(seed), 30)]:
        # the fast path reads exactly the frames with no header tagged fields (a zero count)
        # whose bodies the careful path reads to their very end
        careful_ok = len(frame) >= len(prefix) and frame[4 : len(prefix)] == prefix[4:]
        if careful_ok:
            reader = Reader(frame, pos=len(prefix))
            careful_ok, careful_body = _outcome(body_plan.decode_careful, reader, careful=True)
            careful_ok = careful_ok and not reader.remaining()
        fast_ok, fast = _outcome(decode, frame)
        assert fast_ok == careful_ok, frame.hex()
        if fast_ok:
            assert fast[0] == struct.unpack_from(">i", frame)[0]
            assert _shape(fast[1]) == _shape(careful_body)


# ---- mutated bytes --------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "api_key", "version"), LAYOUTS, ids=_case_id)
@_settings(6)
@given(data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_fast_decode_succeeds_exactly_when_the_careful_path_does(
    kind: str, api_key: int, version: int, data: st.DataObject, seed: int
) -> None:
    body = data.draw(bodies(kind, api_key, version))
    valid = frame_bytes(careful_buffers(kind, api_key, version, body))
    for mutated in [valid, *mutations(valid, random.Random(seed), 40)]:
        careful_ok, careful = _outcome(
            careful_decode, kind, api_key, version, mutated, careful=True
        )
        fast_ok, fast = _outcome(fast_decode, kind, api_key, version, mutated)
        assert fast_ok == careful_ok, (mutated.hex(), careful, fast)
        if careful_ok:
            assert _shape(fast[0]) == _shape(careful[0]) and fast[1] == careful[1]


# ---- wrong values ---------------------------------------------------------------------------


class NotAMapping:
    """Has ``get`` like a dict, but is no Mapping: the careful path refuses it as a struct."""

    def get(self, key: str, default: Any = None) -> Any:
        return default


ODD_VALUES: list[Any] = [
    NotAMapping(),
    None,
    "x",
    "é" * 20_000,  # too long for a classic string, fine for a compact one
    "\ud800",  # a lone surrogate: no UTF-8 for it
    -1,
    2**31,
    2**70,
    1.5,
    True,
    b"xy",
    bytearray(b"z"),
    memoryview(b"view"),
    [],
    [b"a", memoryview(b"b")],
    (1, 2),
    ["s"],
    [{}],
    {},
    OrderedDict(index=3),
    uuid.UUID(int=5),
    object(),
]


def _slots(value: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """Every (container, key or index) inside a body."""
    if isinstance(value, dict):
        for key in value:
            out.append((value, key))
            _slots(value[key], out)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.append((value, i))
            _slots(item, out)
    return out


@pytest.mark.parametrize(("kind", "api_key", "version"), LAYOUTS, ids=_case_id)
@_settings(10)
@given(data=st.data())
def test_fast_encode_succeeds_exactly_when_the_careful_path_does(
    kind: str, api_key: int, version: int, data: st.DataObject
) -> None:
    body = copy.deepcopy(data.draw(bodies(kind, api_key, version)))
    slots = _slots(body, [(None, None)])
    for _ in range(data.draw(st.integers(1, 2))):
        container, key = data.draw(st.sampled_from(slots))
        if container is None:
            body = data.draw(st.sampled_from([[], None, OrderedDict(body), "body"]))
            break
        if isinstance(container, dict) and data.draw(st.booleans()):
            container.pop(key, None)  # a missing key encodes as the default
        else:
            container[key] = data.draw(st.sampled_from(ODD_VALUES))
    careful_ok, careful = _outcome(careful_buffers, kind, api_key, version, body, careful=True)
    fast_ok, fast = _outcome(fast_buffers, kind, api_key, version, body)
    assert fast_ok == careful_ok, (careful, fast)
    if careful_ok:
        assert [bytes(p) for p in fast] == [bytes(p) for p in careful]
    else:  # and the public encoder reports what the careful path says
        with pytest.raises(ProtocolEncodeError) as info:
            plan(_message(kind, api_key), version).encode(body)
        assert str(info.value) == str(careful)


# ---- the public functions on the fast path --------------------------------------------------

PRODUCE: dict[str, Any] = {
    "acks": 1,
    "timeout_ms": 1000,
    "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"abc"}]}],
}


def _produce_response(version: int) -> bytes:
    body = {
        "responses": [
            {"name": "t", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 9}]}
        ]
    }
    return frame_bytes(encode_response(ApiKey.PRODUCE, version, 5, body))[4:]


def test_encode_request_reuses_its_header_but_never_shares_buffers() -> None:
    first = encode_request(ApiKey.PRODUCE, 9, 1, "c", PRODUCE)
    second = encode_request(ApiKey.PRODUCE, 9, 2, "c", PRODUCE)
    assert first[0] is not second[0]
    one, two = frame_bytes(first), frame_bytes(second)
    assert one[:8] == two[:8] and one[12:] == two[12:]
    assert struct.unpack_from(">i", one, 8) == (1,) and struct.unpack_from(">i", two, 8) == (2,)
    assert struct.unpack_from(">i", two)[0] == len(two) - 4
    records = PRODUCE["topic_data"][0]["partition_data"][0]["records"]
    assert any(part is records for part in second)


def test_encode_request_errors_on_the_fast_path_are_the_careful_ones() -> None:
    encode_request(ApiKey.PRODUCE, 9, 1, "c", PRODUCE)  # the header is cached now
    with pytest.raises(ProtocolEncodeError, match=r"^ProduceRequest v9: field acks: 'x' is not"):
        encode_request(ApiKey.PRODUCE, 9, 1, "c", {**PRODUCE, "acks": "x"})
    with pytest.raises(ProtocolEncodeError, match="^request header: "):
        encode_request(ApiKey.PRODUCE, 9, 2**31, "c", PRODUCE)
    with pytest.raises(ProtocolEncodeError, match="not supported"):
        encode_request(ApiKey.PRODUCE, 9.0, 1, "c", PRODUCE)  # type: ignore[arg-type]
    with pytest.raises(ProtocolEncodeError, match="^request header: "):
        encode_request(0.0, 9, 1, "c", PRODUCE)  # type: ignore[arg-type]

    class Name(str):
        pass

    with pytest.raises(ProtocolEncodeError, match="client_id must be a str or None, got Name"):
        encode_request(ApiKey.PRODUCE, 9, 1, Name("c"), PRODUCE)
    with pytest.raises(ProtocolEncodeError, match="client_id must be a str"):
        encode_request(ApiKey.PRODUCE, 9, 1, ["c"], PRODUCE)  # type: ignore[arg-type]


def test_the_careful_path_starts_from_what_the_fast_path_was_given() -> None:
    body_plan = Plan(REQUESTS[ApiKey.PRODUCE], 9)  # a private one, to break its fast path
    records = memoryview(b"records")
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}],
    }

    def gives_up_halfway(buf: bytearray, parts: list[Any], d: Any) -> Any:
        buf += b"half"
        parts += [buf, b"referenced"]
        raise IndexError  # as generated code does on input it leaves to the careful path

    body_plan.fast_encode = gives_up_halfway
    writer = Writer()
    writer.buf += b"header"
    body_plan.encode_into(writer, body)
    expected = Writer()
    expected.buf += b"header"
    plan(REQUESTS[ApiKey.PRODUCE], 9).encode_careful_into(expected, body)
    got = writer.buffers()
    assert [bytes(b) for b in got] == [bytes(b) for b in expected.buffers()]
    assert got[1] is records
    assert frame_bytes(body_plan.encode(body)) == frame_bytes(got)[len(b"header") :]

    def gives_up_reading(buf: memoryview, pos: int, items_left: int) -> Any:
        raise IndexError

    body_plan.fast_decode = gives_up_reading
    reader = Reader(b"xx" + frame_bytes(got)[len(b"header") :], pos=2)
    assert body_plan.decode_rest(reader)["topic_data"][0]["partition_data"][0]["records"] == (
        b"records"
    )


def test_garbage_on_the_fast_decode_path_raises_only_typed_errors() -> None:
    valid = _produce_response(9)
    assert decode_response(ApiKey.PRODUCE, 9, valid)[0] == 5  # the decoder is cached now
    fast = plan(RESPONSES[ApiKey.PRODUCE], 9).fast_decode
    with pytest.raises(Exception):  # noqa: B017 - the fast path gives up with anything
        fast(memoryview(valid[:-3]), 5)
    with pytest.raises(ProtocolDecodeError, match=r"^ProduceResponse v9: cannot read int32 at"):
        decode_response(ApiKey.PRODUCE, 9, valid[:-3])
    rng = random.Random(7)
    for frame in mutations(valid, rng, 500):
        assert "ProduceResponse v9" in _decode_error(ApiKey.PRODUCE, 9, frame)
    for _ in range(300):
        garbage = rng.randbytes(rng.randint(0, 40))
        assert "MetadataResponse v12" in _decode_error(ApiKey.METADATA, 12, garbage)
    with pytest.raises(UnsupportedVersionError):
        decode_response(ApiKey.PRODUCE, 9.0, valid)  # type: ignore[arg-type]
    with pytest.raises(ProtocolDecodeError, match="response header: cannot read int32"):
        peek_correlation_id(b"\x00")


def _decode_error(api_key: int, version: int, frame: bytes) -> str:
    """The message of the ``ProtocolDecodeError`` decoding ``frame`` raises (any, if none)."""
    try:
        decode_response(api_key, version, frame)
    except ProtocolDecodeError as exc:
        return str(exc)
    return RESPONSES[api_key].name + f" v{version}"  # it decoded: nothing to check


def test_decode_response_takes_any_byte_buffer() -> None:
    valid = _produce_response(9)
    expected = decode_response(ApiKey.PRODUCE, 9, valid)
    sliced = memoryview(b"xx" + valid)[2:]  # not all of what it views: strings from a copy
    for frame in (bytearray(valid), memoryview(valid), memoryview(valid).cast("c"), sliced):
        correlation_id, body = decode_response(ApiKey.PRODUCE, 9, frame)  # type: ignore[arg-type]
        assert (correlation_id, _shape(body)) == (expected[0], _shape(expected[1]))
        assert peek_correlation_id(frame) == 5  # type: ignore[arg-type]


def test_header_tagged_fields_and_trailing_bytes_go_the_careful_way() -> None:
    valid = _produce_response(9)
    with_tag = valid[:4] + bytes.fromhex("01 05 01 aa") + valid[5:]
    assert decode_response(ApiKey.PRODUCE, 9, with_tag)[1] == decode_response(0, 9, valid)[1]
    with pytest.raises(ProtocolDecodeError, match="1 unexpected bytes after the body"):
        decode_response(ApiKey.PRODUCE, 9, valid + b"\x00")


# ---- the generator's own arithmetic ---------------------------------------------------------


def _struct_fields(fields: tuple[Field, ...]) -> list[Field]:
    out = []
    for fld in fields:
        if fld.is_struct:
            out.append(fld)
            out += _struct_fields(fld.fields)
    return out


@pytest.mark.parametrize(("kind", "api_key", "version"), CASES, ids=_case_id)
def test_smallest_item_sizes_match_the_careful_path(kind: str, api_key: int, version: int) -> None:
    msg = _message(kind, api_key)
    flexible = msg.is_flexible(version)
    for fld in _struct_fields(msg.fields):
        careful = compile_struct(fld.fields, version, flexible)[2]
        assert _min_size(fld, version, flexible, item=True) == careful, fld.name


def test_arrays_of_empty_structs_are_checked_against_the_bytes_left() -> None:
    # With nothing to read per item, only the count check stops a bogus count; as the
    # careful path does, the fast path counts each item as at least one byte.
    item = (F("Later", "int32", "1+"),)  # so at v0 an item has no fields
    empty = message("Empties", 1000, "0-1", "none", (F("Items", "[]Empty", "0+", fields=item),))
    body_plan = plan(empty, 0)
    cases = [(b"\x00\x00\x00\x03abc", True), (b"\x00\x00\x00\x04abc", False)]
    for data, ok in [*cases, (b"\x7f\xff\xff\xffabc", False)]:
        reader = Reader(data)
        if ok:
            assert body_plan.fast_decode(memoryview(data), 0, NO_ITEM_LIMIT) == (
                {"items": [{}] * 3},
                4,
            )
            assert body_plan.decode_careful(reader) == {"items": [{}] * 3}
        else:
            with pytest.raises(_FastPathMiss):
                body_plan.fast_decode(memoryview(data), 0, NO_ITEM_LIMIT)
            with pytest.raises(ProtocolDecodeError, match="items of at least 1 bytes, only 3"):
                body_plan.decode(reader)


@pytest.mark.parametrize("size", [0, 125, 126, 127, 128, 16381, 16382, 16383, 16384, 2**21])
def test_lengths_at_varint_boundaries(size: int) -> None:
    # one, two and more bytes of compact length, written and read inline or by the helper
    name = "n" * min(size, 20_000)
    records = memoryview(bytes(size))
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [{"name": name, "partition_data": [{"index": 0, "records": records}]}],
    }
    for version in (8, 9):  # classic int16/int32 lengths, then compact ones
        expected = careful_buffers("request", ApiKey.PRODUCE, version, body)
        got = fast_buffers("request", ApiKey.PRODUCE, version, body)
        assert [bytes(part) for part in got] == [bytes(part) for part in expected]
        encoded = frame_bytes(expected)
        fast = fast_decode("request", ApiKey.PRODUCE, version, encoded)
        careful = careful_decode("request", ApiKey.PRODUCE, version, encoded)
        assert _shape(fast) == _shape(careful)
        assert fast[0]["topic_data"][0]["partition_data"][0]["records"].nbytes == size


def _read_uvarint(data: bytes) -> tuple[int, int]:
    reader = Reader(data)
    return reader.uvarint(), reader.pos


_VARINT_EDGES = [
    uvarint_bytes(2**32 - 1),  # the largest that fits
    uvarint_bytes(2**32),  # five bytes, too large
    uvarint_bytes(2**35 - 1),  # five bytes, all ones
    b"\x80" * 5 + b"\x00",  # six bytes
    b"\xff\xff",  # cut short
]


@_settings(400)
@given(st.binary(min_size=1, max_size=8) | st.sampled_from(_VARINT_EDGES))
def test_the_varint_helper_reads_what_the_reader_reads(data: bytes) -> None:
    careful_ok, careful = _outcome(_read_uvarint, data, careful=True)
    fast_ok, fast = _outcome(_uvarint_at, memoryview(data), 0)
    assert fast_ok == careful_ok
    if careful_ok:
        assert fast == careful


def test_kept_string_encodings_stay_bounded() -> None:
    body_plan = plan(REQUESTS[ApiKey.PRODUCE], 9)
    for i in range(_STRINGS_KEPT + 10):
        body = {
            "acks": 1,
            "timeout_ms": 1000,
            "topic_data": [{"name": f"topic-{i}", "partition_data": []}],
        }
        assert frame_bytes(body_plan.encode(body)) == frame_bytes(
            careful_buffers("request", ApiKey.PRODUCE, 9, body)
        )
    assert len(_COMPACT_STRINGS) <= _STRINGS_KEPT
