"""Kafka wire-protocol primitive types.

Corresponds to Kafka's ``org.apache.kafka.common.protocol.types`` (Type, CompactArrayOf, …)
and ``ByteBufferAccessor``; varints are :mod:`kclient.varint`'s (``ByteUtils``).
Sans-I/O and stateless: any thread may use it; a ``Reader`` or ``Writer`` belongs to
whoever created it.

Reading: a ``Reader`` walks a ``memoryview`` with a position. Every read checks what is
left before it slices or allocates, so garbage or truncated bytes raise ``DecodeError``
(a ``ProtocolDecodeError``) naming what was being read and the byte offset, never
``struct.error``/``IndexError``, and a bogus length can never cause a large allocation.

Writing: ``write_*`` functions append to a ``bytearray``; a ``Writer`` is such a bytearray
plus the buffers an encode takes by reference (record data), in wire order.

Wire formats (big-endian; "compact" forms are used by flexible versions, KIP-482):
    int8/16/32/64, uint16/32, float64   fixed width, two's complement / IEEE 754
    boolean                             int8, 0 = false, anything else = true
    unsigned varint                     7 bits per byte, low group first, MSB = "more"
    varint / varlong                    zigzag ((n << 1) ^ (n >> 31|63)), then unsigned varint
    string / bytes                      int16 / int32 length (-1 = null when nullable), data
    compact string / bytes              unsigned varint length + 1 (0 = null), data
    array                               int32 count (-1 = null) / compact: uvarint count + 1
    uuid                                16 bytes
    tagged fields                       uvarint count, then per field: uvarint tag,
                                        uvarint size, <size> bytes; tags ascending
"""

from __future__ import annotations

import struct
import sys
import uuid

from kclient.errors import ProtocolDecodeError, ProtocolEncodeError
from kclient.varint import VarintError, read_uvarint
from kclient.varint import uvarint_bytes as _uvarint_bytes

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)

MAX_UINT32 = 0xFFFF_FFFF
MAX_UINT64 = 0xFFFF_FFFF_FFFF_FFFF
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
MAX_STRING_BYTES = 0x7FFF


def _field_path(path: list[str]) -> str:
    out = ""
    for part in reversed(path):
        out += part if part.startswith("[") or not out else "." + part
    return out


class DecodeError(ProtocolDecodeError):
    """Peer bytes that do not decode: what was read, at which byte offset, in which field."""

    def __init__(self, what: str, offset: int, problem: str) -> None:
        super().__init__(what, offset, problem)
        self.what = what
        self.offset = offset
        self.problem = problem
        self.path: list[str] = []  # innermost first; codecs append while unwinding
        self.context = ""  # e.g. "ProduceRequest v9"

    @property
    def field_path(self) -> str:
        return _field_path(self.path)

    def __str__(self) -> str:
        prefix = f"{self.context}: " if self.context else ""
        where = f" (field {self.field_path})" if self.path else ""
        return (
            f"{prefix}cannot read {self.what} at byte offset {self.offset}{where}: {self.problem}"
        )


class EncodeError(ProtocolEncodeError):
    """A value handed to the encoder does not fit its declaration: which field and why."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.path: list[str] = []
        self.context = ""

    @property
    def field_path(self) -> str:
        return _field_path(self.path)

    def __str__(self) -> str:
        prefix = f"{self.context}: " if self.context else ""
        where = f"field {self.field_path}: " if self.path else ""
        return f"{prefix}{where}{self.problem}"


#: ``Reader.items_left`` without a limit.
NO_ITEM_LIMIT = sys.maxsize


class Reader:
    """Sequential reader over a buffer. ``pos`` is the next byte; offsets in errors add ``base``.

    ``max_items`` (None: no limit) bounds the array items the reader decodes in all: a
    message of a few bytes per item makes Python objects of ~60x its size, so a server
    sets it (``frame.decode_request``) before decoding what a client sent.
    """

    __slots__ = ("base", "buf", "items_left", "max_items", "pos")

    def __init__(self, data: bytes | bytearray | memoryview, pos: int = 0, base: int = 0) -> None:
        view = data if type(data) is memoryview else memoryview(data)
        if view.format != "B" or view.ndim != 1:
            view = view.cast("B")
        self.buf = view
        self.pos = pos
        self.base = base
        self.max_items: int | None = None
        self.items_left = NO_ITEM_LIMIT

    def limit_items(self, max_items: int) -> None:
        """Decode at most ``max_items`` array items from now on (DecodeError beyond)."""
        self.max_items = self.items_left = max_items

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def error(self, what: str, problem: str, at: int | None = None) -> DecodeError:
        return DecodeError(what, self.base + (self.pos if at is None else at), problem)

    def short(self, what: str, need: int) -> DecodeError:
        left = max(len(self.buf) - self.pos, 0)
        return self.error(what, f"needs {need} bytes, {left} left")

    def _fixed(self, st: struct.Struct, what: str) -> int:
        try:
            value: int = st.unpack_from(self.buf, self.pos)[0]
        except struct.error:
            raise self.short(what, st.size) from None
        self.pos += st.size
        return value

    def int8(self) -> int:
        return self._fixed(INT8, "int8")

    def int16(self) -> int:
        return self._fixed(INT16, "int16")

    def int32(self) -> int:
        return self._fixed(INT32, "int32")

    def int64(self) -> int:
        return self._fixed(INT64, "int64")

    def uint16(self) -> int:
        return self._fixed(UINT16, "uint16")

    def uint32(self) -> int:
        return self._fixed(UINT32, "uint32")

    def float64(self) -> float:
        try:
            value: float = FLOAT64.unpack_from(self.buf, self.pos)[0]
        except struct.error:
            raise self.short("float64", 8) from None
        self.pos += 8
        return value

    def boolean(self) -> bool:
        return self._fixed(INT8, "boolean") != 0

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=bytes(self.take(16, "uuid")))

    def _uvarint(self, what: str, max_bytes: int) -> int:
        try:
            value, self.pos = read_uvarint(self.buf, self.pos, max_bytes)
        except VarintError as exc:
            raise self.error(what, exc.problem, at=exc.position) from None
        return value

    def uvarint(self, what: str = "unsigned varint") -> int:
        buf, pos = self.buf, self.pos
        if pos < len(buf) and buf[pos] < 0x80:  # one byte: the common case
            self.pos = pos + 1
            return buf[pos]
        start = pos
        value = self._uvarint(what, 5)
        if value > MAX_UINT32:
            raise self.error(what, f"value {value} does not fit in 32 bits", at=start)
        return value

    def varint(self) -> int:
        start = self.pos
        value = self._uvarint("varint", 5)
        if value > MAX_UINT32:
            raise self.error("varint", f"value {value} does not fit in 32 bits", at=start)
        return (value >> 1) ^ -(value & 1)

    def uvarlong(self, what: str = "unsigned varlong") -> int:
        start = self.pos
        value = self._uvarint(what, 10)
        if value > MAX_UINT64:
            raise self.error(what, f"value {value} does not fit in 64 bits", at=start)
        return value

    def varlong(self) -> int:
        value = self.uvarlong("varlong")
        return (value >> 1) ^ -(value & 1)

    def take(self, n: int, what: str) -> memoryview:
        """The next ``n`` bytes as a zero-copy slice (checked before slicing)."""
        pos = self.pos
        end = pos + n
        if n < 0 or end > len(self.buf):
            raise self.short(what, n)
        self.pos = end
        return self.buf[pos:end]

    def _utf8(self, n: int, what: str) -> str:
        pos = self.pos
        end = pos + n
        if end > len(self.buf):
            raise self.short(what, n)
        try:
            text = str(self.buf[pos:end], "utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(what, f"invalid UTF-8 ({exc.reason})") from None
        self.pos = end
        return text

    def string(self) -> str:
        start = self.pos
        n = self._fixed(INT16, "string length")
        if n < 0:
            raise self.error("string", f"length {n} in a non-nullable string", at=start)
        return self._utf8(n, "string")

    def nullable_string(self) -> str | None:
        start = self.pos
        n = self._fixed(INT16, "nullable string length")
        if n < 0:
            if n == -1:
                return None
            raise self.error("nullable string", f"negative length {n}", at=start)
        return self._utf8(n, "nullable string")

    def compact_string(self) -> str:
        start = self.pos
        n = self.uvarint("compact string length")
        if n == 0:
            raise self.error("compact string", "null in a non-nullable string", at=start)
        return self._utf8(n - 1, "compact string")

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint("compact nullable string length")
        return None if n == 0 else self._utf8(n - 1, "compact nullable string")

    def bytes_view(self, *, compact: bool, nullable: bool, what: str) -> memoryview | None:
        """Length-prefixed bytes as a zero-copy slice; ``None`` for null."""
        start = self.pos
        n = self.uvarint(f"{what} length") - 1 if compact else self._fixed(INT32, f"{what} length")
        if n < 0:
            if n == -1 and nullable:
                return None
            raise self.error(what, f"length {n} in a non-nullable field", at=start)
        return self.take(n, what)

    def array_length(self, *, compact: bool, nullable: bool, min_item_size: int, what: str) -> int:
        """Element count of an array, -1 for null; rejects counts the bytes left cannot hold."""
        start = self.pos
        n = self.uvarint(f"{what} length") - 1 if compact else self._fixed(INT32, f"{what} length")
        if n < 0:
            if n == -1 and nullable:
                return -1
            raise self.error(what, f"length {n} in a non-nullable array", at=start)
        if n * max(min_item_size, 1) > len(self.buf) - self.pos:
            raise self.error(
                what,
                f"claims {n} items of at least {max(min_item_size, 1)} bytes,"
                f" only {len(self.buf) - self.pos} bytes left",
                at=start,
            )
        self.items_left -= n
        if self.items_left < 0:
            raise self.error(
                what, f"more than {self.max_items} array items in one message", at=start
            )
        return n

    def raw_tagged_fields(self) -> list[tuple[int, int, memoryview]]:
        """A tagged-field section as (tag, offset, raw bytes); tags must be strictly ascending."""
        start = self.pos
        count = self.uvarint("tagged field count")
        if count * 2 > len(self.buf) - self.pos:
            raise self.error("tagged fields", f"claims {count} fields, too few bytes left", start)
        fields: list[tuple[int, int, memoryview]] = []
        last = -1
        for _ in range(count):
            at = self.pos
            tag = self.uvarint("tag")
            if tag <= last:
                raise self.error("tag", f"tag {tag} after tag {last}: not ascending", at=at)
            last = tag
            size = self.uvarint("tagged field size")
            offset = self.base + self.pos
            fields.append((tag, offset, self.take(size, f"tagged field {tag}")))
        return fields

    def expect_end(self, what: str) -> None:
        extra = len(self.buf) - self.pos
        if extra:
            raise self.error(what, f"{extra} unexpected bytes after the end")


# ---- writing ------------------------------------------------------------------------------

Buffer = bytes | bytearray | memoryview


class Writer:
    """Output of an encode: a growing ``bytearray`` plus buffers taken by reference."""

    __slots__ = ("buf", "parts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.parts: list[Buffer] = []

    def reference(self, chunk: Buffer) -> None:
        """Append ``chunk`` without copying it."""
        self.parts.append(self.buf)
        self.parts.append(chunk)
        self.buf = bytearray()

    def buffers(self) -> list[Buffer]:
        if self.buf or not self.parts:
            self.parts.append(self.buf)
            self.buf = bytearray()
        return self.parts

    def size(self) -> int:
        """Bytes written so far, referenced buffers included."""
        total = len(self.buf)
        for part in self.parts:
            total += part.nbytes if type(part) is memoryview else len(part)
        return total

    def getvalue(self) -> bytes:
        return b"".join(self.buffers())


def uvarint_bytes(value: int) -> bytes:
    """Unsigned varint encoding of ``value`` (0 <= value < 2**64)."""
    if value < 0 or value > MAX_UINT64:
        raise EncodeError(f"{value} is out of range for an unsigned varint")
    return _uvarint_bytes(value)


def write_uvarint(out: bytearray, value: int) -> None:
    if 0 <= value < 0x80:
        out.append(value)
    else:
        out += uvarint_bytes(value)


def write_varint(out: bytearray, value: int) -> None:
    if not INT32_MIN <= value <= INT32_MAX:
        raise EncodeError(f"{value} is out of range for a varint (int32)")
    write_uvarint(out, ((value << 1) ^ (value >> 31)) & MAX_UINT32)


def write_varlong(out: bytearray, value: int) -> None:
    if not INT64_MIN <= value <= INT64_MAX:
        raise EncodeError(f"{value} is out of range for a varlong (int64)")
    write_uvarint(out, ((value << 1) ^ (value >> 63)) & MAX_UINT64)


def write_string(out: bytearray, value: str | None, *, compact: bool, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise EncodeError("None given for a non-nullable string")
        out += b"\x00" if compact else b"\xff\xff"
        return
    data = value.encode("utf-8")
    if compact:
        write_uvarint(out, len(data) + 1)
    elif len(data) > MAX_STRING_BYTES:
        raise EncodeError(f"string of {len(data)} bytes exceeds {MAX_STRING_BYTES}")
    else:
        out += INT16.pack(len(data))
    out += data


def write_bytes(
    out: bytearray, value: bytes | bytearray | memoryview | None, *, compact: bool, nullable: bool
) -> None:
    if value is None:
        if not nullable:
            raise EncodeError("None given for non-nullable bytes")
        out += b"\x00" if compact else b"\xff\xff\xff\xff"
        return
    size = value.nbytes if type(value) is memoryview else len(value)
    if compact:
        write_uvarint(out, size + 1)
    else:
        out += INT32.pack(size)
    out += value


def write_array_length(out: bytearray, count: int | None, *, compact: bool, nullable: bool) -> None:
    if count is None:
        if not nullable:
            raise EncodeError("None given for a non-nullable array")
        out += b"\x00" if compact else b"\xff\xff\xff\xff"
    elif compact:
        write_uvarint(out, count + 1)
    else:
        out += INT32.pack(count)


def write_uuid(out: bytearray, value: uuid.UUID) -> None:
    out += value.bytes


def write_raw_tagged_fields(out: bytearray, fields: dict[int, bytes]) -> None:
    """A tagged-field section from tag → already-encoded bytes (written in ascending tag order)."""
    write_uvarint(out, len(fields))
    for tag in sorted(fields):
        data = fields[tag]
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
