"""CreatePartitions (api key 37): admin clients add partitions to a topic; the embedded
broker serves it.

Corresponds to Kafka's ``CreatePartitionsRequest.json`` / ``CreatePartitionsResponse.json``:
versions 0-3, flexible from v2; v3 is the first whose client honours the controller
mutation quota strictly (KIP-599). ``Count`` is the topic's new partition count, not how
many to add; ``Assignments`` (nullable) places the new partitions' replicas.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "CreatePartitionsRequest",
    37,
    "0-3",
    "2+",
    (
        F(
            "Topics",
            "[]CreatePartitionsTopic",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F("Count", "int32", "0+"),
                F(
                    "Assignments",
                    "[]CreatePartitionsAssignment",
                    "0+",
                    nullable="0+",
                    fields=(F("BrokerIds", "[]int32", "0+"),),
                ),
            ),
        ),
        F("TimeoutMs", "int32", "0+", default=60000),
        F("ValidateOnly", "bool", "0+", default=False),
    ),
)

RESPONSE = message(
    "CreatePartitionsResponse",
    37,
    "0-3",
    "2+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F(
            "Results",
            "[]CreatePartitionsTopicResult",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
            ),
        ),
    ),
)
