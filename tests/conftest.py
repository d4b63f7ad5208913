"""Fixtures shared by the unit tests of ``KafkaProducer``'s caller side: a producer
(linger 0) over ``LiveMockClient``, which answers like a broker (no sockets)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kclient.producer import KafkaProducer
from tests.test_producer import LiveMockClient


@pytest.fixture
def client() -> LiveMockClient:
    return LiveMockClient()


@pytest.fixture
def producer(client: LiveMockClient) -> Iterator[KafkaProducer]:
    with KafkaProducer(bootstrap_servers="127.0.0.1:9092", linger_ms=0, kafka_client=client) as p:
        yield p
