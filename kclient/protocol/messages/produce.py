"""Produce (api key 0): the producer's write path; the embedded broker's hottest request.

Corresponds to Kafka's ``ProduceRequest.json`` / ``ProduceResponse.json``.
Kafka 4.1 accepts v3-v13 (v0-v2 were removed in 4.0 by KIP-896, though 4.x still lists
them in ApiVersions for librdkafka's sake, KAFKA-18659). Flexible from v9. v13 (KIP-516)
names topics by ``topic_id`` instead of ``name``. Versions read from the 4.1 protocol
guide (kafka.apache.org/41/design/protocol, "Produce API (Key: 0)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message
from kclient.protocol.types import ZERO_UUID

_NODE_ENDPOINT = (
    F("NodeId", "int32", "10+"),
    F("Host", "string", "10+"),
    F("Port", "int32", "10+"),
    F("Rack", "string", "10+", nullable="10+", default=None),
)

REQUEST = message(
    "ProduceRequest",
    0,
    "3-13",
    "9+",
    (
        F("TransactionalId", "string", "3+", nullable="3+", default=None),
        F("Acks", "int16", "0+"),
        F("TimeoutMs", "int32", "0+"),
        F(
            "TopicData",
            "[]TopicProduceData",
            "0+",
            fields=(
                F("Name", "string", "0-12"),
                F("TopicId", "uuid", "13+", default=ZERO_UUID),
                F(
                    "PartitionData",
                    "[]PartitionProduceData",
                    "0+",
                    fields=(
                        F("Index", "int32", "0+"),
                        F("Records", "records", "0+", nullable="0+"),
                    ),
                ),
            ),
        ),
    ),
)

RESPONSE = message(
    "ProduceResponse",
    0,
    "3-13",
    "9+",
    (
        F(
            "Responses",
            "[]TopicProduceResponse",
            "0+",
            fields=(
                F("Name", "string", "0-12"),
                F("TopicId", "uuid", "13+", default=ZERO_UUID),
                F(
                    "PartitionResponses",
                    "[]PartitionProduceResponse",
                    "0+",
                    fields=(
                        F("Index", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("BaseOffset", "int64", "0+"),
                        F("LogAppendTimeMs", "int64", "2+", default=-1),
                        F("LogStartOffset", "int64", "5+", default=-1),
                        F(
                            "RecordErrors",
                            "[]BatchIndexAndErrorMessage",
                            "8+",
                            default=(),
                            fields=(
                                F("BatchIndex", "int32", "8+"),
                                F(
                                    "BatchIndexErrorMessage",
                                    "string",
                                    "8+",
                                    nullable="8+",
                                    default=None,
                                ),
                            ),
                        ),
                        F("ErrorMessage", "string", "8+", nullable="8+", default=None),
                        F(
                            "CurrentLeader",
                            "LeaderIdAndEpoch",
                            "10+",
                            tagged="10+",
                            tag=0,
                            fields=(
                                F("LeaderId", "int32", "10+", default=-1),
                                F("LeaderEpoch", "int32", "10+", default=-1),
                            ),
                        ),
                    ),
                ),
            ),
        ),
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F("NodeEndpoints", "[]NodeEndpoint", "10+", tagged="10+", tag=0, fields=_NODE_ENDPOINT),
    ),
)
