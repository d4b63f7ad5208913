"""Reading record batches: Kafka's ``DefaultRecordBatch``, ``DefaultRecord`` and ``MemoryRecords``.

:func:`iter_batches` walks a buffer of concatenated v2 batches (a Produce request's or a
Fetch response's records) without copying it: every :class:`RecordBatch` is a memoryview
slice. :meth:`RecordBatch.records` checks all records of a batch at once, and only hands
out records once the whole batch has decoded and its record count matches. Two decoders
do it, with the same records and the same errors:

* in C, :func:`kclient.record._speedups.decode_records` (when
  ``kclient.record.ACCELERATED``): it checks the whole batch when ``records()`` is called,
  then makes each record as it is iterated, so that records die young one by one;
* in Python, :func:`_py_decode_records`: one ``bytes`` copy of the records section, the
  one- and two-byte varints inlined, every record made at once.

Offsets and timestamps are signed 64-bit and wrap around, as Java's ``long`` does.

Bad bytes from a peer raise :class:`CorruptRecordError` naming what is wrong and the byte
offset of the batch; nothing else (no ``struct.error``, ``IndexError``, or unbounded
loops). A batch cut short at the end of the buffer — as a Fetch response may return it —
is skipped silently.

Also here: the in-place rewrites the broker does on an incoming batch
(:func:`assign_offsets`, :func:`set_partition_leader_epoch`, :func:`set_log_append_time`).

Threads: a RecordBatch is immutable and may be read from any thread; the rewrites
mutate the buffer they are given and need the caller to own it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

from crc32c import crc32c

from kclient.errors import CorruptRecordError
from kclient.record import _accel
from kclient.record import compression as _compression
from kclient.record.compression import NONE, CompressionType
from kclient.record.layout import (
    ATTRIBUTES,
    ATTRIBUTES_OFFSET,
    BASE_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LENGTH_PREFIX,
    LOG_APPEND_TIME,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MAX_TIMESTAMP,
    MAX_TIMESTAMP_OFFSET,
    MIN_BATCH_LENGTH,
    MIN_RECORD_SIZE,
    PARTITION_LEADER_EPOCH,
    PARTITION_LEADER_EPOCH_OFFSET,
    PRODUCER_STATE,
    PRODUCER_STATE_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from kclient.record.varint import ZIGZAG, decode_varint

if _accel.ACCELERATED:
    from kclient.record._speedups import decode_records as _c_decode_records

Buffer = bytes | bytearray | memoryview


class Record(NamedTuple):
    """One record of a batch (Java: ``DefaultRecord``), with its absolute offset/timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


_CODECS = {member.value: member for member in CompressionType}
# (data, count, base offset, base timestamp, log append time, Record) -> the checked records
_Decoder = Callable[
    ["bytes | memoryview", int, int, int, "int | None", "type[Record]"], Iterable[Record]
]
_INT64_MIN = -(2**63)
_UINT64 = 2**64
# A base offset or timestamp this far inside the 64-bit range stays inside it whatever
# delta a one- or two-byte varint adds (zig-zag values -8192..8191).
_SAFE_BASE_MIN = _INT64_MIN + 8192
_SAFE_BASE_MAX = 2**63 - 1 - 8192
_new_record: Any = tuple.__new__  # Record(...) without the Python-level __new__


class RecordBatch:
    """A view of one v2 record batch (Java: ``DefaultRecordBatch``); read-only.

    ``RecordBatch(buffer)`` reads the header of the batch at the start of ``buffer``;
    ``position`` is where that is in a larger buffer, for error messages.
    """

    __slots__ = ("_header", "position", "raw")

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        view = memoryview(buffer)
        if view.ndim != 1 or view.itemsize != 1:
            view = view.cast("B")
        if len(view) < HEADER_SIZE:
            raise CorruptRecordError(
                f"record batch at byte {position}: {len(view)} bytes is shorter than the "
                f"{HEADER_SIZE}-byte batch header"
            )
        magic = view[MAGIC_OFFSET]
        if magic != MAGIC:
            raise CorruptRecordError(
                f"record batch at byte {position}: magic {magic} is not supported "
                f"(only magic {MAGIC}, the v2 format of Kafka 0.11+, is)"
            )
        header = HEADER.unpack_from(view)
        batch_length = header[1]
        if batch_length < MIN_BATCH_LENGTH or LOG_OVERHEAD + batch_length != len(view):
            raise CorruptRecordError(
                f"record batch at byte {position}: batchLength {batch_length} does not match "
                f"the {len(view)} bytes given (expected {len(view) - LOG_OVERHEAD}, at least "
                f"{MIN_BATCH_LENGTH})"
            )
        self._header: tuple[int, ...] = header
        self.raw: memoryview = view
        """The whole batch, header included."""
        self.position = position
        """Byte offset of the batch in the buffer it was read from."""

    # ---- header fields -----------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return self._header[0]

    @property
    def batch_length(self) -> int:
        return self._header[1]

    @property
    def partition_leader_epoch(self) -> int:
        return self._header[2]

    @property
    def magic(self) -> int:
        return self._header[3]

    @property
    def crc(self) -> int:
        return self._header[4]

    @property
    def attributes(self) -> int:
        return self._header[5]

    @property
    def compression(self) -> CompressionType:
        """The codec; raises CorruptRecordError for an id no Kafka version defines."""
        codec_id = self._header[5] & COMPRESSION_MASK
        codec = _CODECS.get(codec_id)
        if codec is None:
            raise CorruptRecordError(
                f"record batch at byte {self.position}: unknown compression codec id {codec_id}"
            )
        return codec

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return LOG_APPEND_TIME if self._header[5] & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self._header[5] & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self._header[5] & CONTROL_MASK)

    @property
    def last_offset_delta(self) -> int:
        return self._header[6]

    @property
    def first_timestamp(self) -> int:
        return self._header[7]

    @property
    def max_timestamp(self) -> int:
        return self._header[8]

    @property
    def producer_id(self) -> int:
        return self._header[9]

    @property
    def producer_epoch(self) -> int:
        return self._header[10]

    @property
    def base_sequence(self) -> int:
        return self._header[11]

    @property
    def record_count(self) -> int:
        return self._header[12]

    @property
    def size_in_bytes(self) -> int:
        """The whole batch: 12 + batchLength."""
        return LOG_OVERHEAD + self._header[1]

    @property
    def last_offset(self) -> int:
        return self._header[0] + self._header[6]

    @property
    def next_offset(self) -> int:
        return self._header[0] + self._header[6] + 1

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, records={self.record_count}, "
            f"size={self.size_in_bytes}, compression={self.compression.name.lower()}, "
            f"producer_id={self.producer_id}, base_sequence={self.base_sequence})"
        )

    # ---- validation and records --------------------------------------------------------

    def validate(self) -> None:
        """Check the CRC, the record count and the codec; raise CorruptRecordError if wrong."""
        computed = crc32c(self.raw[ATTRIBUTES_OFFSET:])
        if computed != self.crc:
            raise CorruptRecordError(
                f"record batch at byte {self.position}: CRC mismatch (stored 0x{self.crc:08x}, "
                f"computed 0x{computed:08x})"
            )
        self._check_shape()

    def _check_shape(self) -> CompressionType:
        codec = self.compression
        count = self.record_count
        records_size = self._header[1] - MIN_BATCH_LENGTH
        if count < 0 or (codec is NONE and count * MIN_RECORD_SIZE > records_size):
            raise CorruptRecordError(
                f"record batch at byte {self.position}: record count {count} is impossible "
                f"for {records_size} bytes of {codec.name.lower()} records"
            )
        return codec

    def records(self) -> Iterator[Record]:
        """Decompress (if needed) and decode every record; raises CorruptRecordError."""
        codec = self._check_shape()
        body = self.raw[HEADER_SIZE:]
        data = body if codec is NONE else _compression.decompress(codec, body, self.position)
        header = self._header
        log_append_time = header[8] if header[5] & TIMESTAMP_TYPE_MASK else None
        decode: _Decoder = _c_decode_records if _accel.ACCELERATED else _py_decode_records
        try:
            records = decode(data, header[12], header[0], header[7], log_append_time, Record)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"record batch at byte {self.position}: {exc}") from None
        except IndexError:
            raise CorruptRecordError(
                f"record batch at byte {self.position}: records end before "
                f"{header[12]} records were read"
            ) from None
        return iter(records)


def _py_decode_records(  # noqa: PLR0917 -- the C decoder's signature
    data: bytes | memoryview,
    count: int,
    base_offset: int,
    base_ts: int,
    log_append_time: int | None,
    record_class: type[Record],
) -> list[Record]:
    """Decode ``count`` records filling ``data`` exactly. ``IndexError`` = ran off the end.

    Varints of one and two bytes (every length below 8 KiB) are decoded inline, through
    the ``ZIGZAG`` table; their values, within +-8192, cannot take an offset or timestamp
    out of the 64-bit range unless its base is at the edge. Longer deltas set ``wide``,
    and then offsets and timestamps are wrapped into the range afterwards.
    """
    if type(data) is not bytes:
        data = bytes(data)
    out: list[Record] = []
    append = out.append
    new = _new_record
    zigzag = ZIGZAG
    end = len(data)
    pos = 0
    wide = not (_SAFE_BASE_MIN <= base_offset <= _SAFE_BASE_MAX) or not (
        _SAFE_BASE_MIN <= base_ts <= _SAFE_BASE_MAX
    )
    for index in range(count):
        b = data[pos]
        if b < 0x80:
            length = zigzag[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            length = zigzag[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            length, pos = decode_varint(data, pos)
        record_end = pos + length
        if length < MIN_RECORD_SIZE - 1 or record_end > end:
            raise CorruptRecordError(
                f"record {index} at byte {pos} has length {length} ({end - pos} bytes left)"
            )
        pos += 1  # attributes
        b = data[pos]
        if b < 0x80:
            ts_delta = zigzag[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            ts_delta = zigzag[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            ts_delta, pos = decode_varint(data, pos)
            wide = True
        b = data[pos]
        if b < 0x80:
            offset_delta = zigzag[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            offset_delta = zigzag[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            offset_delta, pos = decode_varint(data, pos)
            wide = True
        b = data[pos]
        if b < 0x80:
            size = zigzag[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            size = zigzag[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            size, pos = decode_varint(data, pos)
        if size >= 0:
            key: bytes | None = data[pos : pos + size]
            pos += size
        elif size == -1:
            key = None
        else:
            raise CorruptRecordError(f"record {index} has key length {size}")
        b = data[pos]
        if b < 0x80:
            size = zigzag[b]
            pos += 1
        elif (c := data[pos + 1]) < 0x80:
            size = zigzag[(b & 0x7F) | (c << 7)]
            pos += 2
        else:
            size, pos = decode_varint(data, pos)
        if size >= 0:
            value: bytes | None = data[pos : pos + size]
            pos += size
        elif size == -1:
            value = None
        else:
            raise CorruptRecordError(f"record {index} has value length {size}")
        if data[pos] == 0:
            headers: list[tuple[str, bytes | None]] = []
            pos += 1
        else:
            headers, pos = _decode_headers(data, pos, record_end, index)
        if pos != record_end:
            raise CorruptRecordError(
                f"record {index} has length {length} but its fields take "
                f"{length + pos - record_end}"
            )
        append(
            new(
                record_class,
                (
                    base_offset + offset_delta,
                    base_ts + ts_delta if log_append_time is None else log_append_time,
                    key,
                    value,
                    headers,
                ),
            )
        )
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} bytes are left after the {count} records the header announces"
        )
    if wide:
        out = [new(record_class, (_wrap64(r[0]), _wrap64(r[1]), r[2], r[3], r[4])) for r in out]
    return out


def _wrap64(value: int) -> int:
    """``value`` as Java's ``long`` arithmetic leaves it: wrapped into the signed 64-bit range."""
    return (value - _INT64_MIN) % _UINT64 + _INT64_MIN


def _decode_headers(
    data: bytes, pos: int, record_end: int, index: int
) -> tuple[list[tuple[str, bytes | None]], int]:
    count, pos = decode_varint(data, pos)
    if count < 0 or count * 2 > record_end - pos:
        raise CorruptRecordError(f"record {index} has header count {count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(count):
        size, pos = decode_varint(data, pos)
        if size < 0 or pos + size > record_end:
            raise CorruptRecordError(f"record {index} has header key length {size}")
        try:
            name = data[pos : pos + size].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError(f"record {index} has a header key that is not UTF-8") from None
        pos += size
        size, pos = decode_varint(data, pos)
        if size >= 0:
            if pos + size > record_end:
                raise CorruptRecordError(f"record {index} has header value length {size}")
            headers.append((name, data[pos : pos + size]))
            pos += size
        elif size == -1:
            headers.append((name, None))
        else:
            raise CorruptRecordError(f"record {index} has header value length {size}")
    return headers, pos


def iter_batches(data: Buffer, *, validate_crc: bool = True) -> Iterator[RecordBatch]:
    """The v2 batches in ``data`` (Java: ``MemoryRecords.batches()``), without copying.

    A batch cut short at the end of ``data`` is skipped silently (Fetch responses may end
    with one); a wrong CRC (when ``validate_crc``), magic, size or record count raises
    :class:`CorruptRecordError` naming the batch's byte offset.
    """
    view = memoryview(data)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    end = len(view)
    pos = 0
    while end - pos >= LOG_OVERHEAD:
        _, batch_length = LENGTH_PREFIX.unpack_from(view, pos)
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(
                f"record batch at byte {pos}: batchLength {batch_length} is below the "
                f"minimum of {MIN_BATCH_LENGTH}"
            )
        batch_end = pos + LOG_OVERHEAD + batch_length
        if batch_end > end:
            return  # truncated trailing batch
        batch = RecordBatch(view[pos:batch_end], pos)
        if validate_crc:
            batch.validate()
        else:
            batch._check_shape()
        yield batch
        pos = batch_end


# ---- in-place rewrites (the broker's LogValidator) --------------------------------------


def _batch_end(buf: bytearray | memoryview, what: str) -> int:
    """Check the header of the batch at the start of ``buf``; return where the batch ends."""
    if len(buf) < HEADER_SIZE:
        raise CorruptRecordError(
            f"cannot {what}: {len(buf)} bytes is shorter than a record batch header"
        )
    if buf[MAGIC_OFFSET] != MAGIC:
        raise CorruptRecordError(f"cannot {what}: magic {buf[MAGIC_OFFSET]} is not {MAGIC}")
    batch_length: int = LENGTH_PREFIX.unpack_from(buf, 0)[1]
    end = LOG_OVERHEAD + batch_length
    if batch_length < MIN_BATCH_LENGTH or end > len(buf):
        raise CorruptRecordError(
            f"cannot {what}: batchLength {batch_length} does not fit the {len(buf)} bytes given"
        )
    return end


def assign_offsets(buf: bytearray | memoryview, base_offset: int) -> None:
    """Set the batch's baseOffset in place (outside the CRC, so the CRC stays valid)."""
    _batch_end(buf, "assign offsets")
    BASE_OFFSET.pack_into(buf, 0, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, epoch: int) -> None:
    """Set the batch's partitionLeaderEpoch in place (outside the CRC)."""
    _batch_end(buf, "set the partition leader epoch")
    PARTITION_LEADER_EPOCH.pack_into(buf, PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_producer_state(
    buf: bytearray | memoryview, producer_id: int, epoch: int, base_sequence: int
) -> None:
    """Set producer id, epoch and base sequence in place and rewrite the CRC (the
    producer re-sequences a batch this way after an epoch bump)."""
    end = _batch_end(buf, "set the producer state")
    PRODUCER_STATE.pack_into(buf, PRODUCER_STATE_OFFSET, producer_id, epoch, base_sequence)
    CRC.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:end]))


def set_log_append_time(buf: bytearray | memoryview, timestamp_ms: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as its maxTimestamp, and rewrite
    the CRC (Java: ``DefaultRecordBatch.setMaxTimestamp(LOG_APPEND_TIME, ts)``)."""
    end = _batch_end(buf, "set the log append time")
    (attributes,) = ATTRIBUTES.unpack_from(buf, ATTRIBUTES_OFFSET)
    ATTRIBUTES.pack_into(buf, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    MAX_TIMESTAMP.pack_into(buf, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    CRC.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:end]))


def set_max_timestamp(buf: bytearray | memoryview, timestamp_ms: int) -> None:
    """Set the batch's maxTimestamp (CreateTime) to ``timestamp_ms`` and rewrite the CRC
    when it changes (Java: ``DefaultRecordBatch.setMaxTimestamp(CREATE_TIME, ts)``)."""
    end = _batch_end(buf, "set the max timestamp")
    if MAX_TIMESTAMP.unpack_from(buf, MAX_TIMESTAMP_OFFSET)[0] == timestamp_ms:
        return
    MAX_TIMESTAMP.pack_into(buf, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    CRC.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:end]))
