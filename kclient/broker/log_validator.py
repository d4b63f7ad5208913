"""Validation of produced record batches (Kafka's ``LogValidator`` + ``analyzeAndValidateRecords``).

Runs on a request handler thread before the partition lock is taken. Per batch, and
without iterating records (so the cost is one CRC pass over the bytes, plus one
decompression pass, whose output is counted and dropped, for a compressed batch):

* it decodes as RecordBatch v2 (magic 2) with a valid CRC-32C -> else CORRUPT_MESSAGE;
* the batches fill the records field exactly (no torn tail) -> else CORRUPT_MESSAGE;
* ``record_count`` is positive and equals ``last_offset_delta + 1`` -> else CORRUPT_MESSAGE;
* it is at most ``max.message.bytes`` -> else MESSAGE_TOO_LARGE;
* a compressed batch decompresses (else CORRUPT_MESSAGE) to at most ``max.message.bytes``
  (else MESSAGE_TOO_LARGE: the producer splits it), counted in 256 KiB steps, so that a
  small batch that expands to gigabytes costs the broker a few steps, not gigabytes;
* the codec is known, and zstd comes with Produce v7+ -> else UNSUPPORTED_COMPRESSION_TYPE;
* it is neither a control batch nor transactional (no transactions here) -> INVALID_RECORD.

Offsets and timestamps are later assigned in place, so the records must be writable:
the writable view into the request frame the Processor read (a fresh ``bytearray`` per
request, never reused) is kept as is, without a copy; anything else is copied once.
"""

from __future__ import annotations

from dataclasses import dataclass

from kclient import errors
from kclient.record import iter_batches
from kclient.record.compression import CompressionType, decompressed_size
from kclient.record.layout import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    MAGIC,
    TRANSACTIONAL_MASK,
)

_ZSTD = 4
_MAX_CODEC = 4


@dataclass(slots=True)
class ValidBatch:
    """What the append needs to know about one validated batch."""

    position: int
    size: int
    record_count: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int


def validate_records(
    records: memoryview | bytes | bytearray | None,
    *,
    max_batch_bytes: int,
    produce_version: int,
) -> tuple[bytearray | memoryview, list[ValidBatch]]:
    """Validate the records of one partition of a Produce request (copying only when
    they are not writable).

    Raises the ``BrokerResponseError`` that the partition's response should carry.
    """
    if records is None or len(records) == 0:
        raise errors.CorruptMessageError("the produce request has no record batches")
    buf: bytearray | memoryview
    if isinstance(records, memoryview) and not records.readonly and records.format == "B":
        buf = records  # a view into this request's own frame: store it, no copy
    else:
        buf = bytearray(records)
    batches: list[ValidBatch] = []
    position = 0
    try:
        for batch in iter_batches(buf, validate_crc=True):
            size = batch.size_in_bytes
            if batch.magic != MAGIC:
                raise errors.CorruptMessageError(
                    f"record batch at byte {position} has magic {batch.magic}; only 2 is accepted"
                )
            if size > max_batch_bytes:
                raise errors.MessageTooLargeError(
                    f"record batch of {size} bytes is larger than max.message.bytes "
                    f"({max_batch_bytes})"
                )
            count = batch.record_count
            if count <= 0 or batch.last_offset_delta != count - 1:
                raise errors.CorruptMessageError(
                    f"record batch at byte {position} has {count} records but a last offset "
                    f"delta of {batch.last_offset_delta}"
                )
            attributes = batch.attributes
            codec = attributes & COMPRESSION_MASK
            if codec > _MAX_CODEC:
                raise errors.CorruptMessageError(f"unknown compression codec id {codec}")
            if codec == _ZSTD and produce_version < 7:
                raise errors.UnsupportedCompressionTypeError(
                    f"zstd needs Produce v7 or later, the request is v{produce_version}"
                )
            if codec:  # it must decompress, and not beyond what a batch may be
                section = batch.raw[HEADER_SIZE:]
                try:
                    size_out = decompressed_size(
                        CompressionType(codec), section, max_batch_bytes, position
                    )
                except errors.CorruptRecordError as exc:
                    message = str(exc)
                    if not message.startswith("record batch"):
                        message = f"record batch at byte {position}: {message}"
                    raise errors.CorruptMessageError(message) from None
                if size_out > max_batch_bytes:
                    raise errors.MessageTooLargeError(
                        f"record batch at byte {position} decompresses to more than "
                        f"max.message.bytes ({max_batch_bytes})"
                    )
            if attributes & CONTROL_MASK:
                raise errors.InvalidRecordError("clients may not write control batches")
            if attributes & TRANSACTIONAL_MASK:
                raise errors.InvalidRecordError(
                    "transactional batches are not supported by the embedded broker"
                )
            batches.append(
                ValidBatch(
                    position,
                    size,
                    count,
                    batch.last_offset_delta,
                    batch.max_timestamp,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                )
            )
            position += size
    except errors.CorruptRecordError as exc:
        raise errors.CorruptMessageError(f"record batch at byte {position}: {exc}") from None
    if position != len(buf) or not batches:
        raise errors.CorruptMessageError(
            f"records end with {len(buf) - position} bytes that are not a whole record batch"
        )
    return buf, batches
