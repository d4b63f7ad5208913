"""RecordBatchBuilder: writes one v2 record batch, like Kafka's ``MemoryRecordsBuilder``.

The producer appends every record it sends here, so ``append`` is the hottest code in
kclient. :class:`RecordBatchBuilder` is the typed interface, and holds what runs once per
batch (the configuration, and :meth:`~RecordBatchBuilder.build`: compression, header,
CRC). ``RecordBatchBuilder(...)`` makes one of two implementations of the per-record part,
which write the same bytes and raise the same errors:

* :class:`CRecordBatchBuilder` — ``append`` in C (:mod:`kclient.record._speedups`),
  encoding each record straight into one growing buffer. Used when the extension is built
  and ``KCLIENT_PURE_PYTHON`` is not set (``kclient.record.ACCELERATED``).
* :class:`PyRecordBatchBuilder` — pure Python, the reference and the fallback. It does no
  per-record function calls on the common path: each varint comes from a precomputed table
  (:mod:`kclient.record.varint`), each record is eight references added to one list with a
  single ``+=``, and the bytes are joined once in ``build``. The first record of a batch,
  records with headers, and records with lengths or timestamp deltas beyond the tables take
  a slower general path that writes the same bytes.

Keys and values must be ``bytes`` (the producer's serializers guarantee it). Another type
is reported by ``build`` (``TypeError`` naming the record); the pure builder keeps
references to keys and values until ``build``, so a ``bytearray`` changed in between
changes its batch (the C builder copies them at ``append``).

Timestamps are signed 64-bit; a timestamp delta wraps around as Java's ``long`` does.

Threads: not thread-safe. The producer's ``RecordAccumulator`` appends under its
per-partition lock; ``build`` runs on the Sender thread when the batch is drained.

Differences from Java: a record fits when the *uncompressed* batch stays within
``batch_size`` (Java scales the size of compressed batches by an estimated compression
ratio, so with compression a Java batch may hold more records).
"""

from __future__ import annotations

from collections.abc import Callable, MutableSequence, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from crc32c import crc32c

from kclient.errors import ConfigError, IllegalStateError
from kclient.record import _accel
from kclient.record import compression as _compression
from kclient.record.compression import NONE, CompressionType
from kclient.record.layout import (
    ATTRIBUTES_OFFSET,
    CRC,
    CRC_OFFSET,
    HEADER_PREFIX,
    HEADER_SIZE,
    HEADER_TAIL,
    LOG_OVERHEAD,
    MAGIC,
    TRANSACTIONAL_MASK,
)
from kclient.record.varint import (
    ATTR_TIMESTAMP,
    LENGTH_PREFIX,
    SIZED,
    TABLE_SIZE,
    VARINT,
    encode_varint,
)

Header = tuple[str, "bytes | None"]

_NULL = b"\x01"  # the varint -1: a null key or value
_NO_HEADERS = b"\x00"  # the varint 0: header count
_EMPTY = b""
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_UINT64 = 2**64

# What every implementation keeps per batch; each adds its own per-record state.
_BATCH_SLOTS = (
    "_base_offset",
    "_base_sequence",
    "_built",
    "_codec",
    "_is_transactional",
    "_level",
    "_partition_leader_epoch",
    "_producer_epoch",
    "_producer_id",
)

_B = TypeVar("_B", bound="RecordBatchBuilder")


class RecordBatchBuilder:
    """Builds one RecordBatch v2 (Java: ``MemoryRecordsBuilder`` + ``DefaultRecord.writeTo``).

    ``append`` returns the record's offset delta, or ``-1`` when the record would take the
    batch past ``batch_size`` (the first record is always accepted, whatever its size).
    ``build`` compresses, writes the header and CRC-32C, and returns the batch's bytes.

    ``RecordBatchBuilder(...)`` returns a :class:`CRecordBatchBuilder` or a
    :class:`PyRecordBatchBuilder` (see the module docstring); both are instances of this
    class, which declares the per-record methods they implement.
    """

    # Empty: the implementations declare the slots (a C base type cannot share its layout).
    # Hidden from mypy, which would reject assigning them here.
    if not TYPE_CHECKING:
        __slots__ = ()

    _base_offset: int
    _base_sequence: int
    _built: bytes | None
    _codec: CompressionType
    _is_transactional: bool
    _level: int | None
    _partition_leader_epoch: int
    _producer_epoch: int
    _producer_id: int

    def __new__(cls: type[_B], *args: Any, **kwargs: Any) -> _B:
        if cls is RecordBatchBuilder:  # the active implementation (a subclass)
            impl: Any = CRecordBatchBuilder if _accel.ACCELERATED else PyRecordBatchBuilder
            return cast(_B, impl.__new__(impl))
        return object.__new__(cls)

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
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = bool(is_transactional)
        self._partition_leader_epoch = partition_leader_epoch
        self._built = None
        self._start(batch_size)

    # ---- per record: each implementation's ---------------------------------------------

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> int:
        """Add a record; returns its offset delta, or ``-1`` if it does not fit.

        Raises :class:`IllegalStateError` after :meth:`build`, ``OverflowError`` for a
        timestamp outside the signed 64-bit range.
        """
        raise NotImplementedError

    def append_rows(  # noqa: PLR0917 (the C method's positional signature)
        self,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        rows: Sequence[int] | None,
        start: int,
        stop: int,
        results: list[Any],
        deltas: MutableSequence[int],
        result: object,
        /,
    ) -> int:
        """Append rows ``rows[start:stop]`` of the columns (``rows`` None: rows
        ``start``..``stop - 1``) without headers, as ``append`` would, until one does not
        fit; for each, ``results[row] = result`` and ``deltas[row]`` = its offset delta.
        Returns the rows appended (``send_batch``'s bulk path; keys and values are bytes
        or None, timestamps ints)."""
        appended = 0
        for i in range(start, stop):
            row = i if rows is None else rows[i]
            delta = self.append(timestamps[row], None if keys is None else keys[row], values[row])
            if delta < 0:
                break
            results[row] = result
            deltas[row] = delta
            appended += 1
        return appended

    @property
    def record_count(self) -> int:
        """Records appended so far."""
        raise NotImplementedError

    @property
    def batch_size(self) -> int:
        raise NotImplementedError

    @property
    def base_timestamp(self) -> int:
        """Timestamp of the first record (0 while empty)."""
        raise NotImplementedError

    @property
    def max_timestamp(self) -> int:
        """Greatest record timestamp so far (-1 while empty, or while every one is below)."""
        raise NotImplementedError

    @property
    def closed(self) -> bool:
        """True once :meth:`build` has run."""
        raise NotImplementedError

    def is_full(self) -> bool:
        """True when built, or when the batch has reached ``batch_size``."""
        raise NotImplementedError

    @property
    def _open_size(self) -> int:
        """Uncompressed size of the batch so far, header included."""
        raise NotImplementedError

    def _start(self, batch_size: int) -> None:
        """Start empty and open, to hold up to ``batch_size`` bytes."""
        raise NotImplementedError

    def _close(self) -> bytes:
        """Close; return the records section (raises TypeError for a non-bytes key/value)."""
        raise NotImplementedError

    def _close_framed(self, header: bytes, crc: Callable[[memoryview], int], /) -> bytes:
        """Close; return ``header`` (61 bytes, zero CRC) and the records as one batch, its
        CRC (``crc`` of everything from the attributes on) written in. The C writer makes
        it with one copy of the records instead of two."""
        batch = bytearray(header)
        batch += self._close()
        CRC.pack_into(batch, CRC_OFFSET, crc(memoryview(batch)[ATTRIBUTES_OFFSET:]))
        return bytes(batch)

    # ---- state -------------------------------------------------------------------------

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed size of the batch so far (header included); after ``build``, the
        size of the built batch."""
        return self._open_size if self._built is None else len(self._built)

    @property
    def compression(self) -> CompressionType:
        return self._codec

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
        if self.closed:
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
        built = self._built
        if built is not None:
            return built
        if self.closed:
            raise IllegalStateError(
                "record batch failed to build (see the first error); start a new RecordBatchBuilder"
            )
        if self._is_transactional and self._producer_id < 0:
            raise IllegalStateError(
                "a transactional record batch needs a producer id: "
                "call set_producer_state() before build()"
            )
        count = self.record_count
        codec = self._codec
        if not count or codec is not NONE:
            records = self._close()
            if not count:
                self._built = _EMPTY
                return _EMPTY
            records = _compression.compress(codec, records, self._level)
        tail = HEADER_TAIL.pack(
            codec | (TRANSACTIONAL_MASK if self._is_transactional else 0),
            count - 1,
            self.base_timestamp,
            self.max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            count,
        )
        if codec is NONE:  # header and records in one bytes, one copy of the records
            prefix = HEADER_PREFIX.pack(
                self._base_offset,
                self._open_size - LOG_OVERHEAD,
                self._partition_leader_epoch,
                MAGIC,
                0,
            )
            self._built = built = self._close_framed(prefix + tail, crc32c)
            return built
        prefix = HEADER_PREFIX.pack(
            self._base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(records),
            self._partition_leader_epoch,
            MAGIC,
            crc32c(records, crc32c(tail)),
        )
        self._built = built = _EMPTY.join((prefix, tail, records))
        return built


class PyRecordBatchBuilder(RecordBatchBuilder):
    """The pure-Python :class:`RecordBatchBuilder`: records are lists of byte strings."""

    __slots__ = (*_BATCH_SLOTS, "_base_ts", "_count", "_limit", "_max_ts", "_parts", "_size")

    _parts: list[bytes] | None
    _count: int
    _size: int
    _limit: int
    _base_ts: int
    _max_ts: int

    def _start(self, batch_size: int) -> None:
        self._limit = batch_size
        # parts[0] is kept for the header; every record adds exactly eight parts.
        self._parts = [_EMPTY]
        self._count = 0
        self._size = HEADER_SIZE
        self._base_ts = 0
        self._max_ts = -1

    # ---- the hot path ------------------------------------------------------------------

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] = (),
    ) -> int:
        count = self._count
        if headers or not count:
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
        if total > self._limit:
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
        """Any record: the first, headers, large lengths, large timestamp deltas. Same
        bytes as above."""
        self._check_open()
        if not _INT64_MIN <= timestamp_ms <= _INT64_MAX:
            raise OverflowError(f"timestamp_ms {timestamp_ms!r} does not fit in 64 bits")
        if key is None:
            key_len, key = _NULL, _EMPTY
        else:
            key_len = VARINT[n] if (n := len(key)) < TABLE_SIZE else encode_varint(n)
        if value is None:
            value_len, value = _NULL, _EMPTY
        else:
            value_len = VARINT[n] if (n := len(value)) < TABLE_SIZE else encode_varint(n)
        header_blob = _encode_headers(headers) if headers else _NO_HEADERS
        # Read the state only now: len() and the headers may have run the caller's code.
        parts = self._check_open()
        count = self._count
        base_ts = self._base_ts if count else timestamp_ms
        delta = timestamp_ms - base_ts
        if 0 <= delta < TABLE_SIZE:
            attr_ts = ATTR_TIMESTAMP[delta][0]
        else:
            if not _INT64_MIN <= delta <= _INT64_MAX:  # wraps around, as Java's long does
                delta = (delta - _INT64_MIN) % _UINT64 + _INT64_MIN
            attr_ts = b"\x00" + encode_varint(delta)
        offset_delta = VARINT[count] if count < TABLE_SIZE else encode_varint(count)
        size = (
            len(attr_ts)
            + len(offset_delta)
            + len(key_len)
            + len(key)
            + len(value_len)
            + len(value)
            + len(header_blob)
        )
        record_len = VARINT[size] if size < TABLE_SIZE else encode_varint(size)
        total = self._size + size + len(record_len)
        if total > self._limit and count:
            return -1
        parts += (record_len, attr_ts, offset_delta, key_len, key, value_len, value, header_blob)
        self._size = total
        self._base_ts = base_ts
        if timestamp_ms > self._max_ts:  # noqa: PLR1730 -- max() is a call
            self._max_ts = timestamp_ms
        self._count = count + 1
        return count

    def _check_open(self) -> list[bytes]:
        """The open batch's parts; IllegalStateError once built."""
        parts = self._parts
        if parts is None:
            raise IllegalStateError(
                "record batch is already built; start a new RecordBatchBuilder for more records"
            )
        return parts

    # ---- state -------------------------------------------------------------------------

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def batch_size(self) -> int:
        return self._limit

    @property
    def base_timestamp(self) -> int:
        return self._base_ts

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    @property
    def closed(self) -> bool:
        return self._parts is None

    def is_full(self) -> bool:
        return self._parts is None or (self._count > 0 and self._size >= self._limit)

    @property
    def _open_size(self) -> int:
        return self._size

    def _close(self) -> bytes:
        parts = self._parts
        if parts is None:
            raise IllegalStateError("record batch is already built")
        self._parts = None
        try:
            return _EMPTY.join(parts)
        except TypeError:
            raise TypeError(_describe_bad_part(parts)) from None


if _accel.ACCELERATED:
    from kclient.record._speedups import RecordsWriter

    class CRecordBatchBuilder(RecordsWriter, RecordBatchBuilder):
        """The C-accelerated :class:`RecordBatchBuilder`: ``append`` and the per-record state
        are :class:`kclient.record._speedups.RecordsWriter`'s."""

        __slots__ = _BATCH_SLOTS


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


def _varint(n: int) -> bytes:
    """The varint of a length ``n >= 0``, from the table when it is there."""
    return VARINT[n] if n < TABLE_SIZE else encode_varint(n)


def _encode_headers(headers: Sequence[Header]) -> bytes:
    """The header count and headers of one record, as ``DefaultRecord.writeTo`` writes them."""
    out = [_varint(len(headers))]
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
        out.append(_varint(len(encoded)))
        out.append(encoded)
        if data is None:
            out.append(_NULL)
        elif isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
            out.append(_varint(len(data)))
            out.append(data)
        else:
            raise TypeError(
                f"header {name!r} value must be bytes or None, got {type(data).__name__}"
            )
    return _EMPTY.join(out)


if _accel.ACCELERATED:  # the C builder's encoder for headers other than a list or tuple of pairs
    from kclient.record._speedups import set_header_encoder

    set_header_encoder(_encode_headers)
