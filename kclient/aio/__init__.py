"""kclient.aio: an asyncio producer with aiokafka's ``AIOKafkaProducer`` surface.

    from kclient.aio import AIOKafkaProducer

    async with AIOKafkaProducer(bootstrap_servers="127.0.0.1:9092") as producer:
        metadata = await producer.send_and_wait("events", b"hello", key=b"k")

Modules: ``producer`` (``AIOKafkaProducer``), ``config`` (aiokafka's keywords →
kclient settings), ``completions`` (``send``'s futures, settled once per batch),
``_future`` (C: the ``RecordFuture`` they are, the per-batch settle, ``send``'s common
case), ``threaded`` (the futures with the Sender on a thread of its own), ``batch``
(``create_batch``/``send_batch``), ``transactions`` (``transaction()`` and awaiting the
``TransactionManager``), ``loop_sender`` (the producer's Sender driven by the event loop)
and ``loop_selector`` (socket readiness from the event loop, for ``KSelector``).
Everything runs on the event loop that called ``start()``.
"""

from kclient.aio.batch import BatchBuilder
from kclient.aio.producer import AIOKafkaProducer

__all__ = ["AIOKafkaProducer", "BatchBuilder"]
