"""PushTelemetry (api key 72): a client's metrics, OTLP ``MetricsData`` bytes, optionally
compressed, for the subscription GetTelemetrySubscriptions gave it (KIP-714).

Corresponds to Kafka's ``PushTelemetryRequest.json`` / ``PushTelemetryResponse.json``.
Only v0, flexible.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message
from kclient.protocol.types import ZERO_UUID

REQUEST = message(
    "PushTelemetryRequest",
    72,
    "0",
    "0+",
    (
        F("ClientInstanceId", "uuid", "0+", default=ZERO_UUID),
        F("SubscriptionId", "int32", "0+", default=0),
        F("Terminating", "bool", "0+", default=False),
        F("CompressionType", "int8", "0+", default=0),
        F("Metrics", "bytes", "0+", default=b""),
    ),
)

RESPONSE = message(
    "PushTelemetryResponse",
    72,
    "0",
    "0+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F("ErrorCode", "int16", "0+", default=0),
    ),
)
