"""KIP-899 on Apache Kafka 4.4: the cluster behind the producer's ``bootstrap.servers`` is
replaced (a load balancer's address, here a TCP forwarder we switch, now leads to another
cluster) and every broker the producer knew is gone. With ``metadata.recovery.strategy``
at its default (``rebootstrap``) the producer starts again from ``bootstrap.servers`` and
its records reach the new cluster."""

from __future__ import annotations

import pytest

from integration.apache_kafka.readback import confluent_read, unique
from integration.tcp_forwarder import LOOPBACK, TcpForwarder
from kclient import KafkaProducer
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka


def _plaintext_port(kafka: ApacheKafka) -> int:
    return int(kafka.broker_address(1).rsplit(":", 1)[1])


@pytest.mark.parametrize("apache_kafka", [VERSIONS[0]], indirect=True)
def test_a_cluster_replaced_behind_the_bootstrap_address_is_found_again(
    apache_kafka: ApacheKafka,
) -> None:
    """(With ``metadata.recovery.strategy=none`` the same run fails the second record
    after ``delivery.timeout.ms``: checked by hand on 2026-11-29; the unit tests keep
    ``none``'s behaviour, and this test saves a second cluster's start.)"""
    new = apache_kafka
    topic = unique("rebootstrap")
    new.create_topic(topic, 1)
    with ApacheKafka(VERSIONS[0]) as old, TcpForwarder(_plaintext_port(old)) as lb:
        old.create_topic(topic, 1)
        settings = {
            "bootstrap.servers": f"{LOOPBACK}:{lb.port}",
            "delivery.timeout.ms": 10_000,
            "request.timeout.ms": 3_000,
        }
        with KafkaProducer(settings) as producer:
            assert producer.send(topic, b"to the old cluster").result(timeout=30).offset == 0
            lb.target = _plaintext_port(new)
            old.close()  # every broker the producer knew is gone
            future = producer.send(topic, b"to the new cluster")
            assert future.result(timeout=40).offset == 0
    read = confluent_read(new, {topic: (1, 1)})
    assert [value for _, value, _, _ in read[topic][0]] == [b"to the new cluster"]
