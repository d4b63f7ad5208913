"""AddPartitionsToTxn (api key 24): a transactional producer adds partitions to its
transaction before it writes to them.

Corresponds to Kafka's ``AddPartitionsToTxnRequest.json`` /
``AddPartitionsToTxnResponse.json``. Kafka 4.1 accepts v0-v5. Flexible from v3; v2 adds
PRODUCER_FENCED. v4 (KIP-890) batches several transactions in one request and adds
``verify_only`` and a top-level error code: it is meant for brokers verifying a producer's
partitions, and clients use v0-v3, whose fields carry the ``v3_and_below_`` prefix as in
Kafka's JSON. v5 adds TRANSACTION_ABORTABLE. Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol, "AddPartitionsToTxn API (Key: 24)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, Field, message

CLIENT_MAX_VERSION = 3
"""Clients speak v0-v3; v4+ is broker to broker."""


_TOPIC: tuple[Field, ...] = (
    F("Name", "string", "0+"),
    F("Partitions", "[]int32", "0+"),
)


_TOPIC_RESULT: tuple[Field, ...] = (
    F("Name", "string", "0+"),
    F(
        "ResultsByPartition",
        "[]AddPartitionsToTxnPartitionResult",
        "0+",
        fields=(
            F("PartitionIndex", "int32", "0+"),
            F("PartitionErrorCode", "int16", "0+"),
        ),
    ),
)


REQUEST = message(
    "AddPartitionsToTxnRequest",
    24,
    "0-5",
    "3+",
    (
        F(
            "Transactions",
            "[]AddPartitionsToTxnTransaction",
            "4+",
            fields=(
                F("TransactionalId", "string", "4+"),
                F("ProducerId", "int64", "4+"),
                F("ProducerEpoch", "int16", "4+"),
                F("VerifyOnly", "bool", "4+", default=False),
                F("Topics", "[]AddPartitionsToTxnTopic", "4+", fields=_TOPIC),
            ),
        ),
        F("V3AndBelowTransactionalId", "string", "0-3"),
        F("V3AndBelowProducerId", "int64", "0-3"),
        F("V3AndBelowProducerEpoch", "int16", "0-3"),
        F("V3AndBelowTopics", "[]AddPartitionsToTxnTopic", "0-3", fields=_TOPIC),
    ),
)

RESPONSE = message(
    "AddPartitionsToTxnResponse",
    24,
    "0-5",
    "3+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F("ErrorCode", "int16", "4+", default=0),
        F(
            "ResultsByTransaction",
            "[]AddPartitionsToTxnResult",
            "4+",
            default=(),
            fields=(
                F("TransactionalId", "string", "4+"),
                F("TopicResults", "[]AddPartitionsToTxnTopicResult", "4+", fields=_TOPIC_RESULT),
            ),
        ),
        F(
            "ResultsByTopicV3AndBelow",
            "[]AddPartitionsToTxnTopicResult",
            "0-3",
            default=(),
            fields=_TOPIC_RESULT,
        ),
    ),
)
