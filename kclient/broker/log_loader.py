"""Loading a partition's segment files on open (Kafka's ``LogLoader``), before the owning
``Log`` rebuilds its producer state from them.

Each segment is read in bounded chunks (at most one batch, or ``_READ_CHUNK_BYTES``, in
memory at a time) and its batch headers indexed: offsets continue, sizes fit the file,
magic 2. Every batch of the active (newest) segment is CRC-checked, and after an unclean
shutdown also every batch from the newest producer-state snapshot (the recovery point) on.
The log is cut at the first torn or corrupt batch, later segments are deleted, and what
was dropped (offsets, batches, bytes) is logged. Kafka trusts a cleanly closed log; here a
bit flipped at rest in the active segment is dropped rather than served to consumers
forever. Called by ``Log.__init__`` on the thread opening the log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from kclient import errors
from kclient.broker.log_segment import BatchEntry, Buffer, Segment
from kclient.broker.producer_state import snapshot_offsets
from kclient.record import RecordBatch
from kclient.record.layout import HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC, MIN_BATCH_LENGTH

log = logging.getLogger(__name__)

SUFFIX = ".log"
#: Bytes read at a time while recovering (a larger batch is read on its own).
_READ_CHUNK_BYTES = 1 << 20


@dataclass
class LoadedSegments:
    """The valid prefix of a partition's segment files: open segments and their batches."""

    segments: list[Segment] = field(default_factory=list)
    entries: list[BatchEntry] = field(default_factory=list)
    log_end_offset: int = 0


def load_segments(name: str, directory: Path, clean_shutdown: bool) -> LoadedSegments:
    """Index every segment of ``directory``, truncating at the first torn or corrupt batch
    (``name`` prefixes the log lines, e.g. ``Log(t-0, end=5)``)."""
    loaded = LoadedSegments()
    snapshots = snapshot_offsets(directory)
    paths = [
        (int(path.stem), path)
        for path in sorted(directory.glob(f"*{SUFFIX}"))
        if path.stem.isdigit()
    ]
    # batches ending at or past check_from are CRC-checked: the active segment's always
    # (bit rot at rest), after an unclean shutdown all from the recovery point on
    check_from = paths[-1][0] if paths else 0
    if not clean_shutdown:
        check_from = min(check_from, snapshots[-1] if snapshots else 0)
    truncated = False
    for base, path in paths:
        if truncated or base != loaded.log_end_offset:
            if not truncated:
                log.warning(
                    "%s: segment %s does not follow offset %d; dropping it and everything after",
                    name,
                    path.name,
                    loaded.log_end_offset,
                )
            truncated = True
            path.unlink()
            continue
        segment = Segment(path, base)
        valid = _load_segment(name, loaded, segment, check_from)
        if valid < segment.size:
            _log_dropped(name, loaded.log_end_offset, segment, valid, paths)
            segment.truncate(valid)
            truncated = True
        if segment.size == 0 and loaded.segments:
            segment.close()
            path.unlink()
            continue
        loaded.segments.append(segment)
    return loaded


def _load_segment(name: str, loaded: LoadedSegments, segment: Segment, check_from: int) -> int:
    """Index a segment's batches into ``loaded``; returns the size of its valid prefix.
    Batches that end at or past offset ``check_from`` are CRC-checked too."""
    size = segment.size
    position = 0
    chunk = b""
    chunk_start = 0
    while size - position >= HEADER_SIZE:
        if not chunk_start <= position <= chunk_start + len(chunk) - HEADER_SIZE:
            chunk = segment.read(position, min(_READ_CHUNK_BYTES, size - position))
            chunk_start = position
        header = HEADER.unpack_from(chunk, position - chunk_start)
        base_offset, batch_length, magic = header[0], header[1], header[3]
        last = base_offset + header[6]
        batch_size = LOG_OVERHEAD + batch_length
        problem = None
        if batch_length < MIN_BATCH_LENGTH or magic != MAGIC:
            problem = f"batchLength {batch_length}, magic {magic}"
        elif position + batch_size > size:
            problem = f"a batch of {batch_size} bytes cut short by the end of the file"
        elif base_offset != loaded.log_end_offset:
            problem = f"offset {base_offset}, expected {loaded.log_end_offset}"
        elif 0 <= check_from <= last:
            at = position - chunk_start
            data: Buffer = (
                memoryview(chunk)[at : at + batch_size]
                if at + batch_size <= len(chunk)
                else segment.read(position, batch_size)
            )
            try:
                RecordBatch(data, position).validate()
            except errors.CorruptRecordError as exc:
                problem = str(exc)
        if problem is not None:
            log.warning("%s: %s at %s:%d", name, problem, segment.path.name, position)
            break
        loaded.entries.append(
            BatchEntry(base_offset, last, header[8], batch_size, None, segment, position)
        )
        position += batch_size
        loaded.log_end_offset = last + 1
    return position


def _log_dropped(
    name: str, end: int, segment: Segment, valid: int, paths: list[tuple[int, Path]]
) -> None:
    """Say what cutting ``segment`` at ``valid`` bytes drops: the offsets (as far as the
    headers after the cut can still be read), the batches and the bytes, with the later
    segments that go with it."""
    batches, last = 0, -1
    position = valid
    while segment.size - position >= HEADER_SIZE:
        header = HEADER.unpack(segment.read(position, HEADER_SIZE))
        if header[1] < MIN_BATCH_LENGTH or header[0] < end:
            break
        batches += 1
        last = max(last, header[0] + header[6])
        position += LOG_OVERHEAD + header[1]
    later = [p for base, p in paths if base > segment.base_offset]
    dropped_bytes = segment.size - valid + sum(p.stat().st_size for p in later)
    offsets = f"offsets {end}..{last}" if last >= end else f"offsets from {end} on"
    log.warning(
        "%s: dropping %s (%d bytes: %d readable batch headers in %s from byte %d%s); "
        "the log ends at offset %d and new records are written from there",
        name,
        offsets,
        dropped_bytes,
        batches,
        segment.path.name,
        valid,
        f", and {len(later)} later segments" if later else "",
        end,
    )
