"""Validation of produced record batches (Kafka's ``LogValidator`` + ``analyzeAndValidateRecords``).

Runs on a request handler thread before the partition lock is taken. Nothing that fails
here is stored. The answers are Kafka's:

* it decodes as RecordBatch v2 (magic 2) with a valid CRC-32C, and the batch fills the
  records field exactly (no torn tail, no bytes after it) -> else CORRUPT_MESSAGE;
* it is at most ``max.message.bytes`` -> else MESSAGE_TOO_LARGE;
* it is the partition's only batch (magic 2 allows one per partition and request), its
  ``record_count`` is positive and equals ``last_offset_delta + 1``, an idempotent batch
  has a base sequence, and it is not a control batch (only the transaction coordinator
  writes those) -> else INVALID_RECORD;
* the codec is known, and zstd comes with Produce v7+ -> else UNSUPPORTED_COMPRESSION_TYPE;
* its records, decompressed first when the batch is compressed, are walked
  (``kclient.record.check``): exactly ``record_count`` records, offset deltas 0..n-1,
  every record's fields filling its length, sane varints and header keys, nothing after
  the last record -> else INVALID_RECORD, naming the record; with Produce v8+ it also
  comes back as a ``record_errors`` entry (batch index and message) when a single record
  is at fault (Kafka's ``RecordValidationException``).

Transactional batches pass (``ValidBatch.transactional``); whether their producer may
write them is checked under the partition lock (``ProducerAppendInfo.check_transaction``).

Decompression is bounded: records that expand past ``max.message.bytes`` (less the batch
header: what the same batch uncompressed could hold) are refused with MESSAGE_TOO_LARGE
as soon as the limit is passed, having taken at most that much memory; producers split
such batches. Data that is not valid for its codec is CORRUPT_MESSAGE (Kafka answers
UNKNOWN_SERVER_ERROR for it).

The batch's maxTimestamp is set to the greatest record timestamp found (Kafka's
``setMaxTimestamp``), so ListOffsets can trust the headers. Offsets and timestamps are
later assigned in place, so the records must be writable: the writable view into the
request frame the Processor read (a fresh ``bytearray`` per request, never reused) is kept
as is, without a copy; anything else is copied once.
"""

from __future__ import annotations

from dataclasses import dataclass

from kclient import errors
from kclient.record import RecordBatch, iter_batches, set_max_timestamp
from kclient.record.check import check_records
from kclient.record.compression import CompressionType, decompress
from kclient.record.layout import (
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    MAGIC,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)

_ZSTD = 4
_MAX_CODEC = 4
_CODECS = {member.value: member for member in CompressionType}


class RecordValidationError(errors.BrokerResponseError):
    """INVALID_RECORD caused by particular records (Kafka's ``RecordValidationException``):
    ``record_errors`` holds (index of the record in its batch, what is wrong)."""

    code = errors.InvalidRecordError.code
    name = errors.InvalidRecordError.name

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.detail, self.record_errors))


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
    transactional: bool = False


def validate_records(
    records: memoryview | bytes | bytearray | None,
    *,
    max_batch_bytes: int,
    produce_version: int,
) -> tuple[bytearray | memoryview, list[ValidBatch]]:
    """Validate the records of one partition of a Produce request (copying only when
    they are not writable).

    Raises the ``BrokerResponseError`` that the partition's response should carry
    (a :class:`RecordValidationError` when particular records are at fault).
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
            if batches:
                raise errors.InvalidRecordError(
                    "the records of a partition must be one record batch (magic 2); "
                    f"another one starts at byte {position}"
                )
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
                raise errors.InvalidRecordError(
                    f"record batch at byte {position} has {count} records but a last offset "
                    f"delta of {batch.last_offset_delta}"
                )
            if batch.producer_id >= 0 and batch.base_sequence < 0:
                raise errors.InvalidRecordError(
                    f"record batch at byte {position} has producer id {batch.producer_id} "
                    f"but no base sequence ({batch.base_sequence})"
                )
            attributes = batch.attributes
            codec = attributes & COMPRESSION_MASK
            if codec > _MAX_CODEC:
                raise errors.CorruptMessageError(f"unknown compression codec id {codec}")
            if codec == _ZSTD and produce_version < 7:
                raise errors.UnsupportedCompressionTypeError(
                    f"zstd needs Produce v7 or later, the request is v{produce_version}"
                )
            if attributes & CONTROL_MASK:
                raise errors.InvalidRecordError("clients may not write control batches")
            max_timestamp = _check_records(batch, _CODECS[codec], max_batch_bytes)
            if attributes & TIMESTAMP_TYPE_MASK:
                max_timestamp = batch.max_timestamp  # LogAppendTime: the header's own
            else:
                set_max_timestamp(memoryview(buf)[position : position + size], max_timestamp)
            batches.append(
                ValidBatch(
                    position,
                    size,
                    count,
                    batch.last_offset_delta,
                    max_timestamp,
                    batch.producer_id,
                    batch.producer_epoch,
                    batch.base_sequence,
                    bool(attributes & TRANSACTIONAL_MASK),
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


def _check_records(batch: RecordBatch, codec: CompressionType, max_batch_bytes: int) -> int:
    """Walk one batch's records (decompressed, within the limit); their greatest timestamp."""
    raw = batch.raw
    position = batch.position
    body = raw[HEADER_SIZE:]
    if codec is not CompressionType.NONE:
        limit = max(0, max_batch_bytes - HEADER_SIZE)
        try:
            body = memoryview(decompress(codec, body, position, max_bytes=limit))
        except errors.DecompressedSizeError:
            raise errors.MessageTooLargeError(
                f"record batch at byte {position} ({codec.name.lower()}, {len(raw)} bytes) holds "
                f"records of more than {limit} bytes: uncompressed it would be larger than "
                f"max.message.bytes ({max_batch_bytes})"
            ) from None
        except errors.UnsupportedCodecError as exc:
            raise errors.UnsupportedCompressionTypeError(
                f"the broker cannot read {codec.name.lower()} batches: {exc}"
            ) from None
    result = check_records(body, batch.record_count, batch.first_timestamp)
    if result.problem is None:
        return result.max_timestamp
    index, message = result.problem
    where = f"record batch at byte {position}: {message}"
    if index < 0:
        raise errors.InvalidRecordError(where)
    raise RecordValidationError(where, [(index, message)])
