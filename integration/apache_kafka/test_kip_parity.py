"""Issue 33's parity items on Apache Kafka (4.4: transaction version 2; 3.9: version 1):
KIP-1050's transaction error classes (fencing by a second producer is
application-recoverable; a record the broker refuses inside a transaction is abortable and
``abort_transaction`` then works) and producer interceptors (a header added by
``on_send`` read back by the Java consumer and confluent-kafka; one acknowledgement per
record; a raising interceptor is logged and loses nothing)."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from integration.apache_kafka.readback import Sent, assert_read_back, unique
from integration.kip_parity import (
    Broken,
    Tagging,
    abort_after_a_refused_record,
    fence_then_commit_with_a_successor,
)
from kclient import KafkaProducer, errors
from kclient.testing.apache_kafka import ApacheKafka


def _topic_with_config(kafka: ApacheKafka, name: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    future = admin.create_topics([NewTopic(name, 1, 1, config=config)])[name]
    future.result(timeout=30)


def test_fencing_by_a_second_producer_is_application_recoverable(
    apache_kafka: ApacheKafka,
) -> None:
    kafka = apache_kafka
    topic = unique("kip1050-fence")
    kafka.create_topic(topic, 1)
    settings = {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique("f")}
    fence_then_commit_with_a_successor(settings, topic)
    assert_read_back(kafka, {topic: (1, [Sent(0, None, b"successor")])})


def test_a_record_the_broker_refuses_is_abortable_and_the_abort_works(
    apache_kafka: ApacheKafka,
) -> None:
    kafka = apache_kafka
    topic = unique("kip1050-refused")
    _topic_with_config(kafka, topic, {"max.message.bytes": "2000"})
    settings = {"bootstrap.servers": kafka.bootstrap_servers, "transactional.id": unique("a")}
    abort_after_a_refused_record(settings, topic)
    assert_read_back(kafka, {topic: (1, [Sent(0, None, b"small-committed")])})


def test_interceptors_add_headers_count_acknowledgements_and_survive_errors(
    apache_kafka: ApacheKafka, caplog: pytest.LogCaptureFixture
) -> None:
    kafka = apache_kafka
    topic = unique("interceptors")
    kafka.create_topic(topic, 2)
    tagging = Tagging()
    settings = {"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 5}
    with (
        caplog.at_level(logging.WARNING, "kclient.producer.interceptors"),
        KafkaProducer(settings, interceptors=[Broken(), tagging]) as producer,
    ):
        for i in range(50):
            producer.send(topic, b"v%d" % i, key=b"k%d" % i, partition=i % 2)
        producer.send_batch(topic, [b"b%d" % i for i in range(50)], partitions=[0] * 50)
        producer.flush(timeout=30)
    assert (tagging.delivered, tagging.failed, tagging.closed) == (100, 0, True)
    broke = [r.getMessage() for r in caplog.records if "Broken" in r.getMessage()]
    assert len(broke) == 2  # on_send and on_acknowledgement, once each
    origin = (("origin", b"kclient"),)
    expected = [Sent(i % 2, b"k%d" % i, b"v%d" % i, origin) for i in range(50)]
    expected += [Sent(0, None, b"b%d" % i, origin) for i in range(50)]
    assert_read_back(kafka, {topic: (2, expected)})


def test_a_transaction_the_broker_timed_out_is_abortable_with_transaction_version_2(
    apache_kafka: ApacheKafka,
) -> None:
    """Past ``transaction.timeout.ms`` the coordinator aborts the transaction. 4.4
    (transaction version 2) answers the late commit INVALID_TXN_STATE: abortable (as Java's
    since KAFKA-19177), and after ``abort_transaction`` the same producer goes on. 3.9
    answers PRODUCER_FENCED: application-recoverable, a new producer goes on."""
    kafka = apache_kafka
    v2 = kafka.version.startswith("4.")
    topic = unique("kip1050-timeout")
    kafka.create_topic(topic, 1)
    settings = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "transactional.id": unique("slow"),
        "transaction.timeout.ms": 1000,
    }
    producer = KafkaProducer(settings)
    try:
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        producer.send(topic, b"too-slow", partition=0)
        producer.flush(timeout=30)
        time.sleep(2.5)  # the broker aborts it (checked every 0.5 s)
        if v2:
            with pytest.raises(errors.AbortableTransactionError) as raised:
                producer.commit_transaction(timeout=30)
            assert isinstance(raised.value.__cause__, errors.InvalidTxnStateError)
            producer.abort_transaction(timeout=30)
        else:
            with pytest.raises(errors.ApplicationRecoverableError):
                producer.commit_transaction(timeout=30)
            producer.close(timeout=5)
            producer = KafkaProducer(settings)
            producer.init_transactions(timeout=30)
        producer.begin_transaction()
        producer.send(topic, b"in-time", partition=0)
        producer.commit_transaction(timeout=30)
    finally:
        producer.close(timeout=5)
    assert_read_back(kafka, {topic: (1, [Sent(0, None, b"in-time")])})
