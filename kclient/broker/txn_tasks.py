"""The transaction coordinator's own work: startup, timers, and the admin views.

The part of Kafka's ``TransactionCoordinator`` that no client request drives: on start-up
the markers of transactions left prepared are written; a timer aborts transactions open
longer than their ``transaction.timeout.ms`` (with a bumped epoch, fencing the producer)
and forgets transactional ids unused for ``transactional.id.expiration.ms``;
ListTransactions and DescribeTransactions read the state. ``TransactionCoordinator``
(``txn_coordinator``) builds on it.

Thread-safety: the timer's operations run on the purgatory's reaper thread under the
timer lock and take each transactional id's lock (``TransactionStateManager.locked``)
while they change it; the admin views read immutable metadata values without locks.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kclient import errors
from kclient.broker.coordinator_timer import CoordinatorTimer
from kclient.broker.purgatory import DelayedOperationPurgatory
from kclient.broker.txn_metadata import TransactionMetadata, TransactionState
from kclient.broker.txn_state import TransactionStateManager

log = logging.getLogger(__name__)

_S = TransactionState
_NONE = 0
_INVALID_REQUEST = errors.InvalidRequestError.code
_TIMER_KEY = "abort-timed-out-transactions"
_EXPIRE_KEY = "remove-expired-transactional-ids"


class CoordinatorTasks:
    """Startup, timers and admin views of one broker's transaction coordinator."""

    node_id: int
    state: TransactionStateManager
    is_coordinator: Callable[[str], bool]
    time_ms: Callable[[], int]
    active: bool

    def __init__(self) -> None:
        self._timer_lock = threading.RLock()
        self._timer: CoordinatorTimer | None = None

    # the coordinator's transitions (``TransactionCoordinator``)
    def _check_coordinator(self, transactional_id: str) -> int:
        raise NotImplementedError

    def _put(self, metadata: TransactionMetadata) -> int:
        raise NotImplementedError

    def _write_markers(self, prepared: TransactionMetadata) -> None:
        raise NotImplementedError

    def _fence_and_abort(self, current: TransactionMetadata, now_ms: int) -> int:
        raise NotImplementedError

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
        timer = self._timer = CoordinatorTimer(purgatory, self._timer_lock, monotonic_ns)

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

        with self._timer_lock:
            timer.schedule(_TIMER_KEY, interval_ms, tick)
            timer.schedule(_EXPIRE_KEY, expiration_interval_ms, expire)

    def shutdown(self) -> None:
        with self._timer_lock:
            self.active = False
            if self._timer is not None:
                self._timer.cancel_all()

    # ---- ListTransactions / DescribeTransactions ----------------------------------------

    def list_transactions(
        self, states: set[str], producer_ids: set[int], min_duration_ms: int
    ) -> tuple[int, list[TransactionMetadata]]:
        """The transactions this broker coordinates, filtered as ListTransactions asks
        (empty filters and a negative duration: all)."""
        now_ms = self.time_ms()
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
        error = self._check_coordinator(transactional_id) if transactional_id else _INVALID_REQUEST
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
        for found in self.state.prepared():
            with self.state.locked(found.transactional_id):
                prepared = self.state.get(found.transactional_id)
                if (
                    prepared is not None
                    and prepared.state in (_S.PREPARE_COMMIT, _S.PREPARE_ABORT)
                    and self.active
                    and self.is_coordinator(prepared.transactional_id)
                ):
                    self._write_markers(prepared)

    def abort_timed_out_transactions(self, now_ms: int) -> int:
        """Abort (with a bumped epoch, fencing the producer) every Ongoing transaction
        open longer than its timeout; how many."""
        aborted = 0
        for found in self.state.transactions():
            if not _timed_out(found, now_ms):
                continue
            with self.state.locked(found.transactional_id):
                current = self.state.get(found.transactional_id)
                if (
                    current is None
                    or not _timed_out(current, now_ms)
                    or not self.active
                    or not self.is_coordinator(current.transactional_id)
                ):
                    continue
                log.info(
                    "transactional id %r: aborting the transaction of producer %d, open "
                    "longer than its timeout (%d ms)",
                    current.transactional_id,
                    current.producer_id,
                    current.timeout_ms,
                )
                if not self._fence_and_abort(current, now_ms):
                    aborted += 1
        return aborted

    def expire_transactional_ids(self, now_ms: int, expiration_ms: int) -> int:
        """Forget every transactional id this broker coordinates that has had no
        transaction (Empty, CompleteCommit, CompleteAbort) for ``expiration_ms``; how many
        (Kafka's ``removeExpiredTransactionalIds``)."""
        expired = 0
        for found in self.state.transactions():
            if not _expired(found, now_ms, expiration_ms):
                continue
            with self.state.locked(found.transactional_id):
                current = self.state.get(found.transactional_id)
                if (
                    current is None
                    or not _expired(current, now_ms, expiration_ms)
                    or not self.active
                    or not self.is_coordinator(current.transactional_id)
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


def _timed_out(m: TransactionMetadata, now_ms: int) -> bool:
    return m.state is _S.ONGOING and m.txn_start_ms + m.timeout_ms < now_ms


def _expired(m: TransactionMetadata, now_ms: int, expiration_ms: int) -> bool:
    return m.is_expiration_allowed and m.txn_last_update_ms + expiration_ms <= now_ms
