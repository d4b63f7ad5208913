"""OffsetDelete (api key 47): an admin deletes a group's committed offsets of topics the
group no longer subscribes to (KIP-496).

Corresponds to Kafka's ``OffsetDeleteRequest.json`` / ``OffsetDeleteResponse.json``.
Kafka 4.1 accepts v0 only; never flexible. Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "OffsetDeleteRequest",
    47,
    "0",
    "none",
    (
        F("GroupId", "string", "0+"),
        F(
            "Topics",
            "[]OffsetDeleteRequestTopic",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]OffsetDeleteRequestPartition",
                    "0+",
                    fields=(F("PartitionIndex", "int32", "0+"),),
                ),
            ),
        ),
    ),
)

RESPONSE = message(
    "OffsetDeleteResponse",
    47,
    "0",
    "none",
    (
        F("ErrorCode", "int16", "0+", default=0),
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F(
            "Topics",
            "[]OffsetDeleteResponseTopic",
            "0+",
            default=(),
            fields=(
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]OffsetDeleteResponsePartition",
                    "0+",
                    fields=(
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+", default=0),
                    ),
                ),
            ),
        ),
    ),
)
