"""A transaction always ends (issue 31, item 1): offsets for a topic that does not exist
fail at once naming it, ``abort_transaction`` ends a transaction whose offsets are still
being retried, and the Sender thread's close is bounded whatever the transaction's state."""

from __future__ import annotations

import pytest

from kclient import ConsumerGroupMetadata, OffsetAndMetadata, errors
from kclient.network.cluster import TopicPartition
from kclient.testing import MockClock
from tests.sender.txn_helpers import COMMIT, END, OFFSETS, S, TxnBroker, TxnHarness, in_transaction

GROUP = ConsumerGroupMetadata("readers")
MISSING = TopicPartition("no-such-topic", 0)


def _offsets(h: TxnHarness, tp: TopicPartition = MISSING) -> object:
    return h.tm.send_offsets_to_transaction({tp: OffsetAndMetadata(1)}, GROUP)


def _run_for(h: TxnHarness, ms: int, step_ms: int = 10) -> None:
    for _ in range(ms // step_ms):
        h.clock.advance(step_ms)
        h.run()


@pytest.mark.parametrize("tv2", [False, True], ids=["tv1", "tv2"])
def test_offsets_of_a_topic_that_does_not_exist_fail_at_once_naming_it(tv2: bool) -> None:
    def setup(broker: TxnBroker) -> None:
        if tv2:
            broker.set_transaction_version(2)
        broker.fail_next(COMMIT, *[errors.UnknownTopicOrPartitionError.code] * 1000)

    h = in_transaction(setup)
    result = _offsets(h)
    h.run_until(result)
    assert isinstance(result.error, errors.TransactionRequiresAbortError)
    assert isinstance(result.error.__cause__, errors.UnknownTopicOrPartitionError)
    message = str(result.error)
    assert "no-such-topic" in message and "readers" in message
    assert "abort_transaction()" in message
    assert h.tm.state is S.ABORTABLE_ERROR
    _run_for(h, 5_000)  # the background loop stopped: no more TxnOffsetCommit
    assert h.broker.sent_apis().count(COMMIT) == 1
    abort = h.tm.begin_abort()
    h.run_until(abort)
    assert abort.is_successful and h.tm.state is S.READY


def test_abort_ends_a_transaction_whose_offsets_are_still_retried() -> None:
    h = in_transaction(
        lambda b: b.fail_next(COMMIT, *[errors.CoordinatorLoadInProgressError.code] * 10_000)
    )
    offsets = _offsets(h, TopicPartition("t", 0))
    _run_for(h, 1_000)
    assert not offsets.is_completed  # retriable: retried
    retried = h.broker.sent_apis().count(COMMIT)
    assert retried > 1
    abort = h.tm.begin_abort()
    h.run_until(abort)
    assert abort.is_successful and h.tm.state is S.READY
    assert h.broker.bodies(END)[-1]["committed"] is False
    assert isinstance(offsets.error, errors.TransactionAbortedError)
    assert "t-0" in str(offsets.error) or "'t'" in str(offsets.error)
    _run_for(h, 5_000)
    assert h.broker.sent_apis().count(COMMIT) == retried  # none after the abort began


def test_abort_while_add_offsets_is_retried_ends_the_transaction() -> None:
    h = in_transaction(
        lambda b: b.fail_next(OFFSETS, *[errors.ConcurrentTransactionsError.code] * 10_000)
    )
    offsets = _offsets(h, TopicPartition("t", 0))
    _run_for(h, 500)
    abort = h.tm.begin_abort()
    h.run_until(abort)
    assert abort.is_successful and h.tm.state is S.READY
    assert isinstance(offsets.error, errors.TransactionAbortedError)


class _AdvancingBroker(TxnBroker):
    """Each poll takes the time it may block (at most 50 ms), and a stuck Sender is a
    failure, not a hang."""

    polls = 0

    def poll(self, timeout_ms: int, now_ms: int) -> list:  # type: ignore[type-arg]
        self.polls += 1
        if self.polls > 20_000:
            raise AssertionError("the Sender did not stop")
        assert isinstance(self._clock, MockClock)
        self._clock.advance(max(1, min(timeout_ms, 50)))
        return super().poll(timeout_ms, now_ms)


def test_closing_while_offsets_are_retried_forever_is_bounded() -> None:
    h = in_transaction(
        lambda b: b.fail_next(COMMIT, *[errors.CoordinatorLoadInProgressError.code] * 100_000)
    )
    h.broker.__class__ = _AdvancingBroker
    offsets = _offsets(h, TopicPartition("t", 0))
    _run_for(h, 200)
    start_ms = h.clock.monotonic_ms()
    h.sender.initiate_close()
    h.sender.run()  # the thread body
    took_ms = h.clock.monotonic_ms() - start_ms
    assert took_ms <= 2 * 30_000 + 1_000  # request.timeout.ms to finish, as much to abort
    assert offsets.is_completed
    assert h.broker.bodies(END)[-1]["committed"] is False
