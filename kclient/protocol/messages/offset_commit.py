"""OffsetCommit (api key 8): a consumer stores the offsets it has processed in its group.

Corresponds to Kafka's ``OffsetCommitRequest.json`` / ``OffsetCommitResponse.json``.
Kafka 4.1 accepts v2-v9 (v0-v1 removed in 4.0 by KIP-896; v10, topics by id, is unstable
in 4.1 and not declared); declared from v0, which old-pinned Python clients may send.
v1 adds the generation, the member id and a per-partition commit timestamp; v2-v4 a
retention time instead; v5 drops it (offsets expire by broker config only); v6 adds the
committed leader epoch; v7 ``group_instance_id``; flexible from v8; v9 is the first for
KIP-848 groups (the generation field is then the member epoch). Versions read from the
4.1 protocol guide (kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "OffsetCommitRequest",
    8,
    "0-9",
    "8+",
    (
        F("GroupId", "string", "0+"),
        F("GenerationIdOrMemberEpoch", "int32", "1+", default=-1),
        F("MemberId", "string", "1+", default=""),
        F("GroupInstanceId", "string", "7+", nullable="7+", default=None),
        F("RetentionTimeMs", "int64", "2-4", default=-1),
        F(
            "Topics",
            "[]OffsetCommitRequestTopic",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]OffsetCommitRequestPartition",
                    "0+",
                    fields=(
                        F("PartitionIndex", "int32", "0+"),
                        F("CommittedOffset", "int64", "0+"),
                        F("CommittedLeaderEpoch", "int32", "6+", default=-1),
                        F("CommitTimestamp", "int64", "1", default=-1),
                        F("CommittedMetadata", "string", "0+", nullable="0+", default=None),
                    ),
                ),
            ),
        ),
    ),
)

RESPONSE = message(
    "OffsetCommitResponse",
    8,
    "0-9",
    "8+",
    (
        F("ThrottleTimeMs", "int32", "3+", default=0),
        F(
            "Topics",
            "[]OffsetCommitResponseTopic",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]OffsetCommitResponsePartition",
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
