"""TransactionCoordinator: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn.

Kafka's ``TransactionCoordinator`` (transaction version 1, the protocol every released
client speaks), for the transactional ids broker ``node_id`` coordinates. Each request
is checked the way Kafka checks it and answered with Kafka's error codes; the state
machine is ``TransactionMetadata``'s; every transition is written to the cluster's
``TransactionStateManager`` before it is taken. Ending a transaction writes PrepareCommit
or PrepareAbort, then the markers (``TransactionMarkerWriter``, in-process), then
CompleteCommit / CompleteAbort, all before EndTxn is answered; a marker that cannot be
written (a storage error) leaves the transaction prepared (clients get
CONCURRENT_TRANSACTIONS) until the timer writes it.

* InitProducerId: a new id gets a producer id at epoch 0; a known one its epoch bumped
  (a new producer id once the epoch is exhausted), which fences older producers; an
  Ongoing transaction is first aborted with a bumped epoch (its producer is fenced on
  every partition by the ABORT markers) and the caller gets CONCURRENT_TRANSACTIONS, to
  retry. With its producer id and epoch (v3+, KIP-360) a producer bumps its own epoch
  after an abortable error; a stale one gets PRODUCER_FENCED.
* A transaction open longer than its ``transaction.timeout.ms`` is aborted with a bumped
  epoch (``abort_timed_out_transactions``, every
  ``transaction.abort.timed.out.transaction.cleanup.interval.ms``).
* A transactional id with no transaction for ``transactional.id.expiration.ms`` (7 days,
  Kafka's default) is forgotten (``expire_transactional_ids``, every
  ``transaction.remove.expired.transaction.cleanup.interval.ms``): a Dead tombstone is
  written, and its next InitProducerId starts over with a new producer id. Without it
  every id ever used would stay in memory and in the state log for ever.

Thread-safety: every method holds the state manager's lock (request handler threads,
and the purgatory's reaper thread for the timer).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kclient import errors
from kclient.broker.coordinator_timer import CoordinatorTimer
from kclient.broker.purgatory import DelayedOperationPurgatory
from kclient.broker.txn_markers import GROUP_OFFSETS_TOPIC, TransactionMarkerWriter
from kclient.broker.txn_metadata import (
    NO_PRODUCER_EPOCH,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from kclient.broker.txn_state import TransactionStateManager, txn_partition_for

log = logging.getLogger(__name__)

_S = TransactionState
_NONE = 0
_INVALID_REQUEST = errors.InvalidRequestError.code
_MAPPING = errors.InvalidProducerIdMappingError.code
_FENCED = errors.ProducerFencedError.code
_CONCURRENT = errors.ConcurrentTransactionsError.code
_INVALID_STATE = errors.InvalidTxnStateError.code
_TIMER_KEY = "abort-timed-out-transactions"
_EXPIRE_KEY = "remove-expired-transactional-ids"


@dataclass(frozen=True)
class InitProducerIdResult:
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    """The transaction coordinator of broker ``node_id``."""

    def __init__(
        self,
        node_id: int,
        state: TransactionStateManager,
        markers: TransactionMarkerWriter,
        allocate_producer_id: Callable[[], int],
        *,
        is_coordinator: Callable[[str], bool] = lambda transactional_id: True,
        time_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
    ) -> None:
        self.node_id = node_id
        self.state = state
        self.markers = markers
        self._allocate = allocate_producer_id
        self.is_coordinator = is_coordinator
        self.time_ms = time_ms
        self.active = True
        self._timer: CoordinatorTimer | None = None

    # ---- lifecycle ---------------------------------------------------------------------

    def startup(
        self,
        purgatory: DelayedOperationPurgatory,
        interval_ms: int,
        monotonic_ns: Callable[[], int],
        *,
        expiration_ms: int = 604_800_000,
        expiration_interval_ms: int = 3_600_000,
    ) -> None:
        """Write the markers of transactions left prepared, then check for timed-out
        transactions every ``interval_ms`` and for expired transactional ids (unused for
        ``expiration_ms``) every ``expiration_interval_ms``."""
        self.complete_prepared()
        timer = self._timer = CoordinatorTimer(purgatory, self.state.lock, monotonic_ns)

        def tick() -> None:
            if not self.active:
                return
            self.complete_prepared()
            self.abort_timed_out_transactions(self.time_ms())
            timer.schedule(_TIMER_KEY, interval_ms, tick)

        def expire() -> None:
            if not self.active:
                return
            self.expire_transactional_ids(self.time_ms(), expiration_ms)
            timer.schedule(_EXPIRE_KEY, expiration_interval_ms, expire)

        with self.state.lock:
            timer.schedule(_TIMER_KEY, interval_ms, tick)
            timer.schedule(_EXPIRE_KEY, expiration_interval_ms, expire)

    def shutdown(self) -> None:
        with self.state.lock:
            self.active = False
            if self._timer is not None:
                self._timer.cancel_all()

    def _check_coordinator(self, transactional_id: str) -> int:
        if not self.active:
            return errors.CoordinatorNotAvailableError.code
        if not self.is_coordinator(transactional_id):
            return errors.NotCoordinatorError.code
        return _NONE

    def _put(self, metadata: TransactionMetadata) -> int:
        try:
            self.state.put(metadata)
        except errors.KafkaStorageError as exc:
            log.error("transactional id %r: %s", metadata.transactional_id, exc)
            return errors.CoordinatorNotAvailableError.code
        return _NONE

    def _new_producer_id(self) -> int | errors.BrokerResponseError:
        try:
            return self._allocate()
        except errors.BrokerResponseError as exc:
            return exc

    # ---- InitProducerId ----------------------------------------------------------------

    def handle_init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected: tuple[int, int] | None = None
    ) -> InitProducerIdResult:
        """``expected``: (producer id, epoch) the producer has (v3+, -1/-1 is None)."""
        if not transactional_id:
            return InitProducerIdResult(_INVALID_REQUEST)
        if not self.state.validate_timeout(timeout_ms):
            log.info(
                "transactional id %r: transaction.timeout.ms %d is not in 1..%d "
                "(transaction.max.timeout.ms)",
                transactional_id,
                timeout_ms,
                self.state.max_timeout_ms,
            )
            return InitProducerIdResult(errors.InvalidTransactionTimeoutError.code)
        with self.state.lock:
            error = self._check_coordinator(transactional_id)
            if error:
                return InitProducerIdResult(error)
            now_ms = self.time_ms()
            current = self.state.get(transactional_id)
            if current is None:
                producer_id = self._new_producer_id()
                if isinstance(producer_id, errors.BrokerResponseError):
                    return InitProducerIdResult(producer_id.code)
                current = TransactionMetadata(
                    transactional_id, producer_id, NO_PRODUCER_EPOCH, timeout_ms, _S.EMPTY,
                    txn_last_update_ms=now_ms,
                )  # fmt: skip
            if expected is not None and not _is_valid_producer_id(current, expected):
                return InitProducerIdResult(_FENCED)
            if current.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                return InitProducerIdResult(_CONCURRENT)
            if current.state is _S.ONGOING:
                # abort it with a bumped epoch (fencing its producer), then the caller retries
                log.info(
                    "transactional id %r: aborting the open transaction of producer %d "
                    "epoch %d (a new producer initialised)",
                    transactional_id,
                    current.producer_id,
                    current.producer_epoch,
                )
                error = self._end(current.prepare_fence_and_abort(now_ms))
                return InitProducerIdResult(error or _CONCURRENT)
            if current.state is _S.DEAD or current.state is _S.PREPARE_EPOCH_FENCE:
                raise AssertionError(f"{transactional_id!r} is {current.state.value}")
            if current.is_epoch_exhausted and (
                expected is None or expected[1] == current.producer_epoch
            ):
                producer_id = self._new_producer_id()
                if isinstance(producer_id, errors.BrokerResponseError):
                    return InitProducerIdResult(producer_id.code)
                nxt = current.prepare_producer_id_rotation(
                    producer_id, timeout_ms, now_ms, expected is not None
                )
            else:
                bumped = current.prepare_increment_epoch(
                    timeout_ms, expected[1] if expected is not None else None, now_ms
                )
                if bumped is None:
                    return InitProducerIdResult(_FENCED)
                nxt = bumped
            error = self._put(nxt)
            if error:
                return InitProducerIdResult(error)
            log.info(
                "transactional id %r: producer %d epoch %d",
                transactional_id,
                nxt.producer_id,
                nxt.producer_epoch,
            )
            return InitProducerIdResult(_NONE, nxt.producer_id, nxt.producer_epoch)

    # ---- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------

    def _current(
        self, transactional_id: str, producer_id: int, epoch: int
    ) -> TransactionMetadata | int:
        """The metadata of a request from ``producer_id`` at ``epoch``, or an error."""
        if not transactional_id:
            return _INVALID_REQUEST
        error = self._check_coordinator(transactional_id)
        if error:
            return error
        current = self.state.get(transactional_id)
        if current is None or current.producer_id != producer_id:
            return _MAPPING
        if current.producer_epoch != epoch:
            return _FENCED
        return current

    def handle_add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> int:
        """Add partitions (and ``__consumer_offsets`` ones: AddOffsetsToTxn) to the
        transaction; an error code for all of them."""
        wanted = frozenset(partitions)
        with self.state.lock:
            current = self._current(transactional_id, producer_id, epoch)
            if isinstance(current, int):
                return current
            if current.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                return _CONCURRENT
            if current.state is not _S.ONGOING or not wanted <= current.partitions:
                error = self._put(current.prepare_add_partitions(wanted, self.time_ms()))
                if error:
                    return error
            self.markers.register(
                (tp for tp in wanted if tp[0] != GROUP_OFFSETS_TOPIC), producer_id, epoch
            )
            return _NONE

    def handle_add_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> int:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the
        transaction, so its TxnOffsetCommit becomes visible with the COMMIT marker."""
        return self.handle_add_partitions(
            transactional_id,
            producer_id,
            epoch,
            [(GROUP_OFFSETS_TOPIC, txn_partition_for(group_id))],
        )

    def handle_verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[TopicPartition],
    ) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn v4+ ``verify_only``: per partition, NONE when it is in the
        transaction, else TRANSACTION_ABORTABLE (Kafka's)."""
        wanted = list(partitions)
        with self.state.lock:
            current = self._current(transactional_id, producer_id, epoch)
            if isinstance(current, int):
                return dict.fromkeys(wanted, current)
            if current.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                return dict.fromkeys(wanted, _CONCURRENT)
            abortable = errors.TransactionAbortableError.code
            return {tp: _NONE if tp in current.partitions else abortable for tp in wanted}

    def check_offsets_in_transaction(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> int:
        """For TxnOffsetCommit: the producer's Ongoing transaction holds the group's
        offsets partition (AddOffsetsToTxn came first)."""
        tp = (GROUP_OFFSETS_TOPIC, txn_partition_for(group_id))
        with self.state.lock:
            current = self.state.get(transactional_id)
            if current is None or current.producer_id != producer_id:
                return _MAPPING
            if current.producer_epoch != epoch:
                return _FENCED
            if current.state is not _S.ONGOING or tp not in current.partitions:
                return _INVALID_STATE
            return _NONE

    def verify_partition(self, topic: str, index: int, producer_id: int, epoch: int) -> None:
        """The produce path's verification: register the partition if the producer's
        Ongoing transaction at ``epoch`` holds it."""
        with self.state.lock:
            for current in self.state.transactions():
                if (
                    current.producer_id == producer_id
                    and current.producer_epoch == epoch
                    and current.state is _S.ONGOING
                    and (topic, index) in current.partitions
                ):
                    self.markers.register([(topic, index)], producer_id, epoch)
                    return

    # ---- EndTxn ------------------------------------------------------------------------

    def handle_end_txn(
        self, transactional_id: str, producer_id: int, epoch: int, commit: bool
    ) -> int:
        with self.state.lock:
            current = self._current(transactional_id, producer_id, epoch)
            if isinstance(current, int):
                return current
            state = current.state
            if state is _S.ONGOING:
                return self._end(current.prepare_abort_or_commit(commit, self.time_ms()))
            if state is _S.COMPLETE_COMMIT:
                return _NONE if commit else _INVALID_STATE
            if state is _S.COMPLETE_ABORT:
                return _INVALID_STATE if commit else _NONE
            if state is _S.PREPARE_COMMIT:
                return _CONCURRENT if commit else _INVALID_STATE
            if state is _S.PREPARE_ABORT:
                return _INVALID_STATE if commit else _CONCURRENT
            log.info(
                "transactional id %r: EndTxn(%s) in state %s",
                transactional_id,
                "commit" if commit else "abort",
                state.value,
            )
            return _INVALID_STATE

    def _end(self, prepared: TransactionMetadata) -> int:
        """Write the PrepareCommit/PrepareAbort transition, the markers, and the
        completion; an error only when the first write failed."""
        error = self._put(prepared)
        if error:
            return error
        self._write_markers(prepared)
        return _NONE

    def _write_markers(self, prepared: TransactionMetadata) -> None:
        committed = prepared.state is _S.PREPARE_COMMIT
        now_ms = self.time_ms()
        try:
            coordinator_epoch = self.state.coordinator_epoch(
                prepared.transactional_id, self.node_id
            )
        except errors.KafkaStorageError as exc:
            log.warning("transactional id %r: %s; retrying later", prepared.transactional_id, exc)
            return  # left prepared: the timer tries again
        failed = self.markers.write_markers(
            prepared.partitions,
            prepared.producer_id,
            prepared.producer_epoch,
            coordinator_epoch,
            committed=committed,
            now_ms=now_ms,
        )
        if failed:
            log.warning(
                "transactional id %r: markers not written to %s yet; retrying later",
                prepared.transactional_id,
                failed,
            )
            return
        if not self._put(prepared.prepare_complete(now_ms)):
            log.debug(
                "transactional id %r: %s",
                prepared.transactional_id,
                "committed" if committed else "aborted",
            )

    # ---- ListTransactions / DescribeTransactions ----------------------------------------

    def list_transactions(
        self, states: set[str], producer_ids: set[int], min_duration_ms: int
    ) -> tuple[int, list[TransactionMetadata]]:
        """The transactions this broker coordinates, filtered as ListTransactions asks
        (empty filters and a negative duration: all)."""
        now_ms = self.time_ms()
        with self.state.lock:
            if not self.active:
                return errors.CoordinatorNotAvailableError.code, []
            return _NONE, [
                m
                for m in self.state.transactions()
                if self.is_coordinator(m.transactional_id)
                and (not states or m.state.value in states)
                and (not producer_ids or m.producer_id in producer_ids)
                and (
                    min_duration_ms < 0
                    or (m.state is _S.ONGOING and now_ms - m.txn_start_ms > min_duration_ms)
                )
            ]

    def describe_transaction(self, transactional_id: str) -> tuple[int, TransactionMetadata | None]:
        """DescribeTransactions of one id: an error (NOT_COORDINATOR,
        TRANSACTIONAL_ID_NOT_FOUND ...) or its metadata."""
        with self.state.lock:
            error = (
                self._check_coordinator(transactional_id) if transactional_id else _INVALID_REQUEST
            )
            if error:
                return error, None
            current = self.state.get(transactional_id)
            if current is None:
                return errors.TransactionalIdNotFoundError.code, None
            return _NONE, current

    # ---- timer ---------------------------------------------------------------------------

    def complete_prepared(self) -> None:
        """Write the markers of the prepared transactions this broker coordinates (left
        by a crash, or by a marker that could not be written)."""
        with self.state.lock:
            for prepared in self.state.prepared():
                if self.active and self.is_coordinator(prepared.transactional_id):
                    self._write_markers(prepared)

    def abort_timed_out_transactions(self, now_ms: int) -> int:
        """Abort (with a bumped epoch, fencing the producer) every Ongoing transaction
        open longer than its timeout; how many."""
        aborted = 0
        with self.state.lock:
            for current in self.state.transactions():
                if (
                    current.state is _S.ONGOING
                    and current.txn_start_ms + current.timeout_ms < now_ms
                    and self.active
                    and self.is_coordinator(current.transactional_id)
                ):
                    log.info(
                        "transactional id %r: aborting the transaction of producer %d, open "
                        "longer than its timeout (%d ms)",
                        current.transactional_id,
                        current.producer_id,
                        current.timeout_ms,
                    )
                    if not self._end(current.prepare_fence_and_abort(now_ms)):
                        aborted += 1
        return aborted

    def expire_transactional_ids(self, now_ms: int, expiration_ms: int) -> int:
        """Forget every transactional id this broker coordinates that has had no
        transaction (Empty, CompleteCommit, CompleteAbort) for ``expiration_ms``; how many
        (Kafka's ``removeExpiredTransactionalIds``)."""
        expired = 0
        with self.state.lock:
            for current in self.state.transactions():
                if not (
                    current.is_expiration_allowed
                    and current.txn_last_update_ms + expiration_ms <= now_ms
                    and self.active
                    and self.is_coordinator(current.transactional_id)
                ):
                    continue
                if self._put(current.prepare_dead()):
                    break  # the state log cannot be written: try again next time
                expired += 1
                log.info(
                    "transactional id %r (producer %d) expired: no transaction for %d ms "
                    "(transactional.id.expiration.ms)",
                    current.transactional_id,
                    current.producer_id,
                    expiration_ms,
                )
        return expired


def _is_valid_producer_id(current: TransactionMetadata, expected: tuple[int, int]) -> bool:
    """Kafka's ``isValidProducerId`` (KIP-360)."""
    producer_id, epoch = expected
    return (
        current.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == current.producer_id
        or (producer_id == current.previous_producer_id and is_epoch_exhausted(epoch))
    )
