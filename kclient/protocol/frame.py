"""Size-prefixed frames and request/response headers.

Corresponds to Kafka's ``RequestHeader``/``ResponseHeader`` (``RequestHeader.json``,
``ResponseHeader.json``), ``ApiKeys.requestHeaderVersion``/``responseHeaderVersion`` and
the 4-byte size prefix that ``NetworkSend``/``NetworkReceive`` put around every message.
Sans-I/O: bytes in, values out, and back; any thread may call it.

    frame            = size:int32 header body          (size counts header + body)
    request header   v1 = api_key:int16 api_version:int16 correlation_id:int32
                          client_id:nullable string (int16 length)
                     v2 = v1 + tagged fields          (client_id stays non-compact)
    response header  v0 = correlation_id:int32
                     v1 = v0 + tagged fields

The header version follows the body: flexible bodies use request header v2 / response
header v1. Exception: ApiVersions responses always use response header v0, so a client
can read the broker's answer even to a version the broker does not know.

Encoders return a list of buffers (size prefix included) to hand to ``socket.sendmsg``;
record data given as ``records`` is in that list by reference (except a one-partition
ProduceRequest's batch of up to 16 KiB, copied into a single buffer: see
``produce_fast``). Decoders take a frame
without its size prefix (what ``NetworkReceive`` hands over).

The client's per-round-trip calls, ``encode_request`` and ``decode_response``, first try
``produce_fast`` for Produce (one partition, the producer's usual request and answer), then
the codec's generated whole-frame fast path: after a first call has gone the careful way
(checking the api key, version and client id), the request header bytes of that (api key,
version, client id) and the response decoder of that (api key, version) are cached, so a
call is one dict lookup and one generated function. Whenever that path gives up, the
call is done again the careful way, which raises the precise error, so both ways behave
the same.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kclient.errors import ProtocolDecodeError, UnsupportedVersionError
from kclient.protocol.codec import (
    Buffer,
    Plan,
    RequestEncoder,
    ResponseDecoder,
    Writer,
    plan,
)
from kclient.protocol.messages import REQUESTS, RESPONSES, ApiKey
from kclient.protocol.produce_fast import decode_produce, encode_produce
from kclient.protocol.types import INT32, DecodeError, EncodeError, Reader

_REQUEST_HEADER = struct.Struct(">ihhi")  # size placeholder, api key, version, correlation id
_RESPONSE_HEADER = struct.Struct(">ii")  # size placeholder, correlation id
_HEADER_V1_FIXED = struct.Struct(">hhih")  # api key, version, correlation id, client id size
_CORRELATION_ID = INT32  # at offset 0 of a response frame without its size prefix
_PRODUCE = int(ApiKey.PRODUCE)


@dataclass(frozen=True)
class RequestHeader:
    """A request's header (what every request starts with)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _known(api_key: int, table: Mapping[int, Any], what: str) -> Any:
    try:
        return table[api_key]
    except (KeyError, TypeError):
        raise EncodeError(f"kclient has no {what} declaration for api key {api_key!r}") from None


def request_header_version(api_key: int, api_version: int) -> int:
    """1 for requests with a non-flexible body, 2 for flexible ones."""
    return 2 if _known(api_key, REQUESTS, "request").is_flexible(api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """0 for non-flexible bodies, 1 for flexible ones; always 0 for ApiVersions."""
    message = _known(api_key, RESPONSES, "response")
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if message.is_flexible(api_version) else 0


def _plan(api_key: int, api_version: int, table: Mapping[int, Any], what: str) -> Plan:
    message = _known(api_key, table, what)
    if api_version not in message.valid:
        raise EncodeError(
            f"{message.name} v{api_version} is not supported (kclient speaks v{message.valid})"
        )
    return plan(message, api_version)


def _finish(writer: Writer) -> list[Buffer]:
    parts = writer.buffers()
    first = parts[0]
    assert type(first) is bytearray  # the header was written into it
    INT32.pack_into(first, 0, writer.size() - 4)
    return parts


# (api key, version, client id) → (request header with zeros for the size and the
# correlation id, the plan's request encoder). Filled once the careful path took all three.
_REQUEST_ENCODERS: dict[tuple[int, int, str | None], tuple[bytearray, RequestEncoder]] = {}
_CACHE_LIMIT = 256  # client ids are few; a caller making up new ones cannot grow it forever


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
) -> list[Buffer]:
    """A size-prefixed request frame as a buffer list (records by reference)."""
    if api_key == _PRODUCE:  # the producer's per-round-trip request, in its usual shape
        frame = encode_produce(api_version, correlation_id, client_id, body, _encode_request)
        if frame is not None:
            return frame
    try:
        header, encode = _REQUEST_ENCODERS[api_key, api_version, client_id]
    except (KeyError, TypeError):
        return _encode_request(api_key, api_version, correlation_id, client_id, body)
    # keys equal to a cached one but of another type (9.0, a str subclass) go the careful way
    if (
        type(api_version) is int
        and (type(client_id) is str or client_id is None)
        and isinstance(api_key, int)
    ):
        try:
            return encode(header, correlation_id, body)
        except Exception:  # the careful path encodes again and says what is wrong
            pass
    return _encode_request(api_key, api_version, correlation_id, client_id, body)


def _encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: Mapping[str, Any],
) -> list[Buffer]:
    """``encode_request`` the careful way, remembering the header for the fast path."""
    body_plan = _plan(api_key, api_version, REQUESTS, "request")
    writer = Writer()
    buf = writer.buf
    try:
        buf += _REQUEST_HEADER.pack(0, api_key, api_version, correlation_id)
    except struct.error as exc:
        raise EncodeError(f"request header: {exc}") from None
    if client_id is None:
        buf += b"\xff\xff"
    else:
        if type(client_id) is not str:
            raise EncodeError(f"client_id must be a str or None, got {type(client_id).__name__}")
        data = client_id.encode("utf-8")
        if len(data) > 0x7FFF:
            raise EncodeError(f"client_id of {len(data)} bytes is longer than 32767")
        buf += len(data).to_bytes(2, "big")
        buf += data
    if body_plan.flexible:
        buf.append(0)  # no header tagged fields
    if type(api_version) is int and isinstance(api_key, int):
        if len(_REQUEST_ENCODERS) >= _CACHE_LIMIT:
            _REQUEST_ENCODERS.clear()
        header = buf[:8] + bytes(4) + buf[12:]
        _REQUEST_ENCODERS[api_key, api_version, client_id] = (header, body_plan.request_encoder())
    body_plan.encode_into(writer, body)
    return _finish(writer)


def encode_response(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> list[Buffer]:
    """A size-prefixed response frame as a buffer list (records by reference)."""
    body_plan = _plan(api_key, api_version, RESPONSES, "response")
    writer = Writer()
    try:
        writer.buf += _RESPONSE_HEADER.pack(0, correlation_id)
    except struct.error as exc:
        raise EncodeError(f"response header: {exc}") from None
    if response_header_version(api_key, api_version) == 1:
        writer.buf.append(0)
    body_plan.encode_into(writer, body)
    return _finish(writer)


def frame_bytes(buffers: Iterable[Buffer]) -> bytes:
    """The buffers of an encoded frame joined into one ``bytes``."""
    return b"".join(buffers)


def _read_request_header(reader: Reader) -> RequestHeader:
    header = _read_request_header_fast(reader)
    if header is not None:
        return header
    try:  # the careful path, which says what is wrong and where
        api_key = reader.int16()
        api_version = reader.int16()
        correlation_id = reader.int32()
        client_id = reader.nullable_string()
        message = REQUESTS.get(api_key)
        if message is not None and message.is_flexible(api_version):
            reader.raw_tagged_fields()
    except DecodeError as exc:
        exc.context = "request header"
        raise
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def _read_request_header_fast(reader: Reader) -> RequestHeader | None:
    """One unpack for the fixed part; ``None`` (nothing consumed) for anything unusual."""
    buf, pos = reader.buf, reader.pos
    if len(buf) - pos < _HEADER_V1_FIXED.size:
        return None
    api_key, api_version, correlation_id, size = _HEADER_V1_FIXED.unpack_from(buf, pos)
    end = pos + _HEADER_V1_FIXED.size
    client_id = None
    if size >= 0:
        if end + size > len(buf):
            return None
        try:
            client_id = str(buf[end : end + size], "utf-8")
        except UnicodeDecodeError:
            return None
        end += size
    elif size != -1:
        return None
    message = REQUESTS.get(api_key)
    if message is not None and message.is_flexible(api_version):
        if end >= len(buf) or buf[end] != 0:  # header tagged fields present (or missing)
            return None
        end += 1
    reader.pos = end
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def decode_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """The header of a request frame (no size prefix) and the offset its body starts at.

    Works for any api key and version: header tagged fields are skipped only when the
    api is one kclient declares and the version is flexible.
    """
    reader = Reader(frame)
    header = _read_request_header(reader)
    return header, reader.pos


def decode_request(
    frame: Buffer, max_items: int | None = None
) -> tuple[RequestHeader, dict[str, Any]]:
    """Header and body of a request frame (no size prefix); with ``max_items``, a body of
    more array items in all (topics, partitions ...) raises ``ProtocolDecodeError``
    before they are made (a broker's bound on what one request may cost it).

    Raises ``ProtocolDecodeError`` for bytes that do not decode or an api key kclient does
    not declare, and ``UnsupportedVersionError`` for a known api at a version outside
    ``SUPPORTED_VERSIONS`` (the broker answers that with error code 35). Bytes after the
    body are ignored, as Kafka's brokers do (librdkafka 2.16 sends 3 after an all-topics
    Metadata v13 request); responses, read by the client, must end with their body.
    """
    reader = Reader(frame)
    header = _read_request_header(reader)
    message = REQUESTS.get(header.api_key)
    if message is None:
        raise ProtocolDecodeError(
            f"request with unknown api key {header.api_key} (correlation id"
            f" {header.correlation_id}, client {header.client_id!r})"
        )
    if header.api_version not in message.valid:
        raise UnsupportedVersionError(
            f"{message.name} v{header.api_version} is not supported (supported: v{message.valid})"
        )
    if max_items is not None:
        reader.limit_items(max_items)
    return header, plan(message, header.api_version).decode(reader)


# (api key, version) → the plan's response decoder. Filled once the careful path took both.
_RESPONSE_DECODERS: dict[tuple[int, int], ResponseDecoder] = {}


def decode_response(api_key: int, api_version: int, frame: Buffer) -> tuple[int, dict[str, Any]]:
    """Correlation id and body of a response frame (no size prefix).

    An ApiVersions response that does not decode at ``api_version`` is read again as v0:
    that is how a broker answers a version it does not know (as Kafka's Java client does).
    """
    if api_key == _PRODUCE:  # a written batch's answer, in its usual shape
        answer = decode_produce(api_version, frame)
        if answer is not None:
            return answer
    try:
        decode = _RESPONSE_DECODERS[api_key, api_version]
    except (KeyError, TypeError):
        return _decode_response(api_key, api_version, frame)
    if type(api_version) is int:  # 9.0 equals 9 but is no version
        try:
            return decode(frame)
        except Exception:  # the careful path decodes or says what is wrong
            pass
    return _decode_response(api_key, api_version, frame)


def _decode_response(api_key: int, api_version: int, frame: Buffer) -> tuple[int, dict[str, Any]]:
    """``decode_response`` the careful way, remembering the plan for the fast path."""
    message = RESPONSES.get(api_key)
    if message is None:
        raise ProtocolDecodeError(f"kclient has no response declaration for api key {api_key}")
    if api_version not in message.valid:
        raise UnsupportedVersionError(
            f"{message.name} v{api_version} is not supported (supported: v{message.valid})"
        )
    body_plan = plan(message, api_version)
    header_version = response_header_version(api_key, api_version)
    if type(api_version) is int:
        _RESPONSE_DECODERS[api_key, api_version] = body_plan.response_decoder(header_version)
    reader = Reader(frame)
    try:
        correlation_id = reader.int32()
        if header_version == 1:
            reader.raw_tagged_fields()
    except DecodeError as exc:
        exc.context = f"{message.name} v{api_version} header"
        raise
    start = reader.pos
    try:
        return correlation_id, body_plan.decode_rest(reader)
    except DecodeError:
        if api_key != ApiKey.API_VERSIONS or api_version == 0:
            raise
        try:
            return correlation_id, plan(message, 0).decode_rest(Reader(frame, pos=start))
        except DecodeError:
            pass
        raise


def peek_correlation_id(frame: Buffer) -> int:
    """The correlation id of a response frame (no size prefix), without decoding the rest."""
    try:
        correlation_id: int = _CORRELATION_ID.unpack_from(frame, 0)[0]
    except Exception:  # too short (or not bytes): the careful path says so
        reader = Reader(frame)
        try:
            return reader.int32()
        except DecodeError as exc:
            exc.context = "response header"
            raise
    return correlation_id
