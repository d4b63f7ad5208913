"""Finish a transaction that another process prepared: EndTxn with a recorded producer id
and epoch, and InitProducerId on a transactional id to fence and abort what it left open.

Kafka has no public client call for this before KIP-939 (``completeTransaction``, not yet
released); stream processors that commit a Kafka transaction from a coordinator process
send the same EndTxn the producer would. On a transaction-version-1 coordinator (every
Kafka 3.x broker; a 4.x broker for any client sending EndTxn v4 or lower, which is what
we send) the epoch stays the same through a commit, so the recorded ``(producer id,
epoch)`` keeps naming the transaction, and an EndTxn(commit) repeated after it committed
is answered NONE: completing is idempotent. Under transaction version 2 (EndTxn v5,
KIP-890) every EndTxn bumps the epoch; we never send v5 (``end_txn.
LAST_VERSION_BEFORE_TRANSACTION_V2``), so the coordinator keeps version-1 semantics for
these transactions.

``complete_transaction`` answers normally when the transaction is committed (now or
before) and raises ``TransactionNotCompletedError`` when the coordinator says it cannot
be: fenced (a newer epoch, e.g. after ``transaction.timeout.ms`` aborted it), or in a
state that is not open nor committed (INVALID_TXN_STATE: it was aborted), or unknown
(the id expired). Coordinator moves and load, CONCURRENT_TRANSACTIONS and lost
connections are retried (``coordinator_calls``).

Threads: the caller's thread (the Spark driver), owning the client.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kclient import errors
from kclient.errors import AbortableTransactionError
from kclient.protocol import ApiKey
from kclient.protocol.messages import end_txn, find_coordinator
from kclient.sender.coordinator_calls import CoordinatorCalls

log = logging.getLogger(__name__)

#: Codes saying the (producer id, epoch) no longer names an open or committed transaction.
LOST = frozenset(
    {
        errors.InvalidProducerEpochError.code,
        errors.ProducerFencedError.code,
        errors.InvalidTxnStateError.code,
        errors.InvalidProducerIdMappingError.code,
        errors.UnknownProducerIdError.code,
        errors.TransactionalIdNotFoundError.code,
    }
)


@dataclass(frozen=True)
class PreparedTxn:
    """A transaction left open by its producer, to be completed elsewhere: KIP-939's
    ``PreparedTxnState`` plus the transactional id."""

    transactional_id: str
    producer_id: int
    epoch: int


class TransactionNotCompletedError(AbortableTransactionError):
    """The coordinator refused to complete a prepared transaction: it was aborted or
    fenced (``error_code`` says how), so its records will never be visible (KIP-1050's
    abortable class: the transaction is lost, the work is to be done again in a new one)."""

    def __init__(self, message: str, error_code: int) -> None:
        super().__init__(message)
        self.error_code = error_code

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.error_code))


def complete_transaction(
    calls: CoordinatorCalls, txn: PreparedTxn, *, commit: bool, timeout_ms: int
) -> None:
    """EndTxn(commit or abort) for ``txn`` at its coordinator (FindCoordinator key type 1).
    Returns once it is done (also when it was done before); raises
    ``TransactionNotCompletedError`` (see the module doc) or ``KafkaTimeoutError``."""
    body = {
        "transactional_id": txn.transactional_id,
        "producer_id": txn.producer_id,
        "producer_epoch": txn.epoch,
        "committed": commit,
    }
    response = calls.call(
        find_coordinator.TRANSACTION,
        txn.transactional_id,
        ApiKey.END_TXN,
        lambda _version: body,
        _error_code,
        timeout_ms=timeout_ms,
        max_version=end_txn.LAST_VERSION_BEFORE_TRANSACTION_V2,
    )
    code = _error_code(response)
    if code == 0:
        log.debug("%s transaction %r", "committed" if commit else "aborted", txn.transactional_id)
        return
    name = errors.error_name(code)
    if code in LOST:
        raise TransactionNotCompletedError(
            f"transaction {txn.transactional_id!r} (producer id {txn.producer_id}, epoch "
            f"{txn.epoch}) could not be {'committed' if commit else 'aborted'}: the "
            f"coordinator answered {name}, so it was aborted or taken over before this call",
            code,
        )
    raise errors.for_code(code)(f"EndTxn for {txn.transactional_id!r}")


def fence_transactional_id(
    calls: CoordinatorCalls, transactional_id: str, *, transaction_timeout_ms: int, timeout_ms: int
) -> PreparedTxn:
    """InitProducerId for ``transactional_id``: bumps its epoch, which fences its producers
    and aborts the transaction it has open (what ``init_transactions`` does, without a
    producer). Returns the new id and epoch."""
    response = calls.call(
        find_coordinator.TRANSACTION,
        transactional_id,
        ApiKey.INIT_PRODUCER_ID,
        lambda _version: {
            "transactional_id": transactional_id,
            "transaction_timeout_ms": transaction_timeout_ms,
        },
        _error_code,
        timeout_ms=timeout_ms,
    )
    code = _error_code(response)
    if code:
        raise errors.for_code(code)(f"InitProducerId for {transactional_id!r}")
    return PreparedTxn(
        transactional_id, int(response["producer_id"]), int(response["producer_epoch"])
    )


def _error_code(body: Mapping[str, Any]) -> int:
    return int(body.get("error_code", 0))
