"""Segment: one append-only segment file of a partition log (Kafka's ``LogSegment``),
and BatchEntry, the in-memory index entry of one stored batch.

``<log_dir>/<topic>-<partition>/<base offset, 20 digits>.log`` holds record batches back
to back, exactly as they were written. Without the indexes Kafka keeps beside it: the
owning ``Log`` indexes batches in memory. Used under the owning ``Partition``'s lock.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

Buffer = bytes | bytearray | memoryview


class Segment:
    """One append-only segment file (Kafka's ``LogSegment`` without the indexes)."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size

    def append(self, data: Buffer) -> int:
        """Append ``data``; returns the position it starts at. On a failed write (disk
        full) the file is cut back to its old size and the OSError raised."""
        position = self.size
        view = memoryview(data)
        try:
            while view:
                n = os.write(self.fd, view)
                view = view[n:]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, position)
            raise
        self.size += len(data)
        return position

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def truncate(self, size: int) -> None:
        os.ftruncate(self.fd, size)
        self.size = size

    def flush(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass(slots=True)
class BatchEntry:
    """Where one stored batch is, and what ListOffsets/Fetch need to know about it."""

    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int
    data: memoryview | None  # in memory
    segment: Segment | None  # on disk
    position: int
