"""The transactional producer's states and the result of a transactional call: Java's
``TransactionManager.State`` (with its table of allowed transitions) and
``TransactionalRequestResult``.

Immutable tables and a small thread-safe latch: any thread. A ``TransactionalRequestResult``
is completed by the Sender thread and waited on by the caller of ``init_transactions``,
``commit_transaction``, ``abort_transaction`` or ``send_offsets_to_transaction``.

States::

    UNINITIALIZED --init_transactions--> INITIALIZING --InitProducerId--> READY
    READY --begin_transaction--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction--> COMMITTING_TRANSACTION --EndTxn--> READY
    IN_TRANSACTION / ABORTABLE_ERROR --abort_transaction--> ABORTING_TRANSACTION --EndTxn-->
        READY (or INITIALIZING when the epoch must be bumped first, KIP-360)
    COMMITTING_TRANSACTION --EndTxn--> INITIALIZING when a version-1 transaction ends
        and the coordinator now speaks version 2 (a new epoch before the switch)
    IN_TRANSACTION / COMMITTING_TRANSACTION --an error the transaction cannot survive-->
        ABORTABLE_ERROR (only abort_transaction() leaves it)
    any --fencing, authorization, a broker without transactions--> FATAL_ERROR (for good)
"""

from __future__ import annotations

import enum
import threading

from kclient.errors import IllegalStateError


class TransactionState(enum.Enum):
    """Java's ``TransactionManager.State``."""

    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TransactionState

#: target state -> the states it may be entered from (FATAL_ERROR: from any).
ALLOWED_SOURCES: dict[TransactionState, frozenset[TransactionState]] = {
    S.UNINITIALIZED: frozenset({S.READY, S.ABORTABLE_ERROR}),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION, S.COMMITTING_TRANSACTION}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset(
        {S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR, S.INITIALIZING}
    ),
    S.FATAL_ERROR: frozenset(TransactionState),
}


def is_transition_valid(source: TransactionState, target: TransactionState) -> bool:
    return source in ALLOWED_SOURCES[target]


class TransactionalRequestResult:
    """Java's ``TransactionalRequestResult``: completed once, by ``done`` or ``fail``.

    ``acked`` is set once a caller has seen it complete; until then a timed-out call
    (``commit_transaction(timeout)``) may be made again and waits on the same result.
    """

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.error: BaseException | None = None
        self.acked = False
        self._completed = threading.Event()

    def done(self) -> None:
        self._completed.set()

    def fail(self, error: BaseException) -> None:
        if not self._completed.is_set():
            self.error = error
            self._completed.set()

    @property
    def is_completed(self) -> bool:
        return self._completed.is_set()

    @property
    def is_successful(self) -> bool:
        return self._completed.is_set() and self.error is None

    def wait(self, timeout_s: float | None) -> bool:
        """Wait for completion (False on timeout); a completion seen here is acked."""
        if not self._completed.wait(timeout_s):
            return False
        self.acked = True
        return True

    def raise_error(self) -> None:
        """Raise the error the result failed with, if any (a fresh traceback each time)."""
        error = self.error
        if error is not None:
            raise error.with_traceback(None)

    def __repr__(self) -> str:
        state = "pending" if not self.is_completed else "failed" if self.error else "done"
        return f"<TransactionalRequestResult {self.operation} {state}>"


def illegal_state(
    operation: str, state: TransactionState, transactional_id: str
) -> IllegalStateError:
    """The error for a call the current state does not allow, saying what to do instead."""
    hint = _HINTS.get((operation, state), "")
    return IllegalStateError(
        f"{operation}() is not allowed in state {state.value} "
        f"(transactional id {transactional_id!r}){hint}"
    )


_HINTS: dict[tuple[str, TransactionState], str] = {
    **{
        (op, S.UNINITIALIZED): ": call init_transactions() first"
        for op in (
            "begin_transaction",
            "send",
            "send_offsets_to_transaction",
            "commit_transaction",
            "abort_transaction",
        )
    },
    **{
        (op, S.READY): ": no transaction is open; call begin_transaction() first"
        for op in ("send", "send_offsets_to_transaction", "commit_transaction", "abort_transaction")
    },
    ("init_transactions", S.READY): ": transactions are already initialized",
    ("init_transactions", S.IN_TRANSACTION): ": transactions are already initialized",
    ("begin_transaction", S.IN_TRANSACTION): (
        ": a transaction is already open; commit or abort it first"
    ),
    **{
        (op, state): ": the transaction is being completed; wait for that call to return"
        for op in ("send", "send_offsets_to_transaction", "begin_transaction")
        for state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)
    },
    ("commit_transaction", S.ABORTING_TRANSACTION): ": the transaction is being aborted",
    ("abort_transaction", S.COMMITTING_TRANSACTION): ": the transaction is being committed",
    **{
        (op, S.INITIALIZING): ": init_transactions() has not completed; call it (again) first"
        for op in (
            "begin_transaction",
            "send",
            "send_offsets_to_transaction",
            "commit_transaction",
            "abort_transaction",
        )
    },
}
