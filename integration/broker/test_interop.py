"""Independent clients against the embedded broker: every codec, keys, null keys, headers.

What each client produces is consumed back (by the same family of client and by the
broker's own reader) and must be byte-identical.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest

from integration.broker import clients
from kclient.broker import EmbeddedBroker

_topics = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker() as b:
        yield b


def new_topic(broker: EmbeddedBroker, prefix: str) -> str:
    name = f"{prefix}-{next(_topics)}"
    broker.create_topic(name, partitions=1)
    return name


def stored(broker: EmbeddedBroker, topic: str) -> list[clients.Rec]:
    return [(r.key, r.value, list(r.headers)) for r in broker.read_records(topic, 0)]


def codec_of_batches(broker: EmbeddedBroker, topic: str) -> set[str]:
    return {b.compression.name.lower() for b in broker.read_batches(topic, 0)}


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("codec", clients.CODECS)
def test_confluent_kafka_producer_and_consumer(
    broker: EmbeddedBroker, codec: str, idempotent: bool
) -> None:
    topic = new_topic(broker, f"confluent-{codec}")
    records = clients.dataset(tag=codec)
    offsets = clients.confluent_produce(broker.bootstrap_servers, topic, records, codec, idempotent)
    assert sorted(offsets) == list(range(len(records)))
    assert stored(broker, topic) == records
    assert codec_of_batches(broker, topic) == {codec}
    assert clients.confluent_consume(broker.bootstrap_servers, topic, len(records)) == records
    if idempotent:
        assert all(b.producer_id >= 0 for b in broker.read_batches(topic, 0))


# kafka-python 3.0 loads its schemas with the deprecated importlib.resources.read_text
@pytest.mark.filterwarnings("ignore:(read_text|open_text) is deprecated:DeprecationWarning")
@pytest.mark.parametrize("codec", clients.CODECS)
def test_kafka_python_producer_and_consumer(broker: EmbeddedBroker, codec: str) -> None:
    topic = new_topic(broker, f"kafka-python-{codec}")
    records = clients.dataset(tag=codec)
    clients.kafka_python_produce(broker.bootstrap_servers, topic, records, codec)
    assert stored(broker, topic) == records
    assert codec_of_batches(broker, topic) == {codec}
    assert clients.kafka_python_consume(broker.bootstrap_servers, topic, len(records)) == records


@pytest.mark.parametrize("codec", clients.CODECS)
def test_aiokafka_producer(broker: EmbeddedBroker, codec: str) -> None:
    topic = new_topic(broker, f"aiokafka-{codec}")
    records = clients.dataset(tag=codec)
    clients.aiokafka_produce(broker.bootstrap_servers, topic, records, codec)
    assert stored(broker, topic) == records
    assert codec_of_batches(broker, topic) == {codec}
    assert clients.confluent_consume(broker.bootstrap_servers, topic, len(records)) == records


@pytest.mark.parametrize("new_librdkafka", [False, True], ids=["debian", "wheel-librdkafka"])
@pytest.mark.parametrize("codec", clients.CODECS)
def test_kcat_produce_and_consume(broker: EmbeddedBroker, codec: str, new_librdkafka: bool) -> None:
    version = clients.kcat_librdkafka_version(new_librdkafka)
    assert (version == "2.0.2") != new_librdkafka, version  # Debian's, or the wheel's newer one
    topic = new_topic(broker, f"kcat-{codec}")
    records = clients.text_dataset(tag=codec)
    clients.kcat_produce(broker.bootstrap_servers, topic, records, codec, new_librdkafka)
    assert stored(broker, topic) == records
    assert codec_of_batches(broker, topic) == {codec}
    consumed = clients.kcat_consume(broker.bootstrap_servers, topic, len(records), new_librdkafka)
    assert consumed == records
