"""InitProducerId (api key 22): the idempotent/transactional producer gets its id and epoch.

Corresponds to Kafka's ``InitProducerIdRequest.json`` / ``InitProducerIdResponse.json``.
Kafka 4.1 accepts v0-v5. Flexible from v2; v3 lets a producer bump its epoch by sending
its current id and epoch (KIP-360). v6 (two-phase commit, KIP-939) is listed as unstable
in 4.1 and is not enabled by default, so it is not declared here. Versions read from the
4.1 protocol guide (kafka.apache.org/41/design/protocol, "InitProducerId API (Key: 22)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "InitProducerIdRequest",
    22,
    "0-5",
    "2+",
    (
        F("TransactionalId", "string", "0+", nullable="0+", default=None),
        F("TransactionTimeoutMs", "int32", "0+"),
        F("ProducerId", "int64", "3+", default=-1),
        F("ProducerEpoch", "int16", "3+", default=-1),
    ),
)

RESPONSE = message(
    "InitProducerIdResponse",
    22,
    "0-5",
    "2+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F("ErrorCode", "int16", "0+"),
        F("ProducerId", "int64", "0+", default=-1),
        F("ProducerEpoch", "int16", "0+"),
    ),
)
