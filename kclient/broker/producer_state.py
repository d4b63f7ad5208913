"""Idempotent-producer state of one partition (Kafka's ``ProducerStateManager``).

Per producer id: the current epoch and the metadata of the last 5 batches appended
(first/last sequence, first/last offset, timestamp), which is what Kafka keeps so that
up to 5 in-flight requests can be retried without duplicates:

* a batch equal (same epoch, first and last sequence) to a cached one is a **duplicate**:
  nothing is appended and the original offsets are returned (as Kafka does);
* a sequence that does not follow the last one is **OUT_OF_ORDER_SEQUENCE_NUMBER**;
* an epoch older than the current one is **INVALID_PRODUCER_EPOCH**; a newer epoch must
  start again at sequence 0;
* a producer id this partition has never seen may start at any sequence (KIP-360).

Transactions (Kafka's ``currentTxnFirstOffset`` and ``VerificationStateEntry``): an entry
remembers the offset of the first batch of the producer's ongoing transaction on this
partition (-1: none); the earliest of them is the partition's first unstable offset,
which bounds the last stable offset. A COMMIT/ABORT marker (``end_txn``) ends it, takes
the marker's epoch (a newer epoch starts the sequences again at 0) and returns the
``CompletedTxn``. ``verified`` holds the producers the transaction coordinator has
added this partition for (producer id -> epoch): only they may start a transaction here.

A producer that has written nothing here for ``producer.id.expiration.ms`` (1 day, Kafka's
default; measured from its last batch's max timestamp, as Kafka does) and has no open
transaction here is forgotten (``remove_expired_producers``, every
``producer.id.expiration.check.interval.ms``): without it every producer id that ever
wrote would stay in memory and in every snapshot. A forgotten producer that comes back
is an unknown producer again (any sequence is accepted, KIP-360).

Used under the owning ``Partition``'s lock. ``ProducerAppendInfo`` stages the updates of
one append so a request whose later batch fails leaves the state untouched.

With a log dir the state survives restarts as Kafka's does: a snapshot
(``<offset, 20 digits>.snapshot`` next to the segments: every entry at that log end
offset, sealed with a CRC by ``durable_file``) is written when a segment rolls and on a
clean shutdown, and on start-up the newest snapshot not past the log end is loaded and
the batches after it are replayed (``replay``).
"""

from __future__ import annotations

import logging
import struct
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kclient import errors
from kclient.broker.durable_file import DamagedFileError, seal, unseal, write_atomically

log = logging.getLogger(__name__)

SNAPSHOT_SUFFIX = ".snapshot"
_SNAPSHOT_MAGIC = b"KCPS"
#: 2: with each entry's ongoing transaction's first offset; 3: and its coordinator epoch
_SNAPSHOT_VERSION = 3
_SNAPSHOT_HEAD = struct.Struct(">qi")  # the log end offset it was taken at, entries
#: per version: producer id, epoch, batches[, ongoing txn first offset[, coordinator epoch]]
_ENTRIES = {1: struct.Struct(">qhb"), 2: struct.Struct(">qhbq"), 3: struct.Struct(">qhbqi")}
_ENTRY = _ENTRIES[_SNAPSHOT_VERSION]
_BATCH = struct.Struct(">iiqqq")  # first/last sequence, first/last offset, timestamp
#: snapshots kept per partition (the newest, and one to fall back to)
SNAPSHOTS_KEPT = 2

INT32_MAX = 0x7FFFFFFF
NUM_BATCHES_TO_RETAIN = 5


def next_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` wrapping past Int32.MAX to 0, as Kafka's sequences do."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended on this partition (Kafka's ``CompletedTxn``)."""

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


@dataclass
class ProducerStateEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )
    #: offset of the first batch of the ongoing transaction here; -1: none
    current_txn_first_offset: int = -1
    #: coordinator epoch of the last marker written for this producer here; -1: none
    coordinator_epoch: int = -1

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.current_txn_first_offset,
            self.coordinator_epoch,
        )

    def update_epoch(self, epoch: int) -> None:
        """A newer epoch forgets the batches: its sequences start again at 0."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


class ProducerStateManager:
    """Producer id -> ProducerStateEntry for one partition."""

    def __init__(self, topic_partition: str) -> None:
        self.topic_partition = topic_partition
        self.entries: dict[int, ProducerStateEntry] = {}
        #: producer id -> epoch the transaction coordinator added this partition for
        self.verified: dict[int, int] = {}

    def find_duplicate(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        entry = self.entries.get(producer_id)
        return entry.find_duplicate(epoch, first_seq, last_seq) if entry else None

    def prepare(self) -> ProducerAppendInfo:
        return ProducerAppendInfo(self)

    def replay(
        self, producer_id: int, epoch: int, batch: BatchMetadata, *, transactional: bool = False
    ) -> None:
        """Apply one batch read back from the log (recovery after the snapshot)."""
        entry = self.entries.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.entries[producer_id] = ProducerStateEntry(epoch)
        elif epoch < entry.epoch:
            return
        entry.batches.append(batch)
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = batch.first_offset

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        """Kafka's marker checks: InvalidProducerEpochError for a marker older than the
        producer's epoch, TransactionCoordinatorFencedError for one from a coordinator
        older than the one that wrote this producer's last marker here."""
        entry = self.entries.get(producer_id)
        if entry is None:
            return
        if epoch < entry.epoch:
            raise errors.InvalidProducerEpochError(
                f"a marker of producer {producer_id} has epoch {epoch}, older than its "
                f"epoch {entry.epoch} on {self.topic_partition}"
            )
        if coordinator_epoch < entry.coordinator_epoch:
            raise errors.TransactionCoordinatorFencedError(
                f"a marker of producer {producer_id} comes from coordinator epoch "
                f"{coordinator_epoch}, older than {entry.coordinator_epoch} on "
                f"{self.topic_partition}"
            )

    def end_txn(
        self, producer_id: int, epoch: int, offset: int, aborted: bool, coordinator_epoch: int = -1
    ) -> CompletedTxn:
        """A COMMIT/ABORT marker of ``producer_id`` at ``offset`` (appended or replayed):
        end its ongoing transaction here and take the marker's epochs. Raises what
        ``check_marker`` raises."""
        self.check_marker(producer_id, epoch, coordinator_epoch)
        entry = self.entries.get(producer_id)
        if entry is None:
            entry = self.entries[producer_id] = ProducerStateEntry(epoch)
        entry.update_epoch(epoch)
        entry.coordinator_epoch = coordinator_epoch
        first = entry.current_txn_first_offset
        entry.current_txn_first_offset = -1
        self.verified.pop(producer_id, None)
        return CompletedTxn(producer_id, first if first >= 0 else offset, offset, aborted)

    def first_unstable_offset(self) -> int:
        """The first offset of the earliest ongoing transaction; -1 when none is open."""
        firsts = [e.current_txn_first_offset for e in self.entries.values()]
        return min((f for f in firsts if f >= 0), default=-1)

    def ongoing_txn_first_offset(self, producer_id: int) -> int:
        entry = self.entries.get(producer_id)
        return entry.current_txn_first_offset if entry is not None else -1

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Forget the producers idle for ``expiration_ms`` with no transaction open here
        (Kafka's ``removeExpiredProducers``); how many."""
        expired = [
            producer_id
            for producer_id, entry in self.entries.items()
            if entry.current_txn_first_offset < 0
            and now_ms - (entry.batches[-1].timestamp if entry.batches else -1) >= expiration_ms
        ]
        for producer_id in expired:
            del self.entries[producer_id]
        return len(expired)

    def active_producers(self) -> list[tuple[int, ProducerStateEntry]]:
        """(producer id, entry) of every producer kept here, by producer id."""
        return sorted(self.entries.items())

    def max_producer_id(self) -> int:
        return max(self.entries, default=-1)

    # ---- snapshots -----------------------------------------------------------------------

    def write_snapshot(self, directory: Path, offset: int) -> None:
        """Write the state as of log end offset ``offset``; keep the newest snapshots only.
        Raises OSError (the log is then recovered by replaying more of it)."""
        parts = [_SNAPSHOT_HEAD.pack(offset, len(self.entries))]
        for producer_id, entry in self.entries.items():
            parts.append(
                _ENTRY.pack(
                    producer_id,
                    entry.epoch,
                    len(entry.batches),
                    entry.current_txn_first_offset,
                    entry.coordinator_epoch,
                )
            )
            parts.extend(
                _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
                for b in entry.batches
            )
        body = b"".join(parts)
        write_atomically(
            snapshot_path(directory, offset), seal(_SNAPSHOT_MAGIC, _SNAPSHOT_VERSION, body)
        )
        for old in snapshot_offsets(directory)[:-SNAPSHOTS_KEPT]:
            snapshot_path(directory, old).unlink(missing_ok=True)

    def load_snapshot(self, directory: Path, log_end_offset: int) -> int:
        """Load the newest readable snapshot taken at or below ``log_end_offset`` and
        return its offset (0, with an empty state, when there is none). Snapshots past
        the log end (the log lost a torn tail) or damaged are deleted."""
        self.entries = {}
        for offset in reversed(snapshot_offsets(directory)):
            path = snapshot_path(directory, offset)
            if offset > log_end_offset:
                log.info("%s: %s is past the log end %d; deleting it", self.topic_partition,
                         path.name, log_end_offset)  # fmt: skip
                path.unlink(missing_ok=True)
                continue
            try:
                self.entries = _decode_snapshot(path, path.read_bytes(), offset)
            except (DamagedFileError, OSError) as exc:
                log.warning("%s: ignoring a producer-state snapshot: %s", self.topic_partition,
                            exc)  # fmt: skip
                path.unlink(missing_ok=True)
                continue
            return offset
        return 0


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offsets(directory: Path) -> list[int]:
    """The offsets of the snapshots in ``directory``, oldest first."""
    found = []
    for path in directory.glob(f"*{SNAPSHOT_SUFFIX}"):
        stem = path.name[: -len(SNAPSHOT_SUFFIX)]
        if stem.isdigit():
            found.append(int(stem))
    return sorted(found)


def _decode_snapshot(path: Path, data: bytes, offset: int) -> dict[int, ProducerStateEntry]:
    # snapshots of older versions (written before an upgrade) are read too
    version = data[4] if len(data) >= 5 and data[4] in _ENTRIES else _SNAPSHOT_VERSION
    body = unseal(path, data, _SNAPSHOT_MAGIC, version)
    entry_struct = _ENTRIES[version]
    try:
        taken_at, count = _SNAPSHOT_HEAD.unpack_from(body)
        if taken_at != offset:
            raise DamagedFileError(f"{path} was taken at offset {taken_at}, not {offset}")
        pos = _SNAPSHOT_HEAD.size
        entries: dict[int, ProducerStateEntry] = {}
        for _ in range(count):
            producer_id, epoch, n, *txn = entry_struct.unpack_from(body, pos)
            pos += entry_struct.size
            entry = entries[producer_id] = ProducerStateEntry(epoch)
            entry.current_txn_first_offset = txn[0] if txn else -1
            entry.coordinator_epoch = txn[1] if len(txn) > 1 else -1
            for _ in range(n):
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
    except struct.error as exc:
        raise DamagedFileError(f"{path} is damaged: {exc}") from None
    if pos != len(body):
        raise DamagedFileError(f"{path} is damaged: {len(body) - pos} bytes after its entries")
    return entries


class ProducerAppendInfo:
    """The producer-state checks and updates of one append, applied by ``commit``."""

    def __init__(self, manager: ProducerStateManager) -> None:
        self._manager = manager
        self._staged: dict[int, ProducerStateEntry] = {}

    def _entry(self, producer_id: int) -> ProducerStateEntry | None:
        staged = self._staged.get(producer_id)
        if staged is not None:
            return staged
        return self._manager.entries.get(producer_id)

    def check(self, producer_id: int, epoch: int, first_seq: int) -> None:
        """Raise INVALID_PRODUCER_EPOCH or OUT_OF_ORDER_SEQUENCE_NUMBER if not acceptable."""
        entry = self._entry(producer_id)
        tp = self._manager.topic_partition
        if entry is None:
            return  # unknown producer: any sequence is accepted
        if epoch < entry.epoch:
            raise errors.InvalidProducerEpochError(
                f"producer {producer_id} epoch {epoch} is older than the current epoch "
                f"{entry.epoch} on {tp}"
            )
        if epoch > entry.epoch:
            if first_seq != 0:
                raise errors.OutOfOrderSequenceNumberError(
                    f"producer {producer_id} bumped its epoch to {epoch} on {tp} but its "
                    f"first sequence is {first_seq}, not 0"
                )
            return
        expected = next_sequence(entry.last_seq, 1)
        if first_seq != expected:
            raise errors.OutOfOrderSequenceNumberError(
                f"producer {producer_id} sent sequence {first_seq} on {tp}, expected {expected}"
            )

    def check_transaction(self, producer_id: int, epoch: int, transactional: bool) -> None:
        """Kafka's transactional append checks (after ``check``): a transactional batch
        needs an ongoing transaction here or the coordinator's AddPartitionsToTxn for this
        epoch; a non-transactional one may not come while a transaction is open.
        Raises InvalidTxnStateError."""
        entry = self._entry(producer_id)
        ongoing = entry is not None and entry.current_txn_first_offset >= 0
        tp = self._manager.topic_partition
        if not transactional:
            if ongoing:
                raise errors.InvalidTxnStateError(
                    f"producer {producer_id} wrote a non-transactional batch to {tp} while "
                    "its transaction there is open"
                )
            return
        if ongoing and entry is not None and entry.epoch == epoch:
            return
        if self._manager.verified.get(producer_id) != epoch:
            raise errors.InvalidTxnStateError(
                f"producer {producer_id} (epoch {epoch}) wrote a transactional batch to {tp}, "
                "which is not part of its transaction (AddPartitionsToTxn first)"
            )

    def append(
        self, producer_id: int, epoch: int, batch: BatchMetadata, *, transactional: bool = False
    ) -> None:
        """Stage a batch appended for ``producer_id`` (after ``check`` passed)."""
        entry = self._entry(producer_id)
        if entry is None:
            entry = ProducerStateEntry(epoch)
        elif epoch != entry.epoch:  # a new epoch's sequences; an open transaction stays
            entry = ProducerStateEntry(
                epoch, current_txn_first_offset=entry.current_txn_first_offset
            )
        elif producer_id not in self._staged:
            entry = entry.copy()
        entry.batches.append(batch)
        if transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = batch.first_offset
        self._staged[producer_id] = entry

    def commit(self) -> None:
        self._manager.entries.update(self._staged)
        self._staged = {}
