"""TransactionMetadata: one transactional id's state and its allowed transitions.

Kafka's ``TransactionState`` / ``TransactionMetadata`` / ``TxnTransitMetadata``. A value
(immutable): each ``prepare_*`` returns the next metadata, which the coordinator writes
to the transaction state log before it takes it as the current one. The transitions
and what each may follow are Kafka's:

    Empty          <- Empty, CompleteCommit, CompleteAbort      (InitProducerId: epoch bump)
    Ongoing        <- Ongoing, Empty, CompleteCommit, CompleteAbort   (partitions added)
    PrepareCommit  <- Ongoing                                   (EndTxn commit)
    PrepareAbort   <- Ongoing, PrepareEpochFence                (EndTxn abort, fencing, timeout)
                      Empty, CompleteCommit, CompleteAbort      (version 2: an empty abort)
    CompleteCommit <- PrepareCommit                             (markers written)
    CompleteAbort  <- PrepareAbort                              (markers written)
    Dead           <- Empty, CompleteCommit, CompleteAbort      (transactional id expired)

``PrepareEpochFence`` is Kafka's in-memory step of fencing (InitProducerId on an Ongoing
transaction, or its timeout): the epoch is bumped and the transaction aborted with it;
here that is one transition, ``prepare_fence_and_abort``.

Transaction version 2 (KIP-890 part 2): ``client_txn_version`` is the transaction
version of the client's last request that changed the state (Kafka's
``clientTransactionVersion``: 2 for EndTxn v5, Produce v12 and TxnOffsetCommit v5, else
0). A version-2 EndTxn bumps the epoch as it prepares (``last_producer_epoch`` keeps the
one before, to recognise a retry), and when that epoch would be exhausted the id rotates
on completion to ``next_producer_id`` at epoch 0. Pure values; any thread.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Any

NO_PRODUCER_ID = -1
#: Kafka's ``TransactionVersion`` levels a client request can have.
TV_0 = 0
TV_2 = 2
NO_PRODUCER_EPOCH = -1
#: Kafka's ``isEpochExhausted``: past this the producer id is rotated.
MAX_EPOCH = 0x7FFF - 1

TopicPartition = tuple[str, int]


class TransactionState(Enum):
    EMPTY = "Empty"
    ONGOING = "Ongoing"
    PREPARE_COMMIT = "PrepareCommit"
    PREPARE_ABORT = "PrepareAbort"
    COMPLETE_COMMIT = "CompleteCommit"
    COMPLETE_ABORT = "CompleteAbort"
    DEAD = "Dead"
    PREPARE_EPOCH_FENCE = "PrepareEpochFence"


_S = TransactionState
_COMPLETE = frozenset({_S.EMPTY, _S.COMPLETE_COMMIT, _S.COMPLETE_ABORT})
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _S.EMPTY: _COMPLETE,
    _S.ONGOING: _COMPLETE | {_S.ONGOING},
    _S.PREPARE_COMMIT: frozenset({_S.ONGOING}),
    _S.PREPARE_ABORT: _COMPLETE | {_S.ONGOING, _S.PREPARE_EPOCH_FENCE},
    _S.COMPLETE_COMMIT: frozenset({_S.PREPARE_COMMIT}),
    _S.COMPLETE_ABORT: frozenset({_S.PREPARE_ABORT}),
    _S.DEAD: _COMPLETE,
    _S.PREPARE_EPOCH_FENCE: frozenset({_S.ONGOING}),
}


class IllegalTransitionError(Exception):
    """A transition Kafka's state machine does not allow: a coordinator bug."""


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= MAX_EPOCH


@dataclass(frozen=True)
class TransactionMetadata:
    """The state of one transactional id."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    partitions: frozenset[TopicPartition] = frozenset()
    txn_start_ms: int = -1
    txn_last_update_ms: int = -1
    #: the transaction version of the client's last state-changing request (0 or 2)
    client_txn_version: int = TV_0
    #: the producer id to take on completion (version 2, when the epoch is exhausted)
    next_producer_id: int = NO_PRODUCER_ID

    @property
    def is_v2(self) -> bool:
        """The transaction is in transaction version 2 (an epoch bump per EndTxn)."""
        return self.client_txn_version >= TV_2

    @property
    def is_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def _to(self, state: TransactionState, **changes: Any) -> TransactionMetadata:
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransitionError(
                f"transactional id {self.transactional_id!r}: {self.state.value} -> "
                f"{state.value} is not a valid transition"
            )
        return dataclasses.replace(self, state=state, **changes)

    # ---- InitProducerId ----------------------------------------------------------------

    def prepare_increment_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> TransactionMetadata | None:
        """The next epoch for InitProducerId (Empty/Complete*); None when the expected
        epoch (KIP-360) is neither the current nor the last one (PRODUCER_FENCED)."""
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch in (NO_PRODUCER_EPOCH, expected_epoch):
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retry
        else:
            return None
        return self._to(
            _S.EMPTY,
            producer_epoch=epoch,
            last_producer_epoch=last,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            txn_start_ms=-1,
            txn_last_update_ms=now_ms,
        )

    def prepare_producer_id_rotation(
        self, producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> TransactionMetadata:
        """A new producer id at epoch 0 (the epoch is exhausted)."""
        return self._to(
            _S.EMPTY,
            previous_producer_id=self.producer_id,
            producer_id=producer_id,
            producer_epoch=0,
            last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
            timeout_ms=timeout_ms,
            partitions=frozenset(),
            txn_start_ms=-1,
            txn_last_update_ms=now_ms,
        )

    def prepare_fence_and_abort(
        self, now_ms: int, *, server_txn_version: int = TV_0, next_producer_id: int = -1
    ) -> TransactionMetadata:
        """Bump the epoch of an Ongoing transaction and abort it with the new epoch
        (PrepareEpochFence then PrepareAbort): its producer is fenced everywhere. The
        epoch is bumped once in either version (Kafka's KAFKA-19367); with version 2 an
        exhausted epoch rotates to ``next_producer_id`` on completion (KAFKA-20090)."""
        fenced = self._to(_S.PREPARE_EPOCH_FENCE, producer_epoch=self.producer_epoch + 1)
        v2 = server_txn_version >= TV_2
        return fenced._to(
            _S.PREPARE_ABORT,
            last_producer_epoch=NO_PRODUCER_EPOCH,
            txn_last_update_ms=now_ms,
            client_txn_version=server_txn_version,
            next_producer_id=next_producer_id if v2 else NO_PRODUCER_ID,
        )

    # ---- AddPartitionsToTxn / EndTxn ---------------------------------------------------

    def prepare_add_partitions(
        self, partitions: frozenset[TopicPartition], now_ms: int, txn_version: int = TV_0
    ) -> TransactionMetadata:
        start_ms = now_ms if self.state in _COMPLETE else self.txn_start_ms
        return self._to(
            _S.ONGOING,
            partitions=self.partitions | partitions,
            txn_start_ms=start_ms,
            txn_last_update_ms=now_ms,
            client_txn_version=txn_version,
        )

    def prepare_abort_or_commit(
        self, commit: bool, now_ms: int, txn_version: int = TV_0, next_producer_id: int = -1
    ) -> TransactionMetadata:
        """PrepareCommit / PrepareAbort. Version 2 bumps the epoch (the markers carry the
        new one, fencing the old epoch's late writes) and, with ``next_producer_id``,
        rotates the producer id on completion."""
        changes: dict[str, Any] = {"client_txn_version": txn_version}
        if txn_version >= TV_2:
            changes |= {
                "producer_epoch": self.producer_epoch + 1,
                "last_producer_epoch": self.producer_epoch,
                "next_producer_id": next_producer_id,
            }
        return self._to(
            _S.PREPARE_COMMIT if commit else _S.PREPARE_ABORT, txn_last_update_ms=now_ms, **changes
        )

    def prepare_empty_abort(self, now_ms: int, next_producer_id: int = -1) -> TransactionMetadata:
        """Version 2's abort of a transaction the coordinator holds nothing of (the
        client's records never arrived): PrepareAbort with no partitions and a bumped
        epoch, from Empty or Complete*."""
        return dataclasses.replace(
            self.prepare_abort_or_commit(False, now_ms, TV_2, next_producer_id),
            partitions=frozenset(),
            txn_start_ms=now_ms,
        )

    def prepare_complete(self, now_ms: int) -> TransactionMetadata:
        """The markers are written: CompleteCommit / CompleteAbort, no partitions. In
        version 2 an exhausted epoch gives way to the next producer id, at epoch 0."""
        state = _S.COMPLETE_COMMIT if self.state is _S.PREPARE_COMMIT else _S.COMPLETE_ABORT
        changes: dict[str, Any] = {}
        if self.is_v2 and self.next_producer_id != NO_PRODUCER_ID:
            changes |= {
                "last_producer_epoch": self.producer_epoch,
                "previous_producer_id": self.producer_id,
                "producer_id": self.next_producer_id,
                "producer_epoch": 0,
                "next_producer_id": NO_PRODUCER_ID,
            }
        return self._to(state, partitions=frozenset(), txn_last_update_ms=now_ms, **changes)

    @property
    def next_producer_id_and_epoch(self) -> tuple[int, int]:
        """What the producer uses once this (prepared or complete) transaction is done:
        EndTxn v5's answer."""
        if self.next_producer_id != NO_PRODUCER_ID:
            return self.next_producer_id, 0
        return self.producer_id, self.producer_epoch

    def prepare_dead(self) -> TransactionMetadata:
        """The id expired (``transactional.id.expiration.ms`` without a transaction): the
        coordinator writes this tombstone and forgets the id."""
        return self._to(_S.DEAD)

    @property
    def is_expiration_allowed(self) -> bool:
        """Kafka's ``isExpirationAllowed``: no transaction open or being completed."""
        return self.state in _COMPLETE

    # ---- log form ----------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.transactional_id,
            "pid": self.producer_id,
            "epoch": self.producer_epoch,
            "last_epoch": self.last_producer_epoch,
            "prev_pid": self.previous_producer_id,
            "timeout_ms": self.timeout_ms,
            "state": self.state.value,
            "partitions": sorted([t, p] for t, p in self.partitions),
            "start_ms": self.txn_start_ms,
            "update_ms": self.txn_last_update_ms,
            "tv": self.client_txn_version,
            "next_pid": self.next_producer_id,
        }

    @staticmethod
    def from_json(v: dict[str, Any]) -> TransactionMetadata:
        return TransactionMetadata(
            transactional_id=str(v["id"]),
            producer_id=int(v["pid"]),
            producer_epoch=int(v["epoch"]),
            timeout_ms=int(v["timeout_ms"]),
            state=TransactionState(v["state"]),
            last_producer_epoch=int(v["last_epoch"]),
            previous_producer_id=int(v["prev_pid"]),
            partitions=frozenset((str(t), int(p)) for t, p in v["partitions"]),
            txn_start_ms=int(v["start_ms"]),
            txn_last_update_ms=int(v["update_ms"]),
            # absent from the records of versions before transaction version 2
            client_txn_version=int(v.get("tv", TV_0)),
            next_producer_id=int(v.get("next_pid", NO_PRODUCER_ID)),
        )
