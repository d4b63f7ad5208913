"""Finding and aborting a hanging transaction on the embedded broker with kafka-python's
admin client (KIP-664: ListTransactions, DescribeTransactions, DescribeProducers and
WriteTxnMarkers, what ``kafka-transactions.sh`` uses): an open transaction that holds
read_committed consumers back is found, described, aborted by the admin, and the
records after it become visible."""

from __future__ import annotations

import uuid
import warnings

from integration.producer.verify import consume_all
from kclient import KafkaProducer
from kclient.broker import EmbeddedCluster

with warnings.catch_warnings():  # kafka-python's import warns on Python 3.11
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import AbortTransactionSpec


def test_an_admin_finds_describes_and_aborts_a_hanging_transaction() -> None:
    with EmbeddedCluster(3) as cluster:
        bs = cluster.bootstrap_servers
        topic = f"hang-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, 1)
        stuck = KafkaProducer({"bootstrap.servers": bs, "transactional.id": "stuck-writer"})
        try:
            _hang_and_abort(cluster, stuck, topic)
        finally:
            stuck.close(timeout=5)


def _hang_and_abort(cluster: EmbeddedCluster, stuck: KafkaProducer, topic: str) -> None:
    bs = cluster.bootstrap_servers
    stuck.init_transactions()
    stuck.begin_transaction()
    for i in range(3):
        stuck.send(topic, f"stuck-{i}".encode(), partition=0)
    stuck.flush()
    later = KafkaProducer({"bootstrap.servers": bs})
    later.send(topic, b"later", partition=0).get(10)
    later.close()
    assert cluster.last_stable_offset(topic) == 0  # held back by the open transaction

    admin = KafkaAdminClient(bootstrap_servers=bs)
    try:
        listed = [t for ts in admin.list_transactions().values() for t in ts]
        assert [(t.transactional_id, t.state.value) for t in listed] == [
            ("stuck-writer", "Ongoing")
        ]
        described = admin.describe_transactions(["stuck-writer"])["stuck-writer"]
        assert described.topic_partitions == {TopicPartition(topic, 0)}
        tp = TopicPartition(topic, 0)
        (producer,) = [
            p
            for p in admin.describe_producers([tp])[tp].active_producers
            if p.current_transaction_start_offset >= 0
        ]
        assert producer.current_transaction_start_offset == 0
        assert (producer.producer_id, producer.producer_epoch) == (
            described.producer_id,
            described.producer_epoch,
        )
        admin.abort_transaction(
            AbortTransactionSpec(
                tp, producer.producer_id, producer.producer_epoch, producer.coordinator_epoch
            )
        )
    finally:
        admin.close()
    assert cluster.last_stable_offset(topic) == cluster.high_watermark(topic)
    got = consume_all(bs, topic, 1, 1, 30, settings={"isolation.level": "read_committed"})
    assert [c.value for c in got] == [b"later"]
