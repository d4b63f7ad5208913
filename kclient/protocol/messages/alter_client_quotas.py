"""AlterClientQuotas (api key 49): an admin sets or removes quotas of user / client-id
entities (KIP-546).

Corresponds to Kafka's ``AlterClientQuotasRequest.json`` /
``AlterClientQuotasResponse.json``. Kafka 4.1 accepts v0-v1. Flexible from v1.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

_ENTITY = F(
    "Entity",
    "[]EntityData",
    "0+",
    fields=(
        F("EntityType", "string", "0+"),
        F("EntityName", "string", "0+", nullable="0+"),  # null: the default entity
    ),
)

REQUEST = message(
    "AlterClientQuotasRequest",
    49,
    "0-1",
    "1+",
    (
        F(
            "Entries",
            "[]EntryData",
            "0+",
            fields=(
                _ENTITY,
                F(
                    "Ops",
                    "[]OpData",
                    "0+",
                    fields=(
                        F("Key", "string", "0+"),
                        F("Value", "float64", "0+"),
                        F("Remove", "bool", "0+"),
                    ),
                ),
            ),
        ),
        F("ValidateOnly", "bool", "0+"),
    ),
)

RESPONSE = message(
    "AlterClientQuotasResponse",
    49,
    "0-1",
    "1+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F(
            "Entries",
            "[]EntryData",
            "0+",
            fields=(
                F("ErrorCode", "int16", "0+", default=0),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                _ENTITY,
            ),
        ),
    ),
)
