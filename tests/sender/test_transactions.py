"""The transactional TransactionManager driven through the Sender on a scripted broker:
every state transition, every request and the handling of its errors (Java's
TransactionManagerTest, in our own words)."""

from __future__ import annotations

import pytest

from kclient import ConsumerGroupMetadata, errors
from kclient.errors import IllegalStateError
from kclient.network.api_versions import NodeApiVersions
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from tests.sender.txn_helpers import (
    ADD,
    COORDINATOR,
    END,
    INIT,
    PRODUCE,
    TXN_ID,
    F,
    S,
    TxnHarness,
    in_transaction,
    make_txn,
)


def _in_transaction(**kwargs: object) -> TxnHarness:
    return in_transaction(**kwargs)


# ---- init_transactions -------------------------------------------------------------------


def test_init_finds_the_transaction_coordinator_then_gets_a_producer_id_from_it() -> None:
    h = make_txn(transaction_timeout_ms=45_000)
    result = h.tm.initialize_transactions()
    assert h.tm.state is S.INITIALIZING
    h.run_until(result)
    assert result.is_successful
    assert h.tm.state is S.READY
    find, init = h.broker.seen
    assert (find.api_key, find.body) == (F, {"key_type": 1, "coordinator_keys": [TXN_ID]})
    assert (init.api_key, init.node) == (INIT, COORDINATOR)
    assert init.body["transactional_id"] == TXN_ID
    assert init.body["transaction_timeout_ms"] == 45_000
    assert (init.body["producer_id"], init.body["producer_epoch"]) == (-1, -1)
    assert h.tm.producer_id_and_epoch == (4000, 0)


def test_find_coordinator_before_v4_names_the_key_and_its_type() -> None:
    h = make_txn()
    versions = {int(k): v for k, v in SUPPORTED_VERSIONS.items()}
    h.broker.set_node_api_versions(NodeApiVersions({**versions, ApiKey.FIND_COORDINATOR: (0, 3)}))
    h.run_until(h.tm.initialize_transactions())
    find = h.broker.seen[0]
    assert (find.version, find.body) == (3, {"key": TXN_ID, "key_type": 1})


def test_coordinator_not_available_looks_it_up_again_and_retries_after_the_backoff() -> None:
    h = make_txn(retry_backoff_ms=100)
    h.broker.fail_next(INIT, errors.CoordinatorNotAvailableError.code)
    result = h.tm.initialize_transactions()
    h.run(4)
    assert h.broker.sent_apis() == [F, INIT, F]
    assert not result.is_completed
    h.run(3)
    assert h.broker.sent_apis() == [F, INIT, F]  # InitProducerId waits out retry.backoff.ms
    h.clock.advance(100)
    h.run_until(result)
    assert h.broker.sent_apis() == [F, INIT, F, INIT]
    assert result.is_successful
    assert "COORDINATOR_NOT_AVAILABLE" in (h.tm.last_problem or "")


def test_a_retriable_find_coordinator_error_is_retried() -> None:
    h = make_txn()
    h.broker.fail_next(F, errors.CoordinatorNotAvailableError.code)
    result = h.tm.initialize_transactions()
    h.run(3)
    h.clock.advance(100)
    h.run_until(result)
    assert h.broker.sent_apis() == [F, F, INIT]


@pytest.mark.parametrize(
    ("code", "error", "text"),
    [
        (
            errors.InvalidTransactionTimeoutError.code,
            errors.InvalidTransactionTimeoutError,
            "'transaction.timeout.ms' (60000 ms) is outside what the broker allows",
        ),
        (
            errors.InvalidRequestError.code,
            errors.InvalidRequestError,
            "probably does not support transactions",
        ),
        (
            errors.TransactionalIdAuthorizationFailedError.code,
            errors.TransactionalIdAuthorizationFailedError,
            "may not use the transactional id",
        ),
        (errors.ProducerFencedError.code, errors.ProducerFencedError, "was fenced: another"),
    ],
)
def test_init_errors_are_fatal_and_say_what_to_do(
    code: int, error: type[Exception], text: str
) -> None:
    h = make_txn()
    h.broker.fail_next(INIT, code)
    result = h.tm.initialize_transactions()
    h.run_until(result)
    assert isinstance(result.error, error)
    assert text in str(result.error)
    assert h.tm.state is S.FATAL_ERROR
    with pytest.raises(error):
        h.tm.begin_transaction()


def test_a_broker_without_transaction_apis_is_a_clear_fatal_error() -> None:
    h = make_txn()
    versions = {int(k): v for k, v in SUPPORTED_VERSIONS.items() if k != ApiKey.FIND_COORDINATOR}
    h.broker.set_node_api_versions(NodeApiVersions(versions))
    result = h.tm.initialize_transactions()
    h.run_until(result)
    assert isinstance(result.error, errors.UnsupportedVersionError)
    assert "the broker does not support transactions" in str(result.error)
    assert h.tm.state is S.FATAL_ERROR


# ---- calls in the wrong state ------------------------------------------------------------


def test_calls_in_the_wrong_state_raise_naming_the_state_and_change_nothing() -> None:
    h = make_txn()
    with pytest.raises(IllegalStateError, match="begin_transaction.*UNINITIALIZED.*init_trans"):
        h.tm.begin_transaction()
    with pytest.raises(IllegalStateError, match=r"send\(\).*UNINITIALIZED"):
        h.tm.check_send()
    h.run_until(h.tm.initialize_transactions())
    with pytest.raises(IllegalStateError, match="init_transactions.*READY.*already initialized"):
        h.tm.initialize_transactions()
    for call, name in (
        (h.tm.begin_commit, "commit_transaction"),
        (h.tm.begin_abort, "abort_transaction"),
        (h.tm.check_send, "send"),
    ):
        with pytest.raises(IllegalStateError, match=rf"{name}\(\).*READY.*begin_transaction"):
            call()
    with pytest.raises(IllegalStateError, match="send_offsets_to_transaction.*READY"):
        h.tm.send_offsets_to_transaction({}, ConsumerGroupMetadata("g"))
    assert h.tm.state is S.READY
    h.tm.begin_transaction()
    with pytest.raises(IllegalStateError, match="begin_transaction.*IN_TRANSACTION"):
        h.tm.begin_transaction()
    assert h.tm.state is S.IN_TRANSACTION


# ---- partitions: AddPartitionsToTxn before the first batch --------------------------------


def test_a_partition_is_added_before_its_first_batch_and_partitions_are_batched() -> None:
    h = _in_transaction(topics={"t": 2, "u": 1})
    futures = h.send("t", 0) + h.send("t", 1) + h.send("u", 0)
    h.run()
    assert h.broker.sent_apis() == [ADD]  # no Produce before the partitions are added
    (add,) = h.broker.bodies(ADD)
    assert add["v3_and_below_transactional_id"] == TXN_ID
    assert (add["v3_and_below_producer_id"], add["v3_and_below_producer_epoch"]) == (4000, 0)
    assert add["v3_and_below_topics"] == [
        {"name": "t", "partitions": [0, 1]},
        {"name": "u", "partitions": [0]},
    ]
    assert h.broker.seen[0].version == 3  # clients use v0-v3
    h.run(3)
    assert all(f.done() for f in futures)
    assert {tp for tp, _ in h.broker.produced} == {("t", 0), ("t", 1), ("u", 0)}
    assert all(b.producer_id == 4000 and b.is_transactional for _, b in h.broker.produced)
    assert h.broker.violations == []
    h.send("t", 0)
    h.run(2)
    assert h.broker.sent_apis().count(ADD) == 1  # already in the transaction


def test_a_partition_added_while_another_add_is_in_flight_waits_for_its_own() -> None:
    h = _in_transaction()
    h.broker.hold(ADD)
    h.send("t", 0)
    h.run()
    h.send("t", 1)
    h.run(2)
    assert h.broker.sent_apis() == [ADD]  # one coordinator request at a time
    h.broker.release(ADD)
    h.run(3)
    assert [b["v3_and_below_topics"] for b in h.broker.bodies(ADD)] == [
        [{"name": "t", "partitions": [0]}],
        [{"name": "t", "partitions": [1]}],
    ]
    assert h.broker.violations == []
    assert len(h.broker.produced) == 2


def test_concurrent_transactions_on_the_first_add_retries_after_20_ms() -> None:
    h = _in_transaction(retry_backoff_ms=100)
    h.broker.fail_next(ADD, errors.ConcurrentTransactionsError.code)
    h.send("t", 0)
    h.run(2)
    assert h.broker.sent_apis() == [ADD]
    h.clock.advance(19)
    h.run()
    assert h.broker.sent_apis() == [ADD]
    h.clock.advance(1)
    h.run(3)
    assert h.broker.sent_apis()[:2] == [ADD, ADD]
    assert h.broker.produced


# ---- commit -------------------------------------------------------------------------------


def test_commit_sends_every_batch_first_then_end_txn() -> None:
    h = _in_transaction(linger_ms=60_000)  # nothing would be sent for a minute
    (future,) = h.send("t", 0)
    h.broker.hold(PRODUCE)
    result = h.tm.begin_commit()
    assert h.tm.state is S.COMMITTING_TRANSACTION
    h.run(4)
    assert h.broker.sent_apis() == [ADD, PRODUCE]  # EndTxn waits for the batch
    h.broker.release(PRODUCE)
    h.run_until(result)
    assert h.broker.sent_apis() == [ADD, PRODUCE, END]
    (end,) = h.broker.bodies(END)
    assert end == {
        "transactional_id": TXN_ID,
        "producer_id": 4000,
        "producer_epoch": 0,
        "committed": True,
    }
    assert h.broker.seen[-1].node == COORDINATOR
    assert result.is_successful and future.result(0).offset == 0
    assert h.tm.state is S.READY


def test_next_transaction_reuses_the_coordinator_and_re_adds_its_partitions() -> None:
    h = _in_transaction()
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    h.tm.begin_transaction()
    h.send("t", 0)
    h.run_until(h.tm.begin_commit())
    assert h.broker.sent_apis() == [ADD, PRODUCE, END, ADD, PRODUCE, END]
    assert h.broker.violations == []


def test_an_empty_transaction_commits_without_end_txn() -> None:
    h = _in_transaction()
    result = h.tm.begin_commit()
    h.run_until(result)
    assert result.is_successful and h.tm.state is S.READY
    assert h.broker.seen == []


def test_concurrent_transactions_on_end_txn_is_retried_after_the_backoff() -> None:
    h = _in_transaction(retry_backoff_ms=50)
    h.send("t", 0)
    h.broker.fail_next(END, errors.ConcurrentTransactionsError.code)
    result = h.tm.begin_commit()
    h.run(6)
    assert h.broker.sent_apis() == [ADD, PRODUCE, END]
    h.clock.advance(50)
    h.run_until(result)
    assert h.broker.sent_apis() == [ADD, PRODUCE, END, END]
    assert result.is_successful


@pytest.mark.parametrize("disconnect", [False, True])
def test_not_coordinator_or_a_lost_connection_finds_the_coordinator_again(
    disconnect: bool,
) -> None:
    h = _in_transaction(retry_backoff_ms=10)
    h.send("t", 0)
    h.run(3)
    h.broker.coordinator = 0  # the coordinator moved
    if disconnect:
        h.broker.hold(END)
    else:
        h.broker.fail_next(END, errors.NotCoordinatorError.code)
    result = h.tm.begin_commit()
    h.run(2)
    if disconnect:
        h.broker.held.clear()
        h.broker.disconnect(COORDINATOR)
    h.run(3)
    h.clock.advance(10)
    h.run_until(result)
    assert h.broker.sent_apis() == [ADD, PRODUCE, END, F, END]
    assert [s.node for s in h.broker.seen if s.api_key == END] == [COORDINATOR, 0]
    assert result.is_successful


# ---- fatal errors ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", [1, 2], ids=["EndTxn-v4", "EndTxn-v5"])
@pytest.mark.parametrize(
    "code", [errors.ProducerFencedError.code, errors.InvalidProducerEpochError.code]
)
def test_fencing_on_end_txn_is_fatal_and_says_another_producer_took_over(
    code: int, level: int
) -> None:
    h = in_transaction(lambda b: b.set_transaction_version(level))
    assert h.tm.is_transaction_v2 is (level == 2)
    h.send("t", 0)
    h.broker.fail_next(END, code)
    result = h.tm.begin_commit()
    h.run_until(result)
    assert isinstance(result.error, errors.ProducerFencedError)
    text = str(result.error)
    assert f"EndTxn: transactional id {TXN_ID!r} (producer id 4000, epoch 0) was fenced" in text
    assert "another producer with the same transactional.id" in text
    assert "close it" in text
    assert h.tm.state is S.FATAL_ERROR and h.tm.fatal_error is result.error
    for call in (h.tm.begin_transaction, h.tm.check_send, h.tm.begin_abort):
        with pytest.raises(errors.ProducerFencedError):
            call()


def test_fencing_on_add_partitions_fails_queued_batches() -> None:
    h = _in_transaction()
    h.broker.fail_next(ADD, errors.InvalidProducerEpochError.code)
    (future,) = h.send("t", 0)
    h.run(3)
    assert h.tm.state is S.FATAL_ERROR
    assert isinstance(future.exception(0), errors.ProducerFencedError)
    assert PRODUCE not in h.broker.sent_apis()


@pytest.mark.parametrize(
    "code",
    [errors.InvalidTxnStateError.code, errors.TransactionalIdAuthorizationFailedError.code],
)
def test_invalid_txn_state_and_authorization_on_end_txn_are_fatal(code: int) -> None:
    h = _in_transaction()
    h.send("t", 0)
    h.broker.fail_next(END, code)
    result = h.tm.begin_commit()
    h.run_until(result)
    assert isinstance(result.error, errors.for_code(code))
    assert TXN_ID in str(result.error)
    assert h.tm.state is S.FATAL_ERROR


def test_produce_fenced_is_fatal() -> None:
    h = _in_transaction()
    h.broker.fail_next(PRODUCE, errors.ProducerFencedError.code)
    (future,) = h.send("t", 0)
    h.run(3)
    assert isinstance(future.exception(0), errors.ProducerFencedError)
    assert h.tm.state is S.FATAL_ERROR
    assert "Produce to t-0: transactional id" in str(h.tm.fatal_error)
    with pytest.raises(errors.ProducerFencedError, match="another producer"):
        h.tm.begin_commit()
