"""APIs the broker answers beyond those ``kclient.protocol`` declares: FindCoordinator.

librdkafka turns LZ4 compression on only when the broker lists FindCoordinator (api key
10) in ApiVersions (its "LZ4" feature depends on it), so the embedded broker declares
FindCoordinator here, with the protocol package's schema and codec, and answers every
lookup with COORDINATOR_NOT_AVAILABLE: there is no group or transaction coordinator.

Declared from Kafka's ``FindCoordinatorRequest.json`` / ``FindCoordinatorResponse.json``
(v0-v6, flexible from v3; v4 batches keys into ``coordinator_keys``). Immutable data and
pure functions: any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from kclient.protocol.codec import Buffer, Writer, plan
from kclient.protocol.schema import F, Message, message
from kclient.protocol.types import Reader

FIND_COORDINATOR = 10

FIND_COORDINATOR_REQUEST = message(
    "FindCoordinatorRequest",
    FIND_COORDINATOR,
    "0-6",
    "3+",
    (
        F("Key", "string", "0-3"),
        F("KeyType", "int8", "1+", default=0),
        F("CoordinatorKeys", "[]string", "4+"),
    ),
)

FIND_COORDINATOR_RESPONSE = message(
    "FindCoordinatorResponse",
    FIND_COORDINATOR,
    "0-6",
    "3+",
    (
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F("ErrorCode", "int16", "0-3", default=0),
        F("ErrorMessage", "string", "1-3", nullable="1-3", default=None),
        F("NodeId", "int32", "0-3", default=-1),
        F("Host", "string", "0-3", default=""),
        F("Port", "int32", "0-3", default=-1),
        F(
            "Coordinators",
            "[]Coordinator",
            "4+",
            fields=(
                F("Key", "string", "4+"),
                F("NodeId", "int32", "4+", default=-1),
                F("Host", "string", "4+", default=""),
                F("Port", "int32", "4+", default=-1),
                F("ErrorCode", "int16", "4+", default=0),
                F("ErrorMessage", "string", "4+", nullable="4+", default=None),
            ),
        ),
    ),
)

#: api key -> (request, response) declarations of the broker-local APIs.
LOCAL_APIS: dict[int, tuple[Message, Message]] = {
    FIND_COORDINATOR: (FIND_COORDINATOR_REQUEST, FIND_COORDINATOR_RESPONSE),
}

_SIZE_AND_CORRELATION = struct.Struct(">ii")


def local_versions() -> dict[int, tuple[int, int]]:
    return {key: (req.valid.low, req.valid.high) for key, (req, _) in LOCAL_APIS.items()}


def decode_local_request(
    api_key: int, api_version: int, frame: Buffer, body_offset: int
) -> dict[str, Any]:
    """Decode the body of a broker-local API request (raises the codec's DecodeError).

    ``body_offset`` is what ``decode_request_header`` returned: for an api the protocol
    package does not declare, that is before the header's tagged fields.
    """
    request, _ = LOCAL_APIS[api_key]
    reader = Reader(frame, pos=body_offset)
    if request.is_flexible(api_version):
        reader.raw_tagged_fields()  # request header v2 (decode_request_header left them)
    body = plan(request, api_version).decode(reader)
    if reader.remaining():
        raise reader.error(request.name, f"{reader.remaining()} unexpected bytes after the body")
    return body


def encode_local_response(
    api_key: int, api_version: int, correlation_id: int, body: Mapping[str, Any]
) -> list[Buffer]:
    """A size-prefixed response frame for a broker-local API."""
    _, response = LOCAL_APIS[api_key]
    writer = Writer()
    writer.buf += _SIZE_AND_CORRELATION.pack(0, correlation_id)
    if response.is_flexible(api_version):
        writer.buf.append(0)  # response header v1: no tagged fields
    plan(response, api_version).encode_into(writer, body)
    parts = writer.buffers()
    first = parts[0]
    assert isinstance(first, bytearray)
    struct.pack_into(">i", first, 0, writer.size() - 4)
    return parts
