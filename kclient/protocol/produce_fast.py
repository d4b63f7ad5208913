"""The producer's round trip in its common shape: a ProduceRequest for one partition's
batch, and the ProduceResponse saying it was written, without the generic codec.

No Kafka counterpart (Java's generated ``ProduceRequestData`` writes any shape). Used by
``frame.encode_request``/``decode_response`` before their generic fast path; any thread
may call it. Whatever these functions do not recognise returns None and takes the
generic way, which encodes or decodes every shape and raises the precise errors.

Request, v3-v13 (one topic, one partition):

    size:int32  api_key:int16  api_version:int16  correlation_id:int32  client_id:string
    [v9+ header tagged fields: 0]  transactional_id  acks:int16  timeout_ms:int32
    topic_data: count 1, name (v13: topic_id:uuid), partition_data: count 1 ─ everything
                up to here is the cached prefix of (version, client id, transactional id,
                acks, timeout, topic[, v13: topic id])
    index:int32  records: length (int32; v9+ unsigned varint of length + 1), the batch
    [v9+: 0 tagged fields each for the partition, the topic and the request]

The prefix is made by the generic encoder (records empty) and checked once against it
with other values; only a prefix that passes is cached.

The topic's dict is ``{name, partition_data}`` or ``{name, topic_id, partition_data}`` (the
id a ``uuid.UUID``, not encoded before v13); v13 needs the id.

Response, v3-v13, decoded here only when it holds one topic, one partition, no record
errors, no error message and no tagged fields (a written batch):

    correlation_id:int32  [v9+ header tagged fields]  responses: count 1, name (v13: topic_id),
    partition_responses: count 1, index:int32  error_code:int16  base_offset:int64
    log_append_time_ms:int64  [v5+ log_start_offset:int64]  [v8+ record_errors: empty,
    error_message: null]  [v9+ tagged fields of partition and topic]
    throttle_time_ms:int32  [v9+ tagged fields]

The body returned is the dict the generic decoder makes of the same bytes.

``encode_produce`` and ``decode_produce`` run in C (:mod:`kclient.protocol._produce`) when the
accelerator is built and ``KCLIENT_PURE_PYTHON`` is unset (``C_ACCELERATED``); the Python
functions here (``encode_produce_py``, ``decode_produce_py``) are the reference, and the C
calls them for any argument not of the exact types it takes. The prefix cache is shared.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kclient.protocol.codec import Buffer
from kclient.record._accel import ACCELERATED

_FIRST_FLEXIBLE = 9
_LAST = 13  # v13 names topics by id (KIP-516)
_SMALL_RECORDS = 16_384
"""Batches up to this size are copied into the frame's one buffer (one ``send``), larger
ones are passed by reference (``sendmsg``)."""

_INT32 = struct.Struct(">i")
_INDEX_LEN = struct.Struct(">ii")
_FLEX_TAIL = b"\x00\x00\x00"
_RECORD_TYPES = (bytes, bytearray)

Encoder = Callable[[int, int, int, str | None, Mapping[str, Any]], list[Buffer]]

# (version, client id, transactional id, acks, timeout ms, topic[, v13: topic id]) →
# request prefix, or None when the check against the generic encoder failed.
_Key = (
    tuple[int, str | None, str | None, int, int, str]
    | tuple[int, str | None, str | None, int, int, str, uuid.UUID]
)
_PREFIXES: dict[_Key, bytes | None] = {}
_CACHE_LIMIT = 1024


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def encode_produce_py(
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
    generic: Encoder,
) -> list[Buffer] | None:
    """The frame of a one-partition ProduceRequest, or None for any other shape.

    ``generic`` is ``frame.encode_request``'s careful path, used to build and check the
    prefix the first time a (version, client id, transactional id, acks, timeout, topic)
    is seen.
    """
    try:
        topic_data = body["topic_data"]
        if len(topic_data) != 1 or len(body) != 4:
            return None
        topic = topic_data[0]
        parts = topic["partition_data"]
        fields = len(topic)
        if len(parts) != 1 or not 2 <= fields <= 3:
            return None
        topic_id = topic["topic_id"] if fields == 3 else None
        if topic_id is not None and topic_id.__class__ is not uuid.UUID:
            return None
        part = parts[0]
        records = part["records"]
        index = part["index"]
        by_name = (
            api_version,
            client_id,
            body["transactional_id"],
            body["acks"],
            body["timeout_ms"],
            topic["name"],
        )
        key: _Key = by_name
        if api_version == _LAST:  # names the topic by id
            if topic_id is None:
                return None
            key = (*by_name, topic_id)
        prefix = _PREFIXES.get(key)
    except (KeyError, TypeError):  # not this shape, or unhashable values: not for here
        return None
    if (
        len(part) != 2
        or type(index) is not int
        or type(correlation_id) is not int
        or type(api_version) is not int
        or records.__class__ not in _RECORD_TYPES
    ):
        return None
    if prefix is None:
        if key in _PREFIXES or not 3 <= api_version <= _LAST:
            return None
        prefix = _make_prefix(key, generic)
        if prefix is None:
            return None
    return _assemble(prefix, api_version >= _FIRST_FLEXIBLE, correlation_id, index, records)


def _assemble(
    prefix: bytes, flexible: bool, correlation_id: int, index: int, records: bytes | bytearray
) -> list[Buffer] | None:
    n = len(records)
    head = bytearray(prefix)
    try:
        if flexible:
            head += _INT32.pack(index)
            size = n + 1  # unsigned varint of the length + 1 (0 is null)
            if size < 0x80:
                head.append(size)
            elif size < 0x4000:
                head.append((size & 0x7F) | 0x80)
                head.append(size >> 7)
            else:
                head += _uvarint(size)
            tail = _FLEX_TAIL
        else:
            head += _INDEX_LEN.pack(index, n)
            tail = b""
        _INT32.pack_into(head, 0, len(head) + n + len(tail) - 4)  # the size
        _INT32.pack_into(head, 8, correlation_id)  # after the api key and version
    except struct.error:  # out of range: the generic way says which field
        return None
    if n <= _SMALL_RECORDS:
        head += records
        head += tail
        return [head]
    return [head, records, tail] if tail else [head, records]


def _make_prefix(key: _Key, generic: Encoder) -> bytes | None:
    """The frame up to the partition index, from the generic encoder, and checked."""
    if len(_PREFIXES) >= _CACHE_LIMIT:
        _PREFIXES.clear()
    version, client_id, transactional_id, acks, timeout_ms, name = key[:6]
    topic: dict[str, Any] = {"name": name}
    if len(key) == 7:
        topic["topic_id"] = key[6]

    def frame(correlation_id: int, index: int, records: bytes) -> bytes:
        body = {
            "transactional_id": transactional_id,
            "acks": acks,
            "timeout_ms": timeout_ms,
            "topic_data": [{**topic, "partition_data": [{"index": index, "records": records}]}],
        }
        return b"".join(generic(0, version, correlation_id, client_id, body))

    try:
        empty = frame(0, 0, b"")
    except Exception:  # the caller's generic call raises the precise error
        return None
    prefix = empty[:-8]  # index + an empty records length + (v9+) three tag counts
    sample = bytes(range(200))  # a length whose varint takes two bytes
    expected = frame(123_456, 7, sample)
    good = True
    for assemble in _ASSEMBLERS:  # the Python one, and the C one when it is built
        check = assemble(prefix, version >= _FIRST_FLEXIBLE, 123_456, 7, sample)
        good = good and check is not None and b"".join(check) == expected
    _PREFIXES[key] = prefix if good else None
    return prefix if good else None


# ---- the response ------------------------------------------------------------------------

_V3 = struct.Struct(">iihqq")  # partitions, index, error code, base offset, log append time
_V5 = struct.Struct(">iihqqq")  # ... log start offset
_V8 = struct.Struct(">iihqqqih")  # ... record errors (count), error message (length)
_FLEX = struct.Struct(">ihqqq")  # index, error code, base offset, log append, log start
_FLEX_AFTER = struct.Struct(">4si")  # 4 bytes of counts/tags, throttle time ms
_FLEX_AFTER_EXPECTED = b"\x01\x00\x00\x00"  # no record errors, null message, no tags x2


def decode_produce_py(api_version: int, frame: Buffer) -> tuple[int, dict[str, Any]] | None:
    """Correlation id and body of a one-partition ProduceResponse without errors or tags;
    None for anything else (the generic decoder then reads it)."""
    if type(api_version) is not int or not 3 <= api_version <= _LAST:
        return None
    try:
        if api_version == _LAST:
            return _decode_by_id(frame)
        if api_version >= _FIRST_FLEXIBLE:
            return _decode_flexible(frame)
        return _decode_fixed(api_version, frame)
    except (struct.error, UnicodeDecodeError, IndexError):
        return None


def _decode_fixed(version: int, frame: Buffer) -> tuple[int, dict[str, Any]] | None:
    correlation_id, topics, name_len = struct.unpack_from(">iih", frame, 0)
    if topics != 1 or name_len < 0:
        return None
    pos = 10 + name_len
    name = bytes(frame[10:pos]).decode()
    part: dict[str, Any]
    if version >= 8:
        count, index, code, base, append, start, errors, message = _V8.unpack_from(frame, pos)
        if errors != 0 or message != -1:
            return None
        pos += _V8.size
        part = {
            "index": index,
            "error_code": code,
            "base_offset": base,
            "log_append_time_ms": append,
            "log_start_offset": start,
            "record_errors": [],
            "error_message": None,
        }
    elif version >= 5:
        count, index, code, base, append, start = _V5.unpack_from(frame, pos)
        pos += _V5.size
        part = {
            "index": index,
            "error_code": code,
            "base_offset": base,
            "log_append_time_ms": append,
            "log_start_offset": start,
        }
    else:
        count, index, code, base, append = _V3.unpack_from(frame, pos)
        pos += _V3.size
        part = {
            "index": index,
            "error_code": code,
            "base_offset": base,
            "log_append_time_ms": append,
        }
    if count != 1 or pos + 4 != len(frame):
        return None
    (throttle_ms,) = _INT32.unpack_from(frame, pos)
    return correlation_id, _answer("name", name, part, throttle_ms)


def _decode_flexible(frame: Buffer) -> tuple[int, dict[str, Any]] | None:
    # correlation id, no header tags, one topic, a name shorter than 127 bytes
    if frame[4] != 0 or frame[5] != 2:
        return None
    name_len = frame[6] - 1
    if not 0 <= name_len < 0x7F:
        return None
    found = _flexible_partition(frame, 7 + name_len)
    if found is None:
        return None
    name = bytes(frame[7 : 7 + name_len]).decode()
    part, throttle_ms = found
    return _INT32.unpack_from(frame, 0)[0], _answer("name", name, part, throttle_ms)


def _decode_by_id(frame: Buffer) -> tuple[int, dict[str, Any]] | None:
    # v13: correlation id, no header tags, one topic named by its 16-byte id
    if frame[4] != 0 or frame[5] != 2:
        return None
    found = _flexible_partition(frame, 22)
    if found is None:
        return None
    part, throttle_ms = found
    return _INT32.unpack_from(frame, 0)[0], _answer(
        "topic_id", topic_id(frame[6:22]), part, throttle_ms
    )


def _flexible_partition(frame: Buffer, pos: int) -> tuple[dict[str, Any], int] | None:
    """From the partitions' count at ``pos`` to the end: the one partition's dict and the
    throttle time, or None if it is not the common shape."""
    if frame[pos] != 2:
        return None
    index, code, base, append, start = _FLEX.unpack_from(frame, pos + 1)
    pos += 1 + _FLEX.size
    after, throttle_ms = _FLEX_AFTER.unpack_from(frame, pos)
    pos += _FLEX_AFTER.size
    if after != _FLEX_AFTER_EXPECTED or pos + 1 != len(frame) or frame[pos] != 0:
        return None
    part = {
        "index": index,
        "error_code": code,
        "base_offset": base,
        "log_append_time_ms": append,
        "log_start_offset": start,
        "record_errors": [],
        "error_message": None,
    }
    return part, throttle_ms


_IDS: dict[bytes, uuid.UUID] = {}
"""Topic ids read from answers, by their bytes: an answer names the same few topics again
and again (shared with the C decoder)."""


def topic_id(data: Buffer) -> uuid.UUID:
    """The ``uuid.UUID`` of a topic id's 16 bytes (the same object for the same bytes)."""
    key = bytes(data)
    found = _IDS.get(key)
    if found is None:
        if len(_IDS) >= _CACHE_LIMIT:
            _IDS.clear()
        found = _IDS[key] = uuid.UUID(bytes=key)
    return found


def _answer(key: str, topic: object, part: dict[str, Any], throttle_ms: int) -> dict[str, Any]:
    """The generic decoder's dict for a one-topic, one-partition answer: the topic by
    ``key`` (``name``, or v13's ``topic_id``)."""
    return {
        "responses": [{key: topic, "partition_responses": [part]}],
        "throttle_time_ms": throttle_ms,
    }


Decoder = Callable[[int, Buffer], tuple[int, dict[str, Any]] | None]
Assembler = Callable[[bytes, bool, int, int, bytes], list[Buffer] | None]

_ASSEMBLERS: list[Assembler] = [_assemble]
encode_produce: Callable[[int, int, str | None, Mapping[str, Any], Encoder], list[Buffer] | None]
encode_produce = encode_produce_py
decode_produce: Decoder = decode_produce_py
C_ACCELERATED = False
"""Whether ``encode_produce``/``decode_produce`` are the C ones."""
try:
    import kclient.protocol._produce as _c
except ImportError:  # not built: the Python functions
    pass
else:  # bound when built (the tests compare both), used when the accelerator is on
    _c.bind(
        encode_produce_py, decode_produce_py, _PREFIXES, _make_prefix, uuid.UUID, topic_id, _IDS
    )
    if ACCELERATED:
        _ASSEMBLERS.append(_c.assemble)
        encode_produce = _c.encode_produce
        decode_produce = _c.decode_produce
        C_ACCELERATED = True
