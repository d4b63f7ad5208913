"""Aborting: abortable errors, abort_transaction, the KIP-360 epoch bump, offsets in a
transaction, calls that timed out, and closing with a transaction open."""

from __future__ import annotations

import pytest

from kclient import ConsumerGroupMetadata, OffsetAndMetadata, errors
from kclient.errors import IllegalStateError
from kclient.network.cluster import TopicPartition
from tests.sender.txn_helpers import (
    ADD,
    COMMIT,
    COORDINATOR,
    END,
    INIT,
    OFFSETS,
    PRODUCE,
    TXN_ID,
    F,
    S,
    TxnHarness,
    in_transaction,
)

GROUP = ConsumerGroupMetadata("readers", generation_id=7, member_id="m-1", group_instance_id="i")


def _in_transaction(init_producer_id_max: int = 5, **kwargs: object) -> TxnHarness:
    return in_transaction(lambda b: b.set_init_producer_id_max(init_producer_id_max), **kwargs)


# ---- abort ------------------------------------------------------------------------------------


def test_abort_fails_queued_records_and_ends_the_transaction_with_abort() -> None:
    h = _in_transaction()
    (sent,) = h.send("t", 0)
    h.run(3)  # added and sent
    h.broker.hold(ADD)
    (queued,) = h.send("t", 1)  # waits for its partition to be added
    h.run(2)
    result = h.tm.begin_abort()
    assert h.tm.state is S.ABORTING_TRANSACTION
    h.run(2)
    assert isinstance(queued.exception(0), errors.TransactionAbortedError)
    assert "was not sent" in str(queued.exception(0))
    h.broker.release(ADD)
    h.run_until(result)
    assert result.is_successful and h.tm.state is S.READY
    assert sent.result(0).offset == 0
    (end,) = h.broker.bodies(END)
    assert end["committed"] is False
    assert h.broker.sent_apis() == [ADD, PRODUCE, ADD, END]
    assert [tp for tp, _ in h.broker.produced] == [("t", 0)]


def test_abort_waits_for_batches_in_flight_before_end_txn() -> None:
    h = _in_transaction()
    (future,) = h.send("t", 0)
    h.broker.hold(PRODUCE)
    h.run(3)
    result = h.tm.begin_abort()
    h.run(3)
    assert h.broker.sent_apis() == [ADD, PRODUCE]
    h.broker.release(PRODUCE)
    h.run_until(result)
    assert h.broker.sent_apis() == [ADD, PRODUCE, END]
    assert future.result(0).offset == 0  # written; the abort marker hides it from readers


# ---- abortable errors -------------------------------------------------------------------------


def test_a_failed_batch_makes_the_transaction_abortable() -> None:
    h = _in_transaction()
    h.broker.fail_next(PRODUCE, errors.InvalidRecordError.code)
    (future,) = h.send("t", 0)
    h.run(3)
    assert isinstance(future.exception(0), errors.InvalidRecordError)
    assert h.tm.state is S.ABORTABLE_ERROR
    for call in (h.tm.check_send, h.tm.begin_commit, h.tm.begin_transaction):
        with pytest.raises(errors.TransactionRequiresAbortError) as raised:
            call()
        assert "Call abort_transaction(), then begin a new transaction" in str(raised.value)
        assert isinstance(raised.value.__cause__, errors.InvalidRecordError)
    h.run_until(h.tm.begin_abort())
    assert h.tm.state is S.READY
    h.tm.begin_transaction()
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    assert h.broker.violations == []


def test_an_error_during_commit_fails_the_commit_and_requires_abort() -> None:
    h = _in_transaction(linger_ms=60_000)
    h.send("t", 0)
    h.broker.fail_next(PRODUCE, errors.TopicAuthorizationFailedError.code)
    result = h.tm.begin_commit()
    h.run_until(result)
    assert isinstance(result.error, errors.TransactionRequiresAbortError)
    assert END not in h.broker.sent_apis()
    assert h.tm.state is S.ABORTABLE_ERROR


def test_abortable_error_bumps_the_epoch_on_abort_when_the_coordinator_can() -> None:
    h = _in_transaction(init_producer_id_max=3)
    h.send("t", 0)
    h.run(3)
    h.broker.fail_next(PRODUCE, errors.InvalidRecordError.code)
    h.send("t", 0)
    h.run(2)
    assert h.tm.state is S.ABORTABLE_ERROR
    h.run_until(h.tm.begin_abort())
    assert h.broker.sent_apis()[-2:] == [END, INIT]
    bump = h.broker.bodies(INIT)[-1]
    assert (bump["producer_id"], bump["producer_epoch"]) == (4000, 0)
    assert h.tm.producer_id_and_epoch == (4000, 1)
    assert h.tm.state is S.READY
    h.tm.begin_transaction()
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    last = h.broker.produced[-1][1]
    assert (last.producer_epoch, last.base_sequence) == (1, 0)  # sequences start again
    assert h.broker.violations == []


def test_without_epoch_bumps_a_failed_sent_batch_is_fatal() -> None:
    h = _in_transaction(init_producer_id_max=2)
    h.broker.fail_next(PRODUCE, errors.InvalidRecordError.code)
    h.send("t", 0)
    h.run(3)
    assert h.tm.state is S.FATAL_ERROR
    assert "cannot bump the producer epoch" in str(h.tm.fatal_error)


def test_without_epoch_bumps_an_error_before_sending_still_aborts() -> None:
    h = _in_transaction(init_producer_id_max=2)
    h.broker.fail_next(ADD, errors.TopicAuthorizationFailedError.code)
    (future,) = h.send("t", 0)
    h.run(2)
    assert h.tm.state is S.ABORTABLE_ERROR
    assert "not allowed to write to t" in str(h.tm.last_error)
    h.run_until(h.tm.begin_abort())
    assert isinstance(future.exception(0), errors.TransactionAbortedError)
    assert INIT not in h.broker.sent_apis()
    assert h.tm.state is S.READY


def test_unknown_producer_id_on_commit_then_abort_bumps_the_epoch() -> None:
    h = _in_transaction()
    h.send("t", 0)
    h.broker.fail_next(END, errors.UnknownProducerIdError.code, errors.UnknownProducerIdError.code)
    commit = h.tm.begin_commit()
    h.run_until(commit)
    assert isinstance(commit.error, errors.TransactionRequiresAbortError)
    abort = h.tm.begin_abort()
    h.run_until(abort)
    assert abort.is_successful
    assert h.broker.sent_apis()[-3:] == [END, END, INIT]
    assert h.tm.producer_id_and_epoch == (4000, 1)
    assert h.tm.state is S.READY


def test_invalid_producer_id_mapping_aborts_by_init_producer_id_alone() -> None:
    h = _in_transaction()
    h.send("t", 0)
    h.run(3)
    h.broker.fail_next(OFFSETS, errors.InvalidProducerIdMappingError.code)
    offsets = h.tm.send_offsets_to_transaction(
        {TopicPartition("in", 0): OffsetAndMetadata(5)}, GROUP
    )
    h.run_until(offsets)
    assert h.tm.state is S.ABORTABLE_ERROR
    h.run_until(h.tm.begin_abort())
    assert END not in h.broker.sent_apis()
    assert h.broker.sent_apis()[-1] == INIT
    assert h.tm.state is S.READY


# ---- offsets --------------------------------------------------------------------------------


def test_send_offsets_adds_the_group_then_commits_to_the_group_coordinator() -> None:
    h = _in_transaction()
    offsets = {
        TopicPartition("in", 0): OffsetAndMetadata(42, "note", leader_epoch=3),
        TopicPartition("in", 1): OffsetAndMetadata(7),
    }
    result = h.tm.send_offsets_to_transaction(offsets, GROUP)
    h.run(2)
    assert not result.is_completed  # done only when the offsets are committed
    h.run_until(result)
    assert result.is_successful
    assert h.broker.sent_apis() == [OFFSETS, F, COMMIT]
    add, find, commit = h.broker.seen
    assert (add.node, add.body["group_id"], add.body["transactional_id"]) == (
        COORDINATOR,
        "readers",
        TXN_ID,
    )
    assert find.body == {"key_type": 0, "coordinator_keys": ["readers"]}
    assert commit.node == h.broker.group_coordinator and commit.version == 4
    assert commit.body["generation_id"] == 7
    assert (commit.body["member_id"], commit.body["group_instance_id"]) == ("m-1", "i")
    assert commit.body["topics"] == [
        {
            "name": "in",
            "partitions": [
                {
                    "partition_index": 0,
                    "committed_offset": 42,
                    "committed_leader_epoch": 3,
                    "committed_metadata": "note",
                },
                {
                    "partition_index": 1,
                    "committed_offset": 7,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                },
            ],
        }
    ]
    h.run_until(h.tm.begin_commit())
    assert h.broker.sent_apis()[-1] == END  # offsets alone make a transaction worth ending


def test_offsets_refused_retriably_are_sent_again() -> None:
    h = _in_transaction(retry_backoff_ms=10)
    h.broker.fail_next(COMMIT, errors.CoordinatorLoadInProgressError.code)
    result = h.tm.send_offsets_to_transaction(
        {TopicPartition("in", 0): OffsetAndMetadata(1)}, GROUP
    )
    h.run(4)
    h.clock.advance(10)
    h.run_until(result)
    assert h.broker.sent_apis() == [OFFSETS, F, COMMIT, COMMIT]


@pytest.mark.parametrize(
    "code", [errors.UnknownMemberIdError.code, errors.IllegalGenerationError.code]
)
def test_a_stale_group_generation_is_a_commit_failed_abortable_error(code: int) -> None:
    h = _in_transaction()
    h.broker.fail_next(COMMIT, code)
    result = h.tm.send_offsets_to_transaction(
        {TopicPartition("in", 0): OffsetAndMetadata(1)}, GROUP
    )
    h.run_until(result)
    assert isinstance(result.error, errors.TransactionRequiresAbortError)
    assert isinstance(result.error.__cause__, errors.CommitFailedError)
    assert "generation or member id is stale" in str(result.error)
    assert h.tm.state is S.ABORTABLE_ERROR


# ---- a call that timed out is resumed ----------------------------------------------------------


def test_a_commit_that_timed_out_is_resumed_by_calling_it_again() -> None:
    h = _in_transaction()
    h.send("t", 0)
    h.broker.hold(END)
    first = h.tm.begin_commit()
    h.run(5)
    assert not first.wait(0)  # the caller gave up waiting
    with pytest.raises(IllegalStateError, match=r"commit_transaction\(\) timed out.*call commit"):
        h.tm.begin_abort()
    with pytest.raises(IllegalStateError, match="commit_transaction"):
        h.tm.begin_transaction()
    assert h.tm.begin_commit() is first  # resumes: no second EndTxn
    h.broker.release(END)
    h.run_until(first)
    assert first.is_successful
    assert h.broker.sent_apis().count(END) == 1
    h.tm.begin_transaction()
    assert h.tm.state is S.IN_TRANSACTION


# ---- closing -------------------------------------------------------------------------------------


def test_closing_with_a_transaction_open_aborts_it() -> None:
    h = _in_transaction()
    h.send("t", 0)
    h.run(3)
    h.sender.initiate_close()
    h.sender.run()  # the thread body: returns once the transaction is aborted
    assert h.broker.sent_apis()[-1] == END
    assert h.broker.bodies(END)[-1]["committed"] is False
    assert h.tm.state is S.READY
