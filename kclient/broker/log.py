"""Partition logs: in memory by default, append-only segment files with a log dir.

Kafka's ``UnifiedLog`` / ``LocalLog`` / ``LogSegment``, reduced to what a development
broker needs. A ``Log`` holds the record batches of one partition exactly as they were
written (offsets assigned), an index of (base offset, last offset, max timestamp,
location) per batch, and the log end offset, which is also the high watermark (every
replica of the embedded cluster shares the one log, so the ISR is always complete).

* In memory, a batch is a ``memoryview`` into the buffer it arrived in; Fetch sends
  these views by reference.
* On disk, ``<log_dir>/<topic>-<partition>/<base offset, 20 digits>.log`` files hold the
  batches back to back (Kafka's segment format). A new segment starts past
  ``log.segment.bytes``; the one it follows is then flushed (fsync) and a producer-state
  snapshot is taken at the new segment's base offset, which is also the recovery point:
  everything before it is on disk.

Recovery on open: ``log_loader`` indexes the segments and cuts the log at the first torn
or corrupt batch (CRC-checking the active segment always, and everything from the
recovery point after an unclean shutdown); then the producer state is loaded from the
newest snapshot not past the log end, and the batches after it are replayed from their
headers.

Data written before an answer survives a crash of the process (kill -9: the page cache
is the kernel's); a crash of the machine can lose what was not yet flushed.

Transactions: ``append_marker`` writes a COMMIT/ABORT control batch (``control_batch``)
and ends the producer's transaction here; the last stable offset is the first offset of
the earliest open transaction (else the high watermark); ABORT markers go into the
aborted-transaction index (``txn_index``), rebuilt with the producer state on start-up.
A read can stop at an offset (read_committed Fetch: the last stable offset).

The log owns its ``ProducerStateManager``. Not thread-safe by itself: callers hold the
owning ``Partition``'s lock.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from pathlib import Path

from kclient import errors
from kclient.broker.control_batch import build_marker, marker_type
from kclient.broker.log_loader import SUFFIX, load_segments
from kclient.broker.log_segment import BatchEntry, Buffer, Segment
from kclient.broker.producer_state import BatchMetadata, ProducerStateManager, next_sequence
from kclient.broker.txn_index import AbortedTxn, TransactionIndex
from kclient.record import RecordBatch, assign_offsets, iter_batches, set_partition_leader_epoch
from kclient.record.check import search_batch
from kclient.record.layout import CONTROL_MASK, HEADER, HEADER_SIZE, TRANSACTIONAL_MASK

log = logging.getLogger(__name__)


class Log:
    """The record batches of one partition."""

    def __init__(
        self,
        topic: str,
        partition: int,
        directory: Path | None,
        segment_bytes: int,
        *,
        clean_shutdown: bool = False,
    ):
        """``clean_shutdown``: the broker closed this log dir cleanly last time, so its
        segments need no CRC check on recovery."""
        self.topic = topic
        self.partition = partition
        self.directory = directory
        self.segment_bytes = segment_bytes
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.size_bytes = 0
        self.producer_state = ProducerStateManager(f"{topic}-{partition}")
        self.txn_index = TransactionIndex(directory)
        self._entries: list[BatchEntry] = []
        self._last_offsets: list[int] = []
        self._bytes_before: list[int] = []  # stored bytes before each entry (prefix sums)
        self._segments: list[Segment] = []
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
            self._recover(clean_shutdown)

    def __repr__(self) -> str:
        return f"Log({self.topic}-{self.partition}, end={self.log_end_offset})"

    @property
    def high_watermark(self) -> int:
        return self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """Offsets below it are in no open transaction (read_committed reads up to it)."""
        first_unstable = self.producer_state.first_unstable_offset()
        return first_unstable if first_unstable >= 0 else self.high_watermark

    def append_marker(
        self,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        committed: bool,
        leader_epoch: int,
        now_ms: int,
    ) -> int:
        """Write a COMMIT/ABORT marker ending ``producer_id``'s transaction here; its
        offset. Raises InvalidProducerEpochError (a marker of a fenced epoch),
        TransactionCoordinatorFencedError (from an older coordinator), OSError."""
        self.producer_state.check_marker(producer_id, producer_epoch, coordinator_epoch)
        buf = build_marker(
            producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            committed=committed,
            timestamp_ms=now_ms,
        )
        offset = self.log_end_offset
        assign_offsets(buf, offset)
        set_partition_leader_epoch(buf, leader_epoch)
        self.append(buf, [(0, len(buf), offset, offset, now_ms)])
        self._end_txn(producer_id, producer_epoch, offset, not committed, coordinator_epoch)
        return offset

    def _end_txn(
        self, producer_id: int, epoch: int, offset: int, aborted: bool, coordinator_epoch: int
    ) -> None:
        txn = self.producer_state.end_txn(producer_id, epoch, offset, aborted, coordinator_epoch)
        if aborted:
            self.txn_index.append(
                AbortedTxn(producer_id, txn.first_offset, offset, self.last_stable_offset)
            )

    def aborted_transactions(self, fetch_offset: int, read_bytes: int) -> list[AbortedTxn]:
        """The aborted transactions with records in what a read at ``fetch_offset`` of
        ``read_bytes`` bytes returned."""
        i = bisect.bisect_left(self._last_offsets, fetch_offset)
        j = (
            bisect.bisect_right(self._bytes_before, self._bytes_before[i] + read_bytes - 1)
            if read_bytes
            else i
        )
        if j <= i:
            return []
        return self.txn_index.collect(fetch_offset, self._entries[j - 1].last_offset + 1)

    # ---- append ----------------------------------------------------------------------

    def append(
        self,
        buffer: bytearray | memoryview,
        batches: list[tuple[int, int, int, int, int]],
    ) -> None:
        """Store validated batches with offsets already assigned.

        ``batches``: (position in buffer, size, base offset, last offset, max timestamp).
        """
        if self.directory is None:
            view = memoryview(buffer)
            for pos, size, base, last, max_ts in batches:
                self._add(BatchEntry(base, last, max_ts, size, view[pos : pos + size], None, 0))
        else:
            segment = self._segment_for(len(buffer))
            start = segment.append(buffer)
            for pos, size, base, last, max_ts in batches:
                self._add(BatchEntry(base, last, max_ts, size, None, segment, start + pos))
        self.log_end_offset = batches[-1][3] + 1

    def _add(self, entry: BatchEntry) -> None:
        self._entries.append(entry)
        self._last_offsets.append(entry.last_offset)
        self._bytes_before.append(self.size_bytes)
        self.size_bytes += entry.size

    def _segment_for(self, size: int) -> Segment:
        assert self.directory is not None
        if not self._segments or (
            self._segments[-1].size > 0 and self._segments[-1].size + size > self.segment_bytes
        ):
            if self._segments:
                self._roll(self.directory)
            path = self.directory / f"{self.log_end_offset:020d}{SUFFIX}"
            self._segments.append(Segment(path, self.log_end_offset))
        return self._segments[-1]

    def _roll(self, directory: Path) -> None:
        """The active segment is full: flush it and snapshot the producer state at the
        log end, the recovery point from now on."""
        self._segments[-1].flush()
        try:
            self.producer_state.write_snapshot(directory, self.log_end_offset)
        except OSError as exc:
            log.warning("%s: no producer-state snapshot at %d: %s", self, self.log_end_offset, exc)

    # ---- read ------------------------------------------------------------------------

    def read(
        self, fetch_offset: int, max_bytes: int, min_one_batch: bool, max_offset: int = -1
    ) -> list[Buffer]:
        """Stored batches from the one holding ``fetch_offset`` on, up to ``max_bytes``
        and, when ``max_offset`` >= 0, ending below it.

        With ``min_one_batch`` the first batch is returned even when it alone is larger
        than ``max_bytes`` (KIP-74), so a consumer always makes progress.
        Raises OffsetOutOfRangeError outside [log start, log end].
        """
        if fetch_offset < self.log_start_offset or fetch_offset > self.log_end_offset:
            raise errors.OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside {self.log_start_offset}..{self.log_end_offset}"
                f" of {self.topic}-{self.partition}"
            )
        i = bisect.bisect_left(self._last_offsets, fetch_offset)
        out: list[Buffer] = []
        total = 0
        run: tuple[Segment, int, int] | None = None  # coalesced disk read
        entries = self._entries
        for j in range(i, len(entries)):
            entry = entries[j]
            if total + entry.size > max_bytes and (total or not min_one_batch):
                break
            if 0 <= max_offset <= entry.last_offset:
                break
            total += entry.size
            if entry.data is not None:
                out.append(entry.data)
                continue
            assert entry.segment is not None
            if run is not None and run[0] is entry.segment and run[1] + run[2] == entry.position:
                run = (run[0], run[1], run[2] + entry.size)
            else:
                if run is not None:
                    out.append(run[0].read(run[1], run[2]))
                run = (entry.segment, entry.position, entry.size)
        if run is not None:
            out.append(run[0].read(run[1], run[2]))
        return out

    def bytes_after(self, fetch_offset: int, max_offset: int = -1) -> int:
        """How many stored bytes a fetch at ``fetch_offset`` (ending below ``max_offset``
        when >= 0) could return."""
        i = bisect.bisect_left(self._last_offsets, fetch_offset)
        if i >= len(self._entries):
            return 0
        end = self.size_bytes
        if max_offset >= 0:
            j = bisect.bisect_left(self._last_offsets, max_offset)
            end = self._bytes_before[j] if j < len(self._entries) else self.size_bytes
        return max(0, end - self._bytes_before[i])

    def offset_for_timestamp(
        self, timestamp_ms: int, max_batch_bytes: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp_ms``.

        The batch is picked by the max timestamps of the index (the batch headers, set
        from the records when they were validated); only that batch is read, and walked
        within ``max_batch_bytes`` (``_search``).
        """
        for entry in self._entries:
            if entry.max_timestamp >= timestamp_ms:
                return self._search(entry, timestamp_ms, entry.base_offset, max_batch_bytes)
        return None

    def max_timestamp(self, max_batch_bytes: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (ListOffsets -3)."""
        best: BatchEntry | None = None
        for entry in self._entries:
            if best is None or entry.max_timestamp > best.max_timestamp:
                best = entry
        if best is None:
            return None
        return self._search(best, best.max_timestamp, best.last_offset, max_batch_bytes)

    def _search(
        self, entry: BatchEntry, timestamp_ms: int, fallback_offset: int, max_batch_bytes: int
    ) -> tuple[int, int]:
        """The first record of ``entry`` at or after ``timestamp_ms``: walked in place when
        uncompressed, decompressed within ``max_batch_bytes`` (less the batch header)
        otherwise. A batch that cannot be walked so (written before the broker validated
        batches, or under a larger max.message.bytes) is answered from its header, at
        ``fallback_offset``."""
        try:
            batch = RecordBatch(self._entry_bytes(entry))
            offset, timestamp = search_batch(
                batch, timestamp_ms, max(0, max_batch_bytes - HEADER_SIZE)
            )
        except errors.CorruptRecordError as exc:
            log.warning(
                "%s: answering a timestamp lookup from the header of the batch at offset %d: %s",
                self,
                entry.base_offset,
                exc,
            )
            return fallback_offset, entry.max_timestamp
        if offset < 0:  # the header promised a record that is not there
            return fallback_offset, entry.max_timestamp
        return offset, timestamp

    def _entry_bytes(self, entry: BatchEntry) -> Buffer:
        if entry.data is not None:
            return entry.data
        assert entry.segment is not None
        return entry.segment.read(entry.position, entry.size)

    def iter_batches(self) -> Iterator[RecordBatch]:
        """Every stored batch, in offset order (tests, reading a partition back)."""
        for entry in list(self._entries):
            yield from iter_batches(self._entry_bytes(entry), validate_crc=True)

    # ---- disk ------------------------------------------------------------------------

    def _recover(self, clean_shutdown: bool) -> None:
        """Load the segments (``log_loader``), then rebuild the producer state."""
        directory = self.directory
        assert directory is not None
        loaded = load_segments(f"{self.topic}-{self.partition}", directory, clean_shutdown)
        for entry in loaded.entries:
            self._add(entry)
        self._segments = loaded.segments
        self.log_end_offset = loaded.log_end_offset
        self._rebuild_producer_state(directory)

    def _rebuild_producer_state(self, directory: Path) -> None:
        """The newest snapshot not past the log end, then the batches after it (markers
        end transactions and re-index aborts)."""
        state = self.producer_state
        start = state.load_snapshot(directory, self.log_end_offset)
        self.txn_index.load(keep_below=start)
        for entry in self._entries[bisect.bisect_left(self._last_offsets, start) :]:
            assert entry.segment is not None
            header = HEADER.unpack(entry.segment.read(entry.position, HEADER_SIZE))
            producer_id, epoch, base_sequence = header[9], header[10], header[11]
            if producer_id < 0:
                continue
            if header[5] & CONTROL_MASK:
                self._replay_marker(entry, producer_id, epoch)
                continue
            state.replay(
                producer_id,
                epoch,
                BatchMetadata(
                    base_sequence,
                    next_sequence(base_sequence, header[6]),
                    entry.base_offset,
                    entry.last_offset,
                    entry.max_timestamp,
                ),
                transactional=bool(header[5] & TRANSACTIONAL_MASK),
            )
        self.txn_index.rewrite()

    def _replay_marker(self, entry: BatchEntry, producer_id: int, epoch: int) -> None:
        try:
            batch = RecordBatch(self._entry_bytes(entry), entry.position)
            committed, coordinator_epoch = marker_type(batch)
            self._end_txn(producer_id, epoch, entry.base_offset, not committed, coordinator_epoch)
        except errors.KafkaError as exc:  # not a marker, or of a fenced epoch: skip it
            log.warning("%s: control batch at offset %d: %s", self, entry.base_offset, exc)

    def flush(self) -> None:
        for segment in self._segments:
            segment.flush()

    def close(self) -> None:
        """Flush, snapshot the producer state at the log end (so that a restart replays
        nothing) and close the files."""
        if self.directory is not None and self._segments:
            try:
                self.flush()
                self.producer_state.write_snapshot(self.directory, self.log_end_offset)
            except OSError as exc:
                log.warning("%s: closing without a flush or snapshot: %s", self, exc)
        for segment in self._segments:
            segment.close()
        self._segments.clear()
        self.txn_index.close()

    def delete(self) -> None:
        """Close and remove the files (DeleteTopics)."""
        self.txn_index.close()
        for segment in self._segments:
            segment.close()
        self._segments.clear()
        if self.directory is not None and self.directory.exists():
            for path in self.directory.iterdir():
                path.unlink()
            self.directory.rmdir()
