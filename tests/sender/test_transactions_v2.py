"""Transaction version 2 (KIP-890 part 2) in the transactional TransactionManager, on a
scripted broker: chosen from what the coordinator's broker advertises (the finalized
``transaction.version`` and the request versions), no AddPartitionsToTxn / AddOffsetsToTxn,
Produce v12, TxnOffsetCommit v5, EndTxn v5 and the epoch it answers; transaction version 1
otherwise."""

from __future__ import annotations

import uuid

import pytest

from kclient import ConsumerGroupMetadata, OffsetAndMetadata, errors
from kclient.network.cluster import TopicPartition
from kclient.protocol import ApiKey
from tests.sender.txn_helpers import (
    ADD,
    COMMIT,
    END,
    INIT,
    OFFSETS,
    PRODUCE,
    S,
    TxnHarness,
    in_transaction,
    make_txn,
)

GROUP = ConsumerGroupMetadata("readers", generation_id=7, member_id="m-1")


def _in_transaction(level: int = 2, **max_versions: int) -> TxnHarness:
    versions = {ApiKey[k]: v for k, v in max_versions.items()}
    return in_transaction(lambda b: b.set_transaction_version(level, versions))


def _versions(h: TxnHarness, api_key: int) -> list[int]:
    return [s.version for s in h.broker.seen if s.api_key == api_key]


def test_with_transaction_version_2_partitions_join_by_produce_and_end_txn_bumps_the_epoch() -> (
    None
):
    h = _in_transaction()
    assert h.tm.is_transaction_v2
    h.send("t", 0)
    h.send("t", 1)
    h.run_until(h.tm.begin_commit())
    assert ADD not in h.broker.sent_apis()
    assert set(_versions(h, PRODUCE)) == {12} and _versions(h, END) == [5]
    assert h.tm.producer_id_and_epoch == (4000, 1)  # what EndTxn v5 answered
    h.tm.begin_transaction()
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    last = h.broker.produced[-1][1]
    assert (last.producer_epoch, last.base_sequence) == (1, 0)  # a new epoch: from 0
    assert h.broker.bodies(END)[-1]["producer_epoch"] == 1
    assert h.tm.producer_id_and_epoch == (4000, 2)
    assert INIT not in h.broker.sent_apis() and h.broker.violations == []


@pytest.mark.parametrize(
    ("level", "max_versions"),
    [
        (1, {}),  # transaction.version finalized at 1 (Kafka 4.x with TV2 off)
        (2, {"END_TXN": 4}),  # advertised, but the request versions are missing
        (2, {"PRODUCE": 11}),
        (2, {"TXN_OFFSET_COMMIT": 4}),
    ],
)
def test_otherwise_transaction_version_1_as_before(
    level: int, max_versions: dict[str, int]
) -> None:
    h = _in_transaction(level, **max_versions)
    assert not h.tm.is_transaction_v2
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    assert h.broker.sent_apis() == [ADD, PRODUCE, END]
    assert _versions(h, PRODUCE) == [11]  # v12 would add partitions implicitly
    assert _versions(h, END) == [4]
    assert h.tm.producer_id_and_epoch == (4000, 0)  # no bump
    assert h.broker.violations == []


def test_a_broker_without_finalized_features_gets_transaction_version_1() -> None:
    h = make_txn()  # the scripted broker's ApiVersions has no finalized features
    h.ready()
    assert not h.tm.is_transaction_v2


def test_send_offsets_with_transaction_version_2_is_one_txn_offset_commit_v5() -> None:
    h = _in_transaction()
    offsets = {TopicPartition("in", 0): OffsetAndMetadata(42)}
    h.run_until(h.tm.send_offsets_to_transaction(offsets, GROUP))
    assert h.broker.sent_apis()[-1] == COMMIT and OFFSETS not in h.broker.sent_apis()
    assert _versions(h, COMMIT) == [5]
    h.run_until(h.tm.begin_commit())
    assert _versions(h, END) == [5]  # the offsets started the transaction: EndTxn is sent


def test_an_abort_after_a_failed_batch_needs_no_init_producer_id() -> None:
    h = _in_transaction()
    h.send("t", 0)
    h.run(3)
    h.broker.fail_next(PRODUCE, errors.InvalidRecordError.code)
    h.send("t", 0)
    h.run(2)
    assert h.tm.state is S.ABORTABLE_ERROR
    h.run_until(h.tm.begin_abort())
    assert h.broker.sent_apis()[-1] == END and INIT not in h.broker.sent_apis()
    assert h.tm.producer_id_and_epoch == (4000, 1) and h.tm.state is S.READY
    h.tm.begin_transaction()
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    last = h.broker.produced[-1][1]
    assert (last.producer_epoch, last.base_sequence) == (1, 0)
    assert h.broker.violations == []


def test_a_retried_end_txn_keeps_the_epoch_it_was_sent_with() -> None:
    h = _in_transaction()
    h.send("t", 0)
    h.broker.fail_next(END, errors.ConcurrentTransactionsError.code)
    result = h.tm.begin_commit()
    h.run(4)
    h.clock.advance(100)  # retry.backoff.ms
    h.run_until(result)
    assert [b["producer_epoch"] for b in h.broker.bodies(END)] == [0, 0]
    assert h.tm.producer_id_and_epoch == (4000, 1)


def test_records_sent_just_before_commit_go_out_before_end_txn() -> None:
    """The caller sends and commits between the Sender's look at the accumulator and its
    choice of the next request: EndTxn must still wait for those records (sent first, it
    would end a version 2 transaction the coordinator has not seen yet)."""
    h = _in_transaction()
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    h.tm.begin_transaction()
    next_request = h.tm.next_request
    results = []

    def caller_acts_first(*args: object, **kwargs: object) -> object:
        if not results:  # the caller's thread runs here, once
            h.send("t", 0)
            results.append(h.tm.begin_commit())
        return next_request(*args, **kwargs)  # type: ignore[arg-type]

    h.tm.next_request = caller_acts_first  # type: ignore[method-assign]
    h.run()
    h.run_until(results[0])
    assert results[0].is_successful
    assert h.broker.sent_apis()[-2:] == [PRODUCE, END]
    assert h.broker.violations == []


def test_a_coordinator_that_turns_on_version_2_mid_transaction_gets_a_new_epoch_first() -> None:
    """The version-1 transaction open when the cluster finalizes transaction version 2 ends
    with EndTxn v4 (which keeps the epoch), then an InitProducerId bump; only then does
    version 2 begin, so its implicitly added partitions can never join the old transaction
    (Kafka's KAFKA-18227)."""
    h = _in_transaction(level=1)
    assert not h.tm.is_transaction_v2
    h.send("t", 0)
    h.run(3)
    h.broker.set_transaction_version(2)  # the cluster is upgraded mid-transaction
    h.send("t", 1)
    result = h.tm.begin_commit()
    h.run_until(result)
    assert result.is_successful and h.tm.state is S.READY
    assert h.broker.sent_apis()[-2:] == [END, INIT] and _versions(h, END) == [4]
    bump = h.broker.bodies(INIT)[-1]
    assert (bump["producer_id"], bump["producer_epoch"]) == (4000, 0)  # KIP-360 bump
    assert h.tm.producer_id_and_epoch == (4000, 1)
    h.tm.begin_transaction()
    assert h.tm.is_transaction_v2
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    assert _versions(h, PRODUCE)[-1] == 12 and _versions(h, END)[-1] == 5
    assert h.broker.produced[-1][1].producer_epoch == 1
    assert h.broker.violations == []


def test_version_2_seen_between_transactions_waits_for_the_next_version_1_to_end() -> None:
    h = _in_transaction(level=1)
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    h.broker.set_transaction_version(2)
    h.run()  # a request to the coordinator would show it; here the next one does
    for expected in (False, True):
        h.tm.begin_transaction()
        assert h.tm.is_transaction_v2 is expected
        h.send("t", 0)
        h.run_until(h.tm.begin_commit())
    assert _versions(h, END) == [4, 4, 5]
    assert h.broker.sent_apis().count(INIT) == 1  # the bump between them
    assert h.broker.violations == []


def test_a_commit_answered_invalid_txn_state_is_abortable_and_the_abort_bumps_the_epoch() -> None:
    """Transaction version 2: the coordinator aborted the transaction at
    transaction.timeout.ms (bumping the epoch) and answers the late commit, and the abort,
    INVALID_TXN_STATE. Abortable, as Java's (KAFKA-19177): the abort ends with a new epoch
    and the producer goes on."""
    h = _in_transaction()
    h.send("t", 0)
    h.broker.fail_next(END, errors.InvalidTxnStateError.code, errors.InvalidTxnStateError.code)
    commit = h.tm.begin_commit()
    h.run_until(commit)
    assert isinstance(commit.error, errors.TransactionRequiresAbortError)
    assert isinstance(commit.error.__cause__, errors.InvalidTxnStateError)
    assert h.tm.state is S.ABORTABLE_ERROR
    h.run_until(h.tm.begin_abort())
    assert h.tm.state is S.READY
    assert INIT in h.broker.sent_apis()  # the new epoch
    h.tm.begin_transaction()
    h.send("t", 0)
    committed = h.tm.begin_commit()
    h.run_until(committed)
    assert committed.error is None


@pytest.mark.parametrize(("level", "produce_version"), [(2, 13), (1, 11)])
def test_with_topic_ids_produce_is_v13_but_transaction_version_1_keeps_v11(
    level: int, produce_version: int
) -> None:
    """KIP-516's v13 when every topic has an id; a version-1 transaction still stops at v11
    (v12+ would add the partition to the transaction implicitly)."""
    ids = {"t": uuid.UUID("6a1f7c1e-0d35-4c11-8a49-0f3e2a9b7d11")}
    h = in_transaction(lambda b: b.set_transaction_version(level), topic_ids=ids)
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    assert _versions(h, PRODUCE) == [produce_version]
    assert h.tm.producer_id_and_epoch[1] == (1 if level == 2 else 0)
    assert h.broker.violations == []
