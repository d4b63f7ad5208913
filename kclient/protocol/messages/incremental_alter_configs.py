"""IncrementalAlterConfigs (api key 44): admin clients change configs key by key; the
embedded broker serves it for topics.

Corresponds to Kafka's ``IncrementalAlterConfigsRequest.json`` /
``IncrementalAlterConfigsResponse.json``: versions 0-1, flexible from v1. Each config
names an operation: 0 set, 1 delete, 2 append and 3 subtract (lists only).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "IncrementalAlterConfigsRequest",
    44,
    "0-1",
    "1+",
    (
        F(
            "Resources",
            "[]AlterConfigsResource",
            "0+",
            fields=(
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
                F(
                    "Configs",
                    "[]AlterableConfig",
                    "0+",
                    fields=(
                        F("Name", "string", "0+"),
                        F("ConfigOperation", "int8", "0+"),
                        F("Value", "string", "0+", nullable="0+"),
                    ),
                ),
            ),
        ),
        F("ValidateOnly", "bool", "0+", default=False),
    ),
)

RESPONSE = message(
    "IncrementalAlterConfigsResponse",
    44,
    "0-1",
    "1+",
    (
        F("ThrottleTimeMs", "int32", "0+", default=0),
        F(
            "Responses",
            "[]AlterConfigsResourceResponse",
            "0+",
            fields=(
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "0+", nullable="0+", default=None),
                F("ResourceType", "int8", "0+"),
                F("ResourceName", "string", "0+"),
            ),
        ),
    ),
)
