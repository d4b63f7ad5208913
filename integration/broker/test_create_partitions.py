"""CreatePartitions against the embedded broker over 127.0.0.1: confluent-kafka's and
kafka-python's admin clients grow a topic (and get Kafka's errors for a shrink or an
unknown topic), kclient's producer sends keyed records to the new partitions once its
metadata refresh sees them, and a consumer reads every record back from them."""

from __future__ import annotations

import time
import warnings

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions

from integration.broker.clients import confluent_consume_records
from kclient import KafkaProducer
from kclient.broker import EmbeddedCluster

with warnings.catch_warnings():  # kafka-python's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.admin import KafkaAdminClient
    from kafka.admin import NewPartitions as KpNewPartitions
    from kafka.errors import InvalidPartitionsError


@pytest.fixture
def cluster() -> EmbeddedCluster:
    with EmbeddedCluster(brokers=3) as embedded:
        yield embedded


def test_confluent_admin_grows_a_topic_and_kclient_sends_to_the_new_partitions(
    cluster: EmbeddedCluster,
) -> None:
    cluster.create_topic("grow", 2)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    with KafkaProducer(bootstrap_servers=cluster.bootstrap_servers, metadata_max_age_ms=200) as p:
        before = {p.send("grow", b"a", key=b"k%d" % i).result(10).partition for i in range(40)}
        (future,) = admin.create_partitions([NewPartitions("grow", 5)]).values()
        future.result(10)
        deadline = time.monotonic() + 10
        while len(p.partitions_for("grow")) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        after = {p.send("grow", b"b", key=b"k%d" % i).result(10).partition for i in range(40)}
    assert before == {0, 1}
    assert after == {0, 1, 2, 3, 4}  # murmur2 of the keys over 5 partitions
    records = confluent_consume_records(
        {"bootstrap.servers": cluster.bootstrap_servers}, "grow", 5, 80
    )
    assert sorted(value for _, _, value, _ in records) == [b"a"] * 40 + [b"b"] * 40
    assert {partition for partition, _, value, _ in records if value == b"b"} == after
    (shrink,) = admin.create_partitions([NewPartitions("grow", 3)]).values()
    with pytest.raises(KafkaException, match="has 5 partitions, more than the 3 asked for"):
        shrink.result(10)
    (unknown,) = admin.create_partitions([NewPartitions("nope", 3)]).values()
    with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
        unknown.result(10)


def test_kafka_python_admin_grows_a_topic(cluster: EmbeddedCluster) -> None:
    cluster.create_topic("kp", 1)
    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers)
    try:
        admin.create_partitions({"kp": KpNewPartitions(total_count=4)})
        assert len(admin.describe_topics(["kp"])[0]["partitions"]) == 4
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"kp": KpNewPartitions(total_count=4)})
    finally:
        admin.close()
    assert len(cluster.controller.topic("kp").partitions) == 4
