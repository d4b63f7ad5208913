"""``client.dns.lookup`` (KIP-235) and ``bootstrap.resolve.timeout.ms`` (KIP-909), as in
Kafka 4.4's ``ClientUtils`` and ``NetworkClient.ensureBootstrapped``: with 0 the names are
resolved when the client is created (a name that does not resolve is left out; none
resolving is a ``ConfigError``); above 0 the client's poll resolves them, a round every
``retry.backoff.ms``, connecting to nothing meanwhile, and fails with the final
``BootstrapResolutionError`` after the timeout. ``resolve_canonical_bootstrap_servers_only``
makes the bootstrap nodes the canonical names of the addresses (TLS verifies those).
Injected resolvers, MockSelector, MockClock: no DNS, no sockets, no sleeps."""

from __future__ import annotations

import logging
import selectors
import socket

import pytest

from kclient.config import ProducerConfig
from kclient.errors import BootstrapResolutionError, ConfigError, KafkaConnectionError
from kclient.network import NetworkClient, NetworkClientConfig
from kclient.network.bootstrap_resolution import (
    BootstrapResolution,
    bootstrap_lookup,
    canonical_host_name,
)
from kclient.network.connection_states import Address
from kclient.protocol import ApiKey
from tests.network.test_client import Env, make_env, metadata_response_for

CANONICAL = "resolve_canonical_bootstrap_servers_only"

#: A little DNS: an alias of two brokers, their names, and a name that does not exist.
FORWARD = {
    "kafka.example": ["10.0.0.1", "10.0.0.2"],
    "b1.internal": ["10.0.0.1"],
    "b2.internal": ["10.0.0.2"],
    "localhost": ["127.0.0.1"],
    "liar.internal": ["10.9.9.9"],  # what 10.0.0.3 reverse-resolves to, but not back
}
REVERSE = {"10.0.0.1": "b1.internal", "10.0.0.2": "b2.internal", "127.0.0.1": "localhost"}
REVERSE["10.0.0.3"] = "liar.internal"


class Dns:
    """Scripted forward and reverse lookups, counting the forward ones per name."""

    def __init__(self) -> None:
        self.forward = {name: list(ips) for name, ips in FORWARD.items()}
        self.lookups: list[str] = []

    def resolve(self, host: str, port: int) -> list[Address]:
        self.lookups.append(host)
        ips = [host] if host[0].isdigit() else self.forward.get(host)
        if not ips:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, ip, port) for ip in ips]

    @staticmethod
    def reverse(ip: str) -> str:
        name = REVERSE.get(ip)
        if name is None:
            raise socket.herror(1, "Unknown host")
        return name


def _env(servers: list[tuple[str, int]], dns: Dns, **config: object) -> Env:
    cfg = NetworkClientConfig(**config)  # type: ignore[arg-type]
    env = make_env(bootstrap_only=servers, resolver=dns.resolve, config=cfg)
    lookup = bootstrap_lookup(cfg.client_dns_lookup, dns.resolve, dns.reverse)
    env.client.bootstrap_resolution = BootstrapResolution(
        servers,
        lookup,
        timeout_ms=cfg.bootstrap_resolve_timeout_ms,
        retry_backoff_ms=cfg.retry_backoff_ms,
    )
    return env


def _hosts(env: Env) -> list[tuple[str, int]]:
    return [(node.host, node.port) for node in env.metadata.fetch().nodes]


def _run(env: Env, ms: int, step_ms: int = 10) -> None:
    for _ in range(ms // step_ms):
        env.poll()
        env.clock.advance(step_ms)


# ---- the settings -------------------------------------------------------------------------


def test_the_settings_have_javas_defaults_and_values() -> None:
    cfg = ProducerConfig({"bootstrap.servers": "localhost:9092"})
    assert cfg.client_dns_lookup == "use_all_dns_ips"
    assert cfg.bootstrap_resolve_timeout_ms == 0
    cfg = ProducerConfig(
        bootstrap_servers="localhost:9092",
        client_dns_lookup="Resolve_Canonical_Bootstrap_Servers_Only",
        bootstrap_resolve_timeout_ms="5000",
    )
    assert cfg.client_dns_lookup == CANONICAL
    assert cfg.bootstrap_resolve_timeout_ms == 5000
    assert NetworkClientConfig.from_config(cfg).client_dns_lookup == CANONICAL


def test_default_is_refused_as_java_3_refuses_it_naming_the_values() -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig({"bootstrap.servers": "localhost:9092", "client.dns.lookup": "default"})
    text = str(info.value)
    assert "'client.dns.lookup' must be one of use_all_dns_ips, " + CANONICAL in text
    assert "KIP-602" in text
    with pytest.raises(ConfigError, match="'client.dns.lookup' must be one of"):
        ProducerConfig({"bootstrap.servers": "h:1", "client.dns.lookup": "all"})
    with pytest.raises(ConfigError, match="bootstrap.resolve.timeout.ms"):
        ProducerConfig({"bootstrap.servers": "h:1", "bootstrap.resolve.timeout.ms": -1})
    with pytest.raises(ConfigError, match="'client.dns.lookup' must be one of"):
        NetworkClientConfig(client_dns_lookup="default")


# ---- canonical names (KIP-235) ------------------------------------------------------------


def test_canonical_host_name_is_the_reverse_name_only_when_it_resolves_back() -> None:
    dns = Dns()
    assert canonical_host_name("10.0.0.1", dns.resolve, dns.reverse) == "b1.internal"
    assert canonical_host_name("10.0.0.3", dns.resolve, dns.reverse) == "10.0.0.3"  # not back
    assert canonical_host_name("10.0.0.4", dns.resolve, dns.reverse) == "10.0.0.4"  # no name


def test_an_alias_becomes_the_canonical_name_of_each_of_its_addresses() -> None:
    dns = Dns()
    canonical = bootstrap_lookup(CANONICAL, dns.resolve, dns.reverse)
    assert canonical("kafka.example", 9093) == [("b1.internal", 9093), ("b2.internal", 9093)]
    assert canonical("127.0.0.1", 9093) == [("localhost", 9093)]  # a literal too
    all_ips = bootstrap_lookup("use_all_dns_ips", dns.resolve, dns.reverse)
    assert all_ips("kafka.example", 9093) == [("kafka.example", 9093)]  # stays a name
    with pytest.raises(socket.gaierror):
        all_ips("nohost.invalid", 9093)


def test_canonical_names_are_the_bootstrap_nodes_and_what_tls_verifies() -> None:
    dns = Dns()
    env = _env([("kafka.example", 9093)], dns, client_dns_lookup=CANONICAL)
    env.client.resolve_bootstrap_now()
    assert _hosts(env) == [("b1.internal", 9093), ("b2.internal", 9093)]
    env.poll()  # the metadata request connects to a bootstrap node
    assert env.selector.server_hostnames[0] in ("b1.internal", "b2.internal")
    assert env.selector.connect_attempts[0][1] in ("10.0.0.1", "10.0.0.2")


def test_use_all_dns_ips_keeps_the_name_tls_verifies() -> None:
    dns = Dns()
    env = _env([("kafka.example", 9093)], dns)
    env.client.resolve_bootstrap_now()
    assert _hosts(env) == [("kafka.example", 9093)]
    env.poll()
    assert env.selector.server_hostnames == ["kafka.example"]


# ---- bootstrap.resolve.timeout.ms 0: at creation -------------------------------------------


def test_at_creation_a_name_that_does_not_resolve_is_left_out_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    dns = Dns()
    env = _env([("nohost.invalid", 9092), ("localhost", 9093)], dns)
    with caplog.at_level(logging.WARNING, logger="kclient"):
        env.client.resolve_bootstrap_now()
    assert _hosts(env) == [("localhost", 9093)]
    assert "leaving nohost.invalid:9092 out of 'bootstrap.servers': no such host" in caplog.text


def test_at_creation_no_name_resolving_is_a_config_error_naming_the_setting() -> None:
    dns = Dns()
    env = _env([("nohost.invalid", 9092), ("gone.invalid", 9093)], dns)
    with pytest.raises(ConfigError) as info:
        env.client.resolve_bootstrap_now()
    text = str(info.value)
    assert "nohost.invalid:9092: no such host; gone.invalid:9093: no such host" in text
    assert "'bootstrap.servers'" in text and "'bootstrap.resolve.timeout.ms'" in text


def test_creating_a_client_with_no_name_resolving_closes_what_it_opened() -> None:
    dns = Dns()
    selector = selectors.DefaultSelector()
    with pytest.raises(ConfigError, match="nohost.invalid:9092: no such host"):
        NetworkClient.create("nohost.invalid:9092", resolver=dns.resolve, selector=selector)
    assert selector.get_map() is None  # closed
    client = NetworkClient.create("nohost.invalid:9092,localhost:9093", resolver=dns.resolve)
    try:
        assert client.metadata.bootstrap_addresses == (("localhost", 9093),)
    finally:
        client.close()


# ---- bootstrap.resolve.timeout.ms above 0: on the client's thread ---------------------------


def test_above_0_nothing_connects_until_a_name_resolves_retried_every_backoff() -> None:
    dns = Dns()
    env = _env(
        [("late.example", 9092)], dns, bootstrap_resolve_timeout_ms=5_000, retry_backoff_ms=100
    )
    assert env.client.bootstrap_resolution.pending
    _run(env, 1_000)
    assert env.selector.connect_attempts == []
    assert 9 <= dns.lookups.count("late.example") <= 11  # a round every retry.backoff.ms
    assert env.client.bootstrap_error(env.now) is None
    assert env.client.bootstrap_refused_error(env.now) is None  # nothing refused: unresolved
    node = env.metadata.fetch().nodes[0]
    assert not env.client.ready(node, env.now)  # not even when asked directly
    assert env.selector.connect_attempts == []
    dns.forward["late.example"] = ["10.0.0.5"]
    env.selector.serve(ApiKey.METADATA, metadata_response_for)
    _run(env, 200)
    assert not env.client.bootstrap_resolution.pending
    assert env.selector.connect_attempts[0][1:] == ("10.0.0.5", 9092)
    assert not env.metadata.fetch().is_bootstrap_configured  # the cluster's metadata came


def test_above_0_the_time_running_out_is_final_and_names_the_setting() -> None:
    dns = Dns()
    env = _env(
        [("nohost.invalid", 9092)], dns, bootstrap_resolve_timeout_ms=1_000, retry_backoff_ms=300
    )
    _run(env, 990)
    assert env.client.bootstrap_error(env.now) is None
    _run(env, 20)
    error = env.client.bootstrap_error(env.now)
    assert isinstance(error, BootstrapResolutionError)
    assert isinstance(error, KafkaConnectionError) and not error.retriable
    text = str(error)
    assert "within 1000 ms ('bootstrap.resolve.timeout.ms'" in text
    assert "nohost.invalid:9092: no such host" in text
    with pytest.raises(BootstrapResolutionError):  # every metadata wait gets it
        env.metadata.maybe_raise_for_topic("t")
    rounds = len(dns.lookups)
    dns.forward["nohost.invalid"] = ["10.0.0.6"]
    _run(env, 2_000)
    assert len(dns.lookups) == rounds  # final: no more rounds, nothing connects
    assert env.selector.connect_attempts == []
    assert env.client.bootstrap_error(env.now) is error


def test_above_0_the_poll_sleeps_until_the_next_round() -> None:
    dns = Dns()
    env = _env(
        [("nohost.invalid", 9092)], dns, bootstrap_resolve_timeout_ms=1_000, retry_backoff_ms=300
    )
    env.client.poll(10_000, env.now)
    assert env.selector.poll_timeouts_ms[-1] == 300
    env.clock.advance(900)
    env.client.poll(10_000, env.now)  # the last round is at the timeout, not after it
    assert env.selector.poll_timeouts_ms[-1] == 100


def test_above_0_canonical_names_are_found_on_the_clients_thread() -> None:
    dns = Dns()
    env = _env(
        [("kafka.example", 9093)],
        dns,
        client_dns_lookup=CANONICAL,
        bootstrap_resolve_timeout_ms=1_000,
    )
    assert _hosts(env) == [("kafka.example", 9093)]  # not resolved yet
    env.poll()
    assert _hosts(env) == [("b1.internal", 9093), ("b2.internal", 9093)]
    assert env.selector.server_hostnames[0] in ("b1.internal", "b2.internal")


def test_once_resolved_refusals_are_bootstrap_refused_timeout_ms_as_before() -> None:
    dns = Dns()
    env = _env(
        [("localhost", 9092), ("nohost.invalid", 9093)],
        dns,
        bootstrap_resolve_timeout_ms=1_000,
        bootstrap_refused_timeout_ms=500,
    )
    env.selector.refuse_connect(-1)
    _run(env, 800)
    assert _hosts(env) == [("localhost", 9092)]  # the name that did not resolve is left out
    error = env.client.bootstrap_error(env.now)
    assert error is not None and "bootstrap.refused.timeout.ms" in str(error)
    assert "localhost:9092 (127.0.0.1:9092): connection refused" in str(error)
