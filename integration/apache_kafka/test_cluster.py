"""A 3-node Apache Kafka 4.4 (replication factor 3, min.insync.replicas=2): an idempotent
kclient producer with acks=all keeps writing while the partition's leader is killed
(``kill -9``), follows the new leader, and loses, duplicates and reorders nothing; the
killed node then comes back."""

from __future__ import annotations

from integration.apache_kafka.readback import Sent, assert_read_back, unique
from kclient import KafkaProducer
from kclient.testing.apache_kafka import ApacheKafka


def test_idempotent_producer_across_a_killed_leader(apache_kafka_cluster: ApacheKafka) -> None:
    kafka = apache_kafka_cluster
    topic = unique("failover")
    kafka.create_topic(topic, 1, replication_factor=3)
    leader = kafka.leaders(topic)[0]
    records = [Sent(0, b"k%d" % (i % 5), b"v%d" % i) for i in range(200)]
    settings = {
        "bootstrap.servers": kafka.bootstrap_servers,
        "acks": "all",
        "enable.idempotence": True,
        "linger.ms": 5,
        "batch.size": 300,  # several batches in flight when the leader dies
        "request.timeout.ms": 5000,
        "delivery.timeout.ms": 60000,
    }
    with KafkaProducer(settings) as producer:
        futures = [producer.send(topic, r.value, key=r.key, partition=0) for r in records[:100]]
        producer.flush(timeout=30)
        kafka.kill_broker(leader)
        futures += [producer.send(topic, r.value, key=r.key, partition=0) for r in records[100:]]
        producer.flush(timeout=60)
        offsets = [f.result(timeout=0).offset for f in futures]
    assert offsets == list(range(200))
    assert kafka.leaders(topic)[0] not in (leader, -1)
    assert_read_back(kafka, {topic: (1, records)})
    kafka.start_broker(leader)
    assert kafka.is_running(leader)
