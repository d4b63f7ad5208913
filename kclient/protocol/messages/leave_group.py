"""LeaveGroup (api key 13): members leave a classic group (a consumer closing, or an
admin removing static members).

Corresponds to Kafka's ``LeaveGroupRequest.json`` / ``LeaveGroupResponse.json``. Kafka
4.1 accepts v0-v5. v3 batches members (KIP-345) and answers per member; flexible from
v4; v5 adds a reason per member. Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "LeaveGroupRequest",
    13,
    "0-5",
    "4+",
    (
        F("GroupId", "string", "0+"),
        F("MemberId", "string", "0-2"),
        F(
            "Members",
            "[]MemberIdentity",
            "3+",
            fields=(
                F("MemberId", "string", "3+"),
                F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
                F("Reason", "string", "5+", nullable="5+", default=None),
            ),
        ),
    ),
)

RESPONSE = message(
    "LeaveGroupResponse",
    13,
    "0-5",
    "4+",
    (
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F("ErrorCode", "int16", "0+", default=0),
        F(
            "Members",
            "[]MemberResponse",
            "3+",
            default=(),
            fields=(
                F("MemberId", "string", "3+"),
                F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
                F("ErrorCode", "int16", "3+", default=0),
            ),
        ),
    ),
)
