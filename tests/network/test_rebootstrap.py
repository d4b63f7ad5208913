"""``metadata.recovery.strategy=rebootstrap`` (KIP-899, KIP-1102): when every broker the
client knows is gone, when no metadata came for ``metadata.recovery.rebootstrap.trigger.ms``,
or when a broker answers REBOOTSTRAP_REQUIRED, the client closes its connections and starts
again from ``bootstrap.servers``; with ``none`` it keeps trying the brokers it knew.
MockSelector + MockClock: no sockets, no sleeps."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from kclient.errors import ConfigError
from kclient.network import NetworkClientConfig
from kclient.network.connection_states import Address
from kclient.producer import KafkaProducer
from kclient.protocol import ApiKey
from kclient.testing.selector import SentRequest
from tests.network.test_client import Env, make_env

BOOTSTRAP = [("kafka.example", 9092)]


def _resolver(host: str, port: int) -> list[Address]:
    return [(socket.AF_INET, "10.0.0.9", port)]


def cluster(*node_ids: int, error_code: int = 0) -> dict[str, Any]:
    """A MetadataResponse body: brokers ``node_ids`` (port 9000 + id), topic ``t`` led by
    the first."""
    return {
        "brokers": [
            {"node_id": i, "host": f"b{i}.example", "port": 9000 + i, "rack": None}
            for i in node_ids
        ],
        "cluster_id": "c",
        "controller_id": node_ids[0] if node_ids else -1,
        "topics": [
            {
                "error_code": 0,
                "name": "t",
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": 0,
                        "leader_id": node_ids[0] if node_ids else -1,
                        "leader_epoch": 0,
                        "replica_nodes": list(node_ids),
                        "isr_nodes": list(node_ids),
                        "offline_replicas": [],
                    }
                ],
            }
        ],
        "error_code": error_code,
    }


class Brokers:
    """What the mock brokers answer to Metadata: ``current`` (changed by the test)."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.current = body

    def __call__(self, request: SentRequest) -> dict[str, Any]:
        return self.current


def started(config: NetworkClientConfig | None = None) -> tuple[Env, Brokers]:
    """A client that bootstrapped from ``kafka.example:9092`` and learned brokers 1 and 2."""
    env = make_env(bootstrap_only=BOOTSTRAP, resolver=_resolver, config=config)
    env.metadata.add("t", env.now)
    brokers = Brokers(cluster(1, 2))
    env.selector.serve(ApiKey.METADATA, brokers)
    run(env, 300)
    assert sorted(n.id for n in env.metadata.fetch().nodes) == [1, 2]
    return env, brokers


def run(env: Env, ms: int, step_ms: int = 50) -> None:
    for _ in range(ms // step_ms):
        env.poll()
        env.clock.advance(step_ms)


def lose_every_known_broker(env: Env) -> None:
    for node_id in (1, 2):
        env.selector.refuse_connect(node_id)
        env.client.disconnect(node_id)


def test_a_client_whose_brokers_are_all_gone_starts_again_from_bootstrap_servers() -> None:
    env, brokers = started()
    brokers.current = cluster(7, 8)  # the cluster behind the name was replaced
    lose_every_known_broker(env)
    attempts = len(env.selector.connect_attempts)
    env.metadata.request_update()
    run(env, 3_000)
    assert (-1, "10.0.0.9", 9092) in env.selector.connect_attempts[attempts:]
    assert sorted(n.id for n in env.metadata.fetch().nodes) == [7, 8]
    assert env.metadata.fetch().leader_for(("t", 0)).id == 7  # type: ignore[arg-type,union-attr]


def test_with_none_the_client_keeps_trying_the_brokers_it_knew() -> None:
    env, brokers = started(NetworkClientConfig(metadata_recovery_strategy="none"))
    brokers.current = cluster(7, 8)
    lose_every_known_broker(env)
    attempts = len(env.selector.connect_attempts)
    env.metadata.request_update()
    run(env, 10_000)
    tried = {node_id for node_id, _, _ in env.selector.connect_attempts[attempts:]}
    assert tried == {1, 2}
    assert sorted(n.id for n in env.metadata.fetch().nodes) == [1, 2]


def test_no_metadata_for_the_trigger_time_closes_the_connections_and_rebootstraps() -> None:
    config = NetworkClientConfig(metadata_recovery_rebootstrap_trigger_ms=5_000)
    env, brokers = started(config)
    env.selector.stop_serving(ApiKey.METADATA)  # connected, but Metadata never answered
    env.metadata.request_update()
    run(env, 4_000)
    assert not env.metadata.fetch().is_bootstrap_configured  # not yet
    connected = [i for i in (1, 2) if env.selector.is_connected(i)]
    assert connected
    brokers.current = cluster(4)  # what the bootstrap address leads to now
    env.selector.serve(ApiKey.METADATA, brokers)  # (the requests in flight stay unanswered)
    run(env, 1_500)
    assert all(not env.selector.is_connected(i) for i in connected)  # closed by the rebootstrap
    assert [n.id for n in env.metadata.fetch().nodes] == [4]


def test_a_refresh_waiting_for_its_answer_wakes_the_poll_at_the_trigger() -> None:
    """The poll sleeps until the trigger, not until the refresh's request.timeout.ms (found
    on Kafka 4.4 with a SIGSTOPped broker: the rebootstrap came at request.timeout.ms)."""
    config = NetworkClientConfig(
        metadata_recovery_rebootstrap_trigger_ms=2_000, request_timeout_ms=20_000
    )
    env, _ = started(config)
    env.selector.stop_serving(ApiKey.METADATA)
    env.metadata.request_update()
    env.client.poll(60_000, env.now)  # sends the refresh, which is never answered
    assert env.selector.poll_timeouts_ms[-1] <= 2_000
    env.clock.advance(1_500)
    env.client.poll(60_000, env.now)
    assert env.selector.poll_timeouts_ms[-1] <= 500
    env.clock.advance(500)
    env.client.poll(60_000, env.now)  # the trigger: rebootstrapped
    assert env.metadata.fetch().is_bootstrap_configured


def test_a_refresh_that_succeeds_in_time_never_rebootstraps() -> None:
    config = NetworkClientConfig(metadata_recovery_rebootstrap_trigger_ms=1_000)
    env, _ = started(config)
    for _ in range(10):
        env.metadata.request_update()
        run(env, 500)
    assert sorted(n.id for n in env.metadata.fetch().nodes) == [1, 2]
    assert not [a for a in env.selector.connect_attempts if a[0] == -1][1:]  # one bootstrap


def test_rebootstrap_required_from_a_broker_rebootstraps_at_once() -> None:
    env, brokers = started()
    brokers.current = {**cluster(), "error_code": 129}  # REBOOTSTRAP_REQUIRED, no brokers
    env.metadata.request_update()
    run(env, 200)
    assert env.metadata.fetch().is_bootstrap_configured
    brokers.current = cluster(3)
    run(env, 500)
    assert [n.id for n in env.metadata.fetch().nodes] == [3]


def test_rebootstrap_required_with_none_is_an_ordinary_failed_refresh() -> None:
    env, brokers = started(NetworkClientConfig(metadata_recovery_strategy="none"))
    brokers.current = {**cluster(), "error_code": 129}
    env.metadata.request_update()
    run(env, 1_000)
    assert sorted(n.id for n in env.metadata.fetch().nodes) == [1, 2]


def test_a_strategy_kafka_does_not_have_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"'metadata.recovery.strategy' must be"):
        NetworkClientConfig(metadata_recovery_strategy="retry")
    with pytest.raises(ConfigError, match=r"'metadata.recovery.strategy' must be"):
        KafkaProducer({"bootstrap.servers": "localhost:9", "metadata.recovery.strategy": "x"})
    with pytest.raises(ConfigError, match=r"metadata.recovery.rebootstrap.trigger.ms"):
        KafkaProducer(
            {"bootstrap.servers": "localhost:9", "metadata.recovery.rebootstrap.trigger.ms": -1}
        )
