"""ListOffsets (api key 2): offsets by timestamp (earliest, latest, max timestamp, …).

Corresponds to Kafka's ``ListOffsetsRequest.json`` / ``ListOffsetsResponse.json``.
Kafka 4.1 accepts v1-v10 (v0 removed in 4.0 by KIP-896). Flexible from v6; v10 adds
``timeout_ms`` (tiered storage). Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol, "ListOffsets API (Key: 2)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "ListOffsetsRequest",
    2,
    "1-10",
    "6+",
    (
        F("ReplicaId", "int32", "0+"),
        F("IsolationLevel", "int8", "2+", default=0),
        F(
            "Topics",
            "[]ListOffsetsTopic",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]ListOffsetsPartition",
                    "0+",
                    fields=(
                        F("PartitionIndex", "int32", "0+"),
                        F("CurrentLeaderEpoch", "int32", "4+", default=-1),
                        F("Timestamp", "int64", "0+"),
                    ),
                ),
            ),
        ),
        F("TimeoutMs", "int32", "10+"),
    ),
)

RESPONSE = message(
    "ListOffsetsResponse",
    2,
    "1-10",
    "6+",
    (
        F("ThrottleTimeMs", "int32", "2+", default=0),
        F(
            "Topics",
            "[]ListOffsetsTopicResponse",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]ListOffsetsPartitionResponse",
                    "0+",
                    fields=(
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("Timestamp", "int64", "1+", default=-1),
                        F("Offset", "int64", "1+", default=-1),
                        F("LeaderEpoch", "int32", "4+", default=-1),
                    ),
                ),
            ),
        ),
    ),
)
