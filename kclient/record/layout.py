"""The RecordBatch v2 (magic 2) byte layout: Kafka's ``DefaultRecordBatch`` / ``DefaultRecord``.

One place for offsets, precompiled structs and attribute bits, shared by the builder
(``MemoryRecordsBuilder``) and the reader (``DefaultRecordBatch``). Constants only: any thread.
"""

from __future__ import annotations

import struct

# RecordBatch (all integers big-endian; 61 bytes of header, then the records):
#   offset  size
#    0      int64   baseOffset            offset of the first record (the broker assigns it)
#    8      int32   batchLength           bytes after this field: 49 + len(records section)
#   12      int32   partitionLeaderEpoch  set by the broker; outside the CRC
#   16      int8    magic                 2
#   17      uint32  crc                   CRC-32C (Castagnoli) of bytes 21..end
#   21      int16   attributes            bits 0-2 codec, 3 timestamp type (1 = LogAppendTime),
#                                         4 transactional, 5 control; others 0
#   23      int32   lastOffsetDelta       offset delta of the last record
#   27      int64   baseTimestamp         timestamp of the first record
#   35      int64   maxTimestamp          greatest record timestamp (or the log append time)
#   43      int64   producerId            -1 without idempotence
#   51      int16   producerEpoch         -1 without idempotence
#   53      int32   baseSequence          -1 without idempotence
#   57      int32   records count
#   61      records (compressed as one block when the codec is not none)
#
# Record (every integer a zig-zag varint / varlong; a length of -1 means null):
#   length varint (bytes after this field) | attributes int8 (unused, 0)
#   | timestampDelta varlong | offsetDelta varint | keyLength varint | key
#   | valueLength varint | value | headers count varint
#   | per header: keyLength varint | key (UTF-8) | valueLength varint | value
HEADER = struct.Struct(
    ">"
    "q"  # baseOffset
    "i"  # batchLength
    "i"  # partitionLeaderEpoch
    "b"  # magic
    "I"  # crc
    "h"  # attributes
    "i"  # lastOffsetDelta
    "q"  # baseTimestamp
    "q"  # maxTimestamp
    "q"  # producerId
    "h"  # producerEpoch
    "i"  # baseSequence
    "i"  # records count
)
HEADER_SIZE = HEADER.size  # 61
# The same header in two halves around the start of the CRC-covered part (byte 21).
HEADER_PREFIX = struct.Struct(">qiibI")  # baseOffset .. crc
HEADER_TAIL = struct.Struct(">hiqqqhii")  # attributes .. records count
LOG_OVERHEAD = 12  # baseOffset + batchLength: the bytes not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: an empty records section

BASE_OFFSET = struct.Struct(">q")  # at 0
LENGTH_PREFIX = struct.Struct(">qi")  # baseOffset, batchLength at 0
PARTITION_LEADER_EPOCH = struct.Struct(">i")  # at 12
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC = struct.Struct(">I")
CRC_OFFSET = 17
ATTRIBUTES = struct.Struct(">h")
ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end of the batch
MAX_TIMESTAMP = struct.Struct(">q")
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_STATE = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence
PRODUCER_STATE_OFFSET = 43

MAGIC = 2
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

CREATE_TIME = 0
LOG_APPEND_TIME = 1

MIN_RECORD_SIZE = 7  # length, attributes, timestamp, offset, key, value, header count
