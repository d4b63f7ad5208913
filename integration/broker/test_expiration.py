"""Idle producer ids and unused transactional ids are forgotten by a running embedded
broker (its timers, real clients): the state a broker keeps per producer stays bounded,
and producers that come back afterwards still write and read back normally."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import confluent_kafka

from integration.producer.verify import consume_all
from kclient import KafkaProducer
from kclient.broker import EmbeddedCluster

# long enough that both producers are still known when the test looks right after they
# wrote (a loaded machine took over 300 ms between the two), short enough to wait for
EXPIRY = {
    "producer_id_expiration_ms": 3000,
    "producer_id_expiration_check_interval_ms": 100,
    "transactional_id_expiration_ms": 3000,
    "transaction_remove_expired_transaction_cleanup_interval_ms": 100,
}


def _wait_for(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_idle_producers_and_transactional_ids_are_forgotten_and_may_come_back() -> None:
    with EmbeddedCluster(1, **EXPIRY) as cluster:
        bs = cluster.bootstrap_servers
        topic = f"exp-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, 1)
        idem = confluent_kafka.Producer({"bootstrap.servers": bs, "enable.idempotence": True})
        idem.produce(topic, b"idem-1")
        assert idem.flush(10) == 0
        txn = KafkaProducer({"bootstrap.servers": bs, "transactional.id": "exp-tx"})
        txn.init_transactions()
        txn.begin_transaction()
        txn.send(topic, b"txn-1")
        txn.commit_transaction()
        assert len(cluster.producer_ids(topic)) == 2
        assert cluster.transactions() == {"exp-tx": "CompleteCommit"}
        _wait_for(lambda: cluster.producer_ids(topic) == [] and cluster.transactions() == {}, 30.0)
        txn.close()
        # both come back: the idempotent producer continues its sequence as an unknown
        # producer; a new transactional producer starts over under the same id
        idem.produce(topic, b"idem-2")
        assert idem.flush(10) == 0
        again = KafkaProducer({"bootstrap.servers": bs, "transactional.id": "exp-tx"})
        again.init_transactions()
        again.begin_transaction()
        again.send(topic, b"txn-2")
        again.commit_transaction()
        again.close()
        got = consume_all(bs, topic, 1, 4, 30, settings={"isolation.level": "read_committed"})
        assert sorted(c.value or b"" for c in got) == [b"idem-1", b"idem-2", b"txn-1", b"txn-2"]
