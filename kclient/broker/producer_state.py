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
_SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">qi")  # the log end offset it was taken at, entries
_ENTRY = struct.Struct(">qhb")  # producer id, epoch, batches
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


@dataclass
class ProducerStateEntry:
    epoch: int
    batches: deque[BatchMetadata] = field(
        default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN)
    )

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
        return ProducerStateEntry(self.epoch, deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN))


class ProducerStateManager:
    """Producer id -> ProducerStateEntry for one partition."""

    def __init__(self, topic_partition: str) -> None:
        self.topic_partition = topic_partition
        self.entries: dict[int, ProducerStateEntry] = {}

    def find_duplicate(
        self, producer_id: int, epoch: int, first_seq: int, last_seq: int
    ) -> BatchMetadata | None:
        entry = self.entries.get(producer_id)
        return entry.find_duplicate(epoch, first_seq, last_seq) if entry else None

    def prepare(self) -> ProducerAppendInfo:
        return ProducerAppendInfo(self)

    def replay(self, producer_id: int, epoch: int, batch: BatchMetadata) -> None:
        """Apply one batch read back from the log (recovery after the snapshot)."""
        entry = self.entries.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.entries[producer_id] = ProducerStateEntry(epoch)
        elif epoch < entry.epoch:
            return
        entry.batches.append(batch)

    def max_producer_id(self) -> int:
        return max(self.entries, default=-1)

    # ---- snapshots -----------------------------------------------------------------------

    def write_snapshot(self, directory: Path, offset: int) -> None:
        """Write the state as of log end offset ``offset``; keep the newest snapshots only.
        Raises OSError (the log is then recovered by replaying more of it)."""
        parts = [_SNAPSHOT_HEAD.pack(offset, len(self.entries))]
        for producer_id, entry in self.entries.items():
            parts.append(_ENTRY.pack(producer_id, entry.epoch, len(entry.batches)))
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
    body = unseal(path, data, _SNAPSHOT_MAGIC, _SNAPSHOT_VERSION)
    try:
        taken_at, count = _SNAPSHOT_HEAD.unpack_from(body)
        if taken_at != offset:
            raise DamagedFileError(f"{path} was taken at offset {taken_at}, not {offset}")
        pos = _SNAPSHOT_HEAD.size
        entries: dict[int, ProducerStateEntry] = {}
        for _ in range(count):
            producer_id, epoch, n = _ENTRY.unpack_from(body, pos)
            pos += _ENTRY.size
            entry = entries[producer_id] = ProducerStateEntry(epoch)
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

    def append(self, producer_id: int, epoch: int, batch: BatchMetadata) -> None:
        """Stage a batch appended for ``producer_id`` (after ``check`` passed)."""
        entry = self._entry(producer_id)
        if entry is None or epoch != entry.epoch:
            entry = ProducerStateEntry(epoch)
        elif producer_id not in self._staged:
            entry = entry.copy()
        entry.batches.append(batch)
        self._staged[producer_id] = entry

    def commit(self) -> None:
        self._manager.entries.update(self._staged)
        self._staged = {}
