"""DurableRecords: a sealed snapshot plus a CRC-framed records log, for coordinator state.

The broker's one mechanism for state kept outside partition logs (as
``consumer_offsets`` keeps group offsets): Kafka keeps transaction state as records of
the compacted ``__transaction_state`` topic; here ``<log_dir>/<name>/`` holds

* ``snapshot``: the whole state as JSON, sealed with a CRC (``durable_file``) and
  written atomically;
* ``records.log``: the changes since, each appended before the change is answered, one
  frame each: int32 length, uint32 CRC-32C of the body, the body (JSON).

``load`` returns the snapshot and the records to replay (a torn or corrupt frame at the
end, left by a crash, ends them: it was never answered); the owner then ``compact``s its
state into a new snapshot, which empties the records log. An appended record survives a
crash of the process (kill -9); one of the machine may lose what was not yet flushed.
Not thread-safe: the owner holds its lock.
"""

from __future__ import annotations

import json
import logging
import os
import struct
from pathlib import Path
from typing import Any

from crc32c import crc32c

from kclient import errors
from kclient.broker.durable_file import DamagedFileError, seal, unseal, write_atomically

log = logging.getLogger(__name__)

SNAPSHOT_FILE = "snapshot"
RECORDS_FILE = "records.log"
_FRAME = struct.Struct(">iI")
#: the records log is compacted into the snapshot once it is this large
COMPACT_BYTES = 16 << 20


class DurableRecords:
    """Snapshot + records log in ``directory`` (``magic``: 4 bytes naming the state)."""

    def __init__(self, directory: Path, magic: bytes, version: int = 1) -> None:
        self.directory = directory
        self._magic = magic
        self._version = version
        self._fd = -1
        self.log_bytes = 0
        directory.mkdir(parents=True, exist_ok=True)

    def load(self) -> tuple[Any, list[Any]]:
        """(the snapshot's JSON value or None, the records appended after it)."""
        snapshot = self.directory / SNAPSHOT_FILE
        value: Any = None
        try:
            data = snapshot.read_bytes()
        except FileNotFoundError:
            data = None
        if data is not None:
            try:
                value = json.loads(unseal(snapshot, data, self._magic, self._version))
            except (DamagedFileError, ValueError) as exc:
                damaged = snapshot.with_name(SNAPSHOT_FILE + ".damaged")
                snapshot.replace(damaged)
                log.warning("%s cannot be read (%s); kept as %s", snapshot, exc, damaged.name)
        return value, self._read_records(self.directory / RECORDS_FILE)

    @staticmethod
    def _read_records(path: Path) -> list[Any]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return []
        records: list[Any] = []
        pos = 0
        while pos + _FRAME.size <= len(data):
            length, crc = _FRAME.unpack_from(data, pos)
            body = data[pos + _FRAME.size : pos + _FRAME.size + length]
            if length < 0 or len(body) != length or crc32c(body) != crc:
                break
            try:
                records.append(json.loads(body))
            except ValueError as exc:
                log.warning("%s: skipping an unreadable record at byte %d: %s", path, pos, exc)
            pos += _FRAME.size + length
        if pos < len(data):
            log.warning(
                "%s: dropping %d bytes after the last whole record at byte %d (a write cut "
                "short by a crash: never answered)",
                path,
                len(data) - pos,
                pos,
            )
        return records

    def append(self, record: Any) -> None:
        """Write one record. Raises KafkaStorageError (nothing of it is left behind)."""
        if self._fd < 0:
            raise errors.KafkaStorageError(f"{self.directory} is closed")
        body = json.dumps(record, separators=(",", ":")).encode()
        frame = memoryview(_FRAME.pack(len(body), crc32c(body)) + body)
        try:
            while frame:
                frame = frame[os.write(self._fd, frame) :]
        except OSError as exc:
            try:
                os.ftruncate(self._fd, self.log_bytes)
            except OSError:
                pass
            raise errors.KafkaStorageError(
                f"cannot write to {self.directory / RECORDS_FILE}: {exc}"
            ) from exc
        self.log_bytes += _FRAME.size + len(body)

    def compact(self, value: Any) -> None:
        """Write ``value`` (the whole state) as the snapshot and empty the records log.
        Raises KafkaStorageError."""
        body = json.dumps(value, separators=(",", ":")).encode()
        path = self.directory / RECORDS_FILE
        try:
            write_atomically(self.directory / SNAPSHOT_FILE, seal(self._magic, self._version, body))
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
        except OSError as exc:
            raise errors.KafkaStorageError(f"cannot compact {self.directory}: {exc}") from exc
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = fd
        self.log_bytes = 0

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
