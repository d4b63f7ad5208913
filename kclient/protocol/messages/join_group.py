"""JoinGroup (api key 11): a consumer joins (or rejoins) a classic group.

Corresponds to Kafka's ``JoinGroupRequest.json`` / ``JoinGroupResponse.json``. Kafka 4.1
accepts v2-v9 (v0-v1 removed in 4.0 by KIP-896); declared from v0, which old-pinned
kafka-python and aiokafka clients may send. v1 adds the rebalance timeout; v4 makes a
new dynamic member join twice (MEMBER_ID_REQUIRED, KIP-394); v5 adds
``group_instance_id`` (static membership, KIP-345); flexible from v6; v7 answers the
protocol type; v8 adds the join reason; v9 ``skip_assignment`` (KIP-814). Versions read
from the 4.1 protocol guide (kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "JoinGroupRequest",
    11,
    "0-9",
    "6+",
    (
        F("GroupId", "string", "0+"),
        F("SessionTimeoutMs", "int32", "0+"),
        F("RebalanceTimeoutMs", "int32", "1+", default=-1),
        F("MemberId", "string", "0+"),
        F("GroupInstanceId", "string", "5+", nullable="5+", default=None),
        F("ProtocolType", "string", "0+"),
        F(
            "Protocols",
            "[]JoinGroupRequestProtocol",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F("Metadata", "bytes", "0+"),
            ),
        ),
        F("Reason", "string", "8+", nullable="8+", default=None),
    ),
)

RESPONSE = message(
    "JoinGroupResponse",
    11,
    "0-9",
    "6+",
    (
        F("ThrottleTimeMs", "int32", "2+", default=0),
        F("ErrorCode", "int16", "0+", default=0),
        F("GenerationId", "int32", "0+", default=-1),
        F("ProtocolType", "string", "7+", nullable="7+", default=None),
        F("ProtocolName", "string", "0+", nullable="7+", default=""),
        F("Leader", "string", "0+", default=""),
        F("SkipAssignment", "bool", "9+", default=False),
        F("MemberId", "string", "0+", default=""),
        F(
            "Members",
            "[]JoinGroupResponseMember",
            "0+",
            default=(),
            fields=(
                F("MemberId", "string", "0+"),
                F("GroupInstanceId", "string", "5+", nullable="5+", default=None),
                F("Metadata", "bytes", "0+"),
            ),
        ),
    ),
)
