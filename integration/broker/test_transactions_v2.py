"""Transaction version 2 (KIP-890 part 2) end to end: kclient's transactional producer
against the embedded broker, which finalizes ``transaction.version`` 2 by default. Each
EndTxn v5 bumps the epoch (seen in the coordinator's state), partitions and group offsets
join the transaction without AddPartitionsToTxn / AddOffsetsToTxn, and confluent-kafka's
consumers read the result (markers of the bumped epochs) in both isolation levels. With
``transaction_version=1`` the same producer speaks version 1 and the epoch stays.
(Fencing and a broker killed mid-commit run with version 2 in test_transactions.py, as
kclient uses it against the default broker.)"""

from __future__ import annotations

import uuid

import confluent_kafka
import pytest

from integration.broker.test_transactions import COMMITTED, _values, commit_and_abort
from kclient import ConsumerGroupMetadata, KafkaProducer, OffsetAndMetadata, TopicPartition
from kclient.broker import EmbeddedCluster


@pytest.fixture(scope="module")
def cluster() -> EmbeddedCluster:
    with EmbeddedCluster(3) as c:
        yield c  # type: ignore[misc]


def _topic(cluster: EmbeddedCluster, partitions: int = 3) -> str:
    name = f"tv2-{uuid.uuid4().hex[:8]}"
    cluster.create_topic(name, partitions)
    return name


def test_kclient_commits_and_aborts_with_an_epoch_bump_per_transaction(
    cluster: EmbeddedCluster,
) -> None:
    topic = _topic(cluster)
    commit_and_abort(cluster, topic, f"k2-{topic}")
    state = cluster.txn_state.get(f"k2-{topic}")
    assert state is not None and state.client_txn_version == 2
    assert state.producer_epoch == 4  # InitProducerId gave 0; each EndTxn v5 one more


def test_with_transaction_version_1_the_producer_keeps_its_epoch() -> None:
    with EmbeddedCluster(1, transaction_version=1) as cluster:
        topic = _topic(cluster)
        commit_and_abort(cluster, topic, f"k1-{topic}")
        state = cluster.txn_state.get(f"k1-{topic}")
        assert state is not None and state.client_txn_version == 0
        assert state.producer_epoch == 0


def test_offsets_join_the_transaction_without_add_offsets_to_txn(
    cluster: EmbeddedCluster,
) -> None:
    source, sink = _topic(cluster, 1), _topic(cluster, 3)
    group = f"g-{source}"
    with KafkaProducer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"o-{sink}"}
    ) as producer:
        producer.init_transactions(timeout=30)
        for offset, commit in ((5, True), (9, False), (12, True)):
            producer.begin_transaction()
            producer.send(sink, b"out-%d" % offset, partition=0)
            producer.send_offsets_to_transaction(
                {TopicPartition(source, 0): OffsetAndMetadata(offset)},
                ConsumerGroupMetadata(group),
            )
            if commit:
                producer.commit_transaction(timeout=30)
            else:
                producer.abort_transaction(timeout=30)
            assert cluster.committed_offsets(group) == {(source, 0): 5 if offset < 12 else 12}
    # a confluent-kafka consumer of the group starts where the last commit left it
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": group, **COMMITTED}
    )
    try:
        (tp,) = consumer.committed([confluent_kafka.TopicPartition(source, 0)], timeout=30)
        assert tp.offset == 12
    finally:
        consumer.close()
    assert _values(cluster.bootstrap_servers, sink, 3, 2, COMMITTED) == [b"out-12", b"out-5"]
