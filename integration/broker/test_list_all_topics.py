"""Listing every topic: the all-topics Metadata request of librdkafka 2.16 (the wheel's)
carries bytes after its body, which Kafka's brokers ignore; so must ours."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from integration.broker.clients import kcat
from kclient.broker import EmbeddedBroker


@pytest.fixture(scope="module")
def broker() -> EmbeddedBroker:
    with EmbeddedBroker() as embedded:
        embedded.create_topic("first", 2)
        embedded.create_topic("second", 1)
        yield embedded


def test_confluent_admin_lists_every_topic(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    topics = admin.list_topics(timeout=10).topics
    assert {"first", "second"} <= set(topics)
    assert len(topics["first"].partitions) == 2


@pytest.mark.parametrize("new_librdkafka", [False, True], ids=["debian", "wheel-librdkafka"])
def test_kcat_lists_every_topic(broker: EmbeddedBroker, new_librdkafka: bool) -> None:
    out = kcat(["-L", "-b", broker.bootstrap_servers, "-m", "10"], new_librdkafka).decode()
    assert 'topic "first" with 2 partitions' in out
    assert 'topic "second" with 1 partitions' in out
