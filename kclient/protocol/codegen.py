"""The fast path of the protocol codec: Python source generated per message and version.

Nested structs and arrays become inline loops, each run of fixed-width fields (with the
int16/int32 length of the field after it) one precompiled ``struct.Struct`` call, with
no call per field; the source is compiled with ``exec``. A generated decoder reads a
``memoryview`` at an offset, an encoder writes to a ``bytearray``. On anything they do
not handle (a wrong type, a truncated or malformed frame) they just raise, whatever the
exception, and ``Plan`` (in ``codec``) runs the careful path instead. Building is pure;
the generated functions keep no state: any thread.
"""

from __future__ import annotations

import linecache
import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kclient.protocol.careful import UNKNOWN_TAGGED, tagged_decoder, tagged_encoder
from kclient.protocol.scalars import (
    DecodeStep,
    EncodeStep,
)
from kclient.protocol.schema import FIXED_TYPES, Field, Message, declared_keys
from kclient.protocol.types import (
    INT16,
    INT32,
    MAX_UINT32,
    NO_ITEM_LIMIT,
    Buffer,
    Reader,
    Writer,
    uvarint_bytes,
)
from kclient.varint import MAX_VARINT_BYTES, VarintError, read_uvarint

# ---- the generated fast path ---------------------------------------------------------------
#
# Each generator below writes the source of one function for one message at one version,
# mirroring the careful path step by step: the same fields in the same order, the same
# checks on what is decoded (nullability, lengths against the bytes left, item counts
# against the smallest item) and on what is encoded (types, string lengths), so that it
# succeeds exactly when the careful path does, with the same result (only the whole-frame
# response decoders also leave response headers with tagged fields to it). Where it would
# need to say what is wrong, it raises instead and leaves that to the careful path.


class _FastPathMiss(Exception):
    """Raised by generated code for input it leaves to the careful path."""


def _uvarint_at(buf: memoryview, pos: int) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (at most 5 bytes, at most 32 bits, as
    ``Reader.uvarint`` takes) and the position after it."""
    try:
        value, pos = read_uvarint(buf, pos, MAX_VARINT_BYTES)
    except VarintError:
        raise _FastPathMiss from None
    if value > MAX_UINT32:
        raise _FastPathMiss
    return value, pos


def _raw_bytes(buf: memoryview) -> bytes | bytearray:
    """The bytes or bytearray ``buf`` views all of, else a copy of it (to read strings from)."""
    obj = buf.obj
    if (type(obj) is bytes or type(obj) is bytearray) and len(obj) == len(buf) and buf.contiguous:
        return obj
    return buf.tobytes()


def _tagged_reader(step: DecodeStep) -> Callable[[memoryview, int, dict[str, Any]], int]:
    """A tagged-field section that is not empty, read by the careful step into ``d``."""

    def read(buf: memoryview, pos: int, d: dict[str, Any]) -> int:
        reader = Reader(buf, pos)
        step(reader, d)
        return reader.pos

    return read


def _tagged_writer(step: EncodeStep) -> Callable[[bytearray, Mapping[str, Any]], None]:
    """A tagged-field section with something in it, written by the careful step."""

    def write(buf: bytearray, d: Mapping[str, Any]) -> None:
        writer = Writer()
        writer.buf = buf  # the step appends in place
        step(writer, d)

    return write


_STRINGS_KEPT = 1024  # strings whose encoding is kept, per form; then they start afresh
_COMPACT_STRINGS: dict[str, bytes] = {}
_CLASSIC_STRINGS: dict[str, bytes] = {}


def _encode_string(text: str, compact: bool) -> bytes:
    """``text`` as a compact or a classic (int16 length) string, kept for next time."""
    data = text.encode()
    if compact:
        encoded = uvarint_bytes(len(data) + 1) + data
        kept = _COMPACT_STRINGS
    else:
        if len(data) > 0x7FFF:
            raise _FastPathMiss
        encoded = INT16.pack(len(data)) + data
        kept = _CLASSIC_STRINGS
    if len(kept) >= _STRINGS_KEPT:
        kept.clear()
    kept[text] = encoded
    return encoded


def _records_size(chunks: list[Any] | tuple[Any, ...]) -> int:
    """The total length of ``records`` given as a list/tuple of buffers."""
    total = 0
    for chunk in chunks:
        kind = type(chunk)
        if kind is memoryview:
            total += chunk.nbytes
        elif kind is bytes or kind is bytearray:
            total += len(chunk)
        else:
            raise _FastPathMiss
    return total


def _reference_chunks(
    buf: bytearray, parts: list[Buffer], flushed: int, chunks: list[Any] | tuple[Any, ...]
) -> tuple[bytearray, int]:
    """Each buffer of ``records`` given as a list/tuple, by reference (as the careful path)."""
    for chunk in chunks:
        if chunk:
            flushed += len(buf) + (chunk.nbytes if type(chunk) is memoryview else len(chunk))
            parts += (buf, chunk)
            buf = bytearray()
    return buf, flushed


_NAMESPACE: dict[str, Any] = {
    "_Miss": _FastPathMiss,
    "_no_item_limit": NO_ITEM_LIMIT,
    "_Mapping": Mapping,
    "_UUID": uuid.UUID,
    "_uvarint_at": _uvarint_at,
    "_uvarint_bytes": uvarint_bytes,
    "_records_size": _records_size,
    "_encode_string": _encode_string,
    "_compact_strings": _COMPACT_STRINGS,
    "_classic_strings": _CLASSIC_STRINGS,
    "_reference_chunks": _reference_chunks,
    "_unpack_from": struct.unpack_from,
    "_pack": struct.pack,
    "_int16_at": INT16.unpack_from,
    "_int32_at": INT32.unpack_from,
    "_int16": INT16.pack,
    "_int32": INT32.pack,
    "_small_int16": tuple(INT16.pack(n) for n in range(256)),  # a lookup beats a pack
    "_small_int32": tuple(INT32.pack(n) for n in range(256)),
    "_request_header_into": struct.Struct(">ihhi").pack_into,
    "_Reader": Reader,
    "_raw_bytes": _raw_bytes,
}


class Source:
    """Lines of one generated function, its local names and the constants it refers to."""

    def __init__(self, name: str, version: int, flexible: bool, *, raw: bool = False) -> None:
        self.name = name
        self.version = version
        self.flexible = flexible
        self.raw = raw  # strings are decoded from ``raw`` (bytes or bytearray, as ``buf``)
        self.lines: list[str] = []
        self.namespace = dict(_NAMESPACE)
        self.layouts: dict[tuple[str, str], str] = {}
        self.count = 0

    def var(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value: Any, prefix: str) -> str:
        name = self.var(f"_{prefix}")
        self.namespace[name] = value
        return name

    def layout(self, fmt: str, method: str) -> str:
        """The name of ``struct.Struct(">" + fmt)``'s ``pack`` or ``unpack_from``."""
        name = self.layouts.get((fmt, method))
        if name is None:
            readable = "".join(c if c.isalnum() else "_" for c in fmt)
            name = self.const(getattr(struct.Struct(">" + fmt), method), f"{method}_{readable}_")
            self.layouts[fmt, method] = name
        return name

    def literal(self, value: Any) -> str:
        """``value`` as an expression: written out when simple, else a shared constant."""
        if value is None or type(value) in (bool, int, str):
            return repr(value)
        return self.const(value, "default")

    def add(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    def compile(self, label: str) -> tuple[Callable[..., Any], str]:
        """The function defined by the lines (named ``self.name``) and its source."""
        source = "\n".join(self.lines) + "\n"
        filename = f"<kclient.protocol.codec: {label} {self.name}>"
        exec(compile(source, filename, "exec"), self.namespace)
        # so that tracebacks and debuggers can show the generated lines
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        function: Callable[..., Any] = self.namespace[self.name]
        return function, source


def _layout(fields: tuple[Field, ...], version: int, flexible: bool) -> tuple[list[Field], ...]:
    """The regular and the tagged fields of a struct at ``version`` (as the careful path)."""
    present = [f for f in fields if version in f.versions]
    regular = [f for f in present if not (flexible and version in f.tagged_versions)]
    tagged = [f for f in present if flexible and version in f.tagged_versions]
    return regular, tagged


def _min_size(fld: Field, version: int, flexible: bool, *, item: bool = False) -> int:
    """The fewest bytes a value of ``fld`` (or one item of it) takes, as the careful path
    counts them for its item-count check."""
    if fld.is_array and not item:
        return 1 if flexible else 4
    if fld.is_struct:
        regular, _ = _layout(fld.fields, version, flexible)
        return sum(_min_size(f, version, flexible) for f in regular) + (1 if flexible else 0)
    kind = fld.item_type
    if kind in FIXED_TYPES:
        return FIXED_TYPES[kind][1]
    if kind == "uuid":
        return 16
    if kind == "string":
        return 1 if flexible else 2
    return 1 if flexible else 4  # bytes, records


# ---- generated decoders --------------------------------------------------------------------


def decoder_source(message: Message, version: int, response_header: int | None) -> Source:
    """``decode(buf, pos, items_left)`` of a body (at most ``items_left`` array items in
    all, else the careful path says what is wrong), or with ``response_header`` (0 or 1)
    ``decode(frame)`` of a whole response frame, header and all."""
    if response_header is None:
        src = Source("decode", version, message.is_flexible(version))
        src.add(0, "def decode(buf, pos, items_left):")
    else:
        name = f"decode_response_v{response_header}"
        src = Source(name, version, message.is_flexible(version), raw=True)
        src.add(0, f"def {name}(frame):")
        src.add(1, "kind = type(frame)")
        src.add(1, "if kind is bytes or kind is bytearray:")
        src.add(2, "raw = frame")
        src.add(2, "buf = memoryview(frame)")
        src.add(1, "else:")  # as the careful path sees it
        src.add(2, "buf = _Reader(frame).buf")
        src.add(2, "raw = _raw_bytes(buf)")
        src.add(1, "pos = 0")  # the header is read with the body's first fixed fields
        src.add(1, "items_left = _no_item_limit")
    src.add(1, "blen = len(buf)")
    lead: tuple[str, list[str], list[str]] | None = None
    if response_header is None:
        pass
    elif response_header == 0:
        lead = ("i", ["correlation_id"], [])
    else:  # header tagged fields (their count, in one byte when there are few) go careful
        lead = ("iB", ["correlation_id", "header_tags"], ["if header_tags:", "    raise _Miss"])
    body = _decode_struct(src, message.fields, 1, lead)
    if response_header is None:
        src.add(1, f"return {body}, pos")
    else:
        src.add(1, "if pos != blen:")
        src.add(2, "raise _Miss")
        src.add(1, f"return correlation_id, {body}")
    return src


def _decode_struct(
    src: Source,
    fields: tuple[Field, ...],
    depth: int,
    lead: tuple[str, list[str], list[str]] | None = None,
) -> str:
    """Lines that read a struct into a new dict; returns the dict's name.

    Fixed-width fields next to each other are read by one ``unpack_from``, and so is the
    int16/int32 length or count in front of the field after them (non-flexible versions;
    a compact one is a varint). ``lead``: (struct format, names, lines to run after) of
    values to read before the struct, with its first fields (a response header).
    """
    regular, tagged = _layout(fields, src.version, src.flexible)
    items: list[str] = []
    fmt, targets, after = (lead[0], list(lead[1]), list(lead[2])) if lead else ("", [], [])

    def flush() -> None:
        nonlocal fmt, targets, after
        if targets:
            unpack = src.layout(fmt, "unpack_from")
            src.add(depth, f"{', '.join(targets)}, = {unpack}(buf, pos)")
            src.add(depth, f"pos += {struct.calcsize('>' + fmt)}")
            for line in after:
                src.add(depth, line)
        fmt, targets, after = "", [], []

    for fld in regular:
        v = src.var("v")
        if not fld.is_array and fld.type in FIXED_TYPES:
            fmt += FIXED_TYPES[fld.type][0]
            targets.append(v)
        elif not fld.is_array and fld.type == "uuid":
            data = src.var("u")
            fmt += "16s"
            targets.append(data)
            after.append(f"{v} = _UUID(bytes={data})")
        elif not src.flexible and (fld.is_array or fld.type in ("string", "bytes", "records")):
            n = src.var("n")
            fmt += "h" if fld.type == "string" else "i"
            targets.append(n)
            flush()
            v = _decode_value(src, fld, depth, n)
        else:
            flush()
            v = _decode_value(src, fld, depth, None)
        items.append(f"{fld.key!r}: {v}")
    flush()
    d = src.var("d")
    src.add(depth, f"{d} = {{{', '.join(items)}}}")
    if src.flexible:
        read_tags = src.const(_tagged_reader(tagged_decoder(tagged, src.version)), "tags")
        src.add(depth, "if buf[pos]:")
        src.add(depth + 1, f"pos = {read_tags}(buf, pos, {d})")
        src.add(depth, "else:")
        src.add(depth + 1, "pos += 1")
    return d


def _decode_value(src: Source, fld: Field, depth: int, length: str | None) -> str:
    """Lines that read one field's value; ``length``: its length or count, already read."""
    nullable = src.version in fld.nullable_versions
    if fld.is_array:
        return _decode_array(src, fld, nullable, depth, length)
    if fld.is_struct:
        return _decode_struct(src, fld.fields, depth)
    return _decode_scalar(src, fld.type, nullable, depth, length)


def _decode_length(src: Source, depth: int, width: int) -> str:
    """Lines that read a length or count (compact: already less one); returns its name."""
    n = src.var("n")
    if src.flexible:
        src.add(depth, f"{n} = buf[pos] - 1")
        src.add(depth, f"if {n} < 127:")
        src.add(depth + 1, "pos += 1")
        src.add(depth, "elif buf[pos + 1] < 128:")  # two bytes: records of up to 16 KiB
        src.add(depth + 1, f"{n} = ({n} + 1 & 127 | buf[pos + 1] << 7) - 1")
        src.add(depth + 1, "pos += 2")
        src.add(depth, "else:")
        src.add(depth + 1, f"{n}, pos = _uvarint_at(buf, pos)")
        src.add(depth + 1, f"{n} -= 1")
    else:
        src.add(depth, f"{n}, = {'_int16_at' if width == 2 else '_int32_at'}(buf, pos)")
        src.add(depth, f"pos += {width}")
    return n


def _decode_null(src: Source, depth: int, n: str, v: str, nullable: bool) -> int:
    """Lines for a negative length: ``v = None`` when allowed; returns the depth to go on at."""
    if not nullable:
        src.add(depth, f"if {n} < 0:")
        src.add(depth + 1, "raise _Miss")
        return depth
    src.add(depth, f"if {n} < 0:")
    src.add(depth + 1, f"if {n} != -1:")
    src.add(depth + 2, "raise _Miss")
    src.add(depth + 1, f"{v} = None")
    src.add(depth, "else:")
    return depth + 1


def _decode_scalar(
    src: Source, kind: str, nullable: bool, depth: int, length: str | None = None
) -> str:
    v = src.var("v")
    if kind in FIXED_TYPES:  # only reached for shapes the runs do not cover
        fmt, size = FIXED_TYPES[kind]
        src.add(depth, f"{v}, = {src.layout(fmt, 'unpack_from')}(buf, pos)")
        src.add(depth, f"pos += {size}")
        return v
    if kind == "uuid":
        src.add(depth, "if pos + 16 > blen:")
        src.add(depth + 1, "raise _Miss")
        src.add(depth, f"{v} = _UUID(bytes=bytes(buf[pos : pos + 16]))")
        src.add(depth, "pos += 16")
        return v
    n = length or _decode_length(src, depth, 2 if kind == "string" else 4)
    inner = _decode_null(src, depth, n, v, nullable)
    end = src.var("end")
    src.add(inner, f"{end} = pos + {n}")
    src.add(inner, f"if {end} > blen:")
    src.add(inner + 1, "raise _Miss")
    if kind == "string":
        if src.raw:  # a bytes/bytearray slice decodes about twice as fast as a view's
            src.add(inner, f"{v} = raw[pos:{end}].decode()")
        else:
            src.add(inner, f'{v} = str(buf[pos:{end}], "utf-8")')
    elif kind == "bytes":
        src.add(inner, f"{v} = bytes(buf[pos:{end}])")
    else:  # records: a zero-copy view
        src.add(inner, f"{v} = buf[pos:{end}]")
    src.add(inner, f"pos = {end}")
    return v


def _decode_array(src: Source, fld: Field, nullable: bool, depth: int, length: str | None) -> str:
    v = src.var("v")
    n = length or _decode_length(src, depth, 4)
    inner = _decode_null(src, depth, n, v, nullable)
    least = max(_min_size(fld, src.version, src.flexible, item=True), 1)
    src.add(inner, f"if {n} * {least} > blen - pos:")
    src.add(inner + 1, "raise _Miss")
    src.add(inner, f"items_left -= {n}")
    src.add(inner, "if items_left < 0:")  # the careful path says so
    src.add(inner + 1, "raise _Miss")
    fixed = FIXED_TYPES.get(fld.item_type)
    if fixed is not None:  # checked above: the bytes are there
        src.add(inner, f'{v} = list(_unpack_from(">%d{fixed[0]}" % {n}, buf, pos))')
        src.add(inner, f"pos += {n} * {fixed[1]}")
        return v
    src.add(inner, f"{v} = []")
    src.add(inner, f"if {n}:")  # often empty (record errors, topics): no loop to set up
    src.add(inner + 1, f"for _ in range({n}):")
    if fld.is_struct:
        item = _decode_struct(src, fld.fields, inner + 2)
    else:
        item = _decode_scalar(src, fld.item_type, False, inner + 2)
    src.add(inner + 2, f"{v}.append({item})")
    return v


# ---- generated encoders --------------------------------------------------------------------


def encoder_source(message: Message, version: int, request: bool) -> Source:
    """``encode(buf, parts, d)`` of a body, or with ``request`` ``encode(header,
    correlation_id, d)`` of a whole request frame, size prefix and all."""
    flexible = message.is_flexible(version)
    if not request:
        src = Source("encode", version, flexible)
        src.add(0, "def encode(buf, parts, d):")
        src.add(1, "flushed = 0")
        _encode_struct(src, message.fields, 1, "d")
        src.add(1, "return buf, flushed")
        return src
    src = Source("encode_request", version, flexible)
    src.add(0, "def encode_request(header, correlation_id, d):")
    src.add(1, "buf = header.copy()")
    # size, api key, version and correlation id: written last, in one go
    fixed = f"{message.api_key}, {version}, correlation_id"
    records = _has_records(message.fields, version)
    if records:
        src.add(1, "parts = []")
        src.add(1, "flushed = 0")
    _encode_struct(src, message.fields, 1, "d")
    if records:
        src.add(1, "if parts:")
        src.add(2, f"_request_header_into(parts[0], 0, flushed + len(buf) - 4, {fixed})")
        src.add(2, "if buf:")
        src.add(3, "parts.append(buf)")
        src.add(2, "return parts")
    src.add(1, f"_request_header_into(buf, 0, len(buf) - 4, {fixed})")
    src.add(1, "return [buf]")
    return src


def _has_records(fields: tuple[Field, ...], version: int) -> bool:
    """Whether any field at ``version``, however deep, is ``records``."""
    return any(
        version in f.versions and (f.type == "records" or _has_records(f.fields, version))
        for f in fields
    )


def _encode_struct(src: Source, fields: tuple[Field, ...], depth: int, d: str) -> None:
    """Lines that write the struct held in ``d``.

    Fixed-width fields next to each other are written by one ``pack``, and so is the
    length or count in front of the field after them (int16/int32, or the one or two
    bytes of a compact one): that field's value is looked at first, then the run and its
    length go out together.
    """
    version = src.version
    src.add(depth, f"if type({d}) is not dict and not isinstance({d}, _Mapping):")
    src.add(depth + 1, "raise _Miss")
    # a key the struct does not declare: the careful path names it
    allowed = src.const(declared_keys(fields) | {UNKNOWN_TAGGED}, "keys")
    src.add(depth, f"if not {allowed}.issuperset({d}):")
    src.add(depth + 1, "raise _Miss")
    regular, tagged = _layout(fields, version, src.flexible)
    run: list[tuple[str, str]] = []  # (struct format, value) of fixed fields not yet written
    for fld in regular:
        if fld.required_in(version, src.flexible):
            value = f"{d}[{fld.key!r}]"  # missing: KeyError, and the careful path names it
        else:
            # not ``get = d.get`` once: ``d.get(...)`` itself is the faster call
            value = f"{d}.get({fld.key!r}, {src.literal(fld.default_value(version))})"
        if not fld.is_array and fld.type in FIXED_TYPES:
            run.append((FIXED_TYPES[fld.type][0], value))
            continue
        if not (fld.is_array or fld.type in ("string", "bytes", "records")):
            _write_run(src, depth, run)  # no length in front of this one to go with the run
            run = []
        x = src.var("x")
        src.add(depth, f"{x} = {value}")
        _encode_value(src, fld, depth, x, run)
        run = []
    _write_run(src, depth, run)
    if not src.flexible:
        return
    # a key for a tagged field (even None, which the careful step skips unless nullable)
    # or for unknown ones (even empty): the careful step writes the section
    present = [f"{key!r} in {d}" for key in [UNKNOWN_TAGGED, *(f.key for f in tagged)]]
    write_tags = src.const(_tagged_writer(tagged_encoder(tagged, version)), "tags")
    src.add(depth, f"if {' or '.join(present)}:")
    src.add(depth + 1, f"{write_tags}(buf, {d})")
    src.add(depth, "else:")
    src.add(depth + 1, "buf.append(0)")


def _write_run(src: Source, depth: int, run: list[tuple[str, str]]) -> None:
    """The line that packs the fixed fields of ``run`` (nothing for an empty one)."""
    if run:
        pack = src.layout("".join(f for f, _ in run), "pack")
        src.add(depth, f"buf += {pack}({', '.join(v for _, v in run)})")


def _encode_value(src: Source, fld: Field, depth: int, x: str, run: list[tuple[str, str]]) -> None:
    """Lines that write ``x`` as ``fld``, with ``run`` packed together with its length."""
    nullable = src.version in fld.nullable_versions
    if fld.is_array:
        _encode_array(src, fld, nullable, depth, x, run=run)
    elif fld.is_struct:
        _encode_struct(src, fld.fields, depth, x)
    else:
        _encode_scalar(src, fld.type, nullable, depth, x, run=run)


def _encode_length(src: Source, depth: int, n: str, width: int, run: list[tuple[str, str]]) -> None:
    """Lines that write the length or count ``n`` (compact: plus one), after ``run``."""
    if src.flexible and n == "-1":  # null
        if run:
            _write_run(src, depth, [*run, ("B", "0")])
        else:
            src.add(depth, "buf.append(0)")
    elif src.flexible and run:  # the varint's bytes go with the run
        src.add(depth, f"if {n} < 127:")
        _write_run(src, depth + 1, [*run, ("B", f"{n} + 1")])
        src.add(depth, f"elif {n} < 16383:")  # two bytes: records of up to 16 KiB
        _write_run(src, depth + 1, [*run, ("B", f"{n} + 1 & 127 | 128"), ("B", f"{n} + 1 >> 7")])
        src.add(depth, "else:")
        _write_run(src, depth + 1, run)
        src.add(depth + 1, f"buf += _uvarint_bytes({n} + 1)")
    elif src.flexible:
        src.add(depth, f"if {n} < 127:")
        src.add(depth + 1, f"buf.append({n} + 1)")
        src.add(depth, f"elif {n} < 16383:")  # two bytes: records of up to 16 KiB
        src.add(depth + 1, f"buf.append({n} + 1 & 127 | 128)")
        src.add(depth + 1, f"buf.append({n} + 1 >> 7)")
        src.add(depth, "else:")
        src.add(depth + 1, f"buf += _uvarint_bytes({n} + 1)")
    elif run:
        _write_run(src, depth, [*run, ("h" if width == 2 else "i", n)])
    else:  # a lookup beats a pack
        table, pack = ("_small_int16", "_int16") if width == 2 else ("_small_int32", "_int32")
        src.add(depth, f"buf += {table}[{n}] if {n} < 256 else {pack}({n})")


def _encode_null(
    src: Source, depth: int, x: str, *, nullable: bool, width: int, run: list[tuple[str, str]]
) -> None:
    """The ``else`` of a type test: the null marker for ``None`` when allowed, else give up."""
    if nullable:
        src.add(depth, f"elif {x} is None:")
        if run or src.flexible:
            _encode_length(src, depth + 1, "-1", width, run)
        else:
            null = b"\xff" * width
            src.add(depth + 1, f"buf += {null!r}")
    src.add(depth, "else:")
    src.add(depth + 1, "raise _Miss")


def _encode_scalar(
    src: Source,
    kind: str,
    nullable: bool,
    depth: int,
    x: str,
    *,
    run: list[tuple[str, str]] | None = None,
) -> None:
    run = run or []
    if kind in FIXED_TYPES:  # only reached for shapes the runs do not cover
        src.add(depth, f"buf += {src.layout(FIXED_TYPES[kind][0], 'pack')}({x})")
        return
    if kind == "uuid":
        src.add(depth, f"if type({x}) is not _UUID:")
        src.add(depth + 1, "raise _Miss")
        src.add(depth, f"buf += {x}.bytes")
        return
    n = src.var("n")
    if kind == "string" and not run:
        # topic names and the like come again and again: their encoding, length first, is
        # looked up instead of made
        data = src.var("b")
        table = "_compact_strings" if src.flexible else "_classic_strings"
        src.add(depth, f"if type({x}) is str:")
        src.add(depth + 1, f"{data} = {table}.get({x})")
        src.add(depth + 1, f"if {data} is None:")
        src.add(depth + 2, f"{data} = _encode_string({x}, {src.flexible})")
        src.add(depth + 1, f"buf += {data}")
        _encode_null(src, depth, x, nullable=nullable, width=2, run=run)
        return
    if kind == "string":
        data = src.var("b")
        src.add(depth, f"if type({x}) is str:")
        src.add(depth + 1, f"{data} = {x}.encode()")
        src.add(depth + 1, f"{n} = len({data})")
        if not src.flexible:
            src.add(depth + 1, f"if {n} > 32767:")
            src.add(depth + 2, "raise _Miss")
        _encode_length(src, depth + 1, n, 2, run)
        src.add(depth + 1, f"buf += {data}")
        _encode_null(src, depth, x, nullable=nullable, width=2, run=run)
        return
    t = src.var("t")
    src.add(depth, f"{t} = type({x})")
    src.add(depth, f"if {t} is bytes or {t} is bytearray or {t} is memoryview:")
    src.add(depth + 1, f"{n} = {x}.nbytes if {t} is memoryview else len({x})")
    _encode_length(src, depth + 1, n, 4, run)
    if kind == "bytes":
        src.add(depth + 1, f"buf += {x}")
    else:  # records: by reference, never copied
        src.add(depth + 1, f"if {x}:")
        src.add(depth + 2, f"flushed += len(buf) + {n}")
        src.add(depth + 2, f"parts += (buf, {x})")
        src.add(depth + 2, "buf = bytearray()")
        src.add(depth, f"elif {t} is list or {t} is tuple:")
        src.add(depth + 1, f"{n} = _records_size({x})")
        _encode_length(src, depth + 1, n, 4, run)
        src.add(depth + 1, f"buf, flushed = _reference_chunks(buf, parts, flushed, {x})")
    _encode_null(src, depth, x, nullable=nullable, width=4, run=run)


def _encode_array(
    src: Source,
    fld: Field,
    nullable: bool,
    depth: int,
    x: str,
    *,
    run: list[tuple[str, str]],
) -> None:
    n = src.var("n")
    src.add(depth, f"if type({x}) is list or type({x}) is tuple:")
    src.add(depth + 1, f"{n} = len({x})")
    _encode_length(src, depth + 1, n, 4, run)
    fixed = FIXED_TYPES.get(fld.item_type)
    if fixed is not None:
        src.add(depth + 1, f'buf += _pack(">%d{fixed[0]}" % {n}, *{x})')
    else:
        item = src.var("item")
        src.add(depth + 1, f"for {item} in {x}:")
        if fld.is_struct:
            _encode_struct(src, fld.fields, depth + 2, item)
        else:
            _encode_scalar(src, fld.item_type, False, depth + 2, item)
    _encode_null(src, depth, x, nullable=nullable, width=4, run=run)
