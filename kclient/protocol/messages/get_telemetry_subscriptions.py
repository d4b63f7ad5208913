"""GetTelemetrySubscriptions (api key 71): a client asks which of its metrics the cluster
wants pushed, how often, in what compression and temporality (KIP-714).

Corresponds to Kafka's ``GetTelemetrySubscriptionsRequest.json`` /
``GetTelemetrySubscriptionsResponse.json``. Only v0, flexible. A broker advertises this
API only when a client-telemetry plugin is configured (``metric.reporters``).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message
from kclient.protocol.types import ZERO_UUID

REQUEST = message(
    "GetTelemetrySubscriptionsRequest",
    71,
    "0",
    "0+",
    (F("ClientInstanceId", "uuid", "0+", default=ZERO_UUID),),
)

RESPONSE = message(
    "GetTelemetrySubscriptionsResponse",
    71,
    "0",
    "0+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F("ErrorCode", "int16", "0+", default=0),
        F("ClientInstanceId", "uuid", "0+", default=ZERO_UUID),
        F("SubscriptionId", "int32", "0+", default=0),
        F("AcceptedCompressionTypes", "[]int8", "0+", default=()),
        F("PushIntervalMs", "int32", "0+", default=0),
        F("TelemetryMaxBytes", "int32", "0+", default=0),
        F("DeltaTemporality", "bool", "0+", default=False),
        F("RequestedMetrics", "[]string", "0+", default=()),
    ),
)
