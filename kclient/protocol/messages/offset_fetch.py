"""OffsetFetch (api key 9): a consumer reads its group's committed offsets.

Corresponds to Kafka's ``OffsetFetchRequest.json`` / ``OffsetFetchResponse.json``.
Kafka 4.1 accepts v1-v9 (v0 removed in 4.0 by KIP-896; v10, topics by id, is unstable in
4.1 and not declared); declared from v0. v2 allows ``topics`` null (every committed
offset of the group) and adds a top-level error code; v5 the committed leader epoch;
flexible from v6; v7 ``require_stable`` (KIP-447); v8 asks for several groups at once
(KIP-709); v9 carries the member id and epoch of KIP-848 groups. Versions read from the
4.1 protocol guide (kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "OffsetFetchRequest",
    9,
    "0-9",
    "6+",
    (
        F("GroupId", "string", "0-7"),
        F(
            "Topics",
            "[]OffsetFetchRequestTopic",
            "0-7",
            nullable="2-7",
            fields=(
                F("Name", "string", "0-7"),
                F("PartitionIndexes", "[]int32", "0-7"),
            ),
        ),
        F(
            "Groups",
            "[]OffsetFetchRequestGroup",
            "8+",
            fields=(
                F("GroupId", "string", "8+"),
                F("MemberId", "string", "9+", nullable="9+", default=None),
                F("MemberEpoch", "int32", "9+", default=-1),
                F(
                    "Topics",
                    "[]OffsetFetchRequestTopics",
                    "8+",
                    nullable="8+",
                    fields=(
                        F("Name", "string", "8+"),
                        F("PartitionIndexes", "[]int32", "8+"),
                    ),
                ),
            ),
        ),
        F("RequireStable", "bool", "7+", default=False),
    ),
)


RESPONSE = message(
    "OffsetFetchResponse",
    9,
    "0-9",
    "6+",
    (
        F("ThrottleTimeMs", "int32", "3+", default=0),
        F(
            "Topics",
            "[]OffsetFetchResponseTopic",
            "0-7",
            default=(),
            fields=(
                F("Name", "string", "0-7"),
                F(
                    "Partitions",
                    "[]OffsetFetchResponsePartition",
                    "0-7",
                    fields=(
                        F("PartitionIndex", "int32", "0-7"),
                        F("CommittedOffset", "int64", "0-7", default=-1),
                        F("CommittedLeaderEpoch", "int32", "5-7", default=-1),
                        F("Metadata", "string", "0-7", nullable="0-7", default=""),
                        F("ErrorCode", "int16", "0-7", default=0),
                    ),
                ),
            ),
        ),
        F("ErrorCode", "int16", "2-7", default=0),
        F(
            "Groups",
            "[]OffsetFetchResponseGroup",
            "8+",
            default=(),
            fields=(
                F("GroupId", "string", "8+"),
                F(
                    "Topics",
                    "[]OffsetFetchResponseTopics",
                    "8+",
                    default=(),
                    fields=(
                        F("Name", "string", "8+"),
                        F(
                            "Partitions",
                            "[]OffsetFetchResponsePartitions",
                            "8+",
                            fields=(
                                F("PartitionIndex", "int32", "8+"),
                                F("CommittedOffset", "int64", "8+", default=-1),
                                F("CommittedLeaderEpoch", "int32", "8+", default=-1),
                                F("Metadata", "string", "8+", nullable="8+", default=""),
                                F("ErrorCode", "int16", "8+", default=0),
                            ),
                        ),
                    ),
                ),
                F("ErrorCode", "int16", "8+", default=0),
            ),
        ),
    ),
)
