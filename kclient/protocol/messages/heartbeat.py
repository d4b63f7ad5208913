"""Heartbeat (api key 12): a member of a classic group says it is alive, and learns of
rebalances (REBALANCE_IN_PROGRESS).

Corresponds to Kafka's ``HeartbeatRequest.json`` / ``HeartbeatResponse.json``. Kafka 4.1
accepts v0-v4. v3 adds ``group_instance_id``; flexible from v4. Versions read from the
4.1 protocol guide (kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "HeartbeatRequest",
    12,
    "0-4",
    "4+",
    (
        F("GroupId", "string", "0+"),
        F("GenerationId", "int32", "0+"),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
    ),
)

RESPONSE = message(
    "HeartbeatResponse",
    12,
    "0-4",
    "4+",
    (
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F("ErrorCode", "int16", "0+", default=0),
    ),
)
