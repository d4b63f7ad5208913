"""ListTransactions (api key 66): the transactional ids a broker coordinates, with their
producer id and state (admin clients ask every broker and merge; KIP-664).

Corresponds to Kafka's ``ListTransactionsRequest.json`` / ``ListTransactionsResponse.json``.
Flexible in every version; v1 adds the duration filter (KIP-994). Versions read from
Kafka's message JSON files.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "ListTransactionsRequest",
    66,
    "0-1",
    "0+",
    (
        F("StateFilters", "[]string", "0+", default=()),
        F("ProducerIdFilters", "[]int64", "0+", default=()),
        F("DurationFilter", "int64", "1+", default=-1),
    ),
)

RESPONSE = message(
    "ListTransactionsResponse",
    66,
    "0-1",
    "0+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F("ErrorCode", "int16", "0+", default=0),
        F("UnknownStateFilters", "[]string", "0+", default=()),
        F(
            "TransactionStates",
            "[]TransactionState",
            "0+",
            fields=(
                F("TransactionalId", "string", "0+"),
                F("ProducerId", "int64", "0+"),
                F("TransactionState", "string", "0+"),
            ),
        ),
    ),
)
