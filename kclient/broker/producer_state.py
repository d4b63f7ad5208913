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
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kclient import errors

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

    def rebuild(self, producer_id: int, epoch: int, batch: BatchMetadata) -> None:
        """Replay one batch header read back from disk (log recovery)."""
        entry = self.entries.get(producer_id)
        if entry is None or epoch > entry.epoch:
            entry = self.entries[producer_id] = ProducerStateEntry(epoch)
        elif epoch < entry.epoch:
            return
        entry.batches.append(batch)


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
