import logging

import pytest

from kclient.config import ProducerConfig
from kclient.errors import ConfigError

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def test_java_defaults() -> None:
    config = ProducerConfig(BOOT)
    assert config.acks == -1
    assert config.enable_idempotence is True
    assert config.batch_size == 131_072  # not Java's 16384: see ProducerConfig
    assert config.send_buffer_bytes == -1  # not Java's 131072: see ProducerConfig
    assert config.linger_ms == 5
    assert config.buffer_memory == 32 * 1024 * 1024
    assert config.max_block_ms == 60_000
    assert config.max_request_size == 1024 * 1024
    assert config.max_in_flight_requests_per_connection == 5
    assert config.retries == 2_147_483_647
    assert config.delivery_timeout_ms == 120_000
    assert config.request_timeout_ms == 30_000
    assert (config.retry_backoff_ms, config.retry_backoff_max_ms) == (100, 1000)
    assert (config.reconnect_backoff_ms, config.reconnect_backoff_max_ms) == (50, 1000)
    assert config.metadata_max_age_ms == 300_000
    assert config.metadata_max_idle_ms == 300_000
    assert config.connections_max_idle_ms == 540_000
    assert config.compression_type == "none"
    assert config.partitioner_ignore_keys is False
    assert config.client_id.startswith("producer-")


def test_kafka_names_snake_case_and_kwargs_are_the_same_thing() -> None:
    a = ProducerConfig({"bootstrap.servers": "h:1", "linger.ms": 7, "batch.size": 100})
    b = ProducerConfig(bootstrap_servers="h:1", linger_ms=7, batch_size=100)
    c = ProducerConfig({"bootstrap_servers": "h:1"}, **{"linger.ms": 7}, batch_size=100)
    for config in (a, b, c):
        assert (config.linger_ms, config.batch_size, config.bootstrap_servers) == (7, 100, ("h:1",))


def test_properties_file_strings_are_parsed() -> None:
    config = ProducerConfig({**BOOT, "linger.ms": "10", "enable.idempotence": "false", "acks": "1"})
    assert (config.linger_ms, config.enable_idempotence, config.acks) == (10, False, 1)


def test_bootstrap_servers_required_and_checked() -> None:
    with pytest.raises(ConfigError, match="'bootstrap.servers' is required"):
        ProducerConfig()
    with pytest.raises(ConfigError, match="not host:port"):
        ProducerConfig(bootstrap_servers="localhost")
    assert ProducerConfig(bootstrap_servers=["a:1", "b:2"]).bootstrap_servers == ("a:1", "b:2")
    assert ProducerConfig(bootstrap_servers="a:1, b:2").bootstrap_servers == ("a:1", "b:2")


def test_unknown_key_suggests_the_closest_setting() -> None:
    with pytest.raises(ConfigError, match="unknown producer setting 'linger.msec'.*'linger.ms'"):
        ProducerConfig(BOOT, **{"linger.msec": 5})
    with pytest.raises(ConfigError, match="did you mean 'batch_size'"):
        ProducerConfig(BOOT, batchsize=5)


def test_wrong_type_names_the_setting() -> None:
    with pytest.raises(ConfigError, match="'linger.ms' must be an integer, got 'soon'"):
        ProducerConfig(BOOT, **{"linger.ms": "soon"})
    with pytest.raises(ConfigError, match="'batch.size' must be an integer, got True"):
        ProducerConfig(BOOT, batch_size=True)
    with pytest.raises(ConfigError, match="'enable.idempotence' must be true or false"):
        ProducerConfig(BOOT, enable_idempotence=1)
    with pytest.raises(ConfigError, match="'partitioner' must be a callable"):
        ProducerConfig(BOOT, partitioner="by-key")


def test_out_of_range_names_the_setting_and_bound() -> None:
    with pytest.raises(ConfigError, match="'linger.ms' must be at least 0, got -1"):
        ProducerConfig(BOOT, linger_ms=-1)
    with pytest.raises(
        ConfigError, match="'max.in.flight.requests.per.connection' must be at least 1"
    ):
        ProducerConfig(BOOT, max_in_flight_requests_per_connection=0, enable_idempotence=False)
    with pytest.raises(ConfigError, match="'acks' must be one of all, -1, 0, 1; got 2"):
        ProducerConfig(BOOT, acks=2)
    with pytest.raises(ConfigError, match="'compression.type' must be one of none, gzip"):
        ProducerConfig(BOOT, compression_type="brotli")
    with pytest.raises(ConfigError, match="'compression.gzip.level' must be at most 9"):
        ProducerConfig(BOOT, compression_gzip_level=12)


def test_explicit_idempotence_conflicts_are_errors() -> None:
    with pytest.raises(ConfigError, match="'enable.idempotence' is true, but 'acks' must be all"):
        ProducerConfig(BOOT, enable_idempotence=True, acks=1)
    with pytest.raises(
        ConfigError, match="'max.in.flight.requests.per.connection' must be at most 5"
    ):
        ProducerConfig(BOOT, enable_idempotence=True, max_in_flight_requests_per_connection=6)
    with pytest.raises(ConfigError, match="'retries' must be greater than 0"):
        ProducerConfig(BOOT, enable_idempotence=True, retries=0)


def test_implicit_idempotence_is_switched_off_like_java(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="kclient.config"):
        config = ProducerConfig(BOOT, acks=1)
    assert config.enable_idempotence is False
    assert "idempotence disabled" in caplog.text
    assert (
        ProducerConfig(BOOT, max_in_flight_requests_per_connection=10).enable_idempotence is False
    )
    assert ProducerConfig(BOOT, acks="all").enable_idempotence is True


def test_transactional_id_makes_a_transactional_idempotent_producer() -> None:
    config = ProducerConfig(BOOT, **{"transactional.id": "orders-writer-1"})
    assert config.transactional_id == "orders-writer-1"
    assert config.transaction_timeout_ms == 60_000
    assert config.enable_idempotence is True
    assert ProducerConfig(BOOT).transactional_id is None
    timeout = ProducerConfig(BOOT, transactional_id="t", transaction_timeout_ms="5000")
    assert timeout.transaction_timeout_ms == 5000


def test_transactional_id_refuses_settings_that_contradict_idempotence() -> None:
    with pytest.raises(
        ConfigError, match="'transactional.id' is set.*'enable.idempotence' is false"
    ):
        ProducerConfig(BOOT, transactional_id="t", enable_idempotence=False)
    # Without transactions these only switch idempotence off; with them they are errors.
    with pytest.raises(ConfigError, match="'transactional.id' is set.*'acks' must be all"):
        ProducerConfig(BOOT, transactional_id="t", acks=1)
    with pytest.raises(ConfigError, match="'transactional.id' is set.*'retries' must be"):
        ProducerConfig(BOOT, transactional_id="t", retries=0)
    with pytest.raises(ConfigError, match="'transactional.id' must not be empty"):
        ProducerConfig(BOOT, transactional_id=" ")
    with pytest.raises(ConfigError, match="'transaction.timeout.ms' must be at least 1"):
        ProducerConfig(BOOT, transactional_id="t", transaction_timeout_ms=0)


def test_transaction_timeout_without_transactional_id_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="kclient.config"):
        ProducerConfig(BOOT, transaction_timeout_ms=1000)
    assert "'transaction.timeout.ms' has no effect without 'transactional.id'" in caplog.text


def test_delivery_timeout_must_cover_linger_and_request_timeout() -> None:
    with pytest.raises(ConfigError, match=r"'delivery.timeout.ms' \(1000\) must be at least"):
        ProducerConfig(BOOT, delivery_timeout_ms=1000, linger_ms=0, request_timeout_ms=5000)
    raised = ProducerConfig(BOOT, linger_ms=100, request_timeout_ms=200_000)
    assert raised.delivery_timeout_ms == 200_100


def test_a_batch_size_larger_than_buffer_memory_is_refused() -> None:
    # before, every send failed with RecordTooLargeError (no batch fits the buffer)
    with pytest.raises(ConfigError, match=r"'batch.size' \(67108864 bytes\) is larger than "):
        ProducerConfig({"bootstrap.servers": "h:1", "batch.size": 64 << 20})
    ProducerConfig({"bootstrap.servers": "h:1", "batch.size": 32 << 20})  # equal: it fits


def test_backoff_above_its_maximum_uses_the_maximum() -> None:
    config = ProducerConfig(BOOT, retry_backoff_ms=5000, retry_backoff_max_ms=2000)
    assert config.retry_backoff_ms == 2000


def test_unsupported_features_say_so() -> None:
    sasl = {"security.protocol": "SASL_SSL", "sasl.username": "a", "sasl.password": "b"}
    with pytest.raises(ConfigError, match="GSSAPI is Java's default; set 'sasl.mechanism'"):
        ProducerConfig(BOOT, **sasl)
    with pytest.raises(ConfigError, match="'security.protocol' is PLAINTEXT: set it to SASL_SSL"):
        ProducerConfig(BOOT, **{"sasl.oauthbearer.token.endpoint.url": "https://idp"})
    assert ProducerConfig(BOOT, **{"security.protocol": "PLAINTEXT"}).acks == -1


def test_same_setting_twice_is_an_error() -> None:
    with pytest.raises(ConfigError, match="'linger.ms' is given twice"):
        ProducerConfig({**BOOT, "linger.ms": 1}, linger_ms=2)


def test_config_is_read_only_and_reports_levels() -> None:
    config = ProducerConfig(BOOT, compression_type="lz4")
    with pytest.raises(AttributeError):
        config.linger_ms = 3  # type: ignore[misc]
    assert config.compression_lz4_level == 9
    assert config.compression_level() is None  # the codec's default
    assert (
        ProducerConfig(BOOT, compression_type="zstd", compression_zstd_level=7).compression_level()
        == 7
    )
    assert (
        ProducerConfig(BOOT, compression_type="gzip", compression_gzip_level=-1).compression_level()
        is None
    )
    assert ProducerConfig(BOOT).compression_level() is None
    assert ProducerConfig(BOOT).to_dict()["linger.ms"] == 5
    assert "linger.ms=9" in repr(ProducerConfig(BOOT, linger_ms=9))
