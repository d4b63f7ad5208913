"""WriteTxnMarkers (api key 27): COMMIT or ABORT markers for a producer's transaction,
written by the partition leaders — sent by a transaction coordinator, and by admin tools
to abort a hanging transaction (``kafka-transactions.sh abort``, KIP-664).

Corresponds to Kafka's ``WriteTxnMarkersRequest.json`` / ``WriteTxnMarkersResponse.json``.
v0-v1, flexible from v1. Versions read from Kafka's message JSON files.
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "WriteTxnMarkersRequest",
    27,
    "0-1",
    "1+",
    (
        F(
            "Markers",
            "[]WritableTxnMarker",
            "0+",
            fields=(
                F("ProducerId", "int64", "0+"),
                F("ProducerEpoch", "int16", "0+"),
                F("TransactionResult", "bool", "0+"),
                F(
                    "Topics",
                    "[]WritableTxnMarkerTopic",
                    "0+",
                    fields=(
                        F("Name", "string", "0+"),
                        F("PartitionIndexes", "[]int32", "0+"),
                    ),
                ),
                F("CoordinatorEpoch", "int32", "0+"),
            ),
        ),
    ),
)

RESPONSE = message(
    "WriteTxnMarkersResponse",
    27,
    "0-1",
    "1+",
    (
        F(
            "Markers",
            "[]WritableTxnMarkerResult",
            "0+",
            fields=(
                F("ProducerId", "int64", "0+"),
                F(
                    "Topics",
                    "[]WritableTxnMarkerTopicResult",
                    "0+",
                    fields=(
                        F("Name", "string", "0+"),
                        F(
                            "Partitions",
                            "[]WritableTxnMarkerPartitionResult",
                            "0+",
                            fields=(
                                F("PartitionIndex", "int32", "0+"),
                                F("ErrorCode", "int16", "0+"),
                            ),
                        ),
                    ),
                ),
            ),
        ),
    ),
)
