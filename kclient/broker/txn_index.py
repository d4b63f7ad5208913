"""The aborted-transaction index of one partition (Kafka's ``TransactionIndex``).

Every ABORT marker appended to a partition adds an ``AbortedTxn`` (producer id, first
offset of the transaction there, last offset = the marker's, the last stable offset
after it). A read_committed Fetch lists the aborted transactions that overlap the
records it returns (``collect``), so the consumer drops their records.

With a log dir the index is ``<partition dir>/aborted.txnindex``: fixed-size entries
appended as markers are written (Kafka's layout: int16 version, int64 producer id,
first offset, last offset, last stable offset). On start-up the entries before the
offset the producer state is replayed from are kept (a torn tail is dropped), the
replay (``Log``) adds the markers after it again, and the file is rewritten atomically
when that changed it. Used under the owning ``Partition``'s lock.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import struct
from dataclasses import dataclass
from pathlib import Path

from kclient.broker.durable_file import write_atomically

log = logging.getLogger(__name__)

FILE = "aborted.txnindex"
_ENTRY = struct.Struct(">hqqqq")
_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    """Aborted transactions of one partition, ordered by their marker's offset."""

    def __init__(self, directory: Path | None) -> None:
        self._path = directory / FILE if directory is not None else None
        self._fd = -1
        self.entries: list[AbortedTxn] = []
        self._last_offsets: list[int] = []

    def append(self, txn: AbortedTxn) -> None:
        """Add an aborted transaction (its marker was just written). Raises OSError."""
        if self._path is not None:
            if self._fd < 0:
                self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.write(self._fd, _pack(txn))
        self._add(txn)

    def _add(self, txn: AbortedTxn) -> None:
        self.entries.append(txn)
        self._last_offsets.append(txn.last_offset)

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions with records in [fetch_offset, upper_bound_offset)."""
        start = bisect.bisect_left(self._last_offsets, fetch_offset)
        return [t for t in self.entries[start:] if t.first_offset < upper_bound_offset]

    # ---- recovery --------------------------------------------------------------------

    def load(self, keep_below: int) -> None:
        """Read the file, keeping the entries whose marker is below ``keep_below`` (the
        replay from there on adds the others again)."""
        self.entries, self._last_offsets = [], []
        if self._path is None:
            return
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            return
        for pos in range(0, len(data) - _ENTRY.size + 1, _ENTRY.size):
            version, *fields = _ENTRY.unpack_from(data, pos)
            txn = AbortedTxn(*fields)
            if version != _VERSION or (
                self._last_offsets and txn.last_offset <= self._last_offsets[-1]
            ):
                log.warning(
                    "%s: ignoring entries from byte %d on (not an index entry)", self._path, pos
                )
                break
            if txn.last_offset < keep_below:
                self._add(txn)

    def rewrite(self) -> None:
        """Make the file hold exactly the entries in memory (after recovery)."""
        if self._path is None:
            return
        self.close()  # the next append opens the file written here
        data = b"".join(_pack(t) for t in self.entries)
        if self._path.exists() or data:
            with contextlib.suppress(FileNotFoundError):
                if self._path.read_bytes() == data:
                    return
            write_atomically(self._path, data)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        if self._path is not None:
            self._path.unlink(missing_ok=True)


def _pack(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(
        _VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
    )
