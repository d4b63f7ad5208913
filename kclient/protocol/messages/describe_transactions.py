"""DescribeTransactions (api key 65): the state, timeout, start time, producer id and epoch,
and partitions of transactional ids, asked of their coordinator (KIP-664).

Corresponds to Kafka's ``DescribeTransactionsRequest.json`` /
``DescribeTransactionsResponse.json``. Only v0, flexible. Versions read from Kafka's
message JSON files.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "DescribeTransactionsRequest",
    65,
    "0",
    "0+",
    (F("TransactionalIds", "[]string", "0+"),),
)

RESPONSE = message(
    "DescribeTransactionsResponse",
    65,
    "0",
    "0+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F(
            "TransactionStates",
            "[]TransactionState",
            "0+",
            fields=(
                F("ErrorCode", "int16", "0+"),
                F("TransactionalId", "string", "0+"),
                F("TransactionState", "string", "0+", default=""),
                F("TransactionTimeoutMs", "int32", "0+", default=0),
                F("TransactionStartTimeMs", "int64", "0+", default=-1),
                F("ProducerId", "int64", "0+", default=-1),
                F("ProducerEpoch", "int16", "0+", default=-1),
                F(
                    "Topics",
                    "[]TopicData",
                    "0+",
                    default=(),
                    fields=(
                        F("Topic", "string", "0+"),
                        F("Partitions", "[]int32", "0+"),
                    ),
                ),
            ),
        ),
    ),
)
