"""RecordBatchBuilder: writes one v2 record batch, like Kafka's ``MemoryRecordsBuilder``.

The producer appends every record it sends here, so :meth:`RecordBatchBuilder.append` is
the hottest code in kclient. It does no per-record function calls on the common path:
each varint comes from a precomputed table (:mod:`kclient.record.varint`), each record is
eight references added to one list with a single ``+=``, and the bytes are joined once in
:meth:`~RecordBatchBuilder.build`. Records with headers, or with lengths or timestamp
deltas beyond the tables, take a slower general path that writes the same bytes.

Keys and values must be ``bytes`` (the producer's serializers guarantee it). The builder
keeps references to them until :meth:`~RecordBatchBuilder.build`, so a ``bytearray``
changed in between changes the batch.

Threads: not thread-safe. The producer's ``RecordAccumulator`` appends under its
per-partition lock; ``build`` runs on the Sender thread when the batch is drained.

Differences from Java: a record fits when the *uncompressed* batch stays within
``batch_size`` (Java scales the size of compressed batches by an estimated compression
ratio, so with compression a Java batch may hold more records).
"""

from __future__ import annotations

from collections.abc import Sequence

from crc32c import crc32c

from kclient.errors import ConfigError, IllegalStateError
from kclient.record import compression as _compression
from kclient.record.compression import NONE, CompressionType
from kclient.record.layout import (
    HEADER_PREFIX,
    HEADER_SIZE,
    HEADER_TAIL,
    LOG_OVERHEAD,
    MAGIC,
    TRANSACTIONAL_MASK,
)
from kclient.record.varint import ATTR_TIMESTAMP, LENGTH_PREFIX, SIZED, encode_varint

Header = tuple[str, "bytes | None"]

_NULL = b"\x01"  # the varint -1: a null key or value
_NO_HEADERS = b"\x00"  # the varint 0: header count
_EMPTY = b""


class RecordBatchBuilder:
    """Builds one RecordBatch v2 (Java: ``MemoryRecordsBuilder`` + ``DefaultRecord.writeTo``).

    ``append`` returns the record's offset delta, or ``-1`` when the record would take the
    batch past ``batch_size`` (the first record is always accepted, whatever its size).
    ``build`` compresses, writes the header and CRC-32C, and returns the batch's bytes.
    """

    __slots__ = (
        "_base_offset",
        "_base_sequence",
        "_base_ts",
        "_built",
        "_codec",
        "_count",
        "_is_transactional",
        "_level",
        "_limit",
        "_max_ts",
        "_partition_leader_epoch",
        "_parts",
        "_producer_epoch",
        "_producer_id",
        "_size",
    )

    def __init__(
        self,
        compression: CompressionType | int | str = CompressionType.NONE,
        batch_size: int = 16384,
        compression_level: int | None = None,
        *,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
    ) -> None:
        # One builder per batch: keep the usual call (a member, no level) cheap.
        if type(compression) is CompressionType and compression_level is None:
            codec = compression
        else:
            codec = CompressionType.of(compression)
            compression_level = _compression.resolve_level(codec, compression_level)
        if codec is not NONE:
            _compression.ensure_available(codec)
        if type(batch_size) is not int or batch_size < 0:
            raise ConfigError(f"batch.size must be an int >= 0, got {batch_size!r}")
        self._level = compression_level
        self._codec = codec
        self._limit = batch_size
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = bool(is_transactional)
        self._partition_leader_epoch = partition_leader_epoch
        # parts[0] is kept for the header; every record adds exactly eight parts.
        self._parts: list[bytes] | None = [_EMPTY]
        self._count = 0
        self._size = HEADER_SIZE
        self._base_ts = 0
        self._max_ts = -1
        self._built: bytes | None = None

    # ---- the hot path ------------------------------------------------------------------

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> int:
        """Add a record; returns its offset delta, or ``-1`` if it does not fit.

        Raises :class:`IllegalStateError` after :meth:`build`.
        """
        count = self._count
        if not count:
            self._base_ts = timestamp_ms
        if headers:
            return self._append_general(timestamp_ms, key, value, headers)
        delta = timestamp_ms - self._base_ts
        if delta < 0:  # out of order: a negative index would wrap around the table
            return self._append_general(timestamp_ms, key, value, headers)
        try:
            # size so far: attributes + timestamp delta + header count (0)
            attr_ts, size = ATTR_TIMESTAMP[delta]
            offset_delta, n = SIZED[count]
            if key is None:
                key_len, k, key_data = _NULL, 1, _EMPTY
            else:
                key_len, k = LENGTH_PREFIX[len(key)]
                key_data = key
            if value is None:
                value_len, v, value_data = _NULL, 1, _EMPTY
            else:
                value_len, v = LENGTH_PREFIX[len(value)]
                value_data = value
            record_len, total = LENGTH_PREFIX[size + n + k + v]
        except IndexError:  # a length or delta beyond the tables
            return self._append_general(timestamp_ms, key, value, headers)
        total += self._size
        if total > self._limit and count:
            self._check_open()
            return -1
        try:
            self._parts += (  # type: ignore[operator]
                record_len,
                attr_ts,
                offset_delta,
                key_len,
                key_data,
                value_len,
                value_data,
                _NO_HEADERS,
            )
        except TypeError:
            self._check_open()
            raise
        self._size = total
        if timestamp_ms > self._max_ts:  # noqa: PLR1730 -- max() is a call
            self._max_ts = timestamp_ms
        self._count = count + 1
        return count

    def _append_general(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
    ) -> int:
        """Any record: headers, large lengths, large timestamp deltas. Same bytes as above."""
        self._check_open()
        count = self._count
        attr_ts = b"\x00" + encode_varint(timestamp_ms - self._base_ts)
        offset_delta = encode_varint(count)
        if key is None:
            key_len, key = _NULL, _EMPTY
        else:
            key_len = encode_varint(len(key))
        if value is None:
            value_len, value = _NULL, _EMPTY
        else:
            value_len = encode_varint(len(value))
        header_blob = _encode_headers(headers) if headers else _NO_HEADERS
        size = (
            len(attr_ts)
            + len(offset_delta)
            + len(key_len)
            + len(key)
            + len(value_len)
            + len(value)
            + len(header_blob)
        )
        record_len = encode_varint(size)
        total = self._size + size + len(record_len)
        if total > self._limit and count:
            return -1
        parts = self._parts
        assert parts is not None
        parts += (record_len, attr_ts, offset_delta, key_len, key, value_len, value, header_blob)
        self._size = total
        if timestamp_ms > self._max_ts:  # noqa: PLR1730 -- max() is a call
            self._max_ts = timestamp_ms
        self._count = count + 1
        return count

    def _check_open(self) -> None:
        if self._parts is None:
            raise IllegalStateError(
                "record batch is already built; start a new RecordBatchBuilder for more records"
            )

    # ---- state -------------------------------------------------------------------------

    @property
    def record_count(self) -> int:
        """Records appended so far."""
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed size of the batch so far (header included); after ``build``, the
        size of the built batch."""
        return self._size if self._built is None else len(self._built)

    @property
    def closed(self) -> bool:
        """True once :meth:`build` has run."""
        return self._parts is None

    def is_full(self) -> bool:
        """True when built, or when the batch has reached ``batch_size``."""
        return self._parts is None or (self._count > 0 and self._size >= self._limit)

    @property
    def compression(self) -> CompressionType:
        return self._codec

    @property
    def batch_size(self) -> int:
        return self._limit

    @property
    def base_timestamp(self) -> int:
        """Timestamp of the first record (0 while empty)."""
        return self._base_ts

    @property
    def max_timestamp(self) -> int:
        """Greatest record timestamp so far (-1 while empty)."""
        return self._max_ts

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence

    @property
    def is_transactional(self) -> bool:
        return self._is_transactional

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Set the idempotence fields (assigned when the batch is drained); before ``build``."""
        if self._parts is None:
            raise IllegalStateError(
                "cannot set the producer state of a built record batch: its bytes are final"
            )
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence

    # ---- build -------------------------------------------------------------------------

    def build(self) -> bytes:
        """Close the builder and return the batch (``b""`` if no record was appended).

        Calling it again returns the same bytes.
        """
        if self._built is not None:
            return self._built
        parts = self._parts
        assert parts is not None
        if self._is_transactional and self._producer_id < 0:
            raise IllegalStateError(
                "a transactional record batch needs a producer id: "
                "call set_producer_state() before build()"
            )
        count = self._count
        self._parts = None
        if not count:
            self._built = _EMPTY
            return _EMPTY
        codec = self._codec
        try:
            records = _EMPTY.join(parts)
        except TypeError:
            raise TypeError(_describe_bad_part(parts)) from None
        if codec is not NONE:
            records = _compression.compress(codec, records, self._level)
        tail = HEADER_TAIL.pack(
            codec | (TRANSACTIONAL_MASK if self._is_transactional else 0),
            count - 1,
            self._base_ts,
            self._max_ts,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            count,
        )
        prefix = HEADER_PREFIX.pack(
            self._base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(records),
            self._partition_leader_epoch,
            MAGIC,
            crc32c(records, crc32c(tail)),
        )
        self._built = built = _EMPTY.join((prefix, tail, records))
        return built


def _describe_bad_part(parts: list[bytes]) -> str:
    """Why joining the records failed: name the first record whose key or value is not bytes."""
    for index, part in enumerate(parts):
        if not isinstance(part, (bytes, bytearray, memoryview)):
            field = "key" if (index - 1) % 8 == 4 else "value"
            return (
                f"record {(index - 1) // 8}: {field} must be bytes or None, "
                f"got {type(part).__name__}"
            )
    return "a record's key or value is not bytes"


def _encode_headers(headers: Sequence[Header]) -> bytes:
    out = [encode_varint(len(headers))]
    for header in headers:
        try:
            name, data = header
        except (TypeError, ValueError):
            raise TypeError(
                f"a header must be a (str, bytes | None) pair, got {header!r}"
            ) from None
        if not isinstance(name, str):
            raise TypeError(f"header key must be str, got {type(name).__name__}")
        encoded = name.encode("utf-8")
        out.append(encode_varint(len(encoded)))
        out.append(encoded)
        if data is None:
            out.append(_NULL)
        elif isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
            out.append(encode_varint(len(data)))
            out.append(data)
        else:
            raise TypeError(
                f"header {name!r} value must be bytes or None, got {type(data).__name__}"
            )
    return _EMPTY.join(out)
