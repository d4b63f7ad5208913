"""CreateTopics (api key 19): admin clients create topics; the embedded broker serves it.

Corresponds to Kafka's ``CreateTopicsRequest.json`` / ``CreateTopicsResponse.json``.
Kafka 4.1 accepts v2-v7 (v0-v1 removed in 4.0 by KIP-896). Flexible from v5; v5 returns
the created topic's configs, v7 its topic id. Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol, "CreateTopics API (Key: 19)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message
from kclient.protocol.types import ZERO_UUID

REQUEST = message(
    "CreateTopicsRequest",
    19,
    "2-7",
    "5+",
    (
        F(
            "Topics",
            "[]CreatableTopic",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F("NumPartitions", "int32", "0+"),
                F("ReplicationFactor", "int16", "0+"),
                F(
                    "Assignments",
                    "[]CreatableReplicaAssignment",
                    "0+",
                    default=(),
                    fields=(
                        F("PartitionIndex", "int32", "0+"),
                        F("BrokerIds", "[]int32", "0+"),
                    ),
                ),
                F(
                    "Configs",
                    "[]CreatableTopicConfig",
                    "0+",
                    fields=(
                        F("Name", "string", "0+"),
                        F("Value", "string", "0+", nullable="0+"),
                    ),
                ),
            ),
        ),
        F("TimeoutMs", "int32", "0+", default=60000),
        F("ValidateOnly", "bool", "1+", default=False),
    ),
)

RESPONSE = message(
    "CreateTopicsResponse",
    19,
    "2-7",
    "5+",
    (
        F("ThrottleTimeMs", "int32", "2+", default=0),
        F(
            "Topics",
            "[]CreatableTopicResult",
            "0+",
            fields=(
                F("Name", "string", "0+"),
                F("TopicId", "uuid", "7+", default=ZERO_UUID),
                F("ErrorCode", "int16", "0+"),
                F("ErrorMessage", "string", "1+", nullable="0+", default=None),
                F("TopicConfigErrorCode", "int16", "5+", tagged="5+", tag=0, default=0),
                F("NumPartitions", "int32", "5+", default=-1),
                F("ReplicationFactor", "int16", "5+", default=-1),
                F(
                    "Configs",
                    "[]CreatableTopicConfigs",
                    "5+",
                    nullable="5+",
                    default=None,
                    fields=(
                        F("Name", "string", "5+"),
                        F("Value", "string", "5+", nullable="5+"),
                        F("ReadOnly", "bool", "5+"),
                        F("ConfigSource", "int8", "5+", default=-1),
                        F("IsSensitive", "bool", "5+"),
                    ),
                ),
            ),
        ),
    ),
)
