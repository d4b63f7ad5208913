"""A cluster upgraded from transaction version 1 to 2 under a live transactional producer
(Kafka's KAFKA-18227): the broker restarts on the same port and log dir finalizing
``transaction.version`` 2 while a version-1 transaction is open. The producer finishes that
transaction with EndTxn v4, takes a new epoch (InitProducerId) and only then speaks version 2,
so nothing it writes under version 2 can join the old transaction. A read_committed
confluent-kafka consumer sees exactly the committed records."""

from __future__ import annotations

from pathlib import Path

from integration.broker.test_transactions import COMMITTED, UNCOMMITTED, _values
from integration.peers import free_port
from kclient import KafkaProducer
from kclient.broker import EmbeddedBroker

TOPIC = "upgrade"


def test_a_version_1_transaction_open_across_the_upgrade_commits_then_version_2_begins(
    tmp_path: Path,
) -> None:
    port = free_port()
    settings = {"port": port, "log_dir": str(tmp_path)}
    committed: list[bytes] = []
    aborted: list[bytes] = []
    broker = EmbeddedBroker(transaction_version=1, **settings)
    broker.start()
    try:
        broker.create_topic(TOPIC, 3)
        producer = KafkaProducer(
            {
                "bootstrap.servers": broker.bootstrap_servers,
                "transactional.id": "upgrading",
                "reconnect.backoff.max.ms": 200,
            }
        )
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        for i in range(6):
            value = f"v1-open-{i}".encode()
            producer.send(TOPIC, value=value, partition=i % 3)
            committed.append(value)
        producer.flush(timeout=30)
    finally:
        broker.close()
    with producer, EmbeddedBroker(transaction_version=2, **settings) as upgraded:
        producer.commit_transaction(timeout=30)  # EndTxn v4, then a new epoch
        state = upgraded.txn_state.get("upgrading")
        assert state is not None and state.producer_epoch == 1  # the bump, no EndTxn v5 yet
        for round_, keep in enumerate((True, False, True)):
            producer.begin_transaction()
            for i in range(6):
                value = f"v2-{round_}-{i}".encode()
                producer.send(TOPIC, value=value, partition=i % 3)
                (committed if keep else aborted).append(value)
            if keep:
                producer.commit_transaction(timeout=30)
            else:
                producer.flush(timeout=30)  # written, then aborted (unsent ones are dropped)
                producer.abort_transaction(timeout=30)
        state = upgraded.txn_state.get("upgrading")
        assert state is not None and state.client_txn_version == 2
        assert state.producer_epoch == 4  # one bump per EndTxn v5 after the switch
        bootstrap = upgraded.bootstrap_servers
        assert _values(bootstrap, TOPIC, 3, len(committed), COMMITTED) == sorted(committed)
        everything = sorted(committed + aborted)
        assert _values(bootstrap, TOPIC, 3, len(everything), UNCOMMITTED) == everything
