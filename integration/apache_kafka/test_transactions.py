"""kclient's transactions on Apache Kafka: 4.4 finalizes transaction version 2 (KIP-890:
EndTxn v5 bumps the epoch, partitions and offsets join without AddPartitionsToTxn and
AddOffsetsToTxn), 3.9 serves version 1. Commit, abort (records flushed before the abort
hidden from read_committed), offsets of a real consumer group committed with a
transaction, and fencing by a second producer; read back by the Java consumer and by
confluent-kafka."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from integration.apache_kafka.readback import (
    Sent,
    assert_read_back,
    confluent_read,
    request_versions,
    unique,
)
from kclient import (
    ConsumerGroupMetadata,
    KafkaProducer,
    OffsetAndMetadata,
    TopicPartition,
    errors,
)
from kclient.testing.apache_kafka import ApacheKafka


def _group_with_a_commit(kafka: ApacheKafka, source: str, group: str) -> None:
    """A real consumer group: a confluent-kafka consumer joins it, reads two records of
    ``source`` and commits offset 2."""
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 20,
        }
    )
    try:
        consumer.subscribe([source])
        read = []
        for _ in range(300):
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                read.append(msg)
                if len(read) == 2:
                    break
        assert len(read) == 2
        consumer.commit(message=read[-1], asynchronous=False)
    finally:
        consumer.close()


def test_commit_abort_and_offsets_of_a_real_group(apache_kafka: ApacheKafka) -> None:
    kafka = apache_kafka
    v2 = kafka.version.startswith("4.")
    level = kafka.finalized_features().get("transaction.version", 0)
    assert level == 2 if v2 else level < 2
    source, sink, group = unique("source"), unique("sink"), unique("group")
    kafka.create_topic(source, 1)
    kafka.create_topic(sink, 3)
    plain = [Sent(0, None, b"in-%d" % i) for i in range(5)]
    with KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers}) as producer:
        for r in plain:
            producer.send(source, r.value, partition=0)
    _group_with_a_commit(kafka, source, group)

    committed: list[Sent] = []
    settings = {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique("t")}
    with request_versions() as used, KafkaProducer(settings) as producer:
        producer.init_transactions(timeout=30)
        for n, outcome in enumerate(("commit", "abort", "offsets")):
            producer.begin_transaction()
            records = [
                Sent(i % 3, b"k%d" % i, b"%s-%d" % (outcome.encode(), i), (("n", b"%d" % n),))
                for i in range(4)
            ]
            for r in records:
                producer.send(sink, r.value, key=r.key, partition=r.partition, headers=r.headers)
            if outcome == "abort":
                producer.flush(timeout=30)  # written, then aborted
                producer.abort_transaction(timeout=30)
                continue
            if outcome == "offsets":
                producer.send_offsets_to_transaction(
                    {TopicPartition(source, 0): OffsetAndMetadata(5)},
                    ConsumerGroupMetadata(group),
                )
            producer.commit_transaction(timeout=30)
            committed += records

    if v2:  # transaction version 2: EndTxn v5, no AddPartitionsToTxn / AddOffsetsToTxn
        assert used["END_TXN"] == {5}
        assert "ADD_PARTITIONS_TO_TXN" not in used
        assert "ADD_OFFSETS_TO_TXN" not in used
        assert used["PRODUCE"] == {13}  # v12+ joins the partition; v13: topics by id
    else:
        assert max(used["END_TXN"]) <= 4
        assert used["ADD_PARTITIONS_TO_TXN"]
        assert used["ADD_OFFSETS_TO_TXN"]
        assert used["PRODUCE"] == {11}
    java = assert_read_back(kafka, {sink: (3, committed), source: (1, plain)}, group=group)
    assert java.committed == {(source, 0): 5}
    # the aborted records are in the log: read_uncommitted sees all twelve
    everything = confluent_read(kafka, {sink: (3, 12)}, isolation_level="read_uncommitted")
    values = {row[1] for rows in everything[sink].values() for row in rows}
    assert {b"abort-%d" % i for i in range(4)} <= values and len(values) == 12
    # the group resumes where the transaction left it
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": kafka.bootstrap_servers, "group.id": group}
    )
    try:
        (tp,) = consumer.committed([confluent_kafka.TopicPartition(source, 0)], timeout=30)
        assert tp.offset == 5
    finally:
        consumer.close()


def test_a_second_producer_fences_the_first(apache_kafka: ApacheKafka) -> None:
    kafka = apache_kafka
    topic = unique("fence")
    kafka.create_topic(topic, 3)
    settings = {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique("z")}
    zombie = KafkaProducer(settings)
    successor = KafkaProducer(settings)
    try:
        zombie.init_transactions(timeout=30)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie-open", partition=0)
        zombie.flush(timeout=30)
        successor.init_transactions(timeout=30)  # aborts the zombie's open transaction
        successor.begin_transaction()
        successor.send(topic, b"successor", partition=1)
        successor.commit_transaction(timeout=30)
        with pytest.raises((errors.ProducerFencedError, errors.TransactionRequiresAbortError)):
            zombie.send(topic, b"zombie-late", partition=2)
            zombie.commit_transaction(timeout=30)
        with pytest.raises(errors.ProducerFencedError):
            zombie.abort_transaction(timeout=30)
    finally:
        zombie.close(timeout=5)
        successor.close(timeout=5)
    assert_read_back(kafka, {topic: (3, [Sent(1, None, b"successor")])})


def test_a_transaction_timed_out_by_the_broker_is_aborted(apache_kafka: ApacheKafka) -> None:
    """Past ``transaction.timeout.ms`` the coordinator aborts the open transaction: its
    flushed records never reach read_committed and the late commit fails."""
    kafka = apache_kafka
    topic = unique("timeout")
    kafka.create_topic(topic, 1)
    settings = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "transactional.id": unique("slow"),
        "transaction.timeout.ms": 1000,
    }
    with KafkaProducer(settings) as producer:
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        producer.send(topic, b"too-slow", partition=0)
        producer.flush(timeout=30)
        time.sleep(2.5)  # the broker aborts it (checked every 0.5 s)
        # the broker's answer to the late EndTxn: with transaction version 2 the aborted
        # transaction's state (INVALID_TXN_STATE: the transaction must be aborted), with
        # version 1 the epoch (fenced)
        late = (
            errors.TransactionRequiresAbortError
            if kafka.version.startswith("4.")
            else errors.ProducerFencedError
        )
        with pytest.raises(late) as raised:
            producer.commit_transaction(timeout=30)
        if late is errors.TransactionRequiresAbortError:
            assert isinstance(raised.value.__cause__, errors.InvalidTxnStateError)
    uncommitted = confluent_read(kafka, {topic: (1, 1)}, isolation_level="read_uncommitted")
    assert [row[1] for row in uncommitted[topic][0]] == [b"too-slow"]
    assert_read_back(kafka, {topic: (1, [])})
