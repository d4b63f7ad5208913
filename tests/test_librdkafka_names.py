"""A confluent-kafka producer's config works as it is: librdkafka's names are kclient's
settings (with their units converted), or a ``ConfigError`` naming what to set instead, and
``statistics.interval.ms`` with a ``stats_cb`` gets the producer's statistics as JSON."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from kclient import KafkaProducer, ProducerConfig
from kclient.errors import ConfigError
from kclient.stats import statistics_json
from tests.test_producer import LiveMockClient

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def test_a_confluent_kafka_producer_config_is_taken_with_its_units_converted() -> None:
    config = ProducerConfig(
        {
            **BOOT,
            "queue.buffering.max.ms": 20,
            "queue.buffering.max.kbytes": 65_536,
            "message.timeout.ms": 300_000,
            "compression.codec": "lz4",
            "socket.timeout.ms": "45000",
            "message.max.bytes": 2_000_000,
            "request.required.acks": 1,
            "message.send.max.retries": 3,
            "max.in.flight": 2,
            "socket.send.buffer.bytes": 0,
        }
    )
    assert config.linger_ms == 20
    assert config.buffer_memory == 64 * 1024 * 1024  # KiB -> bytes
    assert config.delivery_timeout_ms == 300_000
    assert config.compression_type == "lz4"
    assert config.request_timeout_ms == 45_000
    assert config.max_request_size == 2_000_000
    assert (config.acks, config.retries) == (1, 3)
    assert config.max_in_flight_requests_per_connection == 2
    assert config.send_buffer_bytes == -1  # librdkafka's 0: the system's default
    assert ProducerConfig({**BOOT, "message.timeout.ms": 0}).delivery_timeout_ms == 2**31 - 1
    assert ProducerConfig(BOOT, queue_buffering_max_ms=7).linger_ms == 7


@pytest.mark.parametrize(
    ("name", "value", "names"),
    [
        ("queue.buffering.max.messages", 100_000, "'buffer.memory'"),
        ("batch.num.messages", 10_000, "'batch.size'"),
        ("compression.level", 3, "'compression.zstd.level'"),
        ("on_delivery", print, "callback=fn"),
        ("dr_msg_cb", print, "callback=fn"),
        ("debug", "all", "logging.getLogger('kclient')"),
    ],
)
def test_librdkafka_names_kclient_has_no_setting_for_say_what_to_set(
    name: str, value: object, names: str
) -> None:
    with pytest.raises(ConfigError, match="librdkafka's") as caught:
        ProducerConfig({**BOOT, name: value})
    assert names in str(caught.value)


def test_librdkafkas_java_compatible_partitioner_is_the_built_in_one() -> None:
    assert ProducerConfig({**BOOT, "partitioner": "murmur2_random"}).partitioner is None
    with pytest.raises(ConfigError, match="'fnv1a' is librdkafka's partitioner.*murmur2_random"):
        ProducerConfig({**BOOT, "partitioner": "fnv1a"})


def test_a_mistyped_name_gets_the_closest_of_kclients_and_librdkafkas() -> None:
    with pytest.raises(ConfigError, match=r"did you mean 'queue.buffering.max.ms' \(librdkafka"):
        ProducerConfig({**BOOT, "queue.buffering.max.msec": 5})
    with pytest.raises(ConfigError, match="did you mean 'batch.num.messages'.*'batch.size'"):
        ProducerConfig({**BOOT, "batch.num.message": 5})


def test_a_setting_under_its_java_and_its_librdkafka_name_is_given_twice() -> None:
    with pytest.raises(ConfigError, match="'linger.ms' is given twice"):
        ProducerConfig({**BOOT, "linger.ms": 5, "queue.buffering.max.ms": 5})
    with pytest.raises(ConfigError, match="'queue.buffering.max.kbytes' must be an integer"):
        ProducerConfig({**BOOT, "queue.buffering.max.kbytes": "lots"})


def test_statistics_interval_and_stats_cb_go_together() -> None:
    with pytest.raises(ConfigError, match="'statistics.interval.ms' and 'stats_cb'"):
        ProducerConfig({**BOOT, "statistics.interval.ms": 1000})
    with pytest.raises(ConfigError, match="'statistics.interval.ms' and 'stats_cb'"):
        ProducerConfig({**BOOT, "stats_cb": print})
    with pytest.raises(ConfigError, match="'stats_cb' must be a callable"):
        ProducerConfig({**BOOT, "statistics.interval.ms": 1000, "stats_cb": "print"})


def test_stats_cb_gets_the_producers_statistics_until_it_closes() -> None:
    got: list[dict[str, Any]] = []
    two = threading.Event()

    def stats_cb(text: str) -> None:
        got.append(json.loads(text))
        if len(got) >= 2:
            two.set()

    producer = KafkaProducer(
        {**BOOT, "statistics.interval.ms": 1, "stats_cb": stats_cb, "client.id": "p1"},
        kafka_client=LiveMockClient(),
    )
    producer.send("t", b"x").result(10)
    assert two.wait(10)
    producer.close()
    reporter = producer._statistics
    assert reporter is not None
    reporter._thread.join(10)
    assert not reporter._thread.is_alive()  # ended with the producer
    last = got[-1]
    assert (last["name"], last["client_id"], last["type"]) == ("p1", "p1", "producer")
    assert last["msg_size_max"] == 32 * 1024 * 1024
    assert "record-send-rate" in last["metrics"]


def test_the_statistics_are_librdkafkas_top_level_fields_over_the_metrics() -> None:
    text = statistics_json(
        {"buffer-total-bytes": 1000.0, "buffer-available-bytes": 600.0}, "c", started_ns=0
    )
    stats = json.loads(text)
    assert (stats["msg_size"], stats["msg_size_max"]) == (400, 1000)
    assert stats["ts"] >= stats["age"] >= 0
