"""Issue 33's parity items on the embedded broker (``message.max.bytes`` 2000), read back
by confluent-kafka: KIP-1050's transaction error classes (fencing by a second producer is
application-recoverable; a record the broker refuses inside a transaction is abortable and
``abort_transaction`` then works) and producer interceptors (a header added by
``on_send``; one acknowledgement per record; a raising interceptor is logged and loses
nothing). The same on Apache Kafka: ``integration/apache_kafka/test_kip_parity.py``."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator

import pytest

from integration.kip_parity import (
    Broken,
    Tagging,
    abort_after_a_refused_record,
    fence_then_commit_with_a_successor,
)
from integration.producer.verify import consume_all
from kclient import KafkaProducer, errors
from kclient.broker import EmbeddedBroker

COMMITTED = {"isolation.level": "read_committed"}
_topics = itertools.count()


@pytest.fixture(scope="module")
def broker() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(message_max_bytes=2_000) as embedded:
        yield embedded


def _topic(broker: EmbeddedBroker, partitions: int = 1) -> str:
    name = f"kip-parity-{next(_topics)}"
    broker.create_topic(name, partitions)
    return name


def test_fencing_by_a_second_producer_is_application_recoverable(broker: EmbeddedBroker) -> None:
    topic = _topic(broker)
    settings = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"{topic}-t"}
    fence_then_commit_with_a_successor(settings, topic)
    read = consume_all(broker.bootstrap_servers, topic, 1, 1, 30, settings=COMMITTED)
    assert [c.value for c in read] == [b"successor"]


def test_a_record_the_broker_refuses_is_abortable_and_the_abort_works(
    broker: EmbeddedBroker,
) -> None:
    topic = _topic(broker)
    settings = {"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"{topic}-t"}
    abort_after_a_refused_record(settings, topic)
    read = consume_all(broker.bootstrap_servers, topic, 1, 1, 30, settings=COMMITTED)
    assert [c.value for c in read] == [b"small-committed"]


def test_a_transaction_the_broker_timed_out_is_handled_by_its_class(
    broker: EmbeddedBroker,
) -> None:
    """The embedded coordinator answers the late commit PRODUCER_FENCED (Apache Kafka 4.4:
    INVALID_TXN_STATE, abortable: ``integration/apache_kafka/test_kip_parity.py``); either
    way the class says how to go on, as the loop of docs/guide/transactions.md does."""
    topic = _topic(broker)
    settings = {
        "bootstrap.servers": broker.bootstrap_servers,
        "transactional.id": f"{topic}-t",
        "transaction.timeout.ms": 1000,
    }
    producer = KafkaProducer(settings)
    try:
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        producer.send(topic, b"too-slow", partition=0)
        producer.flush(timeout=30)
        time.sleep(2.5)  # the coordinator aborts it
        try:
            producer.commit_transaction(timeout=30)
        except errors.AbortableTransactionError:
            producer.abort_transaction(timeout=30)
        except errors.ApplicationRecoverableError:
            producer.close(timeout=5)
            producer = KafkaProducer(settings)
            producer.init_transactions(timeout=30)
        else:
            raise AssertionError("the commit of a timed-out transaction succeeded")
        producer.begin_transaction()
        producer.send(topic, b"in-time", partition=0)
        producer.commit_transaction(timeout=30)
    finally:
        producer.close(timeout=5)
    read = consume_all(broker.bootstrap_servers, topic, 1, 1, 30, settings=COMMITTED)
    assert [c.value for c in read] == [b"in-time"]


def test_interceptors_add_headers_count_acknowledgements_and_survive_errors(
    broker: EmbeddedBroker, caplog: pytest.LogCaptureFixture
) -> None:
    topic = _topic(broker, 2)
    tagging = Tagging()
    with (
        caplog.at_level(logging.WARNING, "kclient.producer.interceptors"),
        KafkaProducer(
            {"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5},
            interceptors=[Broken(), tagging],
        ) as producer,
    ):
        for i in range(50):
            producer.send(topic, b"v%d" % i, partition=i % 2)
        producer.send_batch(topic, [b"b%d" % i for i in range(50)], partitions=[0] * 50)
        with pytest.raises(errors.RecordTooLargeError):  # refused by send: acknowledged
            producer.send(topic, b"x" * 2_000_000)
        big = producer.send(topic, b"x" * 5_000, partition=1)  # refused by the broker
        assert isinstance(big.exception(30), errors.RecordTooLargeError)
        producer.flush(timeout=30)
    assert (tagging.delivered, tagging.failed, tagging.closed) == (100, 2, True)
    broke = [r.getMessage() for r in caplog.records if "Broken" in r.getMessage()]
    assert len(broke) == 2  # on_send and on_acknowledgement, once each
    read = consume_all(broker.bootstrap_servers, topic, 2, 100, 30)
    assert sorted(c.value or b"" for c in read) == sorted(
        [b"v%d" % i for i in range(50)] + [b"b%d" % i for i in range(50)]
    )
    assert {tuple(c.headers) for c in read} == {(("origin", b"kclient"),)}
