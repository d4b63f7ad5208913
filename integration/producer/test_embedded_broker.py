"""kclient → one embedded broker whose ``message.max.bytes`` is below ``batch.size``."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator

import pytest

from kclient import KafkaProducer
from kclient.broker import EmbeddedBroker
from kclient.errors import RecordTooLargeError

MESSAGE_MAX_BYTES = 2_000
_topics = itertools.count()


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(message_max_bytes=MESSAGE_MAX_BYTES) as embedded:
        yield embedded


def _topic(broker: EmbeddedBroker) -> str:
    name = f"small-messages-{next(_topics)}"
    broker.create_topic(name, 1)
    return name


@pytest.mark.parametrize("idempotence", [True, False])
def test_records_that_fit_are_delivered_and_the_oversize_one_fails_at_once(
    broker: EmbeddedBroker, idempotence: bool
) -> None:
    topic = _topic(broker)
    values = [b"a" * 800, b"b" * 5_000, b"c" * 800, b"d" * 800]
    with KafkaProducer(
        bootstrap_servers=broker.bootstrap_servers,
        linger_ms=60_000,  # one batch of all four (batch.size is 16 KiB), sent by flush
        enable_idempotence=idempotence,
    ) as producer:
        start = time.monotonic()
        futures = [producer.send(topic, value, partition=0) for value in values]
        producer.flush(30)
        elapsed_s = time.monotonic() - start
        big = futures.pop(1)
        offsets = [f.result(0).offset for f in futures]
        error = big.exception(0)
    assert elapsed_s < 10  # not delivery.timeout.ms (120 s)
    assert isinstance(error, RecordTooLargeError)
    assert "message.max.bytes" in str(error)
    assert f"({MESSAGE_MAX_BYTES})" in str(error)
    assert offsets == sorted(offsets)
    stored = [r.value for r in broker.read_records(topic)]
    assert stored == [values[0], values[2], values[3]]


def test_three_records_each_too_large_fail_at_once(broker: EmbeddedBroker) -> None:
    topic = _topic(broker)
    with KafkaProducer(bootstrap_servers=broker.bootstrap_servers, linger_ms=60_000) as producer:
        start = time.monotonic()
        futures = [producer.send(topic, bytes(5_000), partition=0) for _ in range(3)]
        producer.flush(30)
        elapsed_s = time.monotonic() - start
        failures = [f.exception(0) for f in futures]
    assert elapsed_s < 10
    assert all(isinstance(exc, RecordTooLargeError) for exc in failures)
    assert broker.read_records(topic) == []
