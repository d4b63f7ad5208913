"""KIP-1242 (``metadata.cluster.check.enable``) on Apache Kafka 4.4 and the embedded broker:
a connection's ApiVersions v5 names the cluster and node it is meant for. The node the
client's metadata names is accepted; the same address reached for a cluster of another id
(a misrouted connection: a DNS name or an address now used by another cluster) is refused
with REBOOTSTRAP_REQUIRED, and the client closes it and goes back to
``bootstrap.servers``."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kclient.broker import EmbeddedBroker
from kclient.clock import SYSTEM_CLOCK
from kclient.network import Metadata, NetworkClient, NetworkClientConfig, Node
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka


def _bootstrapped(bootstrap: str) -> tuple[NetworkClient, Metadata]:
    """A NetworkClient that has the cluster's metadata (its id and nodes)."""
    metadata = Metadata()
    client = NetworkClient.create(
        bootstrap, NetworkClientConfig(client_id="cluster-check"), metadata=metadata
    )
    deadline = time.monotonic() + 20
    while metadata.fetch().is_bootstrap_configured:
        assert time.monotonic() < deadline, "no metadata within 20 s"
        client.poll(50, SYSTEM_CLOCK.monotonic_ms())
    return client, metadata


def _ready_within(client: NetworkClient, node: Node, seconds: float, metadata: Metadata) -> bool:
    """Whether a new connection to ``node`` becomes ready; False as soon as the client
    went back to its bootstrap list."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if client.ready(node, SYSTEM_CLOCK.monotonic_ms()):
            return True
        client.poll(50, SYSTEM_CLOCK.monotonic_ms())
        if metadata.fetch().is_bootstrap_configured:
            return False
    return False


def _check(bootstrap: str) -> None:
    client, metadata = _bootstrapped(bootstrap)
    try:
        cluster = metadata.fetch()
        node = cluster.nodes[0]
        assert cluster.cluster_id
        assert _ready_within(client, node, 20, metadata), "the right node was refused"
        client.disconnect(node.id)
        client.poll(0, SYSTEM_CLOCK.monotonic_ms())
        # the same address, for a cluster of another id: as if it had been replaced
        body: dict[str, Any] = {
            "brokers": [
                {"node_id": n.id, "host": n.host, "port": n.port, "rack": n.rack}
                for n in cluster.nodes
            ],
            "cluster_id": "AnotherClusterId00000w",
            "controller_id": node.id,
            "topics": [],
        }
        metadata.update(0, body, False, SYSTEM_CLOCK.monotonic_ms())
        assert not _ready_within(client, node, 20, metadata)
        assert metadata.fetch().is_bootstrap_configured  # refused: bootstrap.servers again
    finally:
        client.close()


@pytest.mark.parametrize("apache_kafka", [VERSIONS[0]], indirect=True)
def test_apache_kafka_refuses_a_connection_meant_for_another_cluster(
    apache_kafka: ApacheKafka,
) -> None:
    assert apache_kafka.api_versions()[18][1] >= 5, "Apache Kafka 4.4 serves ApiVersions v5"
    _check(apache_kafka.bootstrap_servers)


def test_the_embedded_broker_refuses_a_connection_meant_for_another_cluster(
    kafka_broker: EmbeddedBroker,
) -> None:
    _check(kafka_broker.bootstrap_servers)
