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

Transaction version 2 (KIP-890 part 2), as Java's ``isTransactionV2Enabled``: when the
transaction coordinator's broker finalizes ``transaction.version`` 2 and serves EndTxn v5,
TxnOffsetCommit v5 and Produce v12, each transaction decides at ``begin_transaction``
(and ``init_transactions``) to use it. Then a partition joins the transaction with its
first Produce v12+ (no AddPartitionsToTxn), offsets with TxnOffsetCommit v5 (no
AddOffsetsToTxn), and EndTxn v5 answers the producer id and epoch for the next
transaction (the epoch bumped every time, a new producer id when it runs out): the
sequences start again at 0, and an abort after a failed batch needs no InitProducerId.
Otherwise transaction version 1, as with Kafka 3.x and tansu.
"""

from __future__ import annotations

import heapq
import itertools
import logging
from collections.abc import Callable, Mapping

from kclient import errors
from kclient.errors import IllegalStateError, KafkaError
from kclient.network.cluster import Node, TopicPartition
from kclient.protocol.messages import find_coordinator
from kclient.sender import idempotence
from kclient.sender.offsets import ConsumerGroupMetadata, OffsetAndMetadata
from kclient.sender.txn_machine import TransactionStateMachine
from kclient.sender.txn_offset_requests import AddOffsetsToTxnHandler, TxnOffsetCommitHandler
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
)

log = logging.getLogger(__name__)

S = TransactionState


class TransactionManager(TransactionStateMachine):
    """A transactional producer's transactions: the calls and the coordinator requests."""

    def __init__(
        self,
        transactional_id: str,
        transaction_timeout_ms: int,
        retry_backoff_ms: int,
        log_prefix: str = "",
    ) -> None:
        super().__init__(transactional_id, log_prefix)
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.coordinators: dict[int, Node | None] = {
            find_coordinator.TRANSACTION: None,
            find_coordinator.GROUP: None,
        }
        self.pending_txn_offset_commits: dict[TopicPartition, OffsetAndMetadata] = {}
        self.in_flight: TxnRequestHandler | None = None
        self._new_partitions: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._queue: list[tuple[int, int, TxnRequestHandler]] = []
        self._order = itertools.count()

    def _fail_queued(self, error: KafkaError) -> None:
        queued, self._queue = self._queue, []
        for _, _, handler in queued:
            handler.result.fail(error)

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
            self.is_transaction_v2 = self.coordinator_supports_tv2
            return self._cached(start, S.INITIALIZING, "init_transactions")

    def begin_transaction(self) -> None:
        with self.lock:
            self._throw_if_pending_state("begin_transaction")
            self._maybe_fail("begin_transaction")
            self._transition("begin_transaction", S.IN_TRANSACTION)
            # Version 2 only under an epoch no version-1 transaction used (see
            # v1_epoch_in_use); that one ends with an epoch bump, then version 2 begins.
            use_v2 = self.coordinator_supports_tv2 and not self.v1_epoch_in_use
            if self.is_transaction_v2 != use_v2:
                log.info("%stransaction version %d from now on", self._prefix, 2 if use_v2 else 1)
            self.is_transaction_v2 = use_v2
            if not use_v2:
                self.v1_epoch_in_use = True

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
            self._drop_offsets()
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
            if self.is_transaction_v2:  # TxnOffsetCommit v5 adds the offsets partition
                self.pending_txn_offset_commits.update(offsets)
                self.enqueue(TxnOffsetCommitHandler(self, result, group))
                self.transaction_started = True
            else:
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

    def _drop_offsets(self) -> None:
        """An abort drops the offsets not committed yet (the abort would discard them):
        a request for them that is retried must not keep the transaction from ending."""
        offset_handlers = (AddOffsetsToTxnHandler, TxnOffsetCommitHandler)
        dropped = [entry for entry in self._queue if isinstance(entry[2], offset_handlers)]
        handlers: list[AddOffsetsToTxnHandler | TxnOffsetCommitHandler] = [
            h for _, _, h in dropped if isinstance(h, offset_handlers)
        ]
        if isinstance(self.in_flight, offset_handlers):
            handlers.append(self.in_flight)  # its answer is then ignored (not retried)
        if not handlers:
            return
        self._queue = [entry for entry in self._queue if entry not in dropped]
        heapq.heapify(self._queue)
        partitions = set(self.pending_txn_offset_commits)
        for handler in handlers:
            if isinstance(handler, AddOffsetsToTxnHandler):
                partitions.update(handler.offsets)
        self.pending_txn_offset_commits.clear()
        names = ", ".join(str(tp) for tp in sorted(partitions))
        log.info("%sthe abort drops the offsets not committed yet (%s)", self._prefix, names)
        for handler in handlers:
            handler.result.fail(
                errors.TransactionAbortedError(
                    f"the offsets of group {handler.group.group_id!r} ({names}) were not "
                    f"committed: the transaction of {self.txn_id!r} was aborted"
                )
            )

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A new batch for ``tp`` (called by the accumulator): add it to the transaction
        (version 2: its Produce v12 adds it, so it is in at once)."""
        with self.lock:
            if tp in self.partitions_in_transaction or tp in self._pending_partitions:
                return
            if self.is_transaction_v2:
                self.partitions_in_transaction.add(tp)
                self.transaction_started = True
            else:
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

    # ---- the request queue (Sender thread; callers enqueue under the lock) ----------------

    def enqueue(self, handler: TxnRequestHandler) -> None:
        with self.lock:
            heapq.heappush(self._queue, (handler.priority, next(self._order), handler))

    def retry(self, handler: TxnRequestHandler, now_ms: int) -> None:
        """Enqueue again after the handler's backoff; not when its result was already
        failed (an abort dropped it, or the producer closed): nothing waits for it."""
        if handler.result.is_completed:
            return
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
        self, has_incomplete_batches: Callable[[], bool], now_ms: int
    ) -> tuple[TxnRequestHandler | None, int | None]:
        """The next request to send, or None and how long until one may go (None: until
        something changes). EndTxn waits until every batch has completed: asked under the
        lock, once EndTxn is next, so a transaction's records sent just before its commit
        are seen (a stale answer would end a version 2 transaction before its first
        Produce added a partition)."""
        with self.lock:
            if self._new_partitions and self.state is not S.FATAL_ERROR:
                self.enqueue(self.add_partitions_handler())
            while self._queue:
                handler = self._queue[0][2]
                if handler.is_end_txn and has_incomplete_batches():
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
        that needs an epoch bump, or a version-1 transaction once the coordinator speaks
        version 2 (the switch needs a new epoch), InitProducerId runs next and completes
        ``result``."""
        bump = (self.epoch_bump_required and self.state is S.ABORTING_TRANSACTION) or (
            not self.is_transaction_v2 and self.coordinator_supports_tv2 and self.can_bump_epoch()
        )
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

    def partitions_added(self, partitions: list[TopicPartition], ok: bool) -> None:
        self._pending_partitions.difference_update(partitions)
        if ok:
            self.partitions_in_transaction.update(partitions)
            self.transaction_started = True

    def close(self) -> None:
        """The producer closes for good: fail whatever is still queued."""
        with self.lock:
            error = IllegalStateError(
                "the producer was closed before the transactional call completed"
            )
            queued, self._queue = self._queue, []
            for _, _, handler in queued:
                handler.result.fail(error)
            if self._pending_transition is not None:
                self._pending_transition[0].fail(error)

    def __repr__(self) -> str:
        pid, epoch = self.producer_id_and_epoch
        return (
            f"<TransactionManager {self.txn_id!r} {self.state.value} producer id {pid} "
            f"epoch {epoch}>"
        )


__all__ = ["TransactionManager", "TransactionState", "TransactionalRequestResult"]
