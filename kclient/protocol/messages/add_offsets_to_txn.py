"""AddOffsetsToTxn (api key 25): a transactional producer adds a consumer group's offsets
to its transaction (the group's ``__consumer_offsets`` partition), before TxnOffsetCommit.

Corresponds to Kafka's ``AddOffsetsToTxnRequest.json`` / ``AddOffsetsToTxnResponse.json``.
Kafka 4.1 accepts v0-v4: v2 adds PRODUCER_FENCED, v3 is the first flexible version, v4
adds TRANSACTION_ABORTABLE (KIP-890). Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol, "AddOffsetsToTxn API (Key: 25)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "AddOffsetsToTxnRequest",
    25,
    "0-4",
    "3+",
    (
        F("TransactionalId", "string", "0+"),
        F("ProducerId", "int64", "0+"),
        F("ProducerEpoch", "int16", "0+"),
        F("GroupId", "string", "0+"),
    ),
)

RESPONSE = message(
    "AddOffsetsToTxnResponse",
    25,
    "0-4",
    "3+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F("ErrorCode", "int16", "0+"),
    ),
)
