"""A topic the cluster does not have, or refuses, on the embedded broker (issue 31, items 3
and 4): while ``send`` waits for it the cluster's answer is warned of once, not at every
refresh (before: about 10 lines a second), and once the send failed the producer stops
asking for the topic (before: a refresh and a warning every ``retry.backoff.ms`` until
``metadata.max.idle.ms``, 5 minutes)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest

from kclient import KafkaProducer
from kclient.broker import EmbeddedBroker
from kclient.errors import KafkaError, KafkaTimeoutError


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(auto_create_topics=False) as b:
        b.create_topic("orders", partitions=1)
        yield b


def _about(caplog: pytest.LogCaptureFixture, topic: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and topic in r.getMessage()
    ]


@pytest.mark.parametrize("topic", ["nope", "bad name!"])
def test_a_missing_topic_is_warned_of_once_and_then_forgotten(
    broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture, topic: str
) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=2_000)
    try:
        producer.send("orders", b"warm up").get(10)
        with caplog.at_level(logging.WARNING, logger="kclient"):
            with pytest.raises(KafkaError, match="UNKNOWN_TOPIC_OR_PARTITION|INVALID_TOPIC"):
                producer.send(topic, b"v")
            during = _about(caplog, topic)
            caplog.clear()
            time.sleep(1.5)  # 15 refreshes at retry.backoff.ms, before
            after = _about(caplog, topic)
        assert len(during) <= 1, during
        assert after == []
        assert producer.send("orders", b"still works").get(10).offset == 1
    finally:
        producer.close()


def test_the_timeout_still_names_the_cluster_s_answer(broker: EmbeddedBroker) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, max_block_ms=500)
    try:
        with pytest.raises(KafkaTimeoutError, match="the cluster says.*UNKNOWN_TOPIC"):
            producer.send("nope", b"v")
        with pytest.raises(KafkaTimeoutError, match="the cluster says.*UNKNOWN_TOPIC"):
            producer.send("nope", b"v")  # asked for again after it was forgotten
    finally:
        producer.close()
