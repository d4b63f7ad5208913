"""Zig-zag varints as used inside a v2 record (Java's ``ByteUtils.writeVarint/readVarlong``).

The encoding itself is :mod:`kclient.varint`'s. Kafka's ``DefaultRecord`` writes every
per-record integer (length, timestamp delta, offset delta, key/value/header lengths,
header count) as a zig-zag encoded base-128 varint. The record builder is the producer's
hot path, so the encodings of the small values that make up nearly every record are
computed once, here, into plain lists:

* ``VARINT[n]`` — the bytes of the zig-zag varint of ``n`` for ``0 <= n < TABLE_SIZE``.
* ``SIZED[n]`` — ``(VARINT[n], len(VARINT[n]))`` for lengths (one lookup gives both).
* ``LENGTH_PREFIX[n]`` — ``(VARINT[n], len(VARINT[n]) + n)``: the varint header of a
  length-``n`` field and the size of header plus field.
* ``ATTR_TIMESTAMP[d]`` — ``(b"\\x00" + varint(d), size + 1)``: the record attributes byte
  followed by the timestamp delta ``0 <= d < TABLE_SIZE``; the size counts one more byte
  for the record's header count, which a header-less record ends with. (Negative deltas
  must not be looked up: Python would index from the end.)

For reading, ``ZIGZAG[raw]`` is the signed value of every one- or two-byte varint's raw
(unsigned) value ``raw < 2**14``.

A lookup outside a table raises ``IndexError``; the builder catches it and takes its slow
path through :func:`encode_varint`. Pure functions and immutable tables: any thread.
"""

from __future__ import annotations

from kclient.errors import CorruptRecordError
from kclient.varint import (
    MAX_UINT64,
    MAX_VARLONG_BYTES,
    VarintError,
    read_uvarint,
    unzigzag,
    varint_bytes,
    varint_size,
)

TABLE_SIZE = 16384
"""Values below this (lengths up to 16 KiB, deltas up to ~16 s) are encoded by lookup."""

encode_varint = varint_bytes
"""The zig-zag varint (or varlong: same encoding) of a signed 64-bit value."""
size_of_varint = varint_size
"""How many bytes :func:`encode_varint` writes for a value."""


def decode_unsigned(data: bytes, pos: int) -> tuple[int, int]:
    """Read the base-128 varint at ``data[pos]`` *without* zig-zag decoding it.

    Returns ``(raw value, position after it)``, kept to 64 bits as Java's ``readVarlong``
    keeps it. Raises :class:`CorruptRecordError` when the varint runs past the end of
    ``data`` or is longer than a varlong (10 bytes) can be.
    """
    try:
        raw, pos = read_uvarint(data, pos, MAX_VARLONG_BYTES)
    except VarintError as exc:  # worded as the C decoder words it
        if not exc.problem.startswith("is longer"):  # (a 10-byte one can end the data too)
            where = f"varint at byte {exc.stopped_at} runs past the end of the records"
        else:
            where = f"varint ending at byte {exc.stopped_at} is longer than 10 bytes"
        raise CorruptRecordError(where) from None
    return raw & MAX_UINT64, pos


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Read the zig-zag varint at ``data[pos]``; returns ``(value, position after it)``."""
    raw, pos = decode_unsigned(data, pos)
    return unzigzag(raw), pos


VARINT: list[bytes] = [encode_varint(n) for n in range(TABLE_SIZE)]
SIZED: list[tuple[bytes, int]] = [(enc, len(enc)) for enc in VARINT]
LENGTH_PREFIX: list[tuple[bytes, int]] = [(enc, len(enc) + n) for n, enc in enumerate(VARINT)]
ATTR_TIMESTAMP: list[tuple[bytes, int]] = [
    (b"\x00" + encode_varint(d), 1 + size_of_varint(d) + 1) for d in range(TABLE_SIZE)
]
ZIGZAG: list[int] = [unzigzag(raw) for raw in range(1 << 14)]
