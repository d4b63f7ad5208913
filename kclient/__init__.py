"""kclient: a Kafka producer for Python built like the Java producer. ::

    from kclient import KafkaProducer
    with KafkaProducer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
        metadata = producer.send("events", value=b"hello", key=b"k").result(timeout=10)

Public API: ``KafkaProducer``, ``ProducerConfig``, ``RecordMetadata``,
``FutureRecordMetadata``, ``ProducerRecord``, ``SendBatchResult``, the types in its
signatures (``Header``, ``Callback``, ``TopicPartition``, ``PartitionInfo``), the
``errors`` module, and for
``send_offsets_to_transaction``: ``OffsetAndMetadata`` and ``ConsumerGroupMetadata``.
Import them from here: the modules they are defined in are internal and may move.
``__version__`` is the installed version (the distribution is ``kclient-kafka`` on PyPI).
"""

from __future__ import annotations

from typing import NamedTuple

# first: with KCLIENT_PURE_PYTHON set it makes the compiled modules load from source
from kclient import (
    _compiled,  # noqa: F401
    errors,
)
from kclient.config import ProducerConfig
from kclient.errors import KafkaError
from kclient.network.cluster import PartitionInfo, TopicPartition
from kclient.producer import KafkaProducer
from kclient.sender.batch import Callback, Header
from kclient.sender.bulk import SendBatchResult
from kclient.sender.future import FutureRecordMetadata, RecordMetadata
from kclient.sender.offsets import ConsumerGroupMetadata, OffsetAndMetadata

#: The version of kclient (distribution ``kclient-kafka``); pyproject.toml reads it here.
__version__ = "0.1.0"


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
    "Callback",
    "ConsumerGroupMetadata",
    "FutureRecordMetadata",
    "Header",
    "KafkaError",
    "KafkaProducer",
    "OffsetAndMetadata",
    "PartitionInfo",
    "ProducerConfig",
    "ProducerRecord",
    "RecordMetadata",
    "SendBatchResult",
    "TopicPartition",
    "__version__",
    "errors",
]
