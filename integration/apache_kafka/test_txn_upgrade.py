"""Kafka 4.4 formatted with transaction version 1, upgraded to 2 (``FeatureCommand``)
while a kclient transaction is open, then restarted: the producer commits that transaction
with EndTxn v4, takes a new epoch and speaks version 2 from its next transaction (EndTxn
v5, no AddPartitionsToTxn); read_committed sees exactly the committed records."""

from __future__ import annotations

from integration.apache_kafka.readback import Sent, assert_read_back, request_versions, unique
from kclient import KafkaProducer
from kclient.testing.apache_kafka import VERSIONS, ApacheKafka


def test_a_transaction_open_across_the_upgrade_to_version_2() -> None:
    with ApacheKafka(VERSIONS[0], features={"transaction.version": 1}) as kafka:
        assert kafka.finalized_features()["transaction.version"] == 1
        topic = unique("upgrade")
        kafka.create_topic(topic, 2)
        committed: list[Sent] = []
        settings = {
            "bootstrap.servers": kafka.bootstrap_servers,
            "transactional.id": unique("upgrading"),
            "reconnect.backoff.max.ms": 200,
        }
        with KafkaProducer(settings) as producer:
            with request_versions() as before:
                producer.init_transactions(timeout=30)
                producer.begin_transaction()
                opened = [Sent(i % 2, None, b"v1-%d" % i) for i in range(4)]
                for r in opened:
                    producer.send(topic, r.value, partition=r.partition)
                producer.flush(timeout=30)
            assert "ADD_PARTITIONS_TO_TXN" in before
            kafka.upgrade_feature("transaction.version", 2)
            kafka.stop_broker(1)
            kafka.start_broker(1)
            assert kafka.finalized_features()["transaction.version"] == 2
            with request_versions() as after:
                producer.commit_transaction(timeout=30)
                committed += opened
                for n, keep in enumerate((True, False, True)):
                    producer.begin_transaction()
                    rows = [Sent(i % 2, None, b"v2-%d-%d" % (n, i)) for i in range(4)]
                    for r in rows:
                        producer.send(topic, r.value, partition=r.partition)
                    if keep:
                        producer.commit_transaction(timeout=30)
                        committed += rows
                    else:
                        producer.flush(timeout=30)
                        producer.abort_transaction(timeout=30)
        assert after["END_TXN"] == {4, 5}  # the open one at v4, the new ones at v5
        assert "INIT_PRODUCER_ID" in after  # the new epoch before version 2
        assert "ADD_PARTITIONS_TO_TXN" not in after  # version 2 adds partitions implicitly
        assert_read_back(kafka, {topic: (2, committed)})
