"""The transaction coordinator through Apis (no sockets, a fake clock): InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit with Kafka's answers."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.protocol import ApiKey
from tests.broker.txn_harness import TxnClient, fetch, values

NONE = 0
FENCED = errors.ProducerFencedError.code
CONCURRENT = errors.ConcurrentTransactionsError.code
INVALID_TXN_STATE = errors.InvalidTxnStateError.code


def test_init_producer_id_gives_a_producer_id_and_each_init_bumps_the_epoch(harness: Any) -> None:
    a = TxnClient(harness, "tx")
    assert a.init() == NONE
    assert a.epoch == 0 and a.producer_id >= 0
    b = TxnClient(harness, "tx")
    assert b.init() == NONE
    assert (b.producer_id, b.epoch) == (a.producer_id, 1)
    other = TxnClient(harness, "other")
    assert other.init() == NONE
    assert other.producer_id != a.producer_id


def test_transaction_timeout_above_the_maximum_is_refused(make_harness: Any) -> None:
    h = make_harness(transaction_max_timeout_ms=60_000)
    client = TxnClient(h, "tx")
    assert client.init(timeout_ms=60_001) == errors.InvalidTransactionTimeoutError.code
    assert client.init(timeout_ms=0) == errors.InvalidTransactionTimeoutError.code
    assert client.init(timeout_ms=60_000) == NONE


def test_a_committed_transaction_becomes_visible_to_read_committed_at_once(harness: Any) -> None:
    harness.controller.create_topic("t", 2)
    client = TxnClient(harness, "tx")
    client.init()
    assert client.add_partitions(("t", 0), ("t", 1)) == {("t", 0): NONE, ("t", 1): NONE}
    assert client.produce("t", [b"a", b"b"], 0)["error_code"] == NONE
    assert client.produce("t", [b"c"], 1)["error_code"] == NONE
    open_ = fetch(harness, "t", read_committed=True)
    assert values(open_) == [] and open_["last_stable_offset"] == 0
    assert open_["high_watermark"] == 2
    assert values(fetch(harness, "t", read_committed=False)) == [b"a", b"b"]
    assert client.end(commit=True) == NONE
    done = fetch(harness, "t", read_committed=True)
    assert values(done) == [b"a", b"b"] and done["aborted_transactions"] == []
    assert done["last_stable_offset"] == done["high_watermark"] == 3  # the marker at 2
    assert values(fetch(harness, "t", read_committed=True, partition=1)) == [b"c"]


def test_an_aborted_transaction_is_listed_for_read_committed_consumers(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_partitions(("t", 0))
    client.produce("t", [b"x", b"y"])
    assert client.end(commit=False) == NONE
    client.add_partitions(("t", 0))
    client.produce("t", [b"z"])
    assert client.end(commit=True) == NONE
    committed = fetch(harness, "t", read_committed=True)
    assert committed["aborted_transactions"] == [
        {"producer_id": client.producer_id, "first_offset": 0}
    ]
    uncommitted = fetch(harness, "t", read_committed=False)
    assert uncommitted["aborted_transactions"] is None
    assert values(uncommitted) == [b"x", b"y", b"z"]
    # from past the aborted transaction, it is not listed any more
    assert fetch(harness, "t", 3, read_committed=True)["aborted_transactions"] == []


def test_a_transactional_batch_to_a_partition_not_added_is_refused(harness: Any) -> None:
    harness.controller.create_topic("t", 2)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_partitions(("t", 0))
    assert client.produce("t", [b"a"], 1)["error_code"] == INVALID_TXN_STATE
    assert harness.controller.partition("t", 1).log.high_watermark == 0


def test_add_partitions_of_an_unknown_topic_attempts_none(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    assert client.add_partitions(("t", 0), ("nope", 0)) == {
        ("t", 0): errors.OperationNotAttemptedError.code,
        ("nope", 0): errors.UnknownTopicOrPartitionError.code,
    }


def test_a_new_producer_fences_the_old_one_and_aborts_its_transaction(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    zombie = TxnClient(harness, "tx")
    zombie.init()
    zombie.add_partitions(("t", 0))
    zombie.produce("t", [b"zombie"])
    successor = TxnClient(harness, "tx")
    # first answer: the open transaction is being aborted (with epoch 1); retry
    assert successor.init() == CONCURRENT
    assert successor.init() == NONE
    assert (successor.producer_id, successor.epoch) == (zombie.producer_id, 2)
    # the zombie is fenced at the coordinator and on the partition
    assert zombie.add_partitions(("t", 0)) == {("t", 0): FENCED}
    assert zombie.end(commit=True) == FENCED
    late = zombie.produce("t", [b"late"])
    assert late["error_code"] == errors.InvalidProducerEpochError.code
    got = fetch(harness, "t", read_committed=True)
    assert values(got) == []
    assert got["aborted_transactions"] == [{"producer_id": zombie.producer_id, "first_offset": 0}]


def test_end_txn_answers_by_state_as_kafka_does(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    assert client.end(commit=True) == INVALID_TXN_STATE  # nothing begun (Empty)
    client.add_partitions(("t", 0))
    client.produce("t", [b"a"])
    assert client.end(commit=True) == NONE
    assert client.end(commit=True) == NONE  # a retry of the commit
    assert client.end(commit=False) == INVALID_TXN_STATE
    unknown = TxnClient(harness, "never-initialised")
    unknown.producer_id, unknown.epoch = 5, 0
    assert unknown.end(commit=True) == errors.InvalidProducerIdMappingError.code


def test_end_txn_v5_is_refused_with_transaction_version_1(make_harness: Any) -> None:
    h = make_harness(transaction_version=1)
    h.controller.create_topic("t", 1)
    client = TxnClient(h, "tx")
    client.init()
    client.add_partitions(("t", 0))
    assert client.end_v2(commit=True) == errors.UnsupportedVersionError.code
    assert client.end(commit=True) == NONE  # v4: transaction version 1, served as before


def test_a_transaction_open_past_its_timeout_is_aborted_and_its_producer_fenced(
    harness: Any,
) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init(timeout_ms=10_000)
    client.add_partitions(("t", 0))
    client.produce("t", [b"slow"])
    coordinator = harness.apis[0].txn_coordinator
    assert coordinator.abort_timed_out_transactions(harness.now_ms + 10_000) == 0
    harness.now_ms += 10_001
    assert coordinator.abort_timed_out_transactions(harness.now_ms) == 1
    assert client.end(commit=True) == FENCED
    got = fetch(harness, "t", read_committed=True)
    assert values(got) == [] and got["last_stable_offset"] == 2  # the ABORT marker at 1
    # fenced for good, as in Kafka (the fence forgets the last epoch): a KIP-360 bump is
    # refused; a new producer (no producer id in InitProducerId) starts at epoch 2
    assert client.init(kip360=True) == FENCED
    assert TxnClient(harness, "tx").init() == NONE


def test_kip360_epoch_bump_refuses_a_stale_producer(harness: Any) -> None:
    first = TxnClient(harness, "tx")
    first.init()
    second = TxnClient(harness, "tx")
    second.init()
    second.init()  # epoch 2 now; epoch 0 is neither the current nor the last one
    assert first.init(kip360=True) == FENCED
    assert second.init(kip360=True) == NONE and second.epoch == 3


def test_a_request_to_a_broker_not_coordinating_the_id_is_refused(make_harness: Any) -> None:
    h = make_harness(brokers=3)
    found = h.call(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["tx"]})
    node = found["coordinators"][0]["node_id"]
    wrong = TxnClient(h, "tx", node=(node + 1) % 3)
    assert wrong.init() == errors.NotCoordinatorError.code
    assert TxnClient(h, "tx", node=node).init() == NONE


def test_verify_only_add_partitions_tells_which_partitions_are_in_the_transaction(
    harness: Any,
) -> None:
    harness.controller.create_topic("t", 2)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_partitions(("t", 0))
    r = harness.call(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        4,
        {
            "transactions": [
                {
                    "transactional_id": "tx",
                    "producer_id": client.producer_id,
                    "producer_epoch": client.epoch,
                    "verify_only": True,
                    "topics": [{"name": "t", "partitions": [0, 1]}],
                }
            ]
        },
    )
    parts = r["results_by_transaction"][0]["topic_results"][0]["results_by_partition"]
    assert {p["partition_index"]: p["partition_error_code"] for p in parts} == {
        0: NONE,
        1: errors.TransactionAbortableError.code,
    }


def _offset_fetch(h: Any, group: str) -> dict[tuple[str, int], int]:
    r = h.call(ApiKey.OFFSET_FETCH, 5, {"group_id": group, "topics": None})
    return {
        (t["name"], p["partition_index"]): p["committed_offset"]
        for t in r["topics"]
        for p in t["partitions"]
    }


def test_transactional_offsets_are_visible_only_once_the_transaction_commits(
    harness: Any,
) -> None:
    harness.controller.create_topic("in", 1)
    client = TxnClient(harness, "tx")
    client.init()
    assert client.txn_offset_commit("g", {("in", 0): 5}) == {("in", 0): INVALID_TXN_STATE}
    assert client.add_offsets("g") == NONE
    assert client.txn_offset_commit("g", {("in", 0): 5}) == {("in", 0): NONE}
    assert _offset_fetch(harness, "g") == {}
    assert client.end(commit=True) == NONE
    assert _offset_fetch(harness, "g") == {("in", 0): 5}
    # an aborted transaction's offsets are dropped
    client.add_offsets("g")
    client.txn_offset_commit("g", {("in", 0): 9})
    assert client.end(commit=False) == NONE
    assert _offset_fetch(harness, "g") == {("in", 0): 5}


def test_offset_fetch_requiring_stable_offsets_waits_for_the_open_transaction(
    harness: Any,
) -> None:
    harness.controller.create_topic("in", 2)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_offsets("g")
    client.txn_offset_commit("g", {("in", 0): 7})

    def fetch_offsets(require_stable: bool) -> dict[int, tuple[int, int]]:
        r = harness.call(
            ApiKey.OFFSET_FETCH,
            7,
            {
                "group_id": "g",
                "topics": [{"name": "in", "partition_indexes": [0, 1]}],
                "require_stable": require_stable,
            },
        )
        return {
            p["partition_index"]: (p["committed_offset"], p["error_code"])
            for p in r["topics"][0]["partitions"]
        }

    unstable = errors.UnstableOffsetCommitError.code
    assert fetch_offsets(True) == {0: (-1, unstable), 1: (-1, NONE)}
    assert fetch_offsets(False) == {0: (-1, NONE), 1: (-1, NONE)}
    client.end(commit=True)
    assert fetch_offsets(True) == {0: (7, NONE), 1: (-1, NONE)}


def test_list_and_describe_transactions_show_the_coordinators_state(harness: Any) -> None:
    harness.controller.create_topic("t", 2)
    open_ = TxnClient(harness, "open")
    open_.init(timeout_ms=30_000)
    open_.add_partitions(("t", 0), ("t", 1))
    done = TxnClient(harness, "done")
    done.init()
    listed = harness.call(
        ApiKey.LIST_TRANSACTIONS, 1, {"state_filters": [], "producer_id_filters": []}
    )
    assert sorted(
        (t["transactional_id"], t["transaction_state"]) for t in listed["transaction_states"]
    ) == [
        ("done", "Empty"),
        ("open", "Ongoing"),
    ]
    ongoing = harness.call(
        ApiKey.LIST_TRANSACTIONS,
        1,
        {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [], "duration_filter": -1},
    )
    assert [t["transactional_id"] for t in ongoing["transaction_states"]] == ["open"]
    assert ongoing["unknown_state_filters"] == ["Bogus"]
    described = harness.call(
        ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": ["open", "nobody"]}
    )["transaction_states"]
    assert {k: v for k, v in described[0].items() if k != "tags"} == {
        "error_code": NONE,
        "transactional_id": "open",
        "transaction_state": "Ongoing",
        "transaction_timeout_ms": 30_000,
        "transaction_start_time_ms": harness.now_ms,
        "producer_id": open_.producer_id,
        "producer_epoch": 0,
        "topics": [{"topic": "t", "partitions": [0, 1]}],
    }
    assert described[1]["error_code"] == errors.TransactionalIdNotFoundError.code


def test_the_state_machine_refuses_transitions_kafka_does_not_allow() -> None:
    from kclient.broker.txn_metadata import (
        IllegalTransitionError,
        TransactionMetadata,
        TransactionState,
    )

    empty = TransactionMetadata("tx", 7, 0, 60_000, TransactionState.EMPTY)
    ongoing = empty.prepare_add_partitions(frozenset({("t", 0)}), 100)
    assert (ongoing.state, ongoing.txn_start_ms) == (TransactionState.ONGOING, 100)
    with pytest.raises(IllegalTransitionError):
        empty.prepare_abort_or_commit(True, 1)  # EndTxn of nothing
    with pytest.raises(IllegalTransitionError):
        empty.prepare_complete(1)
    prepared = ongoing.prepare_abort_or_commit(True, 200)
    with pytest.raises(IllegalTransitionError):
        prepared.prepare_add_partitions(frozenset({("t", 1)}), 1)
    done = prepared.prepare_complete(300)
    assert (done.state, done.partitions) == (TransactionState.COMPLETE_COMMIT, frozenset())
    fenced = ongoing.prepare_fence_and_abort(400)
    assert (fenced.state, fenced.producer_epoch) == (TransactionState.PREPARE_ABORT, 1)


def test_an_exhausted_epoch_gets_a_new_producer_id(harness: Any) -> None:
    import dataclasses

    from kclient.broker.txn_metadata import MAX_EPOCH

    client = TxnClient(harness, "tx")
    client.init()
    state = harness.apis[0].txn_coordinator.state
    current = state.get("tx")
    state.put(dataclasses.replace(current, producer_epoch=MAX_EPOCH))
    old_producer_id = client.producer_id
    assert client.init() == NONE
    assert client.producer_id != old_producer_id and client.epoch == 0


def test_a_marker_that_cannot_be_written_leaves_the_transaction_prepared_until_it_is(
    harness: Any, monkeypatch: Any
) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_partitions(("t", 0))
    client.produce("t", [b"a"])
    log = harness.controller.partition("t", 0).log
    write = log.append_marker

    def disk_full(**kw: Any) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(log, "append_marker", disk_full)
    assert client.end(commit=True) == NONE  # PrepareCommit is written: it will commit
    assert TxnClient(harness, "tx").init() == CONCURRENT
    assert values(fetch(harness, "t", read_committed=True)) == []
    monkeypatch.setattr(log, "append_marker", write)
    harness.apis[0].txn_coordinator.complete_prepared()  # the timer's retry
    assert values(fetch(harness, "t", read_committed=True)) == [b"a"]
    assert TxnClient(harness, "tx").init() == NONE
