"""DescribeConfigs (api key 32): admin clients read topic and broker configs; the embedded
broker serves it.

Corresponds to Kafka's ``DescribeConfigsRequest.json`` / ``DescribeConfigsResponse.json``:
Kafka 4.x accepts v1-v4 (v0, with ``IsDefault`` instead of ``ConfigSource`` and synonyms,
was removed in 4.0 by KIP-896, so ``IsDefault`` is not declared); v3 adds the config's
type and documentation; flexible from v4. Resource types: 2 topic, 4 broker, 8 broker
logger. Config sources: 1 topic, 4 static broker, 5 default.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "DescribeConfigsRequest",
    32,
    "1-4",
    "4+",
    (
        F(
            "Resources",
            "[]DescribeConfigsResource",
            "0+",
            fields=(
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F("ConfigurationKeys", "[]string", "0+", nullable="0+"),
            ),
        ),
        F("IncludeSynonyms", "bool", "1+", default=False),
        F("IncludeDocumentation", "bool", "3+", default=False),
    ),
)

RESPONSE = message(
    "DescribeConfigsResponse",
    32,
    "1-4",
    "4+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F(
            "Results",
            "[]DescribeConfigsResult",
            "0+",
            fields=(
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F(
                    "Configs",
                    "[]DescribeConfigsResourceResult",
                    "0+",
                    fields=(
                        F("Name", "string", "0+"),
                        F("Value", "string", "0+", nullable="0+"),
                        F("ReadOnly", "bool", "0+"),
                        F("ConfigSource", "int8", "1+", default=-1),
                        F("IsSensitive", "bool", "0+"),
                        F(
                            "Synonyms",
                            "[]DescribeConfigsSynonym",
                            "1+",
                            default=(),
                            fields=(
                                F("Name", "string", "1+"),
                                F("Value", "string", "1+", nullable="0+"),
                                F("Source", "int8", "1+"),
                            ),
                        ),
                        F("ConfigType", "int8", "3+", default=0),
                        F("Documentation", "string", "3+", nullable="0+", default=None),
                    ),
                ),
            ),
        ),
    ),
)
