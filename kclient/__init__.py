"""kclient: a Kafka producer for Python built like the Java producer. ::

    from kclient import KafkaProducer
    with KafkaProducer({"bootstrap.servers": "127.0.0.1:9092"}) as producer:
        metadata = producer.send("events", value=b"hello", key=b"k").result(timeout=10)

Public API: ``KafkaProducer``, ``ProducerConfig``, ``RecordMetadata``,
``FutureRecordMetadata``, ``ProducerRecord``, ``SendBatchResult``, ``ProducerInterceptor``
(the base class of the ``interceptors`` setting's objects), the types in its
signatures (``Header``, ``Callback``, ``TopicPartition``, ``PartitionInfo``), the
``errors`` module, and for
``send_offsets_to_transaction``: ``OffsetAndMetadata`` and ``ConsumerGroupMetadata``.
Import them from here: the modules they are defined in are internal and may move.
``__version__`` is the installed version (the distribution is ``kclient-kafka`` on PyPI).
"""

from __future__ import annotations

# first: with KCLIENT_PURE_PYTHON set it makes the compiled modules load from source
from kclient import (
    _compiled,  # noqa: F401
    errors,
)
from kclient.config import ProducerConfig
from kclient.errors import KafkaError
from kclient.network.cluster import PartitionInfo, TopicPartition
from kclient.producer import KafkaProducer
from kclient.producer.interceptors import ProducerInterceptor, ProducerRecord
from kclient.sender.batch import Callback, Header
from kclient.sender.bulk import SendBatchResult
from kclient.sender.future import FutureRecordMetadata, RecordMetadata
from kclient.sender.offsets import ConsumerGroupMetadata, OffsetAndMetadata

#: The version of kclient (distribution ``kclient-kafka``); pyproject.toml reads it here.
__version__ = "0.1.0"


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
    "ProducerInterceptor",
    "ProducerRecord",
    "RecordMetadata",
    "SendBatchResult",
    "TopicPartition",
    "__version__",
    "errors",
]
