"""ApiVersions (api key 18): the first request on every connection; version negotiation.

Corresponds to Kafka's ``ApiVersionsRequest.json`` / ``ApiVersionsResponse.json``.
Kafka 4.1 accepts v0-v4, Kafka 4.4 v0-v5. Flexible from v3 (the request then carries the
client's software name and version). v5 (KIP-1242) adds the cluster id and node id the
client means to reach; a broker of another cluster, or another node, answers
REBOOTSTRAP_REQUIRED (a misrouted connection). The response ALWAYS uses response header
v0, even when flexible, so a client that sent a version the broker does not know can
still read it.
Versions read from the 4.1 protocol guide (kafka.apache.org/41/design/protocol,
"ApiVersions API (Key: 18)").
"""

from __future__ import annotations

from kclient.protocol.schema import F, message

REQUEST = message(
    "ApiVersionsRequest",
    18,
    "0-5",
    "3+",
    (
        F("ClientSoftwareName", "string", "3+"),
        F("ClientSoftwareVersion", "string", "3+"),
        F("ClusterId", "string", "5+", nullable="5+", default=None),
        F("NodeId", "int32", "5+", default=-1),
    ),
)

RESPONSE = message(
    "ApiVersionsResponse",
    18,
    "0-5",
    "3+",
    (
        F("ErrorCode", "int16", "0+"),
        F(
            "ApiKeys",
            "[]ApiVersion",
            "0+",
            fields=(
                F("ApiKey", "int16", "0+"),
                F("MinVersion", "int16", "0+"),
                F("MaxVersion", "int16", "0+"),
            ),
        ),
        F("ThrottleTimeMs", "int32", "1+", default=0),
        F(
            "SupportedFeatures",
            "[]SupportedFeatureKey",
            "3+",
            tagged="3+",
            tag=0,
            fields=(
                F("Name", "string", "3+"),
                F("MinVersion", "int16", "3+"),
                F("MaxVersion", "int16", "3+"),
            ),
        ),
        F("FinalizedFeaturesEpoch", "int64", "3+", tagged="3+", tag=1, default=-1),
        F(
            "FinalizedFeatures",
            "[]FinalizedFeatureKey",
            "3+",
            tagged="3+",
            tag=2,
            fields=(
                F("Name", "string", "3+"),
                F("MaxVersionLevel", "int16", "3+"),
                F("MinVersionLevel", "int16", "3+"),
            ),
        ),
        F("ZkMigrationReady", "bool", "3+", tagged="3+", tag=3, default=False),
    ),
)
