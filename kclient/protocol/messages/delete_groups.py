"""DeleteGroups (api key 42): an admin deletes empty groups and their committed offsets.

Corresponds to Kafka's ``DeleteGroupsRequest.json`` / ``DeleteGroupsResponse.json``.
Kafka 4.1 accepts v0-v2. Flexible from v2. Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "DeleteGroupsRequest",
    42,
    "0-2",
    "2+",
    (F("GroupsNames", "[]string", "0+"),),
)

RESPONSE = message(
    "DeleteGroupsResponse",
    42,
    "0-2",
    "2+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F(
            "Results",
            "[]DeletableGroupResult",
            "0+",
            fields=(
                F("GroupId", "string", "0+"),
                F("ErrorCode", "int16", "0+", default=0),
            ),
        ),
    ),
)
