"""TxnOffsetCommit (api key 28): a transactional producer commits a consumer group's
offsets as part of its transaction (visible to the group only if the transaction commits).

Corresponds to Kafka's ``TxnOffsetCommitRequest.json`` / ``TxnOffsetCommitResponse.json``.
Kafka 4.1 accepts v0-v5: v2 adds the committed leader epoch, v3 (first flexible) the
consumer's generation id, member id and group instance id (KIP-447), v4 adds
TRANSACTION_ABORTABLE; v5 (KIP-890 part 2) also adds the offsets partition to the
transaction, so without transaction version 2 a client must not use it. Sent to the
group coordinator. Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol, "TxnOffsetCommit API (Key: 28)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

LAST_VERSION_BEFORE_TRANSACTION_V2 = 4

REQUEST = message(
    "TxnOffsetCommitRequest",
    28,
    "0-5",
    "3+",
    (
        F("TransactionalId", "string", "0+"),
        F("GroupId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("GenerationId", "int32", "3+", default=-1),
        F("MemberId", "string", "3+", default=""),
        F("GroupInstanceId", "string", "3+", nullable="3+", default=None),
        F(
            "Topics",
            "[]TxnOffsetCommitRequestTopic",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]TxnOffsetCommitRequestPartition",
                    "0+",
                    fields=(
                        F("PartitionIndex", "int32", "0+"),
                        F("CommittedOffset", "int64", "0+"),
                        F("CommittedLeaderEpoch", "int32", "2+", default=-1),
                        F("CommittedMetadata", "string", "0+", nullable="0+"),
                    ),
                ),
            ),
        ),
    ),
)

RESPONSE = message(
    "TxnOffsetCommitResponse",
    28,
    "0-5",
    "3+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F(
            "Topics",
            "[]TxnOffsetCommitResponseTopic",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]TxnOffsetCommitResponsePartition",
                    "0+",
                    fields=(
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                    ),
                ),
            ),
        ),
    ),
)
