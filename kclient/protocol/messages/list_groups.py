"""ListGroups (api key 16): the groups a broker coordinates (admin clients ask every
broker and merge).

Corresponds to Kafka's ``ListGroupsRequest.json`` / ``ListGroupsResponse.json``. Kafka
4.1 accepts v0-v5. Flexible from v3; v4 filters by state and answers each group's
state (KIP-518); v5 filters by type and answers each group's type (KIP-848). Versions
read from the 4.1 protocol guide (kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "ListGroupsRequest",
    16,
    "0-5",
    "3+",
    (
        F("StatesFilter", "[]string", "4+", default=()),
        F("TypesFilter", "[]string", "5+", default=()),
    ),
)

RESPONSE = message(
    "ListGroupsResponse",
    16,
    "0-5",
    "3+",
    (
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F("ErrorCode", "int16", "0+", default=0),
        F(
            "Groups",
            "[]ListedGroup",
            "0+",
            fields=(
                F("GroupId", "string", "0+"),
                F("ProtocolType", "string", "0+"),
                F("GroupState", "string", "4+", default=""),
                F("GroupType", "string", "5+", default=""),
            ),
        ),
    ),
)
