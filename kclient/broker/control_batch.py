"""Transaction markers: the COMMIT/ABORT control batches written to partitions.

Kafka's ``EndTransactionMarker`` / ``ControlRecordType``
(``MemoryRecords.withEndTransactionMarker``).
A marker is a RecordBatch v2 with the control and transactional attribute bits, the
producer id and epoch of the transaction it ends, base sequence -1, and one record:

* key: int16 version (0), int16 type (0 = ABORT, 1 = COMMIT);
* value: int16 version (0), int32 coordinator epoch.

Pure functions; any thread.
"""

from __future__ import annotations

import struct

from crc32c import crc32c

from kclient import errors
from kclient.record import RecordBatch
from kclient.record.layout import (
    ATTRIBUTES_OFFSET,
    CONTROL_MASK,
    CRC,
    CRC_OFFSET,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    TRANSACTIONAL_MASK,
)

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_CURRENT_VERSION = 0


def _varint(n: int) -> bytes:
    """Zig-zag varint of a small non-negative int (what one control record needs)."""
    z = n << 1
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def build_marker(
    producer_id: int,
    *,
    producer_epoch: int,
    coordinator_epoch: int,
    committed: bool,
    timestamp_ms: int,
) -> bytearray:
    """One control batch (base offset 0: the log assigns it) ending a transaction."""
    key = _KEY.pack(_CURRENT_VERSION, COMMIT if committed else ABORT)
    value = _VALUE.pack(_CURRENT_VERSION, coordinator_epoch)
    body = (
        b"\x00"  # attributes
        + _varint(0)  # timestamp delta
        + _varint(0)  # offset delta
        + _varint(len(key))
        + key
        + _varint(len(value))
        + value
        + _varint(0)  # headers
    )
    record = _varint(len(body)) + body
    buf = bytearray(HEADER_SIZE + len(record))
    HEADER.pack_into(
        buf,
        0,
        0,  # base offset
        len(buf) - LOG_OVERHEAD,
        -1,  # partition leader epoch: the log sets it
        MAGIC,
        0,  # crc, below
        CONTROL_MASK | TRANSACTIONAL_MASK,
        0,  # last offset delta
        timestamp_ms,
        timestamp_ms,
        producer_id,
        producer_epoch,
        -1,  # base sequence
        1,  # records
    )
    buf[HEADER_SIZE:] = record
    CRC.pack_into(buf, CRC_OFFSET, crc32c(bytes(buf[ATTRIBUTES_OFFSET:])))
    return buf


def marker_type(batch: RecordBatch) -> tuple[bool, int]:
    """(committed, coordinator epoch) of a control batch; CorruptRecordError when it is
    not a transaction marker."""
    for record in batch.records():
        key = record.key
        if key is None or len(key) < _KEY.size:
            break
        _, kind = _KEY.unpack_from(key)
        if kind not in (ABORT, COMMIT):
            break  # another control record type (KRaft's, ...): not a marker
        value = record.value
        epoch = _VALUE.unpack_from(value)[1] if value is not None and len(value) >= 6 else -1
        return kind == COMMIT, epoch
    raise errors.CorruptRecordError(
        f"control batch at offset {batch.base_offset} is not a transaction marker"
    )
