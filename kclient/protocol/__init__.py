"""Sans-I/O Kafka wire protocol: primitive types, message declarations, one codec, frames.

Corresponds to Kafka's ``org.apache.kafka.common.protocol`` and ``common.requests``
packages. No sockets, threads or clocks: bytes in, plain dicts out, and back.

    from kclient.protocol import ApiKey, SUPPORTED_VERSIONS, RequestHeader
    from kclient.protocol.frame import encode_request, decode_request, ...
"""

from __future__ import annotations

from kclient.protocol.frame import RequestHeader
from kclient.protocol.messages import (
    SUPPORTED_VERSIONS,
    ApiKey,
    request_schema,
    response_schema,
)

__all__ = [
    "SUPPORTED_VERSIONS",
    "ApiKey",
    "RequestHeader",
    "request_schema",
    "response_schema",
]
