"""DescribeGroups (api key 15): state, protocol and members of classic groups.

Corresponds to Kafka's ``DescribeGroupsRequest.json`` / ``DescribeGroupsResponse.json``.
Kafka 4.1 accepts v0-v6. v3 can ask for the authorized operations; v4 answers each
member's ``group_instance_id``; flexible from v5; v6 answers GROUP_ID_NOT_FOUND (with an
error message) for a group that does not exist, where older versions answer state
"Dead" (KIP-1043). Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

#: ``authorized_operations`` when they were not asked for (Integer.MIN_VALUE).
NO_AUTHORIZED_OPERATIONS = -(2**31)

REQUEST = message(
    "DescribeGroupsRequest",
    15,
    "0-6",
    "5+",
    (
        F("Groups", "[]string", "0+"),
        F("IncludeAuthorizedOperations", "bool", "3+", default=False),
    ),
)

RESPONSE = message(
    "DescribeGroupsResponse",
    15,
    "0-6",
    "5+",
    (
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F(
            "Groups",
            "[]DescribedGroup",
            "0+",
            fields=(
                F("ErrorCode", "int16", "0+", default=0),
                F("ErrorMessage", "string", "6+", nullable="6+", default=None),
                F("GroupId", "string", "0+"),
                F("GroupState", "string", "0+", default=""),
                F("ProtocolType", "string", "0+", default=""),
                F("ProtocolData", "string", "0+", default=""),
                F(
                    "Members",
                    "[]DescribedGroupMember",
                    "0+",
                    default=(),
                    fields=(
                        F("MemberId", "string", "0+"),
                        F("GroupInstanceId", "string", "4+", nullable="4+", default=None),
                        F("ClientId", "string", "0+"),
                        F("ClientHost", "string", "0+"),
                        F("MemberMetadata", "bytes", "0+", default=b""),
                        F("MemberAssignment", "bytes", "0+", default=b""),
                    ),
                ),
                F("AuthorizedOperations", "int32", "3+", default=NO_AUTHORIZED_OPERATIONS),
            ),
        ),
    ),
)
