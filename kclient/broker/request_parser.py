"""Parsing a completed receive into a ``Request``, on a Processor's network thread (the
part of Kafka's ``SocketServer.Processor.processCompletedReceives`` that builds the
``RequestChannel.Request``).

``parse_request`` returns the Request, or why the connection must be closed: an
unparseable header or body, an unknown api key, an unsupported version (except
ApiVersions, whose newer versions are answered with UNSUPPORTED_VERSION in the v0
format), or, on a SASL listener before authentication, any request other than
ApiVersions, SaslHandshake and SaslAuthenticate. The Processor logs that reason once and
closes the connection.
"""

from __future__ import annotations

from typing import Any

from kclient import errors
from kclient.broker.metrics import BrokerMetrics
from kclient.broker.request_channel import Request, api_metric_name
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.protocol.frame import decode_request, decode_request_header

_SUPPORTED: dict[int, tuple[int, int]] = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
#: What a SASL listener accepts from a connection that has not authenticated yet.
_BEFORE_AUTHENTICATION = frozenset(
    {int(ApiKey.API_VERSIONS), int(ApiKey.SASL_HANDSHAKE), int(ApiKey.SASL_AUTHENTICATE)}
)


def api_name(api_key: int) -> str:
    """The api's name as the request metrics spell it, or ``Unknown(<key>)``."""
    try:
        return api_metric_name(ApiKey(api_key).name)
    except ValueError:
        return f"Unknown({api_key})"


def _hint(sasl_pending: bool) -> str:
    """What a broken first frame on a SASL listener usually is."""
    if not sasl_pending:
        return ""
    return (
        " before SASL authentication (a client sending raw SASL tokens without "
        "SaslHandshake, or not configured for SASL?)"
    )


def parse_request(
    frame: bytearray,
    *,
    processor_id: int,
    connection_id: str,
    peer: str,
    start_time_ns: int,
    max_request_items: int | None,
    metrics: BrokerMetrics | None,
    sasl_pending: bool = False,
    principal: str = "ANONYMOUS",
) -> Request | str:
    """The frame as a Request, or the reason to close its connection.

    ``sasl_pending``: the connection has yet to authenticate, so only ApiVersions and
    the SASL requests are parsed; anything else is refused.
    """
    try:
        header, _ = decode_request_header(frame)
    except Exception as exc:
        return f"unparseable request header ({exc}){_hint(sasl_pending)}"
    api_key = int(header.api_key)
    versions = _SUPPORTED.get(api_key)
    if versions is None:
        return f"unknown api key {api_key}{_hint(sasl_pending)}"
    min_version, max_version = versions
    name = api_name(api_key)
    if sasl_pending and api_key not in _BEFORE_AUTHENTICATION:
        return f"request {name} before SASL authentication"
    # an ApiVersions request newer than ours is answered with UNSUPPORTED_VERSION in the
    # v0 format, so any client can negotiate
    unsupported = api_key == ApiKey.API_VERSIONS and header.api_version > max_version
    body: dict[str, Any] | None = None
    try:
        if not unsupported:
            header, body = decode_request(frame, max_request_items)
    except errors.UnsupportedVersionError:
        return (
            f"{name} v{header.api_version} is not supported "
            f"(supported: v{min_version}..v{max_version})"
        )
    except Exception as exc:
        hint = " (max.request.items)" if "array items in one message" in str(exc) else ""
        return f"unparseable {name} v{header.api_version} request ({exc}){hint}"
    return Request(
        processor=processor_id,
        connection_id=connection_id,
        header=header,
        body=body,
        frame=frame,
        start_time_ns=start_time_ns,
        metrics=metrics,
        api_name=name,
        client_address=peer,
        unsupported_version=unsupported,
        principal=principal,
    )
