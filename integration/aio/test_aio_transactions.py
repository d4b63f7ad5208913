"""kclient.aio transactions against real brokers: aiokafka's transactional producer
example with only the import changed, on the embedded broker and on tansu, read back by
confluent-kafka with ``isolation.level=read_committed`` (committed records once, aborted
ones never; offsets sent to a transaction are the group's once it commits).

tansu writes COMMIT/ABORT markers but does not hide aborted records from read_committed
readers (see ``integration/producer/txn_log.py``): there the abort is checked on its
marker and on the read_committed view the markers give.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import confluent_kafka

from integration.aio.test_aio_producer import read_values
from integration.peers import run_tansu
from integration.producer.txn_log import ABORT, COMMIT, markers, read_committed, read_log
from kclient import TopicPartition
from kclient.aio import AIOKafkaProducer
from kclient.broker import EmbeddedBroker

COMMITTED = {"isolation.level": "read_committed"}


async def aiokafka_transaction_example(bootstrap: str, topic: str, transactional_id: str) -> Any:
    """aiokafka's transactional producer example (its docs), with a committed transaction
    before and after the aborted one; returns the aborted record's metadata."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed first")
        aborted = None
        try:
            async with producer.transaction():
                aborted = await producer.send_and_wait(topic, b"aborted")
                raise ValueError("abort this one")
        except ValueError:
            pass
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed second")
            await producer.send_offsets_to_transaction({TopicPartition("input", 0): 42}, "workers")
    finally:
        await producer.stop()
    return aborted


def test_the_aiokafka_transaction_example_on_the_embedded_broker(
    kafka_broker: EmbeddedBroker,
) -> None:
    bootstrap = kafka_broker.bootstrap_servers
    kafka_broker.create_topic("txn-out", partitions=1)
    kafka_broker.create_topic("input", partitions=1)
    aborted = asyncio.run(aiokafka_transaction_example(bootstrap, "txn-out", "aio-txn"))
    assert (
        aborted is not None and aborted.offset == 2
    )  # written: after 'committed first' and its marker
    values = read_values(bootstrap, "txn-out", 1, 2, **COMMITTED)
    assert values == [b"committed first", b"committed second"]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "workers"})
    try:
        [committed] = consumer.committed([confluent_kafka.TopicPartition("input", 0)], 10)
    finally:
        consumer.close()
    assert committed.offset == 42


def test_the_aiokafka_transaction_example_on_tansu() -> None:
    with run_tansu() as tansu:
        tansu.create_topic("txn-out", 1)
        tansu.create_topic("input", 1)
        bootstrap = tansu.bootstrap_servers
        asyncio.run(aiokafka_transaction_example(bootstrap, "txn-out", f"aio-{uuid.uuid4()}"))
        log = read_log(bootstrap, "txn-out", 0)
        assert markers(log) == [COMMIT, ABORT, COMMIT]
        assert read_committed(log) == [b"committed first", b"committed second"]
        values = read_values(bootstrap, "txn-out", 1, 1, **COMMITTED)
        assert values[0] == b"committed first"
