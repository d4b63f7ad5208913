"""Expiration of idle producer ids (``producer.id.expiration.ms``) in a partition and of
unused transactional ids (``transactional.id.expiration.ms``) in the coordinator, with a
fake clock: what a returning producer sees afterwards, and that the state stays bounded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kclient import errors
from kclient.broker.txn_state import TransactionStateManager
from tests.broker.conftest import NOW_MS
from tests.broker.txn_harness import TxnClient, fetch, values

DAY_MS = 86_400_000
WEEK_MS = 7 * DAY_MS
NONE = 0
OUT_OF_ORDER = errors.OutOfOrderSequenceNumberError.code


def _produce(h: Any, make_batch: Any, pid: int, seq: int, ts_ms: int) -> int:
    records = make_batch([b"v"], producer_id=pid, producer_epoch=0, base_sequence=seq,
                         timestamp_ms=ts_ms)  # fmt: skip
    error: int = h.produce("t", records, acks=-1)["error_code"]
    return error


def test_an_idle_producer_is_forgotten_after_producer_id_expiration_ms(
    harness: Any, make_batch: Any
) -> None:
    harness.controller.create_topic("t", 1)
    state = harness.controller.partition("t", 0).producer_state
    assert _produce(harness, make_batch, 7, 0, NOW_MS) == NONE
    assert _produce(harness, make_batch, 8, 0, NOW_MS + DAY_MS // 2) == NONE
    # while known, a gap in its sequences is refused
    assert _produce(harness, make_batch, 7, 5, NOW_MS) == OUT_OF_ORDER
    expire = harness.controller.remove_expired_producers
    assert expire(0, NOW_MS + DAY_MS - 1, DAY_MS) == 0
    assert expire(1, NOW_MS + DAY_MS, DAY_MS) == 0  # broker 1 leads nothing here
    assert expire(0, NOW_MS + DAY_MS, DAY_MS) == 1
    assert set(state.entries) == {8}
    # forgotten: it is an unknown producer again, whose first sequence is taken as is
    assert _produce(harness, make_batch, 7, 5, NOW_MS + DAY_MS) == NONE


def test_a_producer_with_an_open_transaction_is_never_expired(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_partitions(("t", 0))
    assert client.produce("t", [b"open"])["error_code"] == NONE
    expire = harness.controller.remove_expired_producers
    assert expire(0, NOW_MS + 10 * DAY_MS, DAY_MS) == 0
    assert client.end(commit=True) == NONE
    assert values(fetch(harness, "t", read_committed=True)) == [b"open"]
    assert expire(0, NOW_MS + 10 * DAY_MS, DAY_MS) == 1


def test_an_unused_transactional_id_expires_and_starts_over_with_a_new_producer_id(
    harness: Any,
) -> None:
    harness.controller.create_topic("t", 1)
    coordinator = harness.apis[0].txn_coordinator
    old = TxnClient(harness, "old")
    old.init()
    old.add_partitions(("t", 0))
    old.produce("t", [b"a"])
    assert old.end(commit=True) == NONE
    busy = TxnClient(harness, "busy")
    busy.init()
    busy.add_partitions(("t", 0))  # open for the whole week: never expired
    later = NOW_MS + WEEK_MS
    assert coordinator.expire_transactional_ids(later - 1, WEEK_MS) == 0
    assert coordinator.expire_transactional_ids(later, WEEK_MS) == 1
    assert coordinator.state.get("old") is None and coordinator.state.get("busy") is not None
    # the old producer is not in the coordinator any more
    assert old.end(commit=True) == errors.InvalidProducerIdMappingError.code
    again = TxnClient(harness, "old")
    assert again.init() == NONE
    assert again.producer_id != old.producer_id and again.epoch == 0


def test_an_expired_transactional_id_stays_gone_after_a_restart(
    tmp_path: Path, make_harness: Any
) -> None:
    h = make_harness(log_dir=str(tmp_path))
    state = TransactionStateManager(tmp_path)
    coordinator = h.apis[0].txn_coordinator
    coordinator.state = state
    for name in ("gone", "kept"):
        assert TxnClient(h, name).init() == NONE
    h.now_ms += 1000
    assert TxnClient(h, "kept").init() == NONE
    assert coordinator.expire_transactional_ids(h.now_ms, 1000) == 1
    assert TransactionStateManager(tmp_path).get("gone") is None  # the tombstone is replayed
    state.close()  # compacted: the snapshot holds only the live id
    reloaded = TransactionStateManager(tmp_path)
    assert [m.transactional_id for m in reloaded.transactions()] == ["kept"]
