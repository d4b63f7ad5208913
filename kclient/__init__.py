"""kclient: a Kafka producer for Python built like the Java producer.

    from kclient import KafkaProducer
    with KafkaProducer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
        metadata = producer.send("events", value=b"hello", key=b"k").result(timeout=10)

Public API: ``KafkaProducer``, ``ProducerConfig``, ``RecordMetadata``,
``FutureRecordMetadata``, ``ProducerRecord`` and the ``errors`` module.
"""

from __future__ import annotations

from typing import NamedTuple

from kclient import errors
from kclient.config import ProducerConfig
from kclient.errors import KafkaError
from kclient.producer import KafkaProducer
from kclient.sender.batch import Header
from kclient.sender.future import FutureRecordMetadata, RecordMetadata


class ProducerRecord(NamedTuple):
    """A record to send, as a value (Java's ``ProducerRecord``):
    ``producer.send(**record._asdict())``."""

    topic: str
    value: object = None
    key: object = None
    headers: list[Header] | None = None
    partition: int | None = None
    timestamp_ms: int | None = None


__all__ = [
    "FutureRecordMetadata",
    "KafkaError",
    "KafkaProducer",
    "ProducerConfig",
    "ProducerRecord",
    "RecordMetadata",
    "errors",
]
