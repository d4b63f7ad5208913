"""EndTxn (api key 26): a transactional producer commits or aborts its transaction.

Corresponds to Kafka's ``EndTxnRequest.json`` / ``EndTxnResponse.json``. Kafka 4.1 accepts
v0-v5: v2 adds PRODUCER_FENCED, v3 is the first flexible version, v4 adds
TRANSACTION_ABORTABLE; v5 (KIP-890 part 2, "transaction version 2") bumps the epoch on
every transaction and returns the new producer id and epoch. Without transaction version
2 a client must not use v5. Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol, "EndTxn API (Key: 26)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

LAST_VERSION_BEFORE_TRANSACTION_V2 = 4

REQUEST = message(
    "EndTxnRequest",
    26,
    "0-5",
    "3+",
    (
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("Committed", "bool", "0+"),
    ),
)

RESPONSE = message(
    "EndTxnResponse",
    26,
    "0-5",
    "3+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F("ErrorCode", "int16", "0+"),
        F("ProducerId", "int64", "5+", default=-1),
        F("ProducerEpoch", "int16", "5+", default=-1),
    ),
)
