"""NetworkClientConfig and bootstrap.servers parsing: mistakes name the setting to fix."""

import dataclasses

import pytest

from kclient.config import ProducerConfig
from kclient.errors import ConfigError
from kclient.network import NetworkClientConfig, parse_bootstrap_servers


def test_bootstrap_servers_accept_names_ips_and_bracketed_ipv6() -> None:
    assert parse_bootstrap_servers(" kafka-1:9092, 10.0.0.2:9093,[::1]:9094 ") == [
        ("kafka-1", 9092),
        ("10.0.0.2", 9093),
        ("::1", 9094),
    ]
    assert parse_bootstrap_servers(["a:1", "b:2"]) == [("a", 1), ("b", 2)]


def test_empty_bootstrap_servers_say_the_setting_is_required() -> None:
    with pytest.raises(ConfigError, match="'bootstrap.servers' is required"):
        parse_bootstrap_servers(" , ")


@pytest.mark.parametrize("bad", ["localhost", "localhost:", "host:99999", "::1:9092", "[::1]"])
def test_a_malformed_address_is_named(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"invalid address .* in 'bootstrap.servers'"):
        parse_bootstrap_servers(f"ok:9092,{bad}")


def test_out_of_range_settings_name_the_kafka_setting() -> None:
    with pytest.raises(ConfigError, match="'max.in.flight.requests.per.connection'"):
        NetworkClientConfig(max_in_flight_requests_per_connection=0)
    with pytest.raises(ConfigError, match="'reconnect.backoff.ms' must not be negative"):
        NetworkClientConfig(reconnect_backoff_ms=-1)


def test_a_base_backoff_above_its_maximum_uses_the_maximum() -> None:
    config = NetworkClientConfig(reconnect_backoff_ms=5000, reconnect_backoff_max_ms=1000)
    assert config.reconnect_backoff_ms == 1000


def test_settings_come_from_the_producer_config() -> None:
    producer = ProducerConfig(
        {
            "bootstrap.servers": "x:1",
            "client.id": "app",
            "request.timeout.ms": 1234,
            "receive.message.max.bytes": 5000,
        }
    )
    config = NetworkClientConfig.from_config(producer)
    assert config.client_id == "app"
    assert config.request_timeout_ms == 1234
    assert config.receive_message_max_bytes == 5000
    assert NetworkClientConfig().receive_message_max_bytes == 100_000_000


def test_every_network_setting_is_a_producer_setting_and_a_zero_timeout_is_one_ms() -> None:
    producer = ProducerConfig({"bootstrap.servers": "x:1", "request.timeout.ms": 0})
    missing = [
        f.name for f in dataclasses.fields(NetworkClientConfig) if not hasattr(producer, f.name)
    ]
    assert not missing  # else the producer would silently run them at their defaults
    assert NetworkClientConfig.from_config(producer).request_timeout_ms == 1
