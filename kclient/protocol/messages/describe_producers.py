"""DescribeProducers (api key 61): the producers a partition leader keeps state for — id,
epoch, last sequence and timestamp, coordinator epoch, and the first offset of each one's
open transaction (KIP-664; what ``kafka-transactions.sh describe-producers`` and
``find-hanging`` read).

Corresponds to Kafka's ``DescribeProducersRequest.json`` / ``DescribeProducersResponse.json``.
Only v0, flexible. Versions read from Kafka's message JSON files.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "DescribeProducersRequest",
    61,
    "0",
    "0+",
    (
        F(
            "Topics",
            "[]TopicRequest",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F("PartitionIndexes", "[]int32", "0+"),
            ),
        ),
    ),
)

RESPONSE = message(
    "DescribeProducersResponse",
    61,
    "0",
    "0+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F(
            "Topics",
            "[]TopicResponse",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F(
                    "Partitions",
                    "[]PartitionResponse",
                    "0+",
                    fields=(
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                        F(
                            "ActiveProducers",
                            "[]ProducerState",
                            "0+",
                            default=(),
                            fields=(
                                F("ProducerId", "int64", "0+"),
                                F("ProducerEpoch", "int32", "0+"),
                                F("LastSequence", "int32", "0+", default=-1),
                                F("LastTimestamp", "int64", "0+", default=-1),
                                F("CoordinatorEpoch", "int32", "0+"),
                                F("CurrentTxnStartOffset", "int64", "0+", default=-1),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    ),
)
