"""Produce v13 (KIP-516) against Apache Kafka 4.4 and 3.9: kclient names topics by id where
the broker serves v13 (4.4), by name where it does not (3.9: v11), read back by Kafka's own
Java consumer (and confluent-kafka); and a topic deleted and made again under its name while
records for it are in flight, as Java's producer handles it: the old id's
UNKNOWN_TOPIC_ID (v13) or the missing topic's UNKNOWN_TOPIC_OR_PARTITION (v11) is retried
after a metadata refresh, which brings the new topic (and its new id): the records land
there."""

from __future__ import annotations

import time

from integration.apache_kafka.readback import Sent, assert_read_back, request_versions, unique
from kclient import KafkaProducer, errors
from kclient.cli.admin import ClusterReader
from kclient.protocol import ApiKey
from kclient.testing.apache_kafka import ApacheKafka

_DEADLINE_S = 60.0


def _newest_produce(kafka: ApacheKafka) -> int:
    return 13 if kafka.version.startswith("4.") else 11


def _delete_topic(kafka: ApacheKafka, name: str) -> None:
    reader = ClusterReader(kafka.bootstrap_servers)
    try:
        body = reader.bootstrap.request(
            ApiKey.DELETE_TOPICS,
            {"topics": [{"name": name}], "topic_names": [name], "timeout_ms": 30_000},
        )
    finally:
        reader.close()
    code = body["responses"][0]["error_code"]
    assert code == 0, errors.for_code(code).__name__


def _create_again(kafka: ApacheKafka, name: str) -> None:
    """Create ``name`` once its deletion is complete (TOPIC_ALREADY_EXISTS until then)."""
    deadline = time.monotonic() + _DEADLINE_S
    while not _try_create(kafka, name):
        assert time.monotonic() < deadline, f"{name} still exists {_DEADLINE_S} s after deletion"
        time.sleep(0.2)


def _try_create(kafka: ApacheKafka, name: str) -> bool:
    try:
        kafka.create_topic(name, 1, 1)
    except errors.TopicAlreadyExistsError:
        return False
    return True


def test_v13_by_topic_id_where_served_and_read_back(apache_kafka: ApacheKafka) -> None:
    kafka = apache_kafka
    served = kafka.api_versions()[ApiKey.PRODUCE][1]
    assert served == _newest_produce(kafka)
    names = [unique("by-id"), unique("by-id")]
    for name in names:
        kafka.create_topic(name, 2)
    expected: dict[str, tuple[int, list[Sent]]] = {}
    # linger: both topics in one request (every topic has an id: v13)
    settings = {"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 20}
    with request_versions() as used, KafkaProducer(settings) as p:
        for name in names:
            sent = [Sent(i % 2, b"k%d" % i, b"%s-%d" % (name.encode(), i)) for i in range(20)]
            futures = [p.send(name, s.value, key=s.key, partition=s.partition) for s in sent]
            expected[name] = (2, sent)
        p.flush(timeout=30)
        for future in futures:
            assert future.result(timeout=0).topic == names[-1]
    assert used["PRODUCE"] == {served}
    assert_read_back(kafka, expected)


def test_a_topic_made_again_under_its_name_while_records_are_in_flight(
    apache_kafka: ApacheKafka,
) -> None:
    kafka = apache_kafka
    name = unique("made-again")
    kafka.create_topic(name, 1, 1)
    settings = {"bootstrap.servers": kafka.bootstrap_servers, "delivery.timeout.ms": 120_000}
    with request_versions() as used, KafkaProducer(settings) as producer:
        before = [producer.send(name, b"old-%d" % i, partition=0) for i in range(5)]
        producer.flush(timeout=30)
        assert [f.result(timeout=0).offset for f in before] == list(range(5))
        _delete_topic(kafka, name)
        # sent with the old topic's id (v13) or name (v11): refused until it is back
        after = [producer.send(name, b"new-%d" % i, partition=0) for i in range(5)]
        time.sleep(1.0)
        assert not any(f.done() for f in after)
        _create_again(kafka, name)
        producer.flush(timeout=_DEADLINE_S)
        offsets = [f.result(timeout=0).offset for f in after]
    assert offsets == list(range(5))  # the new topic's first records, in order
    assert used["PRODUCE"] == {_newest_produce(kafka)}
    assert_read_back(kafka, {name: (1, [Sent(0, None, b"new-%d" % i) for i in range(5)])})
