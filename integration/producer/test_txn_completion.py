"""A transaction prepared by one producer (``prepare_transaction``, then closed) and
committed from another client (``txn_completion.complete_transaction``), on the embedded
broker and tansu; read back with confluent-kafka read_committed consumers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest

from integration.peers import run_tansu
from integration.producer.verify import consume_all
from kclient import KafkaProducer
from kclient.broker import EmbeddedBroker
from kclient.clock import SYSTEM_CLOCK
from kclient.network import NetworkClient, NetworkClientConfig
from kclient.sender.coordinator_calls import CoordinatorCalls
from kclient.sender.txn_completion import (
    PreparedTxn,
    TransactionNotCompletedError,
    complete_transaction,
)

COMMITTED = {"isolation.level": "read_committed"}


@pytest.fixture(params=["embedded", "tansu"])
def bootstrap_and_topic(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    topic = f"prepared-{uuid.uuid4().hex[:8]}"
    if request.param == "embedded":
        with EmbeddedBroker() as broker:
            broker.create_topic(topic, 2)
            yield broker.bootstrap_servers, topic
    else:
        with run_tansu() as tansu:
            tansu.create_topic(topic, 2)
            yield tansu.bootstrap_servers, topic


def prepare(bootstrap: str, topic: str, values: list[bytes], **settings: object) -> PreparedTxn:
    txn_id = f"prepared-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=txn_id, **settings)
    try:
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.send(topic, value, partition=i % 2)
        return producer.prepare_transaction(timeout=30)
    finally:
        producer.close(timeout=30)  # leaves the prepared transaction open


def coordinator_calls(bootstrap: str) -> tuple[NetworkClient, CoordinatorCalls]:
    client = NetworkClient.create(bootstrap, NetworkClientConfig(), clock=SYSTEM_CLOCK)
    return client, CoordinatorCalls(client, SYSTEM_CLOCK)


def test_a_transaction_prepared_and_closed_is_committed_from_another_client(
    bootstrap_and_topic: tuple[str, str],
) -> None:
    bootstrap, topic = bootstrap_and_topic
    values = [b"a", b"b", b"c", b"d"]
    prepared = prepare(bootstrap, topic, values)
    client, calls = coordinator_calls(bootstrap)
    try:
        complete_transaction(calls, prepared, commit=True, timeout_ms=30_000)
        complete_transaction(calls, prepared, commit=True, timeout_ms=30_000)  # a replay: fine
    finally:
        client.close()
    records = consume_all(bootstrap, topic, 2, len(values), 30, settings=COMMITTED)
    assert sorted(r.value or b"" for r in records) == values


def test_a_prepared_transaction_aborted_by_its_timeout_cannot_be_committed() -> None:
    with EmbeddedBroker() as broker:
        topic = f"prepared-{uuid.uuid4().hex[:8]}"
        broker.create_topic(topic, 2)
        prepared = prepare(broker.bootstrap_servers, topic, [b"late"], transaction_timeout_ms=1000)
        deadline = time.monotonic() + 30
        while broker.transactions().get(prepared.transactional_id) != "CompleteAbort":
            assert time.monotonic() < deadline, broker.transactions()
            time.sleep(0.1)
        client, calls = coordinator_calls(broker.bootstrap_servers)
        try:
            with pytest.raises(TransactionNotCompletedError, match="could not be committed"):
                complete_transaction(calls, prepared, commit=True, timeout_ms=30_000)
        finally:
            client.close()
