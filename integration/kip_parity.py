"""Issue 33's parity scenarios, run on the embedded broker
(``integration/producer/test_kip_parity_embedded.py``) and on Apache Kafka
(``integration/apache_kafka/test_kip_parity.py``): each test reads the records back in its
broker's way."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from kclient import KafkaProducer, ProducerInterceptor, ProducerRecord, errors
from kclient.sender.future import RecordMetadata


def fence_then_commit_with_a_successor(settings: dict[str, Any], topic: str) -> None:
    """A second producer with the same ``transactional.id`` fences the first: the
    zombie's commit and abort raise ``ApplicationRecoverableError`` (a new producer goes
    on), and the successor commits ``b"successor"``."""
    zombie = KafkaProducer(settings)
    try:
        zombie.init_transactions(timeout=30)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0)
        zombie.flush(timeout=30)
        with KafkaProducer(settings) as successor:
            successor.init_transactions(timeout=30)  # fences the zombie, aborts its records
            with pytest.raises(errors.ApplicationRecoverableError) as raised:
                zombie.commit_transaction(timeout=30)
            assert errors.transaction_error_class(raised.value) is (
                errors.ApplicationRecoverableError
            )
            with pytest.raises(errors.ApplicationRecoverableError):
                zombie.abort_transaction(timeout=30)
            zombie.close(timeout=5)
            # what the class says to do: a new producer with the same transactional.id
            successor.begin_transaction()
            successor.send(topic, b"successor", partition=0)
            successor.commit_transaction(timeout=30)
    finally:
        zombie.close(timeout=5)


def abort_after_a_refused_record(settings: dict[str, Any], topic: str) -> None:
    """A record above the topic's limit (2,000 bytes) fails its future and the commit
    with ``AbortableTransactionError``; ``abort_transaction`` works and the next
    transaction commits ``b"small-committed"``."""
    with KafkaProducer(settings) as producer:
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        producer.send(topic, b"small-aborted", partition=0)
        producer.flush(timeout=30)  # written, then aborted
        refused = producer.send(topic, b"x" * 5_000, partition=0)  # above the limit
        assert isinstance(refused.exception(30), errors.AbortableTransactionError)
        with pytest.raises(errors.AbortableTransactionError):
            producer.commit_transaction(timeout=30)
        producer.abort_transaction(timeout=30)  # the producer goes on
        producer.begin_transaction()
        producer.send(topic, b"small-committed", partition=0)
        producer.commit_transaction(timeout=30)


class Tagging(ProducerInterceptor):
    """Adds a header; counts acknowledgements (I/O thread) under a lock."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.delivered = 0
        self.failed = 0
        self.closed = False

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        return record._replace(headers=[*(record.headers or ()), ("origin", b"kclient")])

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        with self.lock:
            if exception is None:
                self.delivered += 1
            else:
                self.failed += 1

    def close(self) -> None:
        self.closed = True


class Broken(ProducerInterceptor):
    """Raises in both methods: logged once each, the records still go."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        raise RuntimeError("broken on_send")

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        raise RuntimeError("broken on_acknowledgement")
