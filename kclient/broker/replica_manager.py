"""ReplicaManager: appends to and reads from the partitions this broker leads.

Kafka's ``ReplicaManager`` (``appendRecords`` / ``fetchMessages`` / offsets lookup) for
one broker, called on request handler threads. Leadership is checked under the
partition lock, so an append either lands while this broker leads the partition or fails
with NOT_LEADER_OR_FOLLOWER; acknowledged records are never lost when leadership moves.

Append: validate (``log_validator``, outside the lock) → under the partition lock:
leader check, idempotent-producer checks (duplicate → the original offsets, no second
copy), assign offsets in place, set the partition leader epoch, LogAppendTime if the
topic asks for it, append to the log, commit the producer state → wake delayed fetches.
A transactional batch is first verified (Kafka's KIP-890 part 1 verification, here an
in-process call, ``txn_verifier``, outside the partition lock): the transaction
coordinator registers the partition for the producer's epoch if its transaction holds
it, and the locked append refuses a transactional batch without that (INVALID_TXN_STATE).
From Produce v12, with transaction version 2 on (KIP-890 part 2), the coordinator adds
the partition to the transaction instead (the implicit AddPartitionsToTxn), and its error
(NOT_ENOUGH_REPLICAS to retry, INVALID_PRODUCER_EPOCH, ...) is the partition's answer.

Read and ListOffsets honour the isolation level: read_committed stops at the last stable
offset and lists the aborted transactions of what it returns.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from kclient import errors
from kclient.broker.config import BrokerConfig
from kclient.broker.controller import Controller, Partition, Topic
from kclient.broker.log_validator import RecordValidationError, ValidBatch, validate_records
from kclient.broker.producer_state import BatchMetadata, next_sequence
from kclient.broker.txn_index import AbortedTxn
from kclient.record import assign_offsets, set_log_append_time, set_partition_leader_epoch

log = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5


@dataclass(slots=True)
class AppendResult:
    error_code: int = 0
    error_message: str | None = None
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    leader_id: int = -1
    leader_epoch: int = -1
    #: (index of the record in its batch, what is wrong): Produce v8+ ``record_errors``
    record_errors: list[tuple[int, str]] = field(default_factory=list)


@dataclass(slots=True)
class FetchResult:
    error_code: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    records: list[Buffer] = field(default_factory=list)
    size: int = 0
    leader_id: int = -1
    leader_epoch: int = -1
    last_stable_offset: int = -1
    aborted_transactions: list[AbortedTxn] | None = None


#: (partition, transactional id, producer id, epoch, add) -> error code: registers the
#: partition in the producer's transaction if the coordinator has it there, or (add,
#: transaction version 2) adds it; a verification always answers 0 (the append refuses)
TxnVerifier = Callable[[Partition, str, int, int, bool], int]
#: the first Produce version whose transactional batches add their partition (KIP-890)
PRODUCE_IMPLICIT_ADD_VERSION = 12


def _error(exc: errors.BrokerResponseError) -> tuple[int, str | None]:
    return exc.code, exc.detail or None


class ReplicaManager:
    """The partition operations of broker ``node_id`` (request handler threads)."""

    def __init__(self, node_id: int, controller: Controller, config: BrokerConfig) -> None:
        self.node_id = node_id
        self.controller = controller
        self.config = config
        self.txn_verifier: TxnVerifier | None = None
        #: Produce v12+ adds partitions to transactions (the finalized transaction.version
        #: is 2); otherwise every version only verifies
        self.implicit_add = config.transaction_version >= 2

    # ---- lookups -----------------------------------------------------------------------

    def _led_partition(self, topic: Topic | None, index: int) -> Partition:
        if topic is None or topic.deleted or not 0 <= index < len(topic.partitions):
            raise errors.UnknownTopicOrPartitionError(
                f"{topic.name if topic else 'unknown topic'}-{index} does not exist"
            )
        partition = topic.partitions[index]
        if partition.leader_id != self.node_id:
            raise errors.NotLeaderOrFollowerError(
                f"broker {self.node_id} is not the leader of {partition.name} "
                f"(leader: {partition.leader_id})"
            )
        return partition

    def leader_of(self, topic: Topic | None, index: int) -> tuple[int, int]:
        """(leader id, leader epoch) of a partition, (-1, -1) when unknown."""
        if topic is None or not 0 <= index < len(topic.partitions):
            return -1, -1
        p = topic.partitions[index]
        return p.leader_id, p.leader_epoch

    @staticmethod
    def _check_epoch(partition: Partition, current_leader_epoch: int) -> None:
        if current_leader_epoch < 0:
            return
        if current_leader_epoch < partition.leader_epoch:
            raise errors.FencedLeaderEpochError(
                f"{partition.name}: epoch {current_leader_epoch} is older than the "
                f"leader's {partition.leader_epoch}"
            )
        if current_leader_epoch > partition.leader_epoch:
            raise errors.UnknownLeaderEpochError(
                f"{partition.name}: epoch {current_leader_epoch} is newer than the "
                f"leader's {partition.leader_epoch}"
            )

    # ---- produce -----------------------------------------------------------------------

    def append(
        self,
        topic: Topic | None,
        index: int,
        records: Buffer | None,
        *,
        produce_version: int,
        now_ms: int,
        transactional_id: str | None = None,
    ) -> AppendResult:
        """Append one partition's records of a Produce request."""
        partition: Partition | None = None
        try:
            partition = self._led_partition(topic, index)
            assert topic is not None
            buf, batches = validate_records(
                records,
                max_batch_bytes=topic.max_message_bytes(self.config.message_max_bytes),
                produce_version=produce_version,
            )
            if any(b.transactional for b in batches):
                add = self.implicit_add and produce_version >= PRODUCE_IMPLICIT_ADD_VERSION
                self._verify_transaction(partition, batches, transactional_id, add)
            with partition.lock:
                self._led_partition(topic, index)
                result = self._append_locked(partition, buf, batches, now_ms, topic)
        except errors.BrokerResponseError as exc:
            code, message = _error(exc)
            leader_id, leader_epoch = self.leader_of(topic, index)
            if code != errors.NotLeaderOrFollowerError.code:
                log.info("produce to %s-%d failed: %s", topic.name if topic else "?", index, exc)
            return AppendResult(
                code,
                message,
                leader_id=leader_id,
                leader_epoch=leader_epoch,
                record_errors=exc.record_errors if isinstance(exc, RecordValidationError) else [],
            )
        except OSError as exc:
            log.error(
                "cannot write to the log of %s-%d: %s", topic.name if topic else "?", index, exc
            )
            return AppendResult(errors.KafkaStorageError.code, str(exc))
        if result.error_code == 0:
            self.controller.notify_append(partition)
        return result

    def _verify_transaction(
        self,
        partition: Partition,
        batches: list[ValidBatch],
        transactional_id: str | None,
        add: bool,
    ) -> None:
        """Ask the transaction coordinator to confirm (or, ``add``, to make) the partition
        part of the producer's transaction, unless it already did or a transaction of that
        epoch is open here. Raises the coordinator's error of an add."""
        for b in batches:
            if not b.transactional:
                continue
            if b.producer_id < 0 or b.producer_epoch < 0:
                raise errors.InvalidRecordError(
                    "a transactional record batch needs a producer id and epoch"
                )
            with partition.lock:
                state = partition.producer_state
                entry = state.entries.get(b.producer_id)
                if state.verified.get(b.producer_id) == b.producer_epoch or (
                    entry is not None
                    and entry.epoch == b.producer_epoch
                    and entry.current_txn_first_offset >= 0
                ):
                    continue
            if self.txn_verifier is not None and transactional_id:
                code = self.txn_verifier(
                    partition, transactional_id, b.producer_id, b.producer_epoch, add
                )
                if code:
                    raise errors.for_code(code)(
                        f"{partition.name}: the transaction coordinator did not add the "
                        f"partition to the transaction of {transactional_id!r}"
                    )

    def _append_locked(
        self,
        partition: Partition,
        buf: bytearray | memoryview,
        batches: list[ValidBatch],
        now_ms: int,
        topic: Topic,
    ) -> AppendResult:
        log_ = partition.log
        log_append_time = topic.log_append_time
        state = partition.producer_state
        if len(batches) == 1 and batches[0].producer_id >= 0:
            b = batches[0]
            duplicate = state.find_duplicate(
                b.producer_id,
                b.producer_epoch,
                b.base_sequence,
                next_sequence(b.base_sequence, b.last_offset_delta),
            )
            if duplicate is not None:
                log.debug(
                    "%s: duplicate batch of producer %d (seq %d), offset %d",
                    partition.name,
                    b.producer_id,
                    b.base_sequence,
                    duplicate.first_offset,
                )
                return AppendResult(
                    base_offset=duplicate.first_offset,
                    log_append_time_ms=duplicate.timestamp if log_append_time else -1,
                    log_start_offset=log_.log_start_offset,
                )
        info = state.prepare()
        offset = log_.log_end_offset
        entries: list[tuple[int, int, int, int, int]] = []
        view = memoryview(buf)
        try:
            for b in batches:
                if b.producer_id >= 0:
                    info.check(b.producer_id, b.producer_epoch, b.base_sequence)
                    info.check_transaction(b.producer_id, b.producer_epoch, b.transactional)
                batch_view = view[b.position : b.position + b.size]
                assign_offsets(batch_view, offset)
                set_partition_leader_epoch(batch_view, partition.leader_epoch)
                max_ts = b.max_timestamp
                if log_append_time:
                    set_log_append_time(batch_view, now_ms)
                    max_ts = now_ms
                batch_view.release()
                last = offset + b.last_offset_delta
                entries.append((b.position, b.size, offset, last, max_ts))
                if b.producer_id >= 0:
                    info.append(
                        b.producer_id,
                        b.producer_epoch,
                        BatchMetadata(
                            b.base_sequence,
                            next_sequence(b.base_sequence, b.last_offset_delta),
                            offset,
                            last,
                            max_ts,
                        ),
                        transactional=b.transactional,
                    )
                offset = last + 1
        finally:
            view.release()
        log_.append(buf, entries)
        info.commit()
        return AppendResult(
            base_offset=entries[0][2],
            log_append_time_ms=now_ms if log_append_time else -1,
            log_start_offset=log_.log_start_offset,
        )

    # ---- fetch -------------------------------------------------------------------------

    def read(
        self,
        topic: Topic | None,
        index: int,
        fetch_offset: int,
        max_bytes: int,
        *,
        min_one_batch: bool,
        current_leader_epoch: int = -1,
        read_committed: bool = False,
    ) -> FetchResult:
        """Read one partition for a Fetch: stored batches by reference, HW, LSO, log
        start; read_committed: only below the LSO, with the aborted transactions."""
        try:
            partition = self._led_partition(topic, index)
            with partition.lock:
                self._check_epoch(partition, current_leader_epoch)
                log_ = partition.log
                lso = log_.last_stable_offset
                records = log_.read(
                    fetch_offset, max_bytes, min_one_batch, lso if read_committed else -1
                )
                size = sum(len(r) for r in records)
                aborted = log_.aborted_transactions(fetch_offset, size) if read_committed else None
                return FetchResult(
                    high_watermark=log_.high_watermark,
                    log_start_offset=log_.log_start_offset,
                    records=records,
                    size=size,
                    last_stable_offset=lso,
                    aborted_transactions=aborted,
                )
        except errors.BrokerResponseError as exc:
            leader_id, leader_epoch = self.leader_of(topic, index)
            hw = -1
            if exc.code == errors.OffsetOutOfRangeError.code and topic is not None:
                hw = topic.partitions[index].log.high_watermark
            return FetchResult(exc.code, hw, -1, [], 0, leader_id, leader_epoch)
        except OSError as exc:
            log.error("cannot read the log of %s-%d: %s", topic.name if topic else "?", index, exc)
            return FetchResult(errors.KafkaStorageError.code)

    def fetchable_bytes(
        self, topic: Topic | None, index: int, fetch_offset: int, read_committed: bool = False
    ) -> int:
        """Bytes a fetch could return now; -1 when the fetch would fail (so: answer now)."""
        if topic is None or topic.deleted or not 0 <= index < len(topic.partitions):
            return -1
        partition = topic.partitions[index]
        with partition.lock:
            if partition.leader_id != self.node_id:
                return -1
            log_ = partition.log
            if not log_.log_start_offset <= fetch_offset <= log_.log_end_offset:
                return -1
            return log_.bytes_after(fetch_offset, log_.last_stable_offset if read_committed else -1)

    # ---- list offsets ------------------------------------------------------------------

    def list_offset(
        self,
        topic: Topic | None,
        index: int,
        timestamp: int,
        current_leader_epoch: int = -1,
        read_committed: bool = False,
    ) -> tuple[int, int, int, int]:
        """(error code, timestamp, offset, leader epoch) for a ListOffsets partition;
        read_committed: nothing at or past the last stable offset."""
        try:
            partition = self._led_partition(topic, index)
            with partition.lock:
                self._check_epoch(partition, current_leader_epoch)
                log_ = partition.log
                epoch = partition.leader_epoch
                if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                    return 0, -1, log_.log_start_offset, epoch
                end = log_.last_stable_offset if read_committed else log_.high_watermark
                if timestamp == LATEST_TIMESTAMP:
                    return 0, -1, end, epoch
                if timestamp == LATEST_TIERED_TIMESTAMP:
                    return 0, -1, -1, -1
                assert topic is not None
                max_batch_bytes = topic.max_message_bytes(self.config.message_max_bytes)
                if timestamp == MAX_TIMESTAMP:
                    found = log_.max_timestamp(max_batch_bytes)
                elif timestamp >= 0:
                    found = log_.offset_for_timestamp(timestamp, max_batch_bytes)
                else:
                    raise errors.InvalidRequestError(f"unknown ListOffsets timestamp {timestamp}")
                if found is None or found[0] >= end:
                    return 0, -1, -1, -1
                return 0, found[1], found[0], epoch
        except errors.BrokerResponseError as exc:
            return exc.code, -1, -1, -1
