"""KafkaProducer's transactional API on a scripted broker (no sockets).

The producer's I/O thread really runs; ``LiveTxnBroker`` answers like a broker with a
transaction coordinator (``tests/sender/txn_helpers.py``) and blocks in ``poll`` until
woken, like a selector. Tests wait on futures and calls, never on sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from kclient import (
    ConsumerGroupMetadata,
    KafkaProducer,
    OffsetAndMetadata,
    TopicPartition,
    errors,
)
from kclient.clock import SYSTEM_CLOCK
from kclient.errors import IllegalStateError, KafkaTimeoutError
from kclient.network.kafka_client import ClientRequest, ClientResponse
from kclient.protocol import ApiKey
from kclient.sender.txn_completion import PreparedTxn
from tests.sender.txn_helpers import TXN_ID, TxnBroker

END = ApiKey.END_TXN


class LiveTxnBroker(TxnBroker):
    """TxnBroker for a producer whose I/O thread runs: poll blocks until woken, and the
    test thread's scripting is serialized with the I/O thread's calls."""

    def __init__(self) -> None:
        super().__init__(SYSTEM_CLOCK, {"t": 2})
        self._wake = threading.Event()
        self.lock = threading.RLock()

    def wakeup(self) -> None:
        super().wakeup()
        self._wake.set()

    def send(self, request: ClientRequest, now_ms: int) -> None:
        with self.lock:
            super().send(request, now_ms)

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        with self.lock:
            responses = super().poll(timeout_ms, now_ms)
        if not responses:
            self._wake.wait(min(timeout_ms, 100) / 1000)
            self._wake.clear()
        return responses

    def release(self, api_key: int) -> None:
        with self.lock:
            super().release(api_key)
        self.wakeup()

    def script(self, action: Any, *args: Any) -> None:
        with self.lock:
            action(*args)


@pytest.fixture
def broker() -> LiveTxnBroker:
    return LiveTxnBroker()


@pytest.fixture
def producer(broker: LiveTxnBroker) -> Iterator[KafkaProducer]:
    config = {"bootstrap.servers": "h:1", "transactional.id": TXN_ID, "linger.ms": 5}
    with KafkaProducer(config, kafka_client=broker) as p:
        yield p


def test_commit_and_abort_through_the_producer(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    futures = [producer.send("t", b"a", partition=0), producer.send("t", b"b", partition=1)]
    producer.commit_transaction(timeout=10)
    assert all(f.done() for f in futures)  # commit sent every record first
    assert sorted(tp for tp, _ in broker.produced) == [("t", 0), ("t", 1)]
    producer.begin_transaction()
    producer.send("t", b"c", partition=0)
    producer.flush()  # written: only the abort marker will hide it
    producer.abort_transaction(timeout=10)
    assert [b["committed"] for b in broker.bodies(END)] == [True, False]
    assert broker.violations == []
    with pytest.raises(IllegalStateError, match=r"send\(\) is not allowed in state READY"):
        producer.send("t", b"outside")


def test_send_batch_rows_go_into_the_transaction_on_every_partition(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    keys = [b"k%d" % (i % 13) for i in range(1000)]
    result = producer.send_batch("t", [b"v%d" % i for i in range(1000)], keys)
    producer.commit_transaction(timeout=10)
    assert result.exceptions(0) == {}
    assert broker.violations == []  # partitions added first, every batch transactional
    assert sorted({tp for tp, _ in broker.produced}) == [("t", 0), ("t", 1)]
    assert sum(batch.record_count for _, batch in broker.produced) == 1000
    with pytest.raises(IllegalStateError, match=r"send\(\) is not allowed in state READY"):
        producer.send_batch("t", [b"outside"])


def test_a_timed_out_commit_is_resumed_by_calling_it_again(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    producer.send("t", b"a", partition=0)
    broker.script(broker.hold, END)
    with pytest.raises(KafkaTimeoutError, match=r"call commit_transaction\(\) again"):
        producer.commit_transaction(timeout=0.05)
    with pytest.raises(IllegalStateError, match=r"the earlier commit_transaction\(\) timed out"):
        producer.begin_transaction()
    with pytest.raises(IllegalStateError, match="commit_transaction"):
        producer.abort_transaction(timeout=1)
    broker.release(END)
    producer.commit_transaction(timeout=10)
    assert [b["committed"] for b in broker.bodies(END)] == [True]  # one EndTxn, resumed
    producer.begin_transaction()


def test_fencing_makes_commit_and_send_raise_producer_fenced(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    producer.send("t", b"a", partition=0)
    broker.script(broker.fail_next, END, errors.ProducerFencedError.code)
    with pytest.raises(errors.ProducerFencedError, match="another producer with the same"):
        producer.commit_transaction(timeout=10)
    with pytest.raises(errors.ProducerFencedError):
        producer.send("t", b"b", partition=0)
    with pytest.raises(errors.ProducerFencedError):
        producer.begin_transaction()


def test_an_abortable_error_is_raised_until_the_transaction_is_aborted(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    broker.script(broker.fail_next, ApiKey.PRODUCE, errors.InvalidRecordError.code)
    with pytest.raises(errors.InvalidRecordError):
        producer.send("t", b"bad", partition=0).result(10)
    with pytest.raises(errors.TransactionRequiresAbortError, match="abort_transaction"):
        producer.send("t", b"next", partition=0)
    with pytest.raises(errors.TransactionRequiresAbortError):
        producer.commit_transaction(timeout=10)
    producer.abort_transaction(timeout=10)
    producer.begin_transaction()
    producer.send("t", b"again", partition=0).result(10)
    producer.commit_transaction(timeout=10)


def test_init_that_times_out_says_what_it_waited_for(broker: LiveTxnBroker) -> None:
    broker.fail_next(ApiKey.FIND_COORDINATOR, *[errors.CoordinatorNotAvailableError.code] * 1000)
    config = {"bootstrap.servers": "h:1", "transactional.id": TXN_ID, "retry.backoff.ms": 10}
    with KafkaProducer(config, kafka_client=broker) as p:
        with pytest.raises(KafkaTimeoutError) as raised:
            p.init_transactions(timeout=0.3)
        text = str(raised.value)
        assert "init_transactions() did not complete within 0.3 s" in text
        assert "FindCoordinator: COORDINATOR_NOT_AVAILABLE (scripted)" in text
        assert "call init_transactions() again" in text
        broker.script(broker.errors.clear)
        p.init_transactions(timeout=10)  # resumes
        p.begin_transaction()


def test_send_offsets_takes_a_group_id_or_its_metadata(
    producer: KafkaProducer, broker: LiveTxnBroker
) -> None:
    @dataclass
    class ConsumerLike:  # what a consumer library's group metadata looks like
        group_id: str
        generation_id: int
        member_id: str
        group_instance_id: str | None

    producer.init_transactions(timeout=10)
    producer.begin_transaction()
    offsets = {TopicPartition("in", 0): OffsetAndMetadata(10)}
    producer.send_offsets_to_transaction(offsets, "plain-group")
    producer.send_offsets_to_transaction({("in", 1): 11}, ConsumerGroupMetadata("g2", 3, "m"))
    producer.send_offsets_to_transaction(offsets, ConsumerLike("g3", 4, "m3", "static-1"))
    producer.send_offsets_to_transaction({}, "nothing-to-send")
    groups = [
        (b["group_id"], b["generation_id"], b["member_id"], b["group_instance_id"])
        for b in broker.bodies(ApiKey.TXN_OFFSET_COMMIT)
    ]
    assert groups == [
        ("plain-group", -1, "", None),
        ("g2", 3, "m", None),
        ("g3", 4, "m3", "static-1"),
    ]
    assert [b["group_id"] for b in broker.bodies(ApiKey.ADD_OFFSETS_TO_TXN)] == [
        "plain-group",
        "g2",
        "g3",
    ]
    with pytest.raises(TypeError, match="group_metadata must be a group id str"):
        producer.send_offsets_to_transaction(offsets, 42)
    with pytest.raises(ValueError, match="offset must be >= 0"):
        producer.send_offsets_to_transaction({TopicPartition("in", 0): OffsetAndMetadata(-1)}, "g")
    with pytest.raises(TypeError, match="must be an OffsetAndMetadata or an int"):
        producer.send_offsets_to_transaction({TopicPartition("in", 0): "10"}, "g")
    producer.commit_transaction(timeout=10)


def test_close_aborts_an_open_transaction(broker: LiveTxnBroker) -> None:
    config = {"bootstrap.servers": "h:1", "transactional.id": TXN_ID}
    p = KafkaProducer(config, kafka_client=broker)
    p.init_transactions(timeout=10)
    p.begin_transaction()
    p.send("t", b"a", partition=0).result(10)
    p.close(timeout=10)
    assert [b["committed"] for b in broker.bodies(END)] == [False]


def test_a_prepared_transaction_is_left_open_by_close_with_its_id_and_epoch(
    broker: LiveTxnBroker,
) -> None:
    config = {"bootstrap.servers": "h:1", "transactional.id": TXN_ID, "linger.ms": 50}
    p = KafkaProducer(config, kafka_client=broker)
    p.init_transactions(timeout=10)
    p.begin_transaction()
    future = p.send("t", b"a", partition=0)
    prepared = p.prepare_transaction(timeout=10)
    assert future.done()  # flushed before it answers
    assert prepared == PreparedTxn(TXN_ID, broker.producer_id, broker.epoch)
    with pytest.raises(IllegalStateError, match="prepared for completion elsewhere"):
        p.send("t", b"b", partition=0)
    p.close(timeout=10)
    assert broker.bodies(END) == []  # neither committed nor aborted: another process will


def test_prepare_transaction_outside_a_transaction_is_refused(producer: KafkaProducer) -> None:
    producer.init_transactions(timeout=10)
    with pytest.raises(IllegalStateError, match="prepare_transaction"):
        producer.prepare_transaction(timeout=10)


def test_transactional_calls_need_a_transactional_id() -> None:
    broker = LiveTxnBroker()
    with KafkaProducer(bootstrap_servers="h:1", kafka_client=broker) as p:
        for call in (p.init_transactions, p.begin_transaction, p.commit_transaction):
            with pytest.raises(IllegalStateError, match="set 'transactional.id'"):
                call()
