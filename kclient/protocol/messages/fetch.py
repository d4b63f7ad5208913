"""Fetch (api key 1): consumers and followers read partitions; the broker serves it.

Corresponds to Kafka's ``FetchRequest.json`` / ``FetchResponse.json``.
Kafka 4.1 accepts v4-v18 (v0-v3 removed in 4.0 by KIP-896). Flexible from v12. From v13
topics are named by ``topic_id`` (KIP-516); from v15 the follower's ``replica_id`` moved
into the tagged ``replica_state`` (KIP-903); v17 adds the tagged ``replica_directory_id``
and v18 the tagged ``high_watermark`` per partition. Versions read from the 4.1 protocol
guide (kafka.apache.org/41/design/protocol, "Fetch API (Key: 1)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message
from kclient.protocol.types import ZERO_UUID

REQUEST = message(
    "FetchRequest",
    1,
    "4-18",
    "12+",
    (
        F("ClusterId", "string", "12+", nullable="12+", default=None, tagged="12+", tag=0),
        F("ReplicaId", "int32", "0-14", default=-1),
        F(
            "ReplicaState",
            "ReplicaState",
            "15+",
            tagged="15+",
            tag=1,
            fields=(
                F("ReplicaId", "int32", "15+", default=-1),
                F("ReplicaEpoch", "int64", "15+", default=-1),
            ),
        ),
        F("MaxWaitMs", "int32", "0+"),
        F("MinBytes", "int32", "0+"),
        F("MaxBytes", "int32", "3+", default=0x7FFFFFFF),
        F("IsolationLevel", "int8", "4+", default=0),
        F("SessionId", "int32", "7+", default=0),
        F("SessionEpoch", "int32", "7+", default=-1),
        F(
            "Topics",
            "[]FetchTopic",
            "0+",
            fields=(
                F("Topic", "string", "0-12"),
                F("TopicId", "uuid", "13+", default=ZERO_UUID),
                F(
                    "Partitions",
                    "[]FetchPartition",
                    "0+",
                    fields=(
                        F("Partition", "int32", "0+"),
                        F("CurrentLeaderEpoch", "int32", "9+", default=-1),
                        F("FetchOffset", "int64", "0+"),
                        F("LastFetchedEpoch", "int32", "12+", default=-1),
                        F("LogStartOffset", "int64", "5+", default=-1),
                        F("PartitionMaxBytes", "int32", "0+"),
                        F("ReplicaDirectoryId", "uuid", "17+", tagged="17+", tag=0),
                        F(
                            "HighWatermark",
                            "int64",
                            "18+",
                            tagged="18+",
                            tag=1,
                            default=0x7FFFFFFFFFFFFFFF,
                        ),
                    ),
                ),
            ),
        ),
        F(
            "ForgottenTopicsData",
            "[]ForgottenTopic",
            "7+",
            default=(),
            fields=(
                F("Topic", "string", "7-12"),
                F("TopicId", "uuid", "13+", default=ZERO_UUID),
                F("Partitions", "[]int32", "7+"),
            ),
        ),
        F("RackId", "string", "11+", default=""),
    ),
)

RESPONSE = message(
    "FetchResponse",
    1,
    "4-18",
    "12+",
    (
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F("ErrorCode", "int16", "7+", default=0),
        F("SessionId", "int32", "7+", default=0),
        F(
            "Responses",
            "[]FetchableTopicResponse",
            "0+",
            fields=(
                F("Topic", "string", "0-12"),
                F("TopicId", "uuid", "13+", default=ZERO_UUID),
                F(
                    "Partitions",
                    "[]PartitionData",
                    "0+",
                    fields=(
                        F("PartitionIndex", "int32", "0+"),
                        F("ErrorCode", "int16", "0+"),
                        F("HighWatermark", "int64", "0+"),
                        F("LastStableOffset", "int64", "4+", default=-1),
                        F("LogStartOffset", "int64", "5+", default=-1),
                        F(
                            "DivergingEpoch",
                            "EpochEndOffset",
                            "12+",
                            tagged="12+",
                            tag=0,
                            fields=(
                                F("Epoch", "int32", "12+", default=-1),
                                F("EndOffset", "int64", "12+", default=-1),
                            ),
                        ),
                        F(
                            "CurrentLeader",
                            "LeaderIdAndEpoch",
                            "12+",
                            tagged="12+",
                            tag=1,
                            fields=(
                                F("LeaderId", "int32", "12+", default=-1),
                                F("LeaderEpoch", "int32", "12+", default=-1),
                            ),
                        ),
                        F(
                            "SnapshotId",
                            "SnapshotId",
                            "12+",
                            tagged="12+",
                            tag=2,
                            fields=(
                                F("EndOffset", "int64", "0+", default=-1),
                                F("Epoch", "int32", "0+", default=-1),
                            ),
                        ),
                        F(
                            "AbortedTransactions",
                            "[]AbortedTransaction",
                            "4+",
                            nullable="4+",
                            fields=(
                                F("ProducerId", "int64", "4+"),
                                F("FirstOffset", "int64", "4+"),
                            ),
                        ),
                        F("PreferredReadReplica", "int32", "11+", default=-1),
                        F("Records", "records", "0+", nullable="0+"),
                    ),
                ),
            ),
        ),
        F(
            "NodeEndpoints",
            "[]NodeEndpoint",
            "16+",
            tagged="16+",
            tag=0,
            fields=(
                F("NodeId", "int32", "16+"),
                F("Host", "string", "16+"),
                F("Port", "int32", "16+"),
                F("Rack", "string", "16+", nullable="16+", default=None),
            ),
        ),
    ),
)
