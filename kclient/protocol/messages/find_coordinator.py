"""FindCoordinator (api key 10): which broker coordinates a group or a transactional id.

Corresponds to Kafka's ``FindCoordinatorRequest.json`` / ``FindCoordinatorResponse.json``.
Kafka 4.1 accepts v0-v6. KeyType (v1+) is 0 for a consumer group, 1 for a transactional id
(2 for a share group, v6). Flexible from v3; v4 batches keys (KIP-699): the request names
them in ``coordinator_keys`` and the answer has one ``coordinators`` entry per key instead
of the v0-v3 top-level fields. v5 adds TRANSACTION_ABORTABLE (KIP-890), v6 share groups
(KIP-932). Versions read from the 4.1 protocol guide (kafka.apache.org/41/design/protocol,
"FindCoordinator API (Key: 10)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
KEY_TYPE_SHARE = 2

REQUEST = message(
    "FindCoordinatorRequest",
    10,
    "0-6",
    "3+",
    (
        F("Key", "string", "0-3"),
        F("KeyType", "int8", "1+", default=0),
        F("CoordinatorKeys", "[]string", "4+"),
    ),
)

RESPONSE = message(
    "FindCoordinatorResponse",
    10,
    "0-6",
    "3+",
    (
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F("ErrorCode", "int16", "0-3", default=0),
        F("ErrorMessage", "string", "1-3", nullable="1-3", default=None),
        F("NodeId", "int32", "0-3", default=-1),
        F("Host", "string", "0-3", default=""),
        F("Port", "int32", "0-3", default=-1),
        F(
            "Coordinators",
            "[]Coordinator",
            "4+",
            default=(),
            fields=(
                F("Key", "string", "4+"),
                F("NodeId", "int32", "4+"),
                F("Host", "string", "4+"),
                F("Port", "int32", "4+"),
                F("ErrorCode", "int16", "4+"),
                F("ErrorMessage", "string", "4+", nullable="4+", default=None),
            ),
        ),
    ),
)
