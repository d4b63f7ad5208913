"""EndTxn's checks: what an EndTxn does to a transaction, before anything is written.

Kafka's ``TransactionCoordinator.endTransaction`` up to the transaction log append, as a
pure function of the transactional id's metadata and the request (``decide_end_txn``),
for both transaction versions:

* **Version 1** (EndTxn v0-v4, the metadata last changed by such a client): the request's
  producer id and epoch must be the current ones; a repeated commit (abort) of a
  completed commit (abort) succeeds again, one in the middle of its markers gets
  CONCURRENT_TRANSACTIONS.
* **Version 2** (KIP-890 part 2): every EndTxn bumps the epoch, so the epoch of a retry is
  one below the current one (or, after the epoch ran out and the id rotated, the
  previous producer id at the last epoch): a retry of a completed transaction succeeds,
  one whose markers are still being written gets CONCURRENT_TRANSACTIONS, as does the
  next transaction's EndTxn then (KAFKA-18464: the client must not fence itself). Unlike
  Kafka, a retry must also match the epoch the bump recorded as the last one, so the
  EndTxn of a producer whose transaction the coordinator aborted (timeout, or a new
  producer) is PRODUCER_FENCED, as in version 1, rather than taken for a retry. An
  EndTxn v5 abort of a transaction the coordinator holds nothing of (its records never
  arrived) is an "empty abort": the epoch is bumped all the same.

Pure; any thread (the coordinator calls it under the transactional id's lock).
"""

from __future__ import annotations

from enum import Enum

from kclient import errors
from kclient.broker.txn_metadata import (
    MAX_EPOCH,
    TV_2,
    TransactionMetadata,
    TransactionState,
)

_S = TransactionState
_NONE = 0
_MAPPING = errors.InvalidProducerIdMappingError.code
_FENCED = errors.ProducerFencedError.code
_CONCURRENT = errors.ConcurrentTransactionsError.code
_INVALID_STATE = errors.InvalidTxnStateError.code
_PREPARED = (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
_COMPLETED = {_S.COMPLETE_COMMIT: True, _S.COMPLETE_ABORT: False}


class EndTxnAction(Enum):
    """What the coordinator does after the checks passed."""

    ANSWER = "answer"  # nothing to write: answer the error code (NONE: a retry)
    END = "end"  # prepare the commit/abort, write the markers, complete
    EMPTY_ABORT = "empty-abort"  # version 2: abort with no partitions, bumping the epoch


def decide_end_txn(
    current: TransactionMetadata,
    producer_id: int,
    epoch: int,
    commit: bool,
    txn_version: int,
) -> tuple[EndTxnAction, int]:
    """(action, error code) for an EndTxn of ``producer_id`` at ``epoch`` sent with
    ``txn_version`` (2 for EndTxn v5, else 0)."""
    v2 = current.is_v2
    retry_on_overflow = (
        v2
        and current.previous_producer_id == producer_id
        and epoch == MAX_EPOCH
        and current.producer_epoch == 0
    )
    # the EndTxn that bumped to the current epoch, sent again (a fence leaves no last
    # epoch: its producer's EndTxn is fenced, as in version 1)
    retry_on_bump = (
        v2 and current.producer_epoch == epoch + 1 and current.last_producer_epoch == epoch
    )
    state = current.state
    if current.producer_id != producer_id and not retry_on_overflow:
        if state in _PREPARED and current.next_producer_id == producer_id:
            return EndTxnAction.ANSWER, _CONCURRENT  # the rotated id's first EndTxn
        return EndTxnAction.ANSWER, _MAPPING
    same_epoch = epoch == current.producer_epoch and not retry_on_overflow
    if v2:
        if state in (_S.ONGOING, _S.EMPTY):
            valid = same_epoch
        else:  # prepared or completed: a retry, or the next transaction's EndTxn
            valid = same_epoch or retry_on_bump or retry_on_overflow
    else:
        valid = same_epoch
    if not valid:
        return EndTxnAction.ANSWER, _FENCED
    if state is _S.ONGOING:
        return EndTxnAction.END, _NONE
    if state in _PREPARED:
        if v2 and same_epoch:
            return EndTxnAction.ANSWER, _CONCURRENT  # a new EndTxn: wait for the markers
        matches = (state is _S.PREPARE_COMMIT) == commit
        return EndTxnAction.ANSWER, _CONCURRENT if matches else _INVALID_STATE
    if state in _COMPLETED:
        was_commit = _COMPLETED[state]
        if v2 and not same_epoch:  # a retry of the EndTxn that completed it
            return EndTxnAction.ANSWER, _NONE if was_commit == commit else _INVALID_STATE
        if not commit and txn_version >= TV_2:
            return EndTxnAction.EMPTY_ABORT, _NONE
        if v2:  # same epoch, not a retry: nothing was added to this transaction
            return EndTxnAction.ANSWER, _INVALID_STATE
        return EndTxnAction.ANSWER, _NONE if was_commit == commit else _INVALID_STATE
    if state is _S.EMPTY and not commit and txn_version >= TV_2:
        return EndTxnAction.EMPTY_ABORT, _NONE
    return EndTxnAction.ANSWER, _INVALID_STATE
