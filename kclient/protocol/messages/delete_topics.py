"""DeleteTopics (api key 20): admin clients delete topics; the embedded broker serves it.

Corresponds to Kafka's ``DeleteTopicsRequest.json`` / ``DeleteTopicsResponse.json``.
Kafka 4.1 accepts v1-v6 (v0 removed in 4.0 by KIP-896). Flexible from v4; v5 adds error
messages; v6 names topics by name or topic id. Versions read from the 4.1 protocol
guide (kafka.apache.org/41/design/protocol, "DeleteTopics API (Key: 20)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message
from kclient.protocol.types import ZERO_UUID

REQUEST = message(
    "DeleteTopicsRequest",
    20,
    "1-6",
    "4+",
    (
        F(
            "Topics",
            "[]DeleteTopicState",
            "6+",
            fields=(
                F("Name", "string", "6+", nullable="6+", default=None),
                F("TopicId", "uuid", "6+", default=ZERO_UUID),
            ),
        ),
        F("TopicNames", "[]string", "0-5"),
        F("TimeoutMs", "int32", "0+"),
    ),
)

RESPONSE = message(
    "DeleteTopicsResponse",
    20,
    "1-6",
    "4+",
    (
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F(
            "Responses",
            "[]DeletableTopicResult",
            "0+",
            fields=(
                F("Name", "string", "0+", nullable="6+"),
                F("TopicId", "uuid", "6+", default=ZERO_UUID),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "5+", nullable="5+", default=None),
            ),
        ),
    ),
)
