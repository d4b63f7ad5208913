"""The per-topic part of ``RecordAccumulator``: a topic's deques of batches (one per
partition, made on first use), its ``TopicPartition`` objects and its sticky partitioner,
all guarded by the topic's lock; and the size bounds ``append`` sizes new batches with.

Written by callers' threads (``append``, under ``TopicQueues.lock``) and the Sender thread
(``ready``/``drain``/re-enqueue, under the same lock); ``queued`` is read without it.
"""

from __future__ import annotations

import collections
import random
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Protocol

from kclient.network.cluster import TopicPartition
from kclient.record import _accel
from kclient.record.layout import HEADER_SIZE
from kclient.sender.batch import Header, ProducerBatch
from kclient.sender.partitioner import StickyPartitioner


class LockLike(Protocol):
    """``threading.Lock``'s API."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...
    def release(self) -> None: ...
    def locked(self) -> bool: ...
    def __enter__(self) -> bool: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
        /,
    ) -> None: ...


BATCH_OVERHEAD = HEADER_SIZE  # 61
RECORD_OVERHEAD_MAX = 21  # varints of a record: length 5 + attrs 1 + ts 10 (bounded) + offset 5
NO_HEADERS: tuple[Header, ...] = ()

make_lock: Callable[[], LockLike] = threading.Lock
"""A topic's lock: the C ``Lock`` the C ``Appender`` takes without a Python call when the
accelerator is built (``threading.Lock``'s API), else ``threading.Lock``."""
if _accel.ACCELERATED:
    from kclient.sender._speedups import Lock as _CLock

    make_lock = _CLock


def estimate_size_upper_bound(
    key: bytes | None, value: bytes | None, headers: Sequence[Header]
) -> int:
    """Java's ``estimateSizeInBytesUpperBound`` for a one-record v2 batch."""
    size = BATCH_OVERHEAD + RECORD_OVERHEAD_MAX
    if key is not None:
        size += len(key)
    if value is not None:
        size += len(value)
    for header_key, header_value in headers:
        size += 10 + len(header_key.encode("utf-8")) + (len(header_value) if header_value else 0)
    return size


class TopicQueuesFields:
    """What the ``Appender`` uses of a topic's queues: its ``lock``, its ``deques``, its
    ``sticky`` partitioner and its ``num_partitions``. ``TopicQueues``' base: with the
    accelerator built, ``kclient.sender._speedups.TopicQueuesFields``, a C struct the C
    ``Appender`` reads directly (kclient/sender/_fields.c); this class is the reference it
    follows."""

    __slots__ = ("deques", "lock", "num_partitions", "sticky")

    lock: LockLike
    deques: _Deques
    sticky: StickyPartitioner
    num_partitions: int


if _accel.ACCELERATED and not TYPE_CHECKING:
    from kclient.sender._speedups import TopicQueuesFields  # the C one


class TopicQueues(TopicQueuesFields):
    """The deques of one topic, indexed by partition, and its sticky partitioner (the
    fields the ``Appender`` uses are ``TopicQueuesFields``')."""

    __slots__ = ("last_batch_ms", "queued", "topic", "tps")

    def __init__(self, topic: str, sticky_batch_size: int, rng: random.Random | None) -> None:
        self.topic = topic
        self.lock = make_lock()
        self.num_partitions = 0
        # Made on first use, so that a topic of 300,000 partitions costs nothing for the
        # partitions never written to; indexing creates (use ``.get`` to only look).
        self.deques = _Deques()
        self.tps: _TopicPartitions = _TopicPartitions(topic)
        self.sticky = StickyPartitioner(sticky_batch_size, rng)
        self.last_batch_ms = -1
        self.queued = 0
        """Batches in this topic's deques (changed under ``lock``; read without it)."""

    def resize(self, num_partitions: int) -> None:
        """Partitions only grow in Kafka; call with the lock held."""
        self.num_partitions = max(self.num_partitions, num_partitions)


class _Deques(dict[int, "collections.deque[ProducerBatch]"]):
    """Partition → its batches, a deque made when a partition is first indexed."""

    __slots__ = ()

    def __missing__(self, partition: int) -> collections.deque[ProducerBatch]:
        dq: collections.deque[ProducerBatch] = collections.deque()
        self[partition] = dq
        return dq


class _TopicPartitions(dict[int, TopicPartition]):
    """Partition → its ``TopicPartition``, made when first indexed (one per partition)."""

    __slots__ = ("topic",)

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic

    def __missing__(self, partition: int) -> TopicPartition:
        tp = self[partition] = TopicPartition(self.topic, partition)
        return tp
