"""The MetadataResponse as the producer reads it: only the topics it asked for, and their
partitions decoded one at a time (the part of Kafka's ``MetadataResponse`` handling that
keeps a client's memory in proportion to what it uses).

Called by the ``NetworkClient``'s owning thread for the metadata requests the client makes
itself; sans-I/O. A broker may answer with topics nobody asked for (a broken or hostile
one: 300,000 partitions in 7.8 MB); decoding them would cost about 500 bytes per partition
before they were thrown away. ``decode_metadata_response`` instead steps over every topic
``keep_topic`` does not want (``kclient.protocol.skip``: the codec's checks, none of its
objects), decodes the rest with the one codec, and gives each kept topic its
``partitions`` as a ``PartitionsView``: a collection over the response's bytes whose
iteration decodes one partition dict at a time, so that no list of every partition's dict
is ever held. The body is otherwise exactly what ``decode_response`` returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kclient.protocol import ApiKey
from kclient.protocol.codec import plan
from kclient.protocol.frame import response_header_version
from kclient.protocol.messages.metadata import RESPONSE
from kclient.protocol.schema import Field
from kclient.protocol.skip import skip, struct_plan
from kclient.protocol.types import Buffer, DecodeError, Reader, uvarint_bytes

__all__ = ["PartitionsView", "decode_metadata_response"]

_TOPICS = next(f for f in RESPONSE.fields if f.key == "topics")
_PARTITIONS = next(f for f in _TOPICS.fields if f.key == "partitions")


class PartitionsView:
    """The partitions of one topic, decoded from the response's bytes on each iteration
    (each a dict, as ``decode_response`` would give it). Keeps those bytes alive."""

    __slots__ = ("_buf", "_count", "_start", "_version")

    def __init__(self, buf: memoryview, start: int, count: int, version: int) -> None:
        self._buf = buf
        self._start = start
        self._count = count
        self._version = version

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[dict[str, Any]]:
        version = self._version
        decode = struct_plan(_PARTITIONS, version, RESPONSE.is_flexible(version)).decode
        reader = Reader(self._buf, self._start)
        for _ in range(self._count):
            yield decode(reader)

    def __repr__(self) -> str:
        return f"PartitionsView({self._count} partitions)"


def decode_metadata_response(
    version: int, frame: Buffer, keep_topic: Callable[[str | None], bool]
) -> tuple[int, dict[str, Any]]:
    """Correlation id and body of a MetadataResponse frame (no size prefix), with only
    the topics ``keep_topic(name)`` wants. Raises ``DecodeError`` as the codec would."""
    flexible = RESPONSE.is_flexible(version)
    reader = Reader(frame)
    try:
        correlation_id = reader.int32()
        if response_header_version(ApiKey.METADATA, version) == 1:
            reader.raw_tagged_fields()
        body_start = reader.pos
        kept, topics_start, topics_end = _walk(reader, version, flexible, keep_topic)
    except DecodeError as exc:
        exc.context = f"{RESPONSE.name} v{version}"
        raise
    buf = reader.buf
    # the body again, with only the kept topics and each one's partitions left empty
    empty = b"\x01" if flexible else b"\x00\x00\x00\x00"
    pieces: list[Buffer] = [buf[body_start:topics_start], _array_count(len(kept), flexible)]
    for start, partitions_start, partitions_end, end, _ in kept:
        pieces += [buf[start:partitions_start], empty, buf[partitions_end:end]]
    pieces.append(buf[topics_end:])
    body = plan(RESPONSE, version).decode_all(b"".join(pieces))
    for topic, (_, _, _, _, partitions) in zip(body["topics"], kept, strict=True):
        topic["partitions"] = partitions
    return correlation_id, body


_Kept = tuple[int, int, int, int, PartitionsView]
"""(topic start, partitions start, partitions end, topic end, the partitions)"""


def _walk(
    reader: Reader, version: int, flexible: bool, keep_topic: Callable[[str | None], bool]
) -> tuple[list[_Kept], int, int]:
    """Step through the body: the kept topics, and where the topics array starts and ends."""
    topics_start = topics_end = -1
    kept: list[_Kept] = []
    for fld in _regular(RESPONSE.fields, version, flexible):
        if fld is not _TOPICS:
            skip(reader, fld, version, flexible)
            continue
        topics_start = reader.pos
        count = reader.array_length(
            compact=flexible, nullable=False, min_item_size=1, what="array of topics"
        )
        for index in range(count):
            try:
                found = _topic(reader, version, flexible)
            except DecodeError as exc:
                exc.path += [f"[{index}]", "topics"]
                raise
            if keep_topic(found[0]):
                kept.append(found[1])
        topics_end = reader.pos
    if flexible:
        reader.raw_tagged_fields()
    reader.expect_end(f"{RESPONSE.name} v{version}")
    return kept, topics_start, topics_end


def _topic(reader: Reader, version: int, flexible: bool) -> tuple[str | None, _Kept]:
    start = reader.pos
    name: str | None = None
    partitions_start = partitions_end = start
    view: PartitionsView | None = None
    for fld in _regular(_TOPICS.fields, version, flexible):
        if fld.key == "name":
            nullable = version in fld.nullable_versions
            if flexible:
                name = reader.compact_nullable_string() if nullable else reader.compact_string()
            else:
                name = reader.nullable_string() if nullable else reader.string()
        elif fld is _PARTITIONS:
            partitions_start = reader.pos
            count = reader.array_length(
                compact=flexible, nullable=False, min_item_size=1, what="array of partitions"
            )
            first = reader.pos
            reader.pos = partitions_start
            skip(reader, fld, version, flexible)  # checks every partition's bytes
            partitions_end = reader.pos
            view = PartitionsView(reader.buf, first, count, version)
        else:
            skip(reader, fld, version, flexible)
    if flexible:
        reader.raw_tagged_fields()
    assert view is not None
    return name, (start, partitions_start, partitions_end, reader.pos, view)


def _regular(fields: tuple[Field, ...], version: int, flexible: bool) -> list[Field]:
    return [
        f
        for f in fields
        if version in f.versions and not (flexible and version in f.tagged_versions)
    ]


def _array_count(count: int, flexible: bool) -> bytes:
    return uvarint_bytes(count + 1) if flexible else count.to_bytes(4, "big", signed=True)
