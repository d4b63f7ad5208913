"""TransactionManager: Java's ``TransactionManager`` for a producer with a ``transactional.id``.

It extends the idempotent producer's state (``idempotence.TransactionManager``: producer
id, epoch, per-partition sequences) with the transaction state machine (``txn_state``),
the queue of coordinator requests the Sender sends before produce data (``txn_requests``
builds and handles them) and the partitions and offsets of the open transaction.

Threads: the caller's threads run ``initialize_transactions``, ``begin_transaction``,
``begin_commit``, ``begin_abort``, ``send_offsets_to_transaction``, ``check_send`` and
(through the accumulator, for a new batch) ``maybe_add_partition``; the Sender thread runs
everything else. One re-entrant lock guards the state; ``state`` is read without it where
a stale value is harmless (Java's ``volatile``).

As in Java: the first batch of a partition in a transaction waits until AddPartitionsToTxn
has added it (partitions are batched into one request); EndTxn goes out only once every
batch completed; CONCURRENT_TRANSACTIONS and coordinator moves are retried; fencing is
fatal; other errors make the transaction abortable. When the transaction coordinator
speaks InitProducerId v3+ (KIP-360), aborting after such an error bumps the epoch, so the
producer continues without a new producer id.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable, Mapping

from kclient import errors
from kclient.errors import IllegalStateError, KafkaError
from kclient.network.cluster import Node, TopicPartition
from kclient.protocol.messages import find_coordinator
from kclient.sender import idempotence
from kclient.sender.batch import NO_SEQUENCE, ProducerBatch
from kclient.sender.offsets import ConsumerGroupMetadata, OffsetAndMetadata
from kclient.sender.txn_offset_requests import AddOffsetsToTxnHandler
from kclient.sender.txn_requests import (
    AddPartitionsToTxnHandler,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    TxnRequestHandler,
)
from kclient.sender.txn_state import (
    TransactionalRequestResult,
    TransactionState,
    illegal_state,
    is_transition_valid,
)

log = logging.getLogger(__name__)

S = TransactionState
_FATAL_FOR_BATCHES = (
    errors.ProducerFencedError,
    errors.TransactionalIdAuthorizationFailedError,
    errors.ClusterAuthorizationFailedError,
    errors.UnsupportedVersionError,
)


class TransactionManager(idempotence.TransactionManager):
    """Transaction state of a transactional producer (and its idempotent bookkeeping)."""

    is_transactional = True

    def __init__(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        retry_backoff_ms: int,
        log_prefix: str = "",
    ) -> None:
        super().__init__(log_prefix)
        self.transactional_id: str | None = transactional_id
        self.txn_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
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
        self.coordinators: dict[int, Node | None] = {
            find_coordinator.TRANSACTION: None,
            find_coordinator.GROUP: None,
        }
        self.partitions_in_transaction: set[TopicPartition] = set()
        self.pending_txn_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        self.in_flight: TxnRequestHandler | None = None
        self._new_partitions: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._queue: list[tuple[int, int, TxnRequestHandler]] = []
        self._order = itertools.count()
        self._pending_transition: tuple[TransactionalRequestResult, TransactionState, str] | None
        self._pending_transition = None

    # ---- caller's threads: the public operations -----------------------------------------

    def initialize_transactions(self) -> TransactionalRequestResult:
        def start() -> TransactionalRequestResult:
            self._transition("init_transactions", S.INITIALIZING)
            result = TransactionalRequestResult("init_transactions")
            self.enqueue(InitProducerIdHandler(self, result, is_epoch_bump=False))
            log.info("%sinitializing transactional id %r", self._prefix, self.txn_id)
            return result

        with self.lock:
            self._maybe_fail("init_transactions")
            return self._cached(start, S.INITIALIZING, "init_transactions")

    def begin_transaction(self) -> None:
        with self.lock:
            self._throw_if_pending_state("begin_transaction")
            self._maybe_fail("begin_transaction")
            self._transition("begin_transaction", S.IN_TRANSACTION)

    def begin_commit(self) -> TransactionalRequestResult:
        def start() -> TransactionalRequestResult:
            self._maybe_fail("commit_transaction")
            self._transition("commit_transaction", S.COMMITTING_TRANSACTION)
            return self._begin_completing(commit=True)

        with self.lock:
            return self._cached(start, S.COMMITTING_TRANSACTION, "commit_transaction")

    def begin_abort(self) -> TransactionalRequestResult:
        def start() -> TransactionalRequestResult:
            if self.state is not S.ABORTABLE_ERROR:
                self._maybe_fail("abort_transaction")
            cause = self.last_error
            self._transition("abort_transaction", S.ABORTING_TRANSACTION)
            self._new_partitions.clear()  # nothing more is sent: no need to add them
            return self._begin_completing(commit=False, cause=cause)

        with self.lock:
            return self._cached(start, S.ABORTING_TRANSACTION, "abort_transaction")

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], group: ConsumerGroupMetadata
    ) -> TransactionalRequestResult:
        with self.lock:
            self._throw_if_pending_state("send_offsets_to_transaction")
            self._maybe_fail("send_offsets_to_transaction")
            if self.state is not S.IN_TRANSACTION:
                raise illegal_state("send_offsets_to_transaction", self.state, self.txn_id)
            result = TransactionalRequestResult("send_offsets_to_transaction")
            self.enqueue(AddOffsetsToTxnHandler(self, result, dict(offsets), group))
            return result

    def may_send(self) -> bool:
        """Records may be appended now (``check_send`` would pass; lock-free)."""
        return (
            self.state is S.IN_TRANSACTION
            and self._pending_transition is None
            and not self.prepared
        )

    def check_send(self) -> None:
        """A record may be sent only inside a transaction (lock-free when it may)."""
        if self.may_send():
            return
        with self.lock:
            self._throw_if_pending_state("send")
            self._maybe_fail("send")
            if self.state is not S.IN_TRANSACTION:
                raise illegal_state("send", self.state, self.txn_id)
            if self.prepared:
                raise IllegalStateError(
                    f"send() is not allowed: the transaction of {self.txn_id!r} was prepared "
                    "for completion elsewhere (prepare_transaction)"
                )

    def prepare(self) -> idempotence.ProducerIdAndEpoch:
        """After a flush: mark the open transaction prepared and return its producer id and
        epoch (see ``KafkaProducer.prepare_transaction``)."""
        with self.lock:
            self._throw_if_pending_state("prepare_transaction")
            self._maybe_fail("prepare_transaction")
            if self.state is not S.IN_TRANSACTION:
                raise illegal_state("prepare_transaction", self.state, self.txn_id)
            self.prepared = True
            return self.producer_id_and_epoch

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A new batch for ``tp`` (called by the accumulator): add it to the transaction."""
        with self.lock:
            if tp not in self.partitions_in_transaction and tp not in self._pending_partitions:
                self._new_partitions.add(tp)

    def _begin_completing(
        self, *, commit: bool, cause: KafkaError | None = None
    ) -> TransactionalRequestResult:
        operation = "commit_transaction" if commit else "abort_transaction"
        result = TransactionalRequestResult(operation)
        if self._new_partitions:
            self.enqueue(self.add_partitions_handler())
        if isinstance(cause, errors.InvalidProducerIdMappingError):
            # the coordinator takes no EndTxn for this producer id: straight to InitProducerId
            self.enqueue(InitProducerIdHandler(self, result, is_epoch_bump=True))
        else:
            self.enqueue(EndTxnHandler(self, result, committed=commit))
        return result

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

    def transition_to_fatal(self, error: KafkaError) -> None:
        if self.state is S.FATAL_ERROR:
            return
        self._set_state(S.FATAL_ERROR, error)
        queued, self._queue = self._queue, []
        for _, _, handler in queued:
            handler.result.fail(error)
        if self._pending_transition is not None:
            self._pending_transition[0].fail(error)
        self.set_fatal_error(error)

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

    # ---- the request queue (Sender thread; callers enqueue under the lock) ----------------

    def enqueue(self, handler: TxnRequestHandler) -> None:
        with self.lock:
            heapq.heappush(self._queue, (handler.priority, next(self._order), handler))

    def retry(self, handler: TxnRequestHandler, now_ms: int) -> None:
        """Enqueue again after the handler's backoff."""
        handler.is_retry = True
        handler.retry_at_ms = now_ms + handler.retry_backoff_ms()
        self.enqueue(handler)

    @property
    def has_pending_requests(self) -> bool:
        return bool(self._queue) or self.in_flight is not None

    def add_partitions_handler(self) -> AddPartitionsToTxnHandler:
        self._pending_partitions |= self._new_partitions
        self._new_partitions.clear()
        return AddPartitionsToTxnHandler(
            self,
            TransactionalRequestResult("AddPartitionsToTxn"),
            sorted(self._pending_partitions),
        )

    def lookup_coordinator(self, key_type: int, key: str) -> None:
        with self.lock:
            self.coordinators[key_type] = None
            for _, _, queued in self._queue:
                if isinstance(queued, FindCoordinatorHandler) and queued.key_type == key_type:
                    return
            self.enqueue(
                FindCoordinatorHandler(
                    self, TransactionalRequestResult("FindCoordinator"), key_type, key
                )
            )

    def next_request(
        self, has_incomplete_batches: bool, now_ms: int
    ) -> tuple[TxnRequestHandler | None, int | None]:
        """The next request to send, or None and how long until one may go (None: until
        something changes). EndTxn waits until every batch has completed."""
        with self.lock:
            if self._new_partitions and self.state is not S.FATAL_ERROR:
                self.enqueue(self.add_partitions_handler())
            while self._queue:
                handler = self._queue[0][2]
                if handler.is_end_txn and has_incomplete_batches:
                    return None, None
                if handler.retry_at_ms > now_ms:
                    return None, handler.retry_at_ms - now_ms
                heapq.heappop(self._queue)
                if self._terminated_by_error(handler):
                    continue
                if handler.is_end_txn and not self.transaction_started:
                    log.debug("%snothing was added to the transaction: no EndTxn", self._prefix)
                    self.complete_transaction(handler.result)
                    continue
                return handler, 0
            return None, None

    def _terminated_by_error(self, handler: TxnRequestHandler) -> bool:
        if self.state is S.FATAL_ERROR and self.last_error is not None:
            handler.result.fail(self.last_error)
            return True
        if self.state is S.ABORTABLE_ERROR and not isinstance(handler, FindCoordinatorHandler):
            handler.result.fail(self.abortable_error_for_caller())
            return True
        return False

    def complete_transaction(self, result: TransactionalRequestResult) -> None:
        """EndTxn succeeded (or was not needed): the transaction is over. After an abort
        that needs an epoch bump, InitProducerId runs next and completes ``result``."""
        bump = self.epoch_bump_required and self.state is S.ABORTING_TRANSACTION
        self.transaction_started = False
        self._new_partitions.clear()
        self._pending_partitions.clear()
        self.partitions_in_transaction.clear()
        self.pending_txn_offset_commits.clear()
        if bump:
            self.transition_to(S.INITIALIZING)
            self.enqueue(InitProducerIdHandler(self, result, is_epoch_bump=True))
            return
        self.epoch_bump_required = False
        self.transition_to(S.READY)
        result.done()

    def on_coordinator_ready(self, node_id: int, init_producer_id_max_version: int | None) -> None:
        """The transaction coordinator is connected: may it bump epochs (KIP-360)?"""
        self.coordinator_supports_bumping_epoch = (
            init_producer_id_max_version is not None and init_producer_id_max_version >= 3
        )

    def partitions_added(self, partitions: list[TopicPartition], ok: bool) -> None:
        self._pending_partitions.difference_update(partitions)
        if ok:
            self.partitions_in_transaction.update(partitions)
            self.transaction_started = True

    def close(self) -> None:
        """The producer closes for good: fail whatever is still queued."""
        with self.lock:
            error = KafkaError("the producer was closed before the transactional call completed")
            queued, self._queue = self._queue, []
            for _, _, handler in queued:
                handler.result.fail(error)
            if self._pending_transition is not None:
                self._pending_transition[0].fail(error)

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
            if self.can_bump_epoch():
                self.epoch_bump_required = True
            else:
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

    def __repr__(self) -> str:
        pid, epoch = self.producer_id_and_epoch
        return (
            f"<TransactionManager {self.txn_id!r} {self.state.value} producer id {pid} "
            f"epoch {epoch}>"
        )


__all__ = ["TransactionManager", "TransactionState", "TransactionalRequestResult"]
