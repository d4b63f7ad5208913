"""TransactionStateMachine: the state half of the transactional producer's manager.

Java's ``TransactionManager`` state (``txn_state``'s transitions, the abortable and fatal
errors and what the caller is told of them, the call that timed out and may be resumed),
what the coordinator's broker supports (KIP-360 epoch bumps, KIP-890 transaction version
2), and the per-batch hooks the Sender calls (which partitions may be drained, what a
failed batch does to the transaction). ``transaction_manager.TransactionManager`` adds
the public operations and the queue of coordinator requests on top.

Threads as ``TransactionManager``'s: one re-entrant lock (``lock``) guards the state;
``state`` is read without it where a stale value is harmless.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kclient import errors
from kclient.errors import IllegalStateError, KafkaError
from kclient.network.api_versions import NodeApiVersions
from kclient.network.cluster import TopicPartition
from kclient.protocol import ApiKey
from kclient.sender import idempotence
from kclient.sender.batch import NO_SEQUENCE, ProducerBatch
from kclient.sender.txn_state import (
    TransactionalRequestResult,
    TransactionState,
    illegal_state,
    is_transition_valid,
)

log = logging.getLogger(__name__)

S = TransactionState
TRANSACTION_VERSION_FEATURE = "transaction.version"
#: (api, first version) a transaction version 2 producer needs from its coordinator
TV2_VERSIONS = ((ApiKey.END_TXN, 5), (ApiKey.TXN_OFFSET_COMMIT, 5), (ApiKey.PRODUCE, 12))
_FATAL_FOR_BATCHES = (
    errors.ProducerFencedError,
    errors.TransactionalIdAuthorizationFailedError,
    errors.ClusterAuthorizationFailedError,
    errors.UnsupportedVersionError,
)


def as_fatal(error: KafkaError) -> KafkaError:
    """``error`` if its KIP-1050 class ends the producer, else a ``FatalTransactionError``
    whose ``__cause__`` it is."""
    if isinstance(error, (errors.ApplicationRecoverableError, errors.FatalTransactionError)):
        return error
    fatal = errors.FatalTransactionError(f"the transactional producer cannot go on: {error}")
    fatal.__cause__ = error
    return fatal


class TransactionStateMachine(idempotence.TransactionManager):
    """Transaction state of a transactional producer (and its idempotent bookkeeping)."""

    is_transactional = True

    def __init__(self, transactional_id: str, log_prefix: str = "") -> None:
        super().__init__(log_prefix)
        self.transactional_id: str | None = transactional_id
        self.txn_id = transactional_id
        self.lock = threading.RLock()
        self.prepared = False
        """``prepare_transaction`` handed the open transaction to another process: no more
        records, and closing leaves it open (KIP-939's prepared state, kept client-side)."""
        self.state = S.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.last_problem: str | None = None
        """The latest retriable trouble (for a timed-out call's message)."""
        self.epoch_bump_required = False
        self.transaction_started = False
        self.coordinator_supports_bumping_epoch = False
        self.coordinator_supports_tv2 = False
        """The transaction coordinator's broker finalizes transaction.version 2 and serves
        the requests of transaction version 2 (Sender thread, on each request to it)."""
        self.is_transaction_v2 = False
        """The open (or next) transaction uses transaction version 2 (Java's
        ``isTransactionV2Enabled``): decided at init_transactions and begin_transaction."""
        self.v1_epoch_in_use = False
        """A version-1 transaction ran under the current epoch. Version 1's EndTxn keeps the
        epoch, so a version-2 transaction under it could have its partitions counted into
        the last version-1 transaction while the coordinator still completes it (Kafka's
        KAFKA-18227): the switch to version 2 waits for a new epoch (InitProducerId)."""
        self.partitions_in_transaction: set[TopicPartition] = set()
        self._pending_transition: tuple[TransactionalRequestResult, TransactionState, str] | None
        self._pending_transition = None

    def _fail_queued(self, error: KafkaError) -> None:
        """The producer failed for good: fail the requests still queued."""

    # ---- state --------------------------------------------------------------------------

    @property
    def is_completing(self) -> bool:
        return self.state in (S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION)

    @property
    def has_abortable_error(self) -> bool:
        return self.state is S.ABORTABLE_ERROR

    @property
    def is_aborting(self) -> bool:
        return self.state is S.ABORTING_TRANSACTION

    @property
    def has_ongoing_transaction(self) -> bool:
        return self.state in (
            S.IN_TRANSACTION,
            S.COMMITTING_TRANSACTION,
            S.ABORTING_TRANSACTION,
            S.ABORTABLE_ERROR,
        )

    def can_bump_epoch(self) -> bool:
        return self.coordinator_supports_bumping_epoch

    def require_epoch_bump(self) -> bool:
        """An error needs a new epoch before the producer goes on: in version 2 the
        EndTxn of the abort brings it; in version 1 an InitProducerId after the abort
        (KIP-360). False when neither is possible (the error is then fatal)."""
        if self.is_transaction_v2:
            return True
        if not self.can_bump_epoch():
            return False
        self.epoch_bump_required = True
        return True

    def _transition(self, operation: str, target: TransactionState) -> None:
        """A caller's transition: an invalid one raises and changes nothing."""
        if not is_transition_valid(self.state, target):
            raise illegal_state(operation, self.state, self.txn_id)
        self._set_state(target, None)

    def transition_to(self, target: TransactionState, error: KafkaError | None = None) -> None:
        """A Sender-thread transition: an invalid one is a bug, and poisons the manager."""
        if not is_transition_valid(self.state, target):
            bug = IllegalStateError(
                f"transactional id {self.txn_id!r}: invalid transition from "
                f"{self.state.value} to {target.value}"
            )
            self.transition_to_fatal(bug)
            raise bug
        self._set_state(target, error)

    def _set_state(self, target: TransactionState, error: KafkaError | None) -> None:
        log.debug("%stransaction state %s -> %s", self._prefix, self.state.value, target.value)
        self.state = target
        self.last_error = error if target in (S.ABORTABLE_ERROR, S.FATAL_ERROR) else None

    def transition_to_abortable(self, error: KafkaError) -> None:
        if self.state is S.ABORTING_TRANSACTION:
            log.debug("%salready aborting; not recording %s", self._prefix, error)
            return
        if self.state is S.FATAL_ERROR:
            return
        log.warning("%sthe transaction of %r must be aborted: %s", self._prefix, self.txn_id, error)
        self.transition_to(S.ABORTABLE_ERROR, error)

    def transition_to_fatal(self, error: KafkaError) -> KafkaError:
        """The producer cannot go on; returns the error its calls raise from now on:
        ``error`` itself when it is an ``ApplicationRecoverableError`` or a
        ``FatalTransactionError``, else a ``FatalTransactionError`` caused by it (so what
        the user catches says what to do: KIP-1050)."""
        if self.state is S.FATAL_ERROR:
            return self.last_error or error
        error = as_fatal(error)
        self._set_state(S.FATAL_ERROR, error)
        self._fail_queued(error)
        if self._pending_transition is not None:
            self._pending_transition[0].fail(error)
        self.set_fatal_error(error)
        return error

    def fenced_error(self, where: str) -> KafkaError:
        """PRODUCER_FENCED (or INVALID_PRODUCER_EPOCH from the coordinator), for people."""
        pid, epoch = self.producer_id_and_epoch
        return errors.ProducerFencedError(
            f"{where}: transactional id {self.txn_id!r} (producer id {pid}, epoch {epoch}) was "
            "fenced: another producer with the same transactional.id called "
            "init_transactions() since (or the coordinator aborted the transaction after "
            "'transaction.timeout.ms'). This producer cannot be used any more: close it"
        )

    def abortable_error_for_caller(self) -> errors.TransactionRequiresAbortError:
        cause = self.last_error
        error = errors.TransactionRequiresAbortError(
            f"the transaction of transactional id {self.txn_id!r} cannot be completed: "
            f"{cause}. Call abort_transaction(), then begin a new transaction"
        )
        error.__cause__ = cause
        return error

    def _maybe_fail(self, operation: str) -> None:
        """Java's ``maybeFailWithError``: no transactional call works in an error state."""
        if self.state is S.ABORTABLE_ERROR:
            raise self.abortable_error_for_caller()
        if self.state is S.FATAL_ERROR and self.last_error is not None:
            raise self.last_error.with_traceback(None)

    def _throw_if_pending_state(self, operation: str) -> None:
        pending = self._pending_transition
        if pending is None:
            return
        if pending[0].acked or self.state is S.FATAL_ERROR:  # the fatal error says more
            self._pending_transition = None
            return
        raise IllegalStateError(
            f"{operation}() is not allowed: the earlier {pending[2]}() timed out and has not "
            f"completed; call {pending[2]}() again to wait for it"
        )

    def _cached(
        self,
        start: Callable[[], TransactionalRequestResult],
        state: TransactionState,
        operation: str,
    ) -> TransactionalRequestResult:
        """Java's ``handleCachedTransactionRequestResult``: a call that timed out is resumed
        by calling it again; any other call meanwhile is refused."""
        pending = self._pending_transition
        if pending is not None:
            if pending[0].acked:
                self._pending_transition = None
            elif pending[1] is not state:
                raise IllegalStateError(
                    f"{operation}() is not allowed: the earlier {pending[2]}() timed out and "
                    f"has not completed; call {pending[2]}() again to wait for it"
                )
            else:
                return pending[0]
        result = start()
        self._pending_transition = (result, state, operation)
        return result

    def on_coordinator_ready(self, node_id: int, versions: NodeApiVersions | None) -> None:
        """The transaction coordinator is connected: may it bump epochs (KIP-360), does
        it speak transaction version 2 (KIP-890)?"""
        if versions is None:
            self.coordinator_supports_bumping_epoch = False
            self.coordinator_supports_tv2 = False
            return
        init_max = versions.max_version(ApiKey.INIT_PRODUCER_ID)
        self.coordinator_supports_bumping_epoch = init_max is not None and init_max >= 3
        self.coordinator_supports_tv2 = versions.finalized_features.get(
            TRANSACTION_VERSION_FEATURE, 0
        ) >= 2 and all((versions.max_version(k) or -1) >= v for k, v in TV2_VERSIONS)

    # ---- batches (Sender thread) -----------------------------------------------------------

    def can_send(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        """Only partitions the coordinator has added to the transaction may be drained."""
        if tp not in self.partitions_in_transaction:
            return False
        return super().can_send(tp, first)

    def _bump_epoch(self) -> None:
        # Only the transaction coordinator bumps a transactional producer's epoch
        # (InitProducerId); sequence gaps make the transaction abortable instead.
        log.warning("%snot bumping the epoch locally (transactional producer)", self._prefix)

    def can_retry_sequence_error(self, batch: ProducerBatch, code: int) -> bool:
        """Java's ``canRetry`` for a transactional producer: OUT_OF_ORDER_SEQUENCE_NUMBER is
        retried only for a batch behind another being retried; the rest fail the batch (and
        make the transaction abortable)."""
        if code == errors.OutOfOrderSequenceNumberError.code:
            return not self.is_next_in_line(batch)
        return False

    def on_failure(self, batch: ProducerBatch, error: BaseException | None = None) -> None:
        """Java's ``handleFailedBatch``: a failed batch fails its transaction."""
        with self.lock:
            if isinstance(error, errors.ProducerFencedError):
                error = self.fenced_error(f"Produce to {batch.tp}")
            if isinstance(error, KafkaError):
                self._maybe_transition_to_error_state(error)
            state = self._partitions.get(batch.tp)
            if state is not None:
                state.remove(batch)
            if self.state is S.FATAL_ERROR or batch.base_sequence == NO_SEQUENCE:
                return
            if not batch.producer_id_and_epoch_matches(self.producer_id_and_epoch):
                return
            # A gap in the partition's sequence: only a new epoch closes it.
            if not self.require_epoch_bump():
                self.transition_to_fatal(
                    errors.UnsupportedVersionError(
                        f"a sent batch for {batch.tp} failed ({error}), and the transaction "
                        "coordinator cannot bump the producer epoch (InitProducerId v3+, "
                        "Kafka 2.5 or later), so the producer cannot continue safely: close it"
                    )
                )

    def _maybe_transition_to_error_state(self, error: KafkaError) -> None:
        if isinstance(error, _FATAL_FOR_BATCHES):
            self.transition_to_fatal(error)
            return
        if self.state in (S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR):
            self.transition_to_abortable(error)
