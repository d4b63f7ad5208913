"""TransactionCoordinator: InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn.

Kafka's ``TransactionCoordinator`` (transaction versions 1 and 2, KIP-890; EndTxn's checks
are in ``txn_end``, the timers in ``txn_tasks``), for the transactional ids broker
``node_id`` coordinates. Each request
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

* Transaction version 2: EndTxn v5 bumps the epoch (a new producer id when it runs out)
  and answers the next producer id and epoch; Produce v12+ and TxnOffsetCommit v5 add
  their partition (``add_partition_for_produce``, as the partition leader's
  AddPartitionsToTxn in Kafka).

Thread-safety: each request holds its transactional id's lock
(``TransactionStateManager.locked``) from its checks to its last write, markers included,
so requests of different ids run at once (request handler threads, and the purgatory's
reaper thread for the timer).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kclient import errors
from kclient.broker.txn_end import EndTxnAction, decide_end_txn
from kclient.broker.txn_markers import GROUP_OFFSETS_TOPIC, TransactionMarkerWriter
from kclient.broker.txn_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TV_0,
    TV_2,
    TopicPartition,
    TransactionMetadata,
    TransactionState,
    is_epoch_exhausted,
)
from kclient.broker.txn_state import TransactionStateManager, txn_partition_for
from kclient.broker.txn_tasks import CoordinatorTasks

log = logging.getLogger(__name__)

_S = TransactionState
_NONE = 0
_INVALID_REQUEST = errors.InvalidRequestError.code
_MAPPING = errors.InvalidProducerIdMappingError.code
_FENCED = errors.ProducerFencedError.code
_CONCURRENT = errors.ConcurrentTransactionsError.code
_INVALID_STATE = errors.InvalidTxnStateError.code


@dataclass(frozen=True)
class InitProducerIdResult:
    error: int
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class EndTxnResult:
    """EndTxn's answer: the error, and (v5) the producer id and epoch of the producer's
    next transaction (-1 with an error)."""

    error: int
    producer_id: int = -1
    producer_epoch: int = -1


#: Errors of an implicit add (Produce v12+) that a producer retries as they are not
#: retriable from the produce path: Kafka answers NOT_ENOUGH_REPLICAS for them.
_RETRY_PRODUCE = frozenset(
    {
        _CONCURRENT,
        errors.NotCoordinatorError.code,
        errors.CoordinatorNotAvailableError.code,
        errors.CoordinatorLoadInProgressError.code,
    }
)


class TransactionCoordinator(CoordinatorTasks):
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
        transaction_version: int = TV_2,
    ) -> None:
        self.node_id = node_id
        self.state = state
        self.markers = markers
        self._allocate = allocate_producer_id
        self.is_coordinator = is_coordinator
        self.time_ms = time_ms
        #: the finalized ``transaction.version`` (1: version 2 requests are refused)
        self.transaction_version = transaction_version
        self.active = True
        super().__init__()

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

    def _next_producer_id(self, epoch: int, v2: bool) -> int | errors.BrokerResponseError:
        """Version 2: a new producer id to rotate to on completion when ``epoch`` is
        exhausted (the bump takes it to the last epoch, which only fences); else
        NO_PRODUCER_ID."""
        if v2 and is_epoch_exhausted(epoch):
            return self._new_producer_id()
        return NO_PRODUCER_ID

    def _fence_and_abort(self, current: TransactionMetadata, now_ms: int) -> int:
        """Abort an Ongoing transaction with a bumped epoch (its producer is fenced). The
        transaction keeps its own version: a version 1 client's is ended as before."""
        next_pid = self._next_producer_id(current.producer_epoch + 1, current.is_v2)
        if isinstance(next_pid, errors.BrokerResponseError):
            return next_pid.code
        return self._end(
            current.prepare_fence_and_abort(
                now_ms, server_txn_version=current.client_txn_version, next_producer_id=next_pid
            )
        )

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
        with self.state.locked(transactional_id):
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
                error = self._fence_and_abort(current, now_ms)
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
        self, transactional_id: str, producer_id: int, epoch: int, *, check_owner: bool = True
    ) -> TransactionMetadata | int:
        """The metadata of a request from ``producer_id`` at ``epoch``, or an error.
        ``check_owner`` False: the request comes from a partition leader of this cluster
        (the implicit add of version 2), which shares the coordinators' state."""
        if not transactional_id:
            return _INVALID_REQUEST
        error = self._check_coordinator(transactional_id) if check_owner else 0
        if not self.active:
            error = errors.CoordinatorNotAvailableError.code
        if error:
            return error
        current = self.state.get(transactional_id)
        if current is None:
            return _MAPPING
        if current.producer_id != producer_id:
            if (
                current.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
                and current.next_producer_id == producer_id
            ):
                return _CONCURRENT  # the rotated id's next transaction: wait for the markers
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
        *,
        txn_version: int = TV_0,
        check_owner: bool = True,
    ) -> int:
        """Add partitions (and ``__consumer_offsets`` ones: AddOffsetsToTxn) to the
        transaction; an error code for all of them. ``txn_version`` 2: the implicit add
        of Produce v12+ / TxnOffsetCommit v5 (from the partition's leader)."""
        wanted = frozenset(partitions)
        with self.state.locked(transactional_id):
            current = self._current(transactional_id, producer_id, epoch, check_owner=check_owner)
            if isinstance(current, int):
                return current
            if current.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT):
                return _CONCURRENT
            if current.state is not _S.ONGOING or not wanted <= current.partitions:
                error = self._put(
                    current.prepare_add_partitions(wanted, self.time_ms(), txn_version)
                )
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

    def add_partition_for_produce(
        self, transactional_id: str, producer_id: int, epoch: int, tp: TopicPartition
    ) -> int:
        """Version 2's implicit AddPartitionsToTxn of a Produce v12+ (or, for the group's
        offsets partition, a TxnOffsetCommit v5), as the partition leader sends it; the
        errors a producer must retry become NOT_ENOUGH_REPLICAS and PRODUCER_FENCED
        INVALID_PRODUCER_EPOCH, as Kafka's ``AddPartitionsToTxnManager`` answers them."""
        error = self.handle_add_partitions(
            transactional_id, producer_id, epoch, [tp], txn_version=TV_2, check_owner=False
        )
        if error in _RETRY_PRODUCE:
            return errors.NotEnoughReplicasError.code
        if error == _FENCED:
            return errors.InvalidProducerEpochError.code
        return error

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
        with self.state.locked(transactional_id):
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
        with self.state.locked(transactional_id):
            current = self.state.get(transactional_id)
            if current is None or current.producer_id != producer_id:
                return _MAPPING
            if current.producer_epoch != epoch:
                return _FENCED
            if current.state is not _S.ONGOING or tp not in current.partitions:
                return _INVALID_STATE
            return _NONE

    def verify_partition(
        self, transactional_id: str, topic: str, index: int, producer_id: int, epoch: int
    ) -> None:
        """The produce path's verification (Produce up to v11): register the partition
        if the producer's Ongoing transaction at ``epoch`` holds it."""
        with self.state.locked(transactional_id):
            current = self.state.get(transactional_id)
            if (
                current is not None
                and current.producer_id == producer_id
                and current.producer_epoch == epoch
                and current.state is _S.ONGOING
                and (topic, index) in current.partitions
            ):
                self.markers.register([(topic, index)], producer_id, epoch)

    # ---- EndTxn ------------------------------------------------------------------------

    def handle_end_txn(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        txn_version: int = TV_0,
    ) -> EndTxnResult:
        """EndTxn (``txn_version`` 2: v5, an epoch bump per transaction): the error, and
        the producer id and epoch of the producer's next transaction."""
        if not transactional_id:
            return EndTxnResult(_INVALID_REQUEST)
        with self.state.locked(transactional_id):
            error = self._check_coordinator(transactional_id)
            if error:
                return EndTxnResult(error)
            current = self.state.get(transactional_id)
            if current is None:
                return EndTxnResult(_MAPPING)
            if current.state is _S.DEAD or current.state is _S.PREPARE_EPOCH_FENCE:
                raise AssertionError(f"{transactional_id!r} is {current.state.value}")
            action, error = decide_end_txn(current, producer_id, epoch, commit, txn_version)
            now_ms = self.time_ms()
            if action is EndTxnAction.ANSWER:
                if error == _INVALID_STATE:
                    log.info(
                        "transactional id %r: EndTxn(%s) in state %s",
                        transactional_id,
                        "commit" if commit else "abort",
                        current.state.value,
                    )
                if error:
                    return EndTxnResult(error)
                return EndTxnResult(_NONE, *current.next_producer_id_and_epoch)
            v2 = txn_version >= TV_2
            next_pid = self._next_producer_id(current.producer_epoch, v2)
            if isinstance(next_pid, errors.BrokerResponseError):
                return EndTxnResult(next_pid.code)
            if action is EndTxnAction.EMPTY_ABORT:
                prepared = current.prepare_empty_abort(now_ms, next_pid)
            else:
                prepared = current.prepare_abort_or_commit(
                    commit, now_ms, txn_version if v2 else TV_0, next_pid
                )
            error = self._end(prepared)
            if error:
                return EndTxnResult(error)
            return EndTxnResult(_NONE, *prepared.next_producer_id_and_epoch)

    def _end(self, prepared: TransactionMetadata) -> int:
        """Write the PrepareCommit/PrepareAbort transition, the markers, and the
        completion; an error only when the first write failed."""
        error = self._put(prepared)
        if error:
            return error
        self._write_markers(prepared)
        return _NONE

    def _write_markers(self, prepared: TransactionMetadata) -> None:
        """The markers carry the prepared epoch: in version 2 the bumped one, so a late
        batch of the ended transaction's epoch is refused on every partition."""
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


def _is_valid_producer_id(current: TransactionMetadata, expected: tuple[int, int]) -> bool:
    """Kafka's ``isValidProducerId`` (KIP-360)."""
    producer_id, epoch = expected
    return (
        current.producer_epoch == NO_PRODUCER_EPOCH
        or producer_id == current.producer_id
        or (producer_id == current.previous_producer_id and is_epoch_exhausted(epoch))
    )
