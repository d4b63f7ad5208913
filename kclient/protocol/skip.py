"""Stepping over a declared value without keeping it: the codec's checks, and at most
one array item's objects at a time.

Sans-I/O; plans are cached and immutable, so any thread may use it. Used where a reader
wants to find its way through a large message and decode only parts of it (the client's
MetadataResponse reader keeps only the topics it asked for).
``skip(reader, field, version, flexible)`` advances the reader past one value of
``field`` exactly as far as the codec's decode would, and raises the same
``DecodeError`` (what, byte offset) for bytes that do not fit: array counts the bytes left
cannot hold, lengths past the end, tagged fields out of order. Items of an array of
structs go through the codec one at a time (``struct_plan``: the codec's plan for one
item), each dropped before the next, so nothing grows with the array.
"""

from __future__ import annotations

from kclient.protocol.codec import Plan, plan
from kclient.protocol.schema import FIXED_TYPES, Field, Message, Versions
from kclient.protocol.types import DecodeError, Reader

__all__ = ["skip", "skip_fields", "struct_plan"]

_ITEM_MESSAGES: dict[tuple[int, bool], Message] = {}


def struct_plan(fld: Field, version: int, flexible: bool) -> Plan:
    """The codec's plan for one item of ``fld`` (an array of structs, or a struct): its
    ``decode(reader)`` reads exactly one item."""
    key = (id(fld), flexible)
    found = _ITEM_MESSAGES.get(key)
    if found is None or found.fields is not fld.fields:
        everywhere = Versions(0, 0x7FFF)
        found = _ITEM_MESSAGES[key] = Message(
            f"{fld.item_type} item",
            -1,
            everywhere,
            everywhere if flexible else Versions(1, 0),
            fld.fields,
        )
    return plan(found, version)


def skip(reader: Reader, fld: Field, version: int, flexible: bool) -> None:
    """Step over one value of ``fld`` (its declared type at ``version``)."""
    try:
        _skip_value(reader, fld, version, flexible)
    except DecodeError as exc:
        exc.path.append(fld.key)
        raise


def skip_fields(reader: Reader, fields: tuple[Field, ...], version: int, flexible: bool) -> None:
    """Step over a struct made of ``fields`` (regular fields, then in flexible versions
    the tagged-field section)."""
    for fld in fields:
        if version in fld.versions and not (flexible and version in fld.tagged_versions):
            skip(reader, fld, version, flexible)
    if flexible:
        reader.raw_tagged_fields()  # checks the tags and sizes; keeps only views


def _skip_value(reader: Reader, fld: Field, version: int, flexible: bool) -> None:
    nullable = version in fld.nullable_versions
    if fld.is_array:
        item = fld.item_type
        fixed = FIXED_TYPES.get(item)
        count = reader.array_length(
            compact=flexible,
            nullable=nullable,
            min_item_size=fixed[1] if fixed is not None else 1,
            what=f"array of {item}",
        )
        if count <= 0:
            return
        if fixed is not None:
            reader.take(count * fixed[1], f"array of {item}")
            return
        decode = struct_plan(fld, version, flexible).decode if fld.is_struct else None
        index = 0
        try:
            for index in range(count):  # noqa: B007 - index names the failing item
                if decode is not None:
                    decode(reader)  # one item's dict, dropped at once
                else:
                    _skip_scalar(reader, item, flexible, False)
        except DecodeError as exc:
            exc.path.append(f"[{index}]")
            raise
        return
    if fld.is_struct:
        struct_plan(fld, version, flexible).decode(reader)
        return
    _skip_scalar(reader, fld.type, flexible, nullable)


def _skip_scalar(reader: Reader, kind: str, flexible: bool, nullable: bool) -> None:
    fixed = FIXED_TYPES.get(kind)
    if fixed is not None:
        reader.take(fixed[1], kind)
    elif kind == "uuid":
        reader.take(16, "uuid")
    elif kind == "string":
        if flexible:
            if nullable:
                reader.compact_nullable_string()
            else:
                reader.compact_string()
        elif nullable:
            reader.nullable_string()
        else:
            reader.string()
    else:  # bytes, records
        reader.bytes_view(compact=flexible, nullable=nullable, what=kind)
