"""kclient's transactional producer → tansu (which has a transaction coordinator), read
back by confluent-kafka and checked record by record and marker by marker.

tansu 0.6.0 writes COMMIT/ABORT markers but does not hide aborted records from
read_committed consumers (see ``txn_log``): that a transaction was aborted is checked on
its ABORT marker and on the read_committed view computed from the markers; that a
commit is visible, with a confluent-kafka ``isolation.level=read_committed`` consumer too.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Iterator

import confluent_kafka
import pytest

from integration.peers import LOOPBACK, Tansu, free_port, run_tansu
from integration.producer.txn_log import ABORT, COMMIT, markers, read_committed, read_log
from integration.producer.verify import consume_all
from integration.tcp_forwarder import TcpForwarder
from kclient import KafkaProducer, OffsetAndMetadata, TopicPartition, errors

_names = itertools.count()


@pytest.fixture(scope="module")
def tansu() -> Iterator[Tansu]:
    with run_tansu() as broker:
        yield broker


def _topic(tansu: Tansu, partitions: int) -> str:
    name = f"txn-{next(_names)}"
    tansu.create_topic(name, partitions)
    return name


def _producer(bootstrap: str, transactional_id: str, **settings: object) -> KafkaProducer:
    return KafkaProducer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **settings}
    )


def _values(consumed: list[object]) -> list[bytes | None]:
    return [c.value for c in consumed]  # type: ignore[attr-defined]


def test_a_committed_transaction_is_visible_on_every_partition_it_wrote(tansu: Tansu) -> None:
    first, second = _topic(tansu, 2), _topic(tansu, 1)
    with _producer(tansu.bootstrap_servers, f"commit-{uuid.uuid4()}") as producer:
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        assert producer._txn is not None and not producer._txn.is_transaction_v2  # version 1
        for i in range(30):
            producer.send(first, b"a%d" % i, partition=i % 2)
            producer.send(second, b"b%d" % i, partition=0)
        producer.commit_transaction(timeout=30)
    committed = {"isolation.level": "read_committed"}
    got_first = consume_all(tansu.bootstrap_servers, first, 2, 30, settings=committed)
    got_second = consume_all(tansu.bootstrap_servers, second, 1, 30, settings=committed)
    assert sorted(_values(got_first)) == sorted(b"a%d" % i for i in range(30))
    assert _values(got_second) == [b"b%d" % i for i in range(30)]
    logs = [read_log(tansu.bootstrap_servers, first, p) for p in (0, 1)]
    logs.append(read_log(tansu.bootstrap_servers, second, 0))
    producer_ids = set()
    for log in logs:
        assert markers(log) == [COMMIT]  # one marker per partition, after its records
        assert log[-1].control == COMMIT
        assert all(e.transactional for e in log)
        producer_ids |= {(e.producer_id, e.producer_epoch) for e in log}
    assert len(producer_ids) == 1  # records and markers: the same producer id and epoch


def test_an_aborted_transaction_is_written_but_never_committed(tansu: Tansu) -> None:
    topic = _topic(tansu, 1)
    with _producer(tansu.bootstrap_servers, f"abort-{uuid.uuid4()}") as producer:
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        aborted = [producer.send(topic, b"gone-%d" % i) for i in range(5)]
        producer.flush(30)  # the records reach the broker: only the abort hides them
        producer.abort_transaction(timeout=30)
        assert [f.result(0).offset for f in aborted] == list(range(5))
        producer.begin_transaction()
        producer.send(topic, b"kept")
        producer.commit_transaction(timeout=30)
    log = read_log(tansu.bootstrap_servers, topic, 0)
    assert markers(log) == [ABORT, COMMIT]
    assert read_committed(log) == [b"kept"]
    uncommitted = consume_all(
        tansu.bootstrap_servers, topic, 1, 6, settings={"isolation.level": "read_uncommitted"}
    )
    assert _values(uncommitted) == [b"gone-%d" % i for i in range(5)] + [b"kept"]


def test_a_second_producer_with_the_same_id_fences_the_first(tansu: Tansu) -> None:
    topic = _topic(tansu, 1)
    transactional_id = f"zombie-{uuid.uuid4()}"
    zombie = _producer(tansu.bootstrap_servers, transactional_id)
    successor = _producer(tansu.bootstrap_servers, transactional_id)
    try:
        zombie.init_transactions(timeout=30)
        zombie.begin_transaction()
        zombie.send(topic, b"from-the-zombie").result(30)
        successor.init_transactions(timeout=30)  # fences the zombie, aborts its transaction
        # (tansu closes the connection on a fenced producer's EndTxn instead of answering
        # PRODUCER_FENCED, for confluent-kafka too; its Produce answers it)
        with pytest.raises(errors.ProducerFencedError):
            zombie.send(topic, b"too-late").result(30)
        with pytest.raises(errors.ProducerFencedError, match="another producer with the same"):
            zombie.commit_transaction(timeout=30)
        with pytest.raises(errors.ProducerFencedError):
            zombie.send(topic, b"more")
        successor.begin_transaction()
        successor.send(topic, b"from-the-successor")
        successor.commit_transaction(timeout=30)
    finally:
        zombie.close(5)
        successor.close(5)
    log = read_log(tansu.bootstrap_servers, topic, 0)
    assert markers(log) == [ABORT, COMMIT]
    assert read_committed(log) == [b"from-the-successor"]
    zombie_epoch, successor_epoch = (e.producer_epoch for e in log if e.control is not None)
    assert successor_epoch > zombie_epoch


def test_offsets_sent_to_a_transaction_are_committed_with_it_only(tansu: Tansu) -> None:
    source, sink = _topic(tansu, 2), _topic(tansu, 1)
    group = f"readers-{uuid.uuid4()}"
    with _producer(tansu.bootstrap_servers, f"offsets-{uuid.uuid4()}") as producer:
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        producer.send(sink, b"out-1")
        producer.send_offsets_to_transaction(
            {TopicPartition(source, 0): OffsetAndMetadata(42), TopicPartition(source, 1): 7},
            group,
            timeout=30,
        )
        producer.commit_transaction(timeout=30)
        assert _committed(tansu.bootstrap_servers, group, source) == {0: 42, 1: 7}
        producer.begin_transaction()
        producer.send(sink, b"out-2")
        producer.send_offsets_to_transaction(
            {TopicPartition(source, 0): OffsetAndMetadata(99)}, group, timeout=30
        )
        producer.abort_transaction(timeout=30)
    assert _committed(tansu.bootstrap_servers, group, source) == {0: 42, 1: 7}


def _committed(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = consumer.committed(
            [confluent_kafka.TopicPartition(topic, p) for p in (0, 1)], timeout=30
        )
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in parts}


# ---- timeouts ---------------------------------------------------------------------------------


def test_a_commit_that_times_out_is_resumed_by_calling_it_again() -> None:
    proxy_port = free_port()
    with run_tansu(advertised_port=proxy_port) as tansu:
        proxy = TcpForwarder(tansu.port, proxy_port)
        try:
            topic = _topic(tansu, 1)
            bootstrap = f"{LOOPBACK}:{proxy_port}"
            with _producer(bootstrap, f"resume-{uuid.uuid4()}") as producer:
                producer.init_transactions(timeout=30)
                producer.begin_transaction()
                producer.send(topic, b"late").result(30)
                proxy.paused.set()  # EndTxn will wait in the proxy
                with pytest.raises(errors.KafkaTimeoutError, match=r"call commit_transaction\(\)"):
                    producer.commit_transaction(timeout=0.5)
                with pytest.raises(errors.IllegalStateError, match="timed out"):
                    producer.begin_transaction()
                proxy.resume()
                producer.commit_transaction(timeout=30)  # the same commit, completed
                producer.begin_transaction()
                producer.abort_transaction(timeout=30)
            log = read_log(tansu.bootstrap_servers, topic, 0)
            assert markers(log) == [COMMIT]
            assert read_committed(log) == [b"late"]
        finally:
            proxy.close()


def test_init_transactions_without_a_broker_times_out_saying_why() -> None:
    address = f"{LOOPBACK}:{free_port()}"  # nothing listens there
    producer = _producer(address, "nowhere", **{"reconnect.backoff.max.ms": 50})
    with producer, pytest.raises(errors.KafkaTimeoutError) as raised:
        producer.init_transactions(timeout=1)
    text = str(raised.value)
    assert "init_transactions() did not complete within 1 s" in text
    assert f"FindCoordinator: no broker is reachable ({address}: connection refused" in text
