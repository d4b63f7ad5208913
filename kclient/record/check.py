"""Checking a batch's records without making them: the record walk of Kafka's ``LogValidator``.

The broker validates every produced batch before storing it (``kclient.broker.log_validator``)
and looks up timestamps in stored batches (ListOffsets). :func:`check_records` walks a
(decompressed) records section the way Kafka's ``DefaultRecord.readFrom`` reads it, and
reports instead of building anything:

* every record: a length of at least 6 bytes that its fields fill exactly; varints of at
  most 5 bytes (10 for the timestamp delta) within the 32-bit range; key and value lengths
  of -1 (null) or that fit the record; a header count that fits the record; header keys
  that are not null and are UTF-8 (Kafka's ``String`` keys; its broker does not decode
  them, so it takes bytes that are not UTF-8 and this refuses them); header value lengths
  of -1 or that fit;
* offset deltas 0, 1, 2 ... (record *i* has delta *i*): Kafka rewrites compressed batches
  whose inner offsets are not consecutive; the embedded broker refuses them instead;
* exactly ``count`` records and no byte after the last one.

Result: :class:`RecordsCheck` — the first problem (the record index, or -1 when it concerns
no single record, and what is wrong), else the greatest timestamp (base timestamp + delta,
wrapping as Java's ``long``; -1 when no record has one above -1, as Kafka computes it) and,
when a ``target_timestamp`` is given, the index and timestamp of the first record whose
timestamp is at least that (-1, -1 when none is). :func:`search_batch` uses that to look
up a timestamp in a stored batch with bounded memory.

Two implementations with the same results: C (``kclient.record._validate``, used when the
accelerator is built and ``KCLIENT_PURE_PYTHON`` is unset; a pass over the bytes that makes
no objects and lets other threads run on large sections) and the Python reference below.
Pure functions: any thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from kclient.errors import CorruptRecordError
from kclient.record import _accel
from kclient.record.batch import RecordBatch
from kclient.record.compression import CompressionType, decompress
from kclient.record.layout import HEADER_SIZE, LOG_APPEND_TIME, MIN_RECORD_SIZE

Buffer = bytes | bytearray | memoryview

_c_check_records: (
    Callable[[Buffer, int, int, int | None], tuple[tuple[int, str] | None, int, int, int]] | None
)
try:
    from kclient.record._validate import check_records as _c_check_records
except ImportError:  # not built: the Python reference runs
    _c_check_records = None

INT64_MIN = -(2**63)
NO_TIMESTAMP = -1
_UINT64 = 2**64
_MIN_BODY = MIN_RECORD_SIZE - 1  # a record without its length varint


class RecordsCheck(NamedTuple):
    """What :func:`check_records` found in one records section."""

    #: (record index or -1, what is wrong) for the first problem, else None
    problem: tuple[int, str] | None
    #: the greatest record timestamp (-1 when none is above -1)
    max_timestamp: int
    #: index of the first record with a timestamp >= the target (-1: none, or no target)
    found_index: int
    #: its timestamp (-1 when none)
    found_timestamp: int


def check_records(
    data: Buffer, count: int, base_timestamp: int, target_timestamp: int | None = None
) -> RecordsCheck:
    """Check ``count`` records filling ``data`` (see the module docstring)."""
    if _c_check_records is not None and _accel.ACCELERATED:
        return RecordsCheck(*_c_check_records(data, count, base_timestamp, target_timestamp))
    return py_check_records(data, count, base_timestamp, target_timestamp)


class _Problem(Exception):
    def __init__(self, index: int, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.message = message


def _uvarint(  # noqa: PLR0917 -- the C helper's arguments
    data: bytes, pos: int, end: int, max_bytes: int, index: int, what: str
) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while pos < end:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if pos - start >= max_bytes:
            raise _Problem(index, f"record {index}: {what} varint is longer than {max_bytes} bytes")
    raise _Problem(index, f"record {index}: {what} runs past the end of the record")


def _varint(data: bytes, pos: int, end: int, index: int, what: str) -> tuple[int, int]:
    """A zig-zag varint of at most 5 bytes that fits in 32 bits (Java's ``readVarint``)."""
    raw, pos = _uvarint(data, pos, end, 5, index, what)
    if raw > 0xFFFFFFFF:
        raise _Problem(index, f"record {index}: {what} varint does not fit in 32 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def _varlong(data: bytes, pos: int, end: int, index: int, what: str) -> tuple[int, int]:
    raw, pos = _uvarint(data, pos, end, 10, index, what)
    raw &= _UINT64 - 1
    return (raw >> 1) ^ -(raw & 1), pos


def _field(data: bytes, pos: int, end: int, index: int, what: str) -> int:
    """Skip a key or value (or header value): -1 is null. Returns the position after it."""
    size, pos = _varint(data, pos, end, index, f"{what} length")
    if size < -1 or size > end - pos:
        raise _Problem(
            index,
            f"record {index}: {what} length {size} does not fit the record "
            f"({end - pos} bytes left)",
        )
    return pos + max(size, 0)


def _check_one(data: bytes, pos: int, end: int, index: int) -> tuple[int, int]:
    """Check record ``index`` at ``pos``; returns (its timestamp delta, position after it)."""
    length, pos = _varint(data, pos, end, index, "length")
    if length < _MIN_BODY or length > end - pos:
        raise _Problem(
            index,
            f"record {index}: length {length} is impossible ({end - pos} bytes left, "
            f"at least {_MIN_BODY} needed)",
        )
    record_end = pos + length
    pos += 1  # attributes: unused in v2, any value is accepted (as Kafka does)
    ts_delta, pos = _varlong(data, pos, record_end, index, "timestamp delta")
    offset_delta, pos = _varint(data, pos, record_end, index, "offset delta")
    if offset_delta != index:
        raise _Problem(
            index,
            f"record {index}: offset delta {offset_delta}, expected {index} (deltas must count "
            "0, 1, 2 ... without gaps)",
        )
    pos = _field(data, pos, record_end, index, "key")
    pos = _field(data, pos, record_end, index, "value")
    headers, pos = _varint(data, pos, record_end, index, "header count")
    if headers < 0 or headers * 2 > record_end - pos:
        raise _Problem(
            index,
            f"record {index}: header count {headers} does not fit the record "
            f"({record_end - pos} bytes left)",
        )
    for h in range(headers):
        size, pos = _varint(data, pos, record_end, index, "header key length")
        if size < 0 or size > record_end - pos:
            raise _Problem(
                index, f"record {index}: header {h} has key length {size} (null or past the record)"
            )
        try:
            data[pos : pos + size].decode("utf-8")
        except UnicodeDecodeError:
            raise _Problem(index, f"record {index}: header {h} key is not UTF-8") from None
        pos += size
        pos = _field(data, pos, record_end, index, f"header {h} value")
    if pos != record_end:
        raise _Problem(
            index,
            f"record {index}: length {length} but its fields take "
            f"{length + pos - record_end} bytes",
        )
    return ts_delta, pos


def py_check_records(
    data: Buffer, count: int, base_timestamp: int, target_timestamp: int | None = None
) -> RecordsCheck:
    """:func:`check_records` in pure Python (the reference the C code follows)."""
    raw = data if type(data) is bytes else bytes(data)
    end = len(raw)
    if count < 0 or count > end // MIN_RECORD_SIZE:
        return _failed(-1, f"record count {count} is impossible for {end} bytes of records")
    max_ts = NO_TIMESTAMP
    found_index = found_ts = -1
    pos = 0
    try:
        for index in range(count):
            if pos == end:
                return _failed(
                    -1, f"the records end after {index} of the {count} the header announces"
                )
            ts_delta, pos = _check_one(raw, pos, end, index)
            ts = (base_timestamp + ts_delta - INT64_MIN) % _UINT64 + INT64_MIN
            max_ts = max(max_ts, ts)
            if found_index < 0 and target_timestamp is not None and ts >= target_timestamp:
                found_index, found_ts = index, ts
    except _Problem as problem:
        return _failed(problem.index, problem.message)
    if pos != end:
        return _failed(
            -1, f"{end - pos} bytes are left after the {count} records the header announces"
        )
    return RecordsCheck(None, max_ts, found_index, found_ts)


def _failed(index: int, message: str) -> RecordsCheck:
    return RecordsCheck((index, message), NO_TIMESTAMP, -1, -1)


def search_batch(batch: RecordBatch, target_timestamp: int, max_bytes: int) -> tuple[int, int]:
    """(offset, timestamp) of the first record of a stored ``batch`` whose timestamp is at
    least ``target_timestamp``, or (-1, -1) (ListOffsets by timestamp: Kafka's
    ``FileRecords.searchForTimestamp`` within one batch).

    A LogAppendTime batch answers from its header (every record has its maxTimestamp);
    other batches are walked, in place when uncompressed, else decompressed within
    ``max_bytes``. Raises :class:`CorruptRecordError` (or its :class:`DecompressedSizeError`)
    when the records cannot be walked.
    """
    if batch.timestamp_type == LOG_APPEND_TIME:
        if batch.max_timestamp >= target_timestamp:
            return batch.base_offset, batch.max_timestamp
        return -1, -1
    codec = batch.compression
    body: bytes | memoryview = batch.raw[HEADER_SIZE:]
    if codec is not CompressionType.NONE:
        body = decompress(codec, body, batch.position, max_bytes=max_bytes)
    result = check_records(body, batch.record_count, batch.first_timestamp, target_timestamp)
    if result.problem is not None:
        raise CorruptRecordError(f"record batch at byte {batch.position}: {result.problem[1]}")
    if result.found_index < 0:
        return -1, -1
    return batch.base_offset + result.found_index, result.found_timestamp
