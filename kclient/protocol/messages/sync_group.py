"""SyncGroup (api key 14): the group leader hands in the assignment; every member gets
its own part back.

Corresponds to Kafka's ``SyncGroupRequest.json`` / ``SyncGroupResponse.json``. Kafka 4.1
accepts v0-v5. v3 adds ``group_instance_id``; flexible from v4; v5 carries the protocol
type and name, checked against the group's (KIP-559). Versions read from the 4.1
protocol guide (kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "SyncGroupRequest",
    14,
    "0-5",
    "4+",
    (
        F("GroupId", "string", "0+"),
        F("GenerationId", "int32", "0+"),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        F("ProtocolType", "string", "5+", nullable="5+", default=None),
        F("ProtocolName", "string", "5+", nullable="5+", default=None),
        F(
            "Assignments",
            "[]SyncGroupRequestAssignment",
            "0+",
            fields=(
                F("MemberId", "string", "0+"),
                F("Assignment", "bytes", "0+"),
            ),
        ),
    ),
)

RESPONSE = message(
    "SyncGroupResponse",
    14,
    "0-5",
    "4+",
    (
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F("ErrorCode", "int16", "0+", default=0),
        F("ProtocolType", "string", "5+", nullable="5+", default=None),
        F("ProtocolName", "string", "5+", nullable="5+", default=None),
        F("Assignment", "bytes", "0+", default=b""),
    ),
)
