"""Base-128 varints, the one encoding of Kafka's ``ByteUtils`` (readUnsignedVarint,
writeVarint, writeVarlong, ...) for both the protocol codec (``kclient.protocol``:
compact lengths, tagged fields) and record batches (``kclient.record``: every
per-record integer).

An unsigned varint stores 7 bits per byte, low group first; a set high bit means more
bytes follow. Signed varints (int32) and varlongs (int64) are zig-zag encoded first, so
that small negative numbers stay short: ``(n << 1) ^ (n >> 31)`` (or ``>> 63``).

Encoding takes values in range (callers check their type's range); decoding raises
:class:`VarintError` with the position and what is wrong, which each caller turns into
its own error (``ProtocolDecodeError`` with the field's name, ``CorruptRecordError``).
The hot paths inline the one-byte case and call these for the rest. Pure functions:
any thread.
"""

from __future__ import annotations

MAX_UINT32 = 2**32 - 1
MAX_UINT64 = 2**64 - 1
#: Bytes a 32-bit / 64-bit value can take.
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10

_ONE_BYTE = tuple(bytes((i,)) for i in range(128))


class VarintError(ValueError):
    """A varint runs past the end of its buffer or is longer than allowed."""

    def __init__(self, position: int, problem: str, stopped_at: int) -> None:
        super().__init__(f"varint at byte {position} {problem}")
        #: where the varint starts
        self.position = position
        #: "ends before its last byte" or "is longer than N bytes"
        self.problem = problem
        #: where reading stopped: the end of the buffer, or after ``max_bytes``
        self.stopped_at = stopped_at


def zigzag(value: int) -> int:
    """The unsigned form of a signed 64-bit (or 32-bit) ``value``."""
    return ((value << 1) ^ (value >> 63)) & MAX_UINT64


def unzigzag(raw: int) -> int:
    return (raw >> 1) ^ -(raw & 1)


def uvarint_bytes(value: int) -> bytes:
    """The unsigned varint of ``0 <= value < 2**64``."""
    if value < 0x80:
        return _ONE_BYTE[value]
    if value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def varint_bytes(value: int) -> bytes:
    """The zig-zag varint (or varlong: same bytes) of a signed 64-bit ``value``."""
    return uvarint_bytes(zigzag(value))


def uvarint_size(value: int) -> int:
    """How many bytes :func:`uvarint_bytes` writes for ``value``."""
    size = 1
    while value > 0x7F:
        value >>= 7
        size += 1
    return size


def varint_size(value: int) -> int:
    """How many bytes :func:`varint_bytes` writes for ``value``."""
    return uvarint_size(zigzag(value))


def read_uvarint(
    buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = MAX_VARLONG_BYTES
) -> tuple[int, int]:
    """The unsigned varint at ``buf[pos]`` (at most ``max_bytes`` long) and the position
    after it. Raises :class:`VarintError` if it ends early or is too long."""
    result = shift = 0
    end = len(buf)
    for at in range(pos, pos + max_bytes):
        if at >= end:
            raise VarintError(pos, "ends before its last byte", at)
        byte = buf[at]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, at + 1
        shift += 7
    raise VarintError(pos, f"is longer than {max_bytes} bytes", pos + max_bytes)
