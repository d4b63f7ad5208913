"""The careful path of the protocol codec: a list of small steps (closures) per struct.

It is the reference the generated fast path (``codegen``) mirrors: ``Plan`` (in
``codec``) runs it whenever the fast path gives up, and it raises the precise
``DecodeError``/``EncodeError`` (field path, byte offset). It also decodes and encodes
the parts the fast path hands over outright (tagged-field sections that are not empty).
Pure functions building immutable steps: any thread.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from kclient.protocol.scalars import (
    ENCODE_FAULTS,
    Decoder,
    DecodeStep,
    Encoder,
    EncodeStep,
    fixed_group_decoder,
    fixed_group_encoder,
    scalar_codec,
)
from kclient.protocol.schema import FIXED_TYPES, Field, declared_keys
from kclient.protocol.types import (
    INT32,
    DecodeError,
    EncodeError,
    Reader,
    Writer,
    write_uvarint,
)

UNKNOWN_TAGGED = "_unknown_tagged_fields"


# ---- compiling a struct --------------------------------------------------------------------


def compile_struct(
    fields: tuple[Field, ...], version: int, flexible: bool
) -> tuple[Decoder, Encoder, int]:
    """Decoder, encoder and minimum encoded size of a struct at ``version``."""
    present = [f for f in fields if version in f.versions]
    regular = [f for f in present if not (flexible and version in f.tagged_versions)]
    tagged = [f for f in present if flexible and version in f.tagged_versions]
    # A step with a key reads/writes that one field; a step without one (a run of fixed
    # fields, the tagged-field section) reads into / writes from the whole dict itself.
    dec_steps: list[tuple[str | None, Callable[..., Any]]] = []
    enc_steps: list[tuple[str | None, Callable[..., None], Any]] = []
    min_size = 1 if flexible else 0
    i = 0
    while i < len(regular):
        fld = regular[i]
        if fld.type in FIXED_TYPES and version not in fld.nullable_versions:
            j = i
            while j < len(regular) and regular[j].type in FIXED_TYPES:
                j += 1
            group = regular[i:j]
            dec_steps.append((None, fixed_group_decoder(group)))
            enc_steps.append((None, fixed_group_encoder(group, version), None))
            min_size += sum(FIXED_TYPES[f.type][1] for f in group)
            i = j
            continue
        dec, enc, size = _value_codec(fld, version, flexible)
        dec_steps.append((fld.key, dec))
        enc_steps.append((fld.key, enc, fld.default_value(version)))
        min_size += size
        i += 1
    if flexible:
        dec_steps.append((None, tagged_decoder(tagged, version)))
        enc_steps.append((None, tagged_encoder(tagged, version), None))

    def decode(r: Reader) -> dict[str, Any]:
        d: dict[str, Any] = {}
        key = None
        try:
            for key, step in dec_steps:
                if key is None:
                    step(r, d)
                else:
                    d[key] = step(r)
        except DecodeError as exc:
            if key is not None:
                exc.path.append(key)
            raise
        return d

    allowed = declared_keys(fields) | {UNKNOWN_TAGGED}
    required = [f.key for f in present if f.required_in(version, flexible)]

    def encode(w: Writer, d: Any) -> None:
        if type(d) is not dict and not isinstance(d, Mapping):
            raise EncodeError(f"expected a dict, got {type(d).__name__}")
        _check_keys(d, allowed, required)
        key = None
        try:
            for key, step, default in enc_steps:
                if key is None:
                    step(w, d)
                else:
                    step(w, d.get(key, default))
        except EncodeError as exc:
            if key is not None:
                exc.path.append(key)
            raise
        except ENCODE_FAULTS as exc:
            err = EncodeError(f"cannot encode {key}: {exc}")
            if key is not None:
                err.path.append(key)
            raise err from exc

    return decode, encode, min_size


def _check_keys(d: Mapping[str, Any], allowed: frozenset[str], required: list[str]) -> None:
    """Raise EncodeError for a key the struct does not declare in any version, or for a
    field of this version that has no default and is missing."""
    if not allowed.issuperset(d):
        unknown = sorted(str(k) for k in d if k not in allowed)
        raise EncodeError(
            f"unknown field {', '.join(map(repr, unknown))}; the fields are "
            f"{', '.join(sorted(k for k in allowed if k != UNKNOWN_TAGGED))}"
        )
    for key in required:
        if key not in d:
            err = EncodeError("missing, and it has no default")
            err.path.append(key)
            raise err


# ---- values --------------------------------------------------------------------------------


def _value_codec(fld: Field, version: int, flexible: bool) -> tuple[Decoder, Encoder, int]:
    """Decoder, encoder and minimum size of one field's value (any type)."""
    nullable = version in fld.nullable_versions
    if fld.is_array:
        return _array_codec(fld, version, flexible, nullable)
    if fld.is_struct:
        return compile_struct(fld.fields, version, flexible)
    return scalar_codec(fld.type, flexible, nullable)


def _array_codec(
    fld: Field, version: int, flexible: bool, nullable: bool
) -> tuple[Decoder, Encoder, int]:
    item = fld.item_type
    if fld.is_struct:
        item_dec, item_enc, item_size = compile_struct(fld.fields, version, flexible)
    else:
        item_dec, item_enc, item_size = scalar_codec(item, flexible, False)
    what = f"array of {item}"
    null = b"\x00" if flexible else b"\xff\xff\xff\xff"
    fixed = FIXED_TYPES.get(item)

    def dec(r: Reader) -> Any:
        n = r.array_length(compact=flexible, nullable=nullable, min_item_size=item_size, what=what)
        if n < 0:
            return None
        if fixed is not None:  # checked above: n * size bytes are there
            values = list(struct.unpack_from(f">{n}{fixed[0]}", r.buf, r.pos))
            r.pos += n * fixed[1]
            return values
        out = []
        i = 0
        try:
            for i in range(n):  # noqa: B007 - i names the failing item
                out.append(item_dec(r))
        except DecodeError as exc:
            exc.path.append(f"[{i}]")
            raise
        return out

    def enc(w: Writer, v: Any) -> None:
        if v is None:
            if not nullable:
                raise EncodeError("None given for a non-nullable array")
            w.buf += null
            return
        if type(v) is not list and type(v) is not tuple:
            raise EncodeError(f"expected a list, got {type(v).__name__}")
        if flexible:
            write_uvarint(w.buf, len(v) + 1)
        else:
            w.buf += INT32.pack(len(v))
        if fixed is not None:
            w.buf += struct.pack(f">{len(v)}{fixed[0]}", *v)
            return
        i = 0
        try:
            for i, value in enumerate(v):  # noqa: B007 - i names the failing item
                item_enc(w, value)
        except EncodeError as exc:
            exc.path.append(f"[{i}]")
            raise
        except ENCODE_FAULTS as exc:
            err = EncodeError(f"cannot encode {item}: {exc}")
            err.path.append(f"[{i}]")
            raise err from exc

    return dec, enc, 1 if flexible else 4


# ---- tagged fields -------------------------------------------------------------------------


def tagged_decoder(tagged: list[Field], version: int) -> DecodeStep:
    by_tag: dict[int, tuple[Field, Decoder]] = {}
    for fld in tagged:
        assert fld.tag is not None
        by_tag[fld.tag] = (fld, _value_codec(fld, version, True)[0])

    def step(r: Reader, d: dict[str, Any]) -> None:
        buf, pos = r.buf, r.pos
        if pos < len(buf) and buf[pos] == 0:  # no tagged fields: the common case
            r.pos = pos + 1
            return
        unknown: dict[int, bytes] = {}
        for tag, offset, raw in r.raw_tagged_fields():
            known = by_tag.get(tag)
            if known is None:
                unknown[tag] = bytes(raw)
                continue
            fld, dec = known
            sub = Reader(raw, base=offset)
            try:
                d[fld.key] = dec(sub)
                if sub.remaining():
                    raise sub.error(fld.type, f"{sub.remaining()} bytes left over in tagged field")
            except DecodeError as exc:
                exc.path.append(fld.key)
                raise
        if unknown:
            d[UNKNOWN_TAGGED] = unknown

    return step


def tagged_encoder(tagged: list[Field], version: int) -> EncodeStep:
    known = [
        (fld.tag, fld.key, _value_codec(fld, version, True)[1], version in fld.nullable_versions)
        for fld in tagged
    ]
    known_tags = {fld.tag for fld in tagged}

    def slow(w: Writer, d: Mapping[str, Any]) -> None:
        fields: dict[int, bytes] = {}
        for tag, key, enc, nullable in known:
            if key not in d or (d[key] is None and not nullable):
                continue
            sub = Writer()
            try:
                enc(sub, d[key])
            except EncodeError as exc:
                exc.path.append(key)
                raise
            except ENCODE_FAULTS as exc:
                err = EncodeError(f"cannot encode tagged field {key}: {exc}")
                err.path.append(key)
                raise err from exc
            assert tag is not None
            fields[tag] = sub.getvalue()
        unknown = d.get(UNKNOWN_TAGGED) or {}
        if not isinstance(unknown, Mapping):
            raise EncodeError(f"{UNKNOWN_TAGGED} must be a dict of tag → bytes")
        for tag, data in unknown.items():
            if type(tag) is not int or tag < 0 or tag in known_tags:
                raise EncodeError(f"{UNKNOWN_TAGGED}: tag {tag!r} is invalid or declared")
            if type(data) not in (bytes, bytearray, memoryview):
                raise EncodeError(f"{UNKNOWN_TAGGED}: tag {tag} must map to bytes")
            fields[tag] = bytes(data)
        buf = w.buf
        write_uvarint(buf, len(fields))
        for tag in sorted(fields):
            data = fields[tag]
            write_uvarint(buf, tag)
            write_uvarint(buf, len(data))
            buf += data

    if not known:

        def step(w: Writer, d: Mapping[str, Any]) -> None:
            if d.get(UNKNOWN_TAGGED):
                slow(w, d)
            else:
                w.buf.append(0)

        return step
    return slow
