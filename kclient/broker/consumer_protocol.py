"""The ``consumer`` protocol's member metadata, as far as a broker reads it.

Kafka's ``ConsumerProtocol``: a consumer group member's JoinGroup metadata is a
``ConsumerProtocolSubscription`` and its SyncGroup assignment a
``ConsumerProtocolAssignment``. Both start with an int16 version and then keep the
fields of version 0 in front (topics; assigned partitions), whatever the version, so
the broker reads that prefix only: the subscribed topics (OffsetDelete refuses to
delete offsets of a topic the group consumes) and the assignment (for
``EmbeddedCluster.describe_group``). Everything after the prefix is ignored.

Non-flexible encoding: int16 string lengths, int32 array lengths. Pure functions.
"""

from __future__ import annotations

import struct

PROTOCOL_TYPE = "consumer"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("consumer protocol data is cut short")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        value: int = _INT16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _INT32.unpack(self._take(4))[0]
        return value

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ValueError("a null string in consumer protocol data")
        return self._take(n).decode()

    def count(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self.data):
            raise ValueError("a bad array length in consumer protocol data")
        return n


def subscribed_topics(metadata: bytes) -> list[str]:
    """The topics of a ``ConsumerProtocolSubscription``; ValueError if it is not one."""
    reader = _Reader(bytes(metadata))
    reader.int16()  # version
    return [reader.string() for _ in range(reader.count())]


def assigned_partitions(assignment: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of a ``ConsumerProtocolAssignment`` ({} for an empty one);
    ValueError if it is not one."""
    if not assignment:
        return {}
    reader = _Reader(bytes(assignment))
    reader.int16()  # version
    out: dict[str, list[int]] = {}
    for _ in range(reader.count()):
        topic = reader.string()
        out.setdefault(topic, []).extend(reader.int32() for _ in range(reader.count()))
    return out


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    """A version-0 ``ConsumerProtocolSubscription`` (tests, tools)."""
    out = bytearray(_INT16.pack(0) + _INT32.pack(len(topics)))
    for topic in topics:
        raw = topic.encode()
        out += _INT16.pack(len(raw)) + raw
    out += _INT32.pack(-1) if user_data is None else _INT32.pack(len(user_data)) + user_data
    return bytes(out)


def encode_assignment(partitions: dict[str, list[int]]) -> bytes:
    """A version-0 ``ConsumerProtocolAssignment`` (tests, tools)."""
    out = bytearray(_INT16.pack(0) + _INT32.pack(len(partitions)))
    for topic, indexes in partitions.items():
        raw = topic.encode()
        out += _INT16.pack(len(raw)) + raw + _INT32.pack(len(indexes))
        for index in indexes:
            out += _INT32.pack(index)
    out += _INT32.pack(-1)  # user data: null
    return bytes(out)
