"""The pytest fixtures kclient ships (``kclient.testing.pytest_plugin``), used as a user would."""

from __future__ import annotations

import confluent_kafka
import pytest

from kclient.broker import EmbeddedBroker, EmbeddedCluster


def test_kafka_broker_fixture(kafka_broker: EmbeddedBroker, kafka_bootstrap_servers: str) -> None:
    assert kafka_bootstrap_servers == kafka_broker.bootstrap_servers
    kafka_broker.create_topic("orders", partitions=2)
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_bootstrap_servers})
    producer.produce("orders", b"o-1", key=b"k", partition=1)
    assert producer.flush(10) == 0
    (record,) = kafka_broker.read_records("orders", 1)
    assert (record.offset, record.key, record.value) == (0, b"k", b"o-1")
    assert kafka_broker.read_records("orders", 0) == []


@pytest.mark.embedded_kafka(num_partitions=5, auto_create_topics=True)
def test_marker_configures_the_broker(kafka_broker: EmbeddedBroker) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce("auto-five", b"x")
    assert producer.flush(10) == 0
    assert kafka_broker.topics() == {"auto-five": 5}


@pytest.mark.embedded_kafka(brokers=2)
def test_kafka_cluster_fixture(kafka_cluster: EmbeddedCluster) -> None:
    assert kafka_cluster.broker_ids == [0, 1]
    assert len(kafka_cluster.bootstrap_servers.split(",")) == 2
    kafka_cluster.create_topic("spread", partitions=2)
    assert {kafka_cluster.leader("spread", p) for p in range(2)} == {0, 1}
    kafka_cluster.stop_broker(0)
    assert kafka_cluster.bootstrap_servers.count(",") == 0
    assert {kafka_cluster.leader("spread", p) for p in range(2)} == {1}
    kafka_cluster.start_broker(0)
    assert {kafka_cluster.leader("spread", p) for p in range(2)} == {0, 1}


def test_session_broker_is_shared(kafka_broker_session: EmbeddedBroker) -> None:
    kafka_broker_session.create_topic("session-topic", 1)
    assert "session-topic" in kafka_broker_session.topics()


def test_close_leaves_no_broker_thread_behind() -> None:
    import threading
    import time

    def broker_threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate() if t.name.startswith("kclient-broker")}

    before = broker_threads()
    cluster = EmbeddedCluster(2, num_network_threads=2, num_io_threads=2).start()
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers})
    producer.produce("t", b"x")
    assert producer.flush(10) == 0
    assert len(broker_threads() - before) == 2 * (1 + 2 + 2) + 1  # + fetch reaper
    snapshot = cluster.metrics()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not any("Produce" in s.requests for s in snapshot):
        time.sleep(0.01)
        snapshot = cluster.metrics()
    produce = [s.requests["Produce"] for s in snapshot if "Produce" in s.requests]
    assert produce and produce[0].requests == 1 and produce[0].total_time_ms.count == 1
    started = time.monotonic()
    cluster.close()
    assert time.monotonic() - started < 5
    assert broker_threads() - before == set()


def test_a_group_consumer_against_the_fixture(kafka_broker: EmbeddedBroker) -> None:
    """What a user's consumer test looks like (the README's example)."""
    producer = confluent_kafka.Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    producer.produce("payments", b"paid-1")
    assert producer.flush(10) == 0
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka_broker.bootstrap_servers,
            "group.id": "billing",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe(["payments"])
    try:
        msg = consumer.poll(5.0)
        assert msg is not None and msg.error() is None
        assert msg.value() == b"paid-1"
        consumer.commit(msg, asynchronous=False)
    finally:
        consumer.close()
    assert kafka_broker.committed_offsets("billing") == {("payments", 0): 1}
