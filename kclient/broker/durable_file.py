"""Small files the broker must not lose or half-write: written atomically, read checked.

The one mechanism behind every durable file of the embedded broker (its state is either
in a log replayed on start-up or in a file written atomically): the topic metadata
(``topics.json``), each partition's ``partition.metadata``, the producer-id block and the
producer-state snapshots. Kafka does the same with its checkpoint files (write a
temporary file, flush it, rename it over the old one, flush the directory), so a crash at
any moment leaves either the old file or the new one, never a torn one.

Binary files carry a magic, a version and a CRC-32C of their body (``seal`` / ``unseal``),
so a damaged one is recognised instead of misread. Pure functions; any thread.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

from crc32c import crc32c

from kclient import errors

__all__ = [
    "DamagedFileError",
    "fsync_directory",
    "read_json",
    "seal",
    "unseal",
    "write_atomically",
    "write_json",
]

_SEAL = struct.Struct(">4sBI")  # magic, version, CRC-32C of the body


class DamagedFileError(errors.KafkaError):
    """A durable file exists but cannot be read back (cut short, not ours, bad CRC)."""


def fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` survive a crash of the machine."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data``: temp file, fsync, rename, fsync of the directory.

    ``sync=False`` leaves out both fsyncs: still whole or absent after the process dies,
    but not promised after a power loss (for files that can be rebuilt). Raises OSError
    (disk full, permissions); the old file is then left as it was.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_directory(path.parent)


def write_json(path: Path, value: Any, *, sync: bool = True) -> None:
    write_atomically(path, json.dumps(value, indent=1, sort_keys=True).encode(), sync=sync)


def read_json(path: Path) -> Any:
    """The JSON value in ``path``; DamagedFileError (naming the file) if it does not parse.
    FileNotFoundError when it does not exist."""
    data = path.read_bytes()
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise DamagedFileError(f"{path} is damaged ({len(data)} bytes, not JSON: {exc})") from None


def seal(magic: bytes, version: int, body: bytes) -> bytes:
    """``body`` behind a header of ``magic`` (4 bytes), ``version`` and its CRC-32C."""
    return _SEAL.pack(magic, version, crc32c(body)) + body


def unseal(path: Path, data: bytes, magic: bytes, version: int) -> bytes:
    """The body of a ``seal``-ed file; DamagedFileError when it is not one, or torn."""
    if len(data) < _SEAL.size:
        raise DamagedFileError(f"{path} is damaged: {len(data)} bytes, shorter than its header")
    found_magic, found_version, crc = _SEAL.unpack_from(data)
    if found_magic != magic or found_version != version:
        raise DamagedFileError(
            f"{path} is not a version-{version} {magic.decode(errors='replace')} file"
        )
    body = data[_SEAL.size :]
    if crc32c(body) != crc:
        raise DamagedFileError(f"{path} is damaged: its CRC does not match its {len(body)} bytes")
    return body
