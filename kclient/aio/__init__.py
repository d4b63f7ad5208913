"""kclient.aio: an asyncio producer with aiokafka's ``AIOKafkaProducer`` surface.

    from kclient.aio import AIOKafkaProducer

    async with AIOKafkaProducer(bootstrap_servers="127.0.0.1:9092") as producer:
        metadata = await producer.send_and_wait("events", b"hello", key=b"k")

What aiokafka users import from ``aiokafka`` that a producer needs is here too:
``TopicPartition`` and ``OffsetAndMetadata`` (for ``send_offsets_to_transaction``), the
``RecordMetadata`` that ``send_and_wait`` returns (with aiokafka's ``topic_partition``,
``timestamp_type`` and ``log_start_offset``), and ``kclient.aio.errors``, aiokafka's error
names over kclient's error classes (``except kclient.aio.errors.KafkaTimeoutError``).

Modules: ``producer`` (``AIOKafkaProducer``), ``config`` (aiokafka's keywords →
kclient settings), ``errors`` (aiokafka's error names), ``completions`` (``send``'s
futures, settled once per batch), ``_future`` (C: the ``RecordFuture`` they are, the
per-batch settle, ``send``'s common case), ``threaded`` (the futures with the Sender on a
thread of its own), ``batch`` (``create_batch``/``send_batch``), ``transactions``
(``transaction()`` and awaiting the ``TransactionManager``), ``loop_sender`` (the
producer's Sender driven by the event loop) and ``loop_selector`` (socket readiness from
the event loop, for ``KSelector``). Everything runs on the event loop that called
``start()``.
"""

from kclient.aio import errors
from kclient.aio.batch import BatchBuilder
from kclient.aio.producer import AIOKafkaProducer
from kclient.network.cluster import TopicPartition
from kclient.sender.future import RecordMetadata
from kclient.sender.offsets import ConsumerGroupMetadata, OffsetAndMetadata

__all__ = [
    "AIOKafkaProducer",
    "BatchBuilder",
    "ConsumerGroupMetadata",
    "OffsetAndMetadata",
    "RecordMetadata",
    "TopicPartition",
    "errors",
]
