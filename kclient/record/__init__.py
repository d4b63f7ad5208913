"""Record batches, format v2 (magic 2): Kafka's ``DefaultRecordBatch`` and ``MemoryRecordsBuilder``.

Build a batch with :class:`RecordBatchBuilder` (the producer's hot path), read batches with
:func:`iter_batches` / :class:`RecordBatch`, and rewrite the broker-owned header fields in
place with :func:`assign_offsets`, :func:`set_log_append_time`, :func:`set_max_timestamp`
and :func:`set_partition_leader_epoch`. Codecs live in :mod:`kclient.record.compression`;
the broker's record walk in :mod:`kclient.record.check`. No sockets, no threads, no clock.

The per-record hot paths (``RecordBatchBuilder.append``, decoding a batch's records) run in
C when the optional extension :mod:`kclient.record._speedups` is built; ``ACCELERATED``
says whether it is. Set ``KCLIENT_PURE_PYTHON=1`` to run the pure-Python code instead
(same bytes, same errors).
"""

from kclient.record._accel import ACCELERATED
from kclient.record.batch import (
    Record,
    RecordBatch,
    assign_offsets,
    iter_batches,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
    set_producer_state,
)
from kclient.record.builder import RecordBatchBuilder
from kclient.record.compression import CompressionType

__all__ = [
    "ACCELERATED",
    "CompressionType",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "assign_offsets",
    "iter_batches",
    "set_log_append_time",
    "set_max_timestamp",
    "set_partition_leader_epoch",
    "set_producer_state",
]
