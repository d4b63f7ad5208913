"""FindCoordinator (api key 10): which broker coordinates a consumer group (or a
transactional id).

Corresponds to Kafka's ``FindCoordinatorRequest.json`` / ``FindCoordinatorResponse.json``.
Kafka 4.1 accepts v1-v6 (v0 removed in 4.0 by KIP-896); declared from v0, which
kafka-python still sends when pinned to an old ``api_version``. Flexible from v3; v1
adds the key type (0 group, 1 transaction, 2 share); v4 batches keys into
``coordinator_keys`` and answers one ``coordinators`` entry per key (KIP-699); v6 allows
the share key type. librdkafka turns LZ4 on only when a broker lists this API.
Versions read from the 4.1 protocol guide (kafka.apache.org/41/design/protocol).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

#: ``key_type`` values.
GROUP = 0
TRANSACTION = 1
SHARE = 2

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
            fields=(
                F("Key", "string", "4+"),
                F("NodeId", "int32", "4+", default=-1),
                F("Host", "string", "4+", default=""),
                F("Port", "int32", "4+", default=-1),
                F("ErrorCode", "int16", "4+", default=0),
                F("ErrorMessage", "string", "4+", nullable="4+", default=None),
            ),
        ),
    ),
)
