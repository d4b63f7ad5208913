"""Codecs for single values and runs of fixed-width fields, as compiled steps.

Part of the one generic codec (see ``codec.py``): its careful path, which says exactly
what is wrong and where, and which the generated fast path falls back to. Corresponds to
the per-type read/write code Kafka's generator emits into ``XxxData.read``/``write``.
Everything here is built once per (message, version) plan and is then immutable, so any
thread may run it.

Each builder returns closures specialised for one field shape (compact or not, nullable
or not), so the hot path makes no type decisions: a decoder takes a ``Reader`` and
returns the value, an encoder appends a value to a ``Writer``.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from kclient.protocol.schema import FIXED_TYPES, Field
from kclient.protocol.types import (
    INT16,
    INT32,
    DecodeError,
    EncodeError,
    Reader,
    Writer,
    write_uvarint,
)

Decoder = Callable[[Reader], Any]
Encoder = Callable[[Writer, Any], None]
DecodeStep = Callable[[Reader, dict[str, Any]], None]  # reads into the struct's dict
EncodeStep = Callable[[Writer, Mapping[str, Any]], None]  # writes from the struct's dict

# What a wrong value makes struct.pack, str.encode and friends raise.
ENCODE_FAULTS = (struct.error, TypeError, AttributeError, ValueError, OverflowError)


def fixed_group_decoder(group: list[Field]) -> DecodeStep:
    layout = struct.Struct(">" + "".join(FIXED_TYPES[f.type][0] for f in group))
    keys = tuple(f.key for f in group)
    size, unpack_from = layout.size, layout.unpack_from

    def fail(r: Reader) -> DecodeError:
        at = r.pos
        for fld in group:  # find the field the bytes ran out in
            width = FIXED_TYPES[fld.type][1]
            if at + width > len(r.buf):
                exc = r.error(fld.type, f"needs {width} bytes, {len(r.buf) - at} left", at=at)
                exc.path.append(fld.key)
                return exc
            at += width
        return r.error(fld.type, "truncated")  # pragma: no cover - unreachable

    if len(keys) == 1:
        (key,) = keys

        def step_one(r: Reader, d: dict[str, Any]) -> None:
            try:
                d[key] = unpack_from(r.buf, r.pos)[0]
            except struct.error:
                raise fail(r) from None
            r.pos += size

        return step_one

    def step(r: Reader, d: dict[str, Any]) -> None:
        try:
            values = unpack_from(r.buf, r.pos)
        except struct.error:
            raise fail(r) from None
        r.pos += size
        d.update(zip(keys, values, strict=True))

    return step


def fixed_group_encoder(group: list[Field], version: int) -> EncodeStep:
    layout = struct.Struct(">" + "".join(FIXED_TYPES[f.type][0] for f in group))
    pairs = tuple((f.key, f.default_value(version)) for f in group)
    pack = layout.pack

    def fail(d: Mapping[str, Any], exc: Exception) -> EncodeError:
        for fld in group:
            value = d.get(fld.key, fld.default_value(version))
            try:
                struct.pack(">" + FIXED_TYPES[fld.type][0], value)
            except ENCODE_FAULTS as inner:
                err = EncodeError(f"{value!r} is not a valid {fld.type}: {inner}")
                err.path.append(fld.key)
                return err
        return EncodeError(str(exc))  # pragma: no cover - a group fails only through a field

    if len(pairs) == 1:
        ((key, default),) = pairs

        def step_one(w: Writer, d: Mapping[str, Any]) -> None:
            try:
                w.buf += pack(d.get(key, default))
            except ENCODE_FAULTS as exc:
                raise fail(d, exc) from exc

        return step_one

    def step(w: Writer, d: Mapping[str, Any]) -> None:
        try:
            w.buf += pack(*[d.get(k, v) for k, v in pairs])
        except ENCODE_FAULTS as exc:
            raise fail(d, exc) from exc

    return step


def scalar_codec(kind: str, flexible: bool, nullable: bool) -> tuple[Decoder, Encoder, int]:
    if kind in FIXED_TYPES:
        fmt, size = FIXED_TYPES[kind]
        layout = struct.Struct(">" + fmt)

        def dec_fixed(r: Reader) -> Any:
            try:
                value = layout.unpack_from(r.buf, r.pos)[0]
            except struct.error:
                raise r.short(kind, size) from None
            r.pos += size
            return value

        def enc_fixed(w: Writer, v: Any) -> None:
            w.buf += layout.pack(v)

        return dec_fixed, enc_fixed, size
    if kind == "string":
        return _string_codec(flexible, nullable)
    if kind == "uuid":
        return Reader.uuid, _encode_uuid, 16
    return _bytes_codec(kind == "records", flexible, nullable)


def _encode_uuid(w: Writer, v: Any) -> None:
    if type(v) is not uuid.UUID:
        raise EncodeError(f"expected a uuid.UUID, got {type(v).__name__}")
    w.buf += v.bytes


def _view_decoder(
    flexible: bool, nullable: bool, prefix: struct.Struct, what: str
) -> Callable[[Reader], memoryview | None]:
    """Length-prefixed data as a zero-copy view (``None`` for null), length read inline."""
    unpack_from, width = prefix.unpack_from, prefix.size

    def dec(r: Reader) -> memoryview | None:
        buf, pos = r.buf, r.pos
        if not flexible:
            try:
                n = unpack_from(buf, pos)[0]
            except struct.error:
                raise r.short(f"{what} length", width) from None
            pos += width
        elif pos < len(buf) and buf[pos] < 0x80:
            n = buf[pos] - 1
            pos += 1
        else:
            n = r.uvarint(f"{what} length") - 1
            pos = r.pos
        if n < 0:
            if n == -1 and nullable:
                r.pos = pos
                return None
            raise r.error(what, f"length {n} in a non-nullable field")
        end = pos + n
        if end > len(buf):
            r.pos = pos
            raise r.short(what, n)
        r.pos = end
        return buf[pos:end]

    return dec


def _string_codec(flexible: bool, nullable: bool) -> tuple[Decoder, Encoder, int]:
    view = _view_decoder(flexible, nullable, INT16, "string")
    null = b"\x00" if flexible else b"\xff\xff"

    def dec(r: Reader) -> str | None:
        start = r.pos
        data = view(r)
        if data is None:
            return None
        try:
            return str(data, "utf-8")
        except UnicodeDecodeError as exc:
            raise r.error("string", f"invalid UTF-8 ({exc.reason})", at=start) from None

    def enc(w: Writer, v: Any) -> None:
        if type(v) is not str:
            if v is None and nullable:
                w.buf += null
                return
            raise EncodeError(f"expected {'str or None' if nullable else 'str'}, got {v!r:.40}")
        data = v.encode("utf-8")
        if flexible:
            write_uvarint(w.buf, len(data) + 1)
        elif len(data) > 0x7FFF:
            raise EncodeError(f"string of {len(data)} bytes is longer than 32767")
        else:
            w.buf += len(data).to_bytes(2, "big")
        w.buf += data

    return dec, enc, 1 if flexible else 2


def _bytes_codec(records: bool, flexible: bool, nullable: bool) -> tuple[Decoder, Encoder, int]:
    what = "records" if records else "bytes"
    null = b"\x00" if flexible else b"\xff\xff\xff\xff"
    view = _view_decoder(flexible, nullable, INT32, what)

    def dec_bytes(r: Reader) -> bytes | None:
        data = view(r)
        return None if data is None else bytes(data)

    dec: Decoder = view if records else dec_bytes

    def enc(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError(f"None given for non-nullable {what}")
            w.buf += null
            return
        chunks = v if records and type(v) in (list, tuple) else (v,)
        total = 0
        for chunk in chunks:
            kind = type(chunk)
            if kind is memoryview:
                total += chunk.nbytes
            elif kind is bytes or kind is bytearray:
                total += len(chunk)
            else:
                raise EncodeError(f"expected bytes, bytearray or memoryview, got {kind.__name__}")
        if flexible:
            write_uvarint(w.buf, total + 1)
        else:
            w.buf += INT32.pack(total)
        if not records:
            w.buf += v
            return
        for chunk in chunks:
            if chunk:
                w.reference(chunk)

    return dec, enc, 1 if flexible else 4
