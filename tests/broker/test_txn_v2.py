"""Transaction version 2 (KIP-890 part 2) in the embedded broker, through Apis (no sockets):
the epoch bump of every EndTxn v5, the implicit adds of Produce v12 and TxnOffsetCommit
v5, the retry of an EndTxn after its bump, fencing of the old epoch, and transaction
version 1 for the older request versions."""

from __future__ import annotations

import dataclasses
from typing import Any

from kclient import errors
from kclient.broker.txn_end import EndTxnAction, decide_end_txn
from kclient.broker.txn_metadata import (
    MAX_EPOCH,
    TV_0,
    TV_2,
    TransactionMetadata,
    TransactionState,
)
from kclient.broker.txn_state import TransactionStateManager
from kclient.protocol import ApiKey
from kclient.record import iter_batches
from tests.broker.txn_harness import TxnClient, fetch, values

NONE = 0
FENCED = errors.ProducerFencedError.code
CONCURRENT = errors.ConcurrentTransactionsError.code
INVALID_TXN_STATE = errors.InvalidTxnStateError.code
INVALID_EPOCH = errors.InvalidProducerEpochError.code
_S = TransactionState


def _markers(h: Any, topic: str, partition: int = 0) -> list[tuple[int, int]]:
    """(producer id, epoch) of the control batches of a partition."""
    fetched = fetch(h, topic, read_committed=False, partition=partition)
    return [
        (b.producer_id, b.producer_epoch)
        for b in iter_batches(bytes(fetched["records"] or b""))
        if b.is_control
    ]


def _state(h: Any, transactional_id: str) -> TransactionMetadata:
    found = h.apis[0].txn_coordinator.state.get(transactional_id)
    assert found is not None
    return found  # type: ignore[no-any-return]


def test_each_end_txn_v5_bumps_the_epoch_and_the_markers_carry_the_new_one(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    pid = client.producer_id
    assert client.epoch == 0
    for expected_epoch, value in ((1, b"a"), (2, b"b")):
        # no AddPartitionsToTxn: Produce v12 adds the partition itself
        assert client.produce("t", [value], version=12)["error_code"] == NONE
        assert client.end_v2(commit=True) == NONE
        assert (client.producer_id, client.epoch) == (pid, expected_epoch)
    assert values(fetch(harness, "t", read_committed=True)) == [b"a", b"b"]
    assert _markers(harness, "t") == [(pid, 1), (pid, 2)]


def test_a_produce_v12_to_a_new_partition_adds_it_to_the_transaction(harness: Any) -> None:
    harness.controller.create_topic("t", 2)
    client = TxnClient(harness, "tx")
    client.init()
    assert client.produce("t", [b"a"], 0, version=12)["error_code"] == NONE
    assert client.produce("t", [b"b"], 1, version=12)["error_code"] == NONE
    current = _state(harness, "tx")
    assert current.state is _S.ONGOING and current.partitions == {("t", 0), ("t", 1)}
    assert current.client_txn_version == TV_2
    assert values(fetch(harness, "t", read_committed=True)) == []  # open
    assert client.end_v2(commit=False) == NONE
    assert values(fetch(harness, "t", read_committed=True, partition=1)) == []
    assert values(fetch(harness, "t", read_committed=False, partition=1)) == [b"b"]


def test_produce_v11_and_older_only_verify_as_in_transaction_version_1(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    assert client.produce("t", [b"a"], version=11)["error_code"] == INVALID_TXN_STATE
    client.add_partitions(("t", 0))
    assert client.produce("t", [b"a"], version=11)["error_code"] == NONE
    assert client.end(commit=True) == NONE  # EndTxn v3: no epoch bump
    assert _state(harness, "tx").producer_epoch == client.epoch == 0
    assert _markers(harness, "t") == [(client.producer_id, 0)]


def test_transaction_version_1_makes_produce_v12_only_verify(make_harness: Any) -> None:
    h = make_harness(transaction_version=1)
    h.controller.create_topic("t", 1)
    client = TxnClient(h, "tx")
    client.init()
    assert client.produce("t", [b"a"], version=12)["error_code"] == INVALID_TXN_STATE


def test_txn_offset_commit_v5_adds_the_groups_offsets_to_the_transaction(harness: Any) -> None:
    harness.controller.create_topic("in", 1)
    harness.controller.create_topic("out", 1)
    client = TxnClient(harness, "tx")
    client.init()
    # v4 needs AddOffsetsToTxn first; v5 adds the offsets partition itself
    assert client.txn_offset_commit("g", {("in", 0): 5}, version=4) == {
        ("in", 0): INVALID_TXN_STATE
    }
    assert client.txn_offset_commit("g", {("in", 0): 5}, version=5) == {("in", 0): NONE}
    assert client.produce("out", [b"x"], version=12)["error_code"] == NONE
    r = harness.call(ApiKey.OFFSET_FETCH, 5, {"group_id": "g", "topics": None})
    assert all(p["committed_offset"] == -1 for t in r["topics"] for p in t["partitions"])
    assert client.end_v2(commit=True) == NONE
    r = harness.call(ApiKey.OFFSET_FETCH, 5, {"group_id": "g", "topics": None})
    found = {(t["name"], p["partition_index"]): p["committed_offset"] for t in r["topics"]
             for p in t["partitions"]}  # fmt: skip
    assert found == {("in", 0): 5}


def test_a_retried_end_txn_after_the_bump_gets_the_same_answer(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    pid = client.producer_id
    client.produce("t", [b"a"], version=12)
    # the answer is lost: the client sends the same EndTxn (old epoch) again
    assert client.end_v2(commit=True, take_epoch=False) == NONE
    retry = client.end_txn(True, 5)
    assert (retry["error_code"], retry["producer_id"], retry["producer_epoch"]) == (NONE, pid, 1)
    assert client.end_txn(False, 5)["error_code"] == INVALID_TXN_STATE  # not what was done
    assert _markers(harness, "t") == [(pid, 1)]  # one commit, not two


def test_the_old_epoch_is_fenced_after_the_bump(harness: Any) -> None:
    harness.controller.create_topic("t", 2)
    client = TxnClient(harness, "tx")
    client.init()
    client.produce("t", [b"a"], 0, version=12)
    zombie = TxnClient(harness, "tx")
    zombie.producer_id, zombie.epoch = client.producer_id, client.epoch
    zombie.sequences = dict(client.sequences)
    assert client.end_v2(commit=True) == NONE
    client.produce("t", [b"b"], 1, version=12)  # the next transaction, epoch 1
    # a late batch of the ended transaction's epoch: refused on its partition (the
    # marker carries epoch 1) and on a new one (the coordinator fences the add)
    assert zombie.produce("t", [b"late"], 0, version=12)["error_code"] == INVALID_EPOCH
    assert zombie.produce("t", [b"late"], 1, version=12)["error_code"] == INVALID_EPOCH
    assert zombie.end_txn(True, 5)["error_code"] == FENCED  # not a retry: epoch 1 is open
    assert client.end_v2(commit=True) == NONE
    assert values(fetch(harness, "t", read_committed=True)) == [b"a"]
    assert values(fetch(harness, "t", read_committed=True, partition=1)) == [b"b"]


def test_a_new_producer_fences_a_version_2_transaction(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    a = TxnClient(harness, "tx")
    a.init()
    a.produce("t", [b"a"], version=12)
    b = TxnClient(harness, "tx")
    assert b.init() == CONCURRENT  # a's transaction is aborted with a bumped epoch first
    assert _markers(harness, "t") == [(a.producer_id, 1)]
    assert b.init() == NONE and b.epoch == 2
    assert a.end_v2(commit=True) == FENCED
    assert a.produce("t", [b"late"], version=12)["error_code"] == INVALID_EPOCH
    assert values(fetch(harness, "t", read_committed=True)) == []


def test_a_version_2_transaction_past_its_timeout_fences_its_producer(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init(timeout_ms=10_000)
    client.produce("t", [b"a"], version=12)
    coordinator = harness.apis[0].txn_coordinator
    assert coordinator.abort_timed_out_transactions(harness.now_ms + 10_001) == 1
    assert _markers(harness, "t") == [(client.producer_id, 1)]
    assert client.end_v2(commit=True) == FENCED  # not taken for a retry of an EndTxn
    assert client.end_v2(commit=False) == FENCED
    assert client.produce("t", [b"late"], version=12)["error_code"] == INVALID_EPOCH


def test_an_abort_of_a_transaction_the_coordinator_never_saw_bumps_the_epoch(
    harness: Any,
) -> None:
    client = TxnClient(harness, "tx")
    client.init()
    # the client sent a record that never arrived: EndTxn v5 abort of an "empty" one
    assert client.end_v2(commit=False) == NONE
    assert client.epoch == 1 and _state(harness, "tx").state is _S.COMPLETE_ABORT
    assert client.end_v2(commit=True) == INVALID_TXN_STATE  # nothing to commit
    assert client.end_v2(commit=False) == NONE and client.epoch == 2  # another empty one
    assert _state(harness, "tx").producer_epoch == 2


def test_an_exhausted_epoch_rotates_the_producer_id_at_the_end_of_a_transaction(
    harness: Any,
) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    state = harness.apis[0].txn_coordinator.state
    state.put(dataclasses.replace(_state(harness, "tx"), producer_epoch=MAX_EPOCH))
    old_pid, client.epoch = client.producer_id, MAX_EPOCH
    assert client.produce("t", [b"a"], version=12)["error_code"] == NONE
    assert client.end_v2(commit=True, take_epoch=False) == NONE
    retry = client.end_txn(True, 5)  # the answer lost: a retry with the old id and epoch
    assert retry["error_code"] == NONE
    assert retry["producer_id"] != old_pid and retry["producer_epoch"] == 0
    client.producer_id, client.epoch = retry["producer_id"], 0
    client.sequences.clear()
    assert _markers(harness, "t") == [(old_pid, MAX_EPOCH + 1)]
    assert client.produce("t", [b"b"], version=12)["error_code"] == NONE
    assert client.end_v2(commit=True) == NONE and client.epoch == 1
    assert values(fetch(harness, "t", read_committed=True)) == [b"a", b"b"]


def test_end_txn_decisions_for_retries_and_the_next_transaction() -> None:
    def meta(state: TransactionState, epoch: int, **kw: Any) -> TransactionMetadata:
        kw.setdefault("last_producer_epoch", epoch - 1)  # what an EndTxn v5's bump records
        return TransactionMetadata("tx", 7, epoch, 60_000, state, client_txn_version=TV_2, **kw)

    answer, end, empty = EndTxnAction.ANSWER, EndTxnAction.END, EndTxnAction.EMPTY_ABORT
    # a retry of a commit whose markers are still being written, and the next one's EndTxn
    assert decide_end_txn(meta(_S.PREPARE_COMMIT, 3), 7, 2, True, TV_2) == (answer, CONCURRENT)
    assert decide_end_txn(meta(_S.PREPARE_COMMIT, 3), 7, 2, False, TV_2) == (
        answer,
        INVALID_TXN_STATE,
    )
    assert decide_end_txn(meta(_S.PREPARE_COMMIT, 3), 7, 3, False, TV_2) == (answer, CONCURRENT)
    assert decide_end_txn(meta(_S.PREPARE_COMMIT, 3, next_producer_id=9), 9, 0, True, TV_2) == (
        answer,
        CONCURRENT,
    )
    assert decide_end_txn(meta(_S.COMPLETE_ABORT, 3), 7, 1, False, TV_2) == (answer, FENCED)
    fenced = meta(_S.COMPLETE_ABORT, 3, last_producer_epoch=-1)  # aborted by a fence
    assert decide_end_txn(fenced, 7, 2, False, TV_2) == (answer, FENCED)
    assert decide_end_txn(meta(_S.ONGOING, 3), 7, 2, True, TV_2) == (answer, FENCED)
    assert decide_end_txn(meta(_S.ONGOING, 3), 7, 3, True, TV_2) == (end, NONE)
    assert decide_end_txn(meta(_S.EMPTY, 3), 7, 3, False, TV_2) == (empty, NONE)
    # version 1 metadata and requests: as before
    v1 = dataclasses.replace(meta(_S.COMPLETE_COMMIT, 3), client_txn_version=TV_0)
    assert decide_end_txn(v1, 7, 3, True, TV_0) == (answer, NONE)
    assert decide_end_txn(v1, 7, 2, True, TV_0) == (answer, FENCED)


def test_version_2_state_survives_a_restart_and_old_records_still_load(tmp_path: Any) -> None:
    manager = TransactionStateManager(tmp_path)
    prepared = TransactionMetadata(
        "tx", 7, MAX_EPOCH + 1, 60_000, _S.PREPARE_COMMIT, last_producer_epoch=MAX_EPOCH,
        partitions=frozenset({("t", 0)}), txn_start_ms=1, txn_last_update_ms=2,
        client_txn_version=TV_2, next_producer_id=9,
    )  # fmt: skip
    manager.put(prepared)
    old = prepared.to_json()
    del old["tv"], old["next_pid"]
    old["id"] = "written-before-version-2"
    manager._records.append(old)  # type: ignore[union-attr]  # as an older broker wrote it
    reopened = TransactionStateManager(tmp_path)
    assert reopened.get("tx") == prepared
    assert reopened.get("tx").next_producer_id_and_epoch == (9, 0)  # type: ignore[union-attr]
    legacy = reopened.get("written-before-version-2")
    assert legacy is not None and legacy.client_txn_version == TV_0
    assert legacy.next_producer_id == -1
    reopened.close()
    manager.close()
