"""Metadata (api key 3): brokers, topics, partition leaders; drives the client's Cluster.

Corresponds to Kafka's ``MetadataRequest.json`` / ``MetadataResponse.json``.
Kafka 4.1 accepts v0-v13 (KIP-896 removed none). Flexible from v9. v10 adds topic ids,
v11 drops ``include_cluster_authorized_operations``, v12 makes response topic names
nullable, v13 adds a top-level ``error_code``. Versions read from the 4.1 protocol guide
(kafka.apache.org/41/design/protocol, "Metadata API (Key: 3)").
A null ``topics`` (v1+) asks for every topic; an empty list asks for none (v0: for all).
"""

from __future__ import annotations

from kclient.protocol.schema import F, message
from kclient.protocol.types import ZERO_UUID

_NO_OPERATIONS = -(2**31)

REQUEST = message(
    "MetadataRequest",
    3,
    "0-13",
    "9+",
    (
        F(
            "Topics",
            "[]MetadataRequestTopic",
            "0+",
            nullable="1+",
            fields=(
                F("TopicId", "uuid", "10+", default=ZERO_UUID),
                F("Name", "string", "0+", nullable="10+"),
            ),
        ),
        F("AllowAutoTopicCreation", "bool", "4+", default=True),
        F("IncludeClusterAuthorizedOperations", "bool", "8-10", default=False),
        F("IncludeTopicAuthorizedOperations", "bool", "8+", default=False),
    ),
)

RESPONSE = message(
    "MetadataResponse",
    3,
    "0-13",
    "9+",
    (
        F("ThrottleTimeMs", "int32", "3+", default=0),
        F(
            "Brokers",
            "[]MetadataResponseBroker",
            "0+",
            fields=(
                F("NodeId", "int32", "0+"),
                F("Host", "string", "0+"),
                F("Port", "int32", "0+"),
                F("Rack", "string", "1+", nullable="1+", default=None),
            ),
        ),
        F("ClusterId", "string", "2+", nullable="2+", default=None),
        F("ControllerId", "int32", "1+", default=-1),
        F(
            "Topics",
            "[]MetadataResponseTopic",
            "0+",
            fields=(
                F("ErrorCode", "int16", "0+"),
                F("Name", "string", "0+", nullable="12+"),
                F("TopicId", "uuid", "10+", default=ZERO_UUID),
                F("IsInternal", "bool", "1+", default=False),
                F(
                    "Partitions",
                    "[]MetadataResponsePartition",
                    "0+",
                    fields=(
                        F("ErrorCode", "int16", "0+"),
                        F("PartitionIndex", "int32", "0+"),
                        F("LeaderId", "int32", "0+"),
                        F("LeaderEpoch", "int32", "7+", default=-1),
                        F("ReplicaNodes", "[]int32", "0+"),
                        F("IsrNodes", "[]int32", "0+"),
                        F("OfflineReplicas", "[]int32", "5+"),
                    ),
                ),
                F("TopicAuthorizedOperations", "int32", "8+", default=_NO_OPERATIONS),
            ),
        ),
        F("ClusterAuthorizedOperations", "int32", "8-10", default=_NO_OPERATIONS),
        F("ErrorCode", "int16", "13+", default=0),
    ),
)
