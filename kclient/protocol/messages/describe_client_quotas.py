"""DescribeClientQuotas (api key 48): an admin lists the quota entities matching a filter
(KIP-546).

Corresponds to Kafka's ``DescribeClientQuotasRequest.json`` /
``DescribeClientQuotasResponse.json``. Kafka 4.1 accepts v0-v1. Flexible from v1.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "DescribeClientQuotasRequest",
    48,
    "0-1",
    "1+",
    (
        F(
            "Components",
            "[]ComponentData",
            "0+",
            fields=(
                F("EntityType", "string", "0+"),
                # 0 = exact name, 1 = default name, 2 = any specified name
                F("MatchType", "int8", "0+"),
                F("Match", "string", "0+", nullable="0+"),
            ),
        ),
        F("Strict", "bool", "0+"),
    ),
)

RESPONSE = message(
    "DescribeClientQuotasResponse",
    48,
    "0-1",
    "1+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F("ErrorCode", "int16", "0+", default=0),
        F("ErrorMessage", "string", "0+", nullable="0+", default=None),
        F(
            "Entries",
            "[]EntryData",
            "0+",
            nullable="0+",
            fields=(
                F(
                    "Entity",
                    "[]EntityData",
                    "0+",
                    fields=(
                        F("EntityType", "string", "0+"),
                        F("EntityName", "string", "0+", nullable="0+"),
                    ),
                ),
                F(
                    "Values",
                    "[]ValueData",
                    "0+",
                    fields=(F("Key", "string", "0+"), F("Value", "float64", "0+")),
                ),
            ),
        ),
    ),
)
