"""``metadata.cluster.check.enable`` (KIP-1242): a connection's ApiVersions (v5) names the
cluster and node it is meant for; a broker that is not that node answers
REBOOTSTRAP_REQUIRED, and the client closes the connection and rebootstraps (or, with
``metadata.recovery.strategy=none``, refreshes). MockSelector + MockClock."""

from __future__ import annotations

from typing import Any

from kclient.network import NetworkClientConfig
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.testing import api_versions_body, metadata_update_with
from kclient.testing.selector import SentRequest
from tests.network.test_client import Env, make_env

REBOOTSTRAP_REQUIRED = 129


def misrouted(request: SentRequest) -> dict[str, Any]:
    """A broker of another cluster: refuses a connection that names a cluster."""
    if request.body.get("cluster_id") is None:
        return api_versions_body()
    return {"error_code": REBOOTSTRAP_REQUIRED, "api_keys": [], "throttle_time_ms": 0}


def bootstrapped(config: NetworkClientConfig | None = None) -> Env:
    """A client that bootstrapped from localhost:9092 and learned nodes 0-2."""
    env = make_env(bootstrap_only=[("localhost", 9092)], config=config)
    env.metadata.add("t", env.now)
    env.selector.serve(ApiKey.METADATA, lambda request: metadata_update_with(3, {"t": 3}))
    for _ in range(10):
        env.poll()
        env.clock.advance(50)
    assert not env.metadata.fetch().is_bootstrap_configured
    return env


def api_versions_sent(env: Env, node_id: int) -> SentRequest:
    (sent, *_) = env.selector.requests(node_id=node_id, api_key=ApiKey.API_VERSIONS)
    return sent


def test_api_versions_names_the_cluster_and_node_the_connection_is_for() -> None:
    env = make_env()  # cluster "mock-cluster", nodes 0-2
    env.connect(1)
    sent = api_versions_sent(env, 1)
    assert sent.api_version == 5
    assert (sent.body["cluster_id"], sent.body["node_id"]) == ("mock-cluster", 1)


def test_a_bootstrap_connection_names_neither() -> None:
    env = make_env(bootstrap_only=[("localhost", 9092)])
    env.connect(-1)
    sent = api_versions_sent(env, -1)
    assert (sent.body["cluster_id"], sent.body["node_id"]) == (None, -1)


def test_with_the_check_off_no_cluster_is_named() -> None:
    env = make_env(config=NetworkClientConfig(metadata_cluster_check_enable=False))
    env.connect(1)
    sent = api_versions_sent(env, 1)
    assert (sent.body["cluster_id"], sent.body["node_id"]) == (None, -1)


def test_a_misrouted_connection_is_closed_and_the_client_rebootstraps() -> None:
    env = bootstrapped()
    env.selector.stop_serving(ApiKey.METADATA)  # (to see the bootstrap list in between)
    env.selector.serve(ApiKey.API_VERSIONS, misrouted)
    node = env.node(1)
    assert not env.client.ready(node, env.now)
    for _ in range(3):
        env.poll()
    assert not env.client.is_ready(node, env.now)
    assert not env.selector.is_connected(1)
    assert env.metadata.fetch().is_bootstrap_configured  # bootstrap.servers again


def test_with_recovery_none_a_misrouted_connection_asks_for_a_refresh_only() -> None:
    env = bootstrapped(NetworkClientConfig(metadata_recovery_strategy="none"))
    env.selector.stop_serving(ApiKey.METADATA)
    env.selector.serve(ApiKey.API_VERSIONS, misrouted)
    node = env.node(1)
    env.client.ready(node, env.now)
    for _ in range(3):
        env.poll()
    assert not env.selector.is_connected(1)
    assert env.metadata.update_requested()
    assert not env.metadata.fetch().is_bootstrap_configured


def test_a_broker_that_drops_a_request_naming_the_cluster_is_asked_without_it() -> None:
    """tansu 0.6 closes the connection on an ApiVersions v5 that names the cluster: the
    next connection to that node leaves the name out (and to the others still names it)."""
    env = make_env()
    env.selector.serve(ApiKey.API_VERSIONS, lambda request: None)  # no answer...
    node = env.node(1)
    env.client.ready(node, env.now)
    env.poll()  # connected
    env.poll()  # ApiVersions written
    assert api_versions_sent(env, 1).body["cluster_id"] == "mock-cluster"
    env.selector.server_disconnect(1)  # ...the connection closed instead
    env.poll()
    env.selector.serve(ApiKey.API_VERSIONS, lambda request: api_versions_body())
    for _ in range(40):
        if env.client.ready(node, env.now):
            break
        env.poll()
        env.clock.advance(50)
    assert env.client.is_ready(node, env.now)
    again = env.selector.requests(node_id=1, api_key=ApiKey.API_VERSIONS)[-1]
    assert (again.body["cluster_id"], again.body["node_id"]) == (None, -1)
    env.connect(2)
    assert api_versions_sent(env, 2).body["cluster_id"] == "mock-cluster"


def test_new_connections_start_at_the_api_versions_version_the_cluster_serves() -> None:
    """A Kafka 3.9 or tansu answers ApiVersions up to v4: once one node said so, the next
    connections ask at v4 (no refusal and second round trip, no v5 for a broker that
    closes on it)."""
    versions = {**SUPPORTED_VERSIONS, ApiKey.API_VERSIONS: (0, 4)}
    env = make_env(api_versions=versions)
    env.connect(0)
    assert [r.api_version for r in env.selector.requests(0, ApiKey.API_VERSIONS)] == [5]
    env.connect(1)
    assert [r.api_version for r in env.selector.requests(1, ApiKey.API_VERSIONS)] == [4]
