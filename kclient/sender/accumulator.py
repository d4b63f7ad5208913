"""RecordAccumulator: Java's ``RecordAccumulator`` — per-partition queues of batches.

Callers' threads ``append`` (under the topic's lock, once per record); the Sender thread
calls ``ready``, ``drain``, ``expired_batches``, ``reenqueue`` and ``split_and_reenqueue``.
``begin_flush`` / ``await_flush_completion`` run on the thread calling ``flush``.

Locking: one lock per topic guards that topic's deques and its sticky partitioner. The
common path of ``append`` — the open batch has room — takes only that lock. A new batch
reserves memory from the ``BufferPool`` *outside* the lock (it may block up to
``max.block.ms``), then takes the lock again. Batches are built (encoded, compressed)
by the Sender after they left the deque, outside any lock.
"""

from __future__ import annotations

import collections
import itertools
import logging
import random
import threading
import time
from array import array
from collections.abc import Callable, Iterable, MutableSequence, Sequence
from operator import itemgetter
from typing import NamedTuple

from kclient.errors import IllegalStateError, KafkaTimeoutError
from kclient.network.cluster import Cluster, Node, PartitionInfo, TopicPartition
from kclient.network.connection_states import ExponentialBackoff
from kclient.record import RecordBatch
from kclient.record.layout import HEADER_SIZE
from kclient.sender.batch import (
    BatchBuilder,
    Callback,
    Header,
    ProducerBatch,
)
from kclient.sender.buffer_pool import BufferPool
from kclient.sender.columns import group_rows
from kclient.sender.future import FutureRecordMetadata, ProduceResult
from kclient.sender.idempotence import TransactionManager
from kclient.sender.incomplete import IncompleteBatches
from kclient.sender.partitioner import StickyPartitioner

log = logging.getLogger(__name__)

BATCH_OVERHEAD = HEADER_SIZE  # 61
RECORD_OVERHEAD_MAX = 21  # varints of a record: length 5 + attrs 1 + ts 10 (bounded) + offset 5
_NO_HEADERS: tuple[Header, ...] = ()
_ZERO = (0,)
_new_object = object.__new__
_FEW_PENDING = 8
_MANY_PARTITIONS = 8
"""At most ``_FEW_PENDING`` batches queued, over more than ``_MANY_PARTITIONS`` partitions
of a node: drain visits only the partitions holding them."""
_first = itemgetter(0)


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


def split_target_bytes(batch: ProducerBatch, batch_size: int) -> int:
    """The size of the batches a refused (MESSAGE_TOO_LARGE) batch is split into: at most
    ``batch.size`` and at most half the refused batch, so that every split shrinks."""
    size = batch.uncompressed_bytes or batch.estimated_size_bytes
    return max(1, min(batch_size, size // 2))


class ReadyCheckResult(NamedTuple):
    """Java's ``ReadyCheckResult``.

    ``next_ready_check_delay_ms`` also covers the next delivery-timeout expiry, so the
    Sender wakes up to fail expired batches even when no leader is known.
    """

    ready_nodes: set[Node]
    next_ready_check_delay_ms: int
    unknown_leader_topics: frozenset[str] | set[str] = frozenset()


class TopicQueues:
    """The deques of one topic, indexed by partition, and its sticky partitioner."""

    __slots__ = (
        "deques",
        "last_batch_ms",
        "lock",
        "num_partitions",
        "queued",
        "sticky",
        "topic",
        "tps",
    )

    def __init__(self, topic: str, sticky_batch_size: int, rng: random.Random | None) -> None:
        self.topic = topic
        self.lock = threading.Lock()
        self.num_partitions = 0
        # Made on first use, so that a topic of 300,000 partitions costs nothing for the
        # partitions never written to; indexing creates (use ``.get`` to only look).
        self.deques: _Deques = _Deques()
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


class RecordAccumulator:
    """Batches records per partition and hands ready batches to the Sender."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        delivery_timeout_ms: int,
        pool: BufferPool,
        builder_factory: Callable[[int], BatchBuilder],
        transaction_manager: TransactionManager | None = None,
        monotonic_ms: Callable[[], int] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.pool = pool
        self._new_builder = builder_factory
        self._tm = transaction_manager
        self._monotonic_ms = monotonic_ms or (lambda: time.monotonic_ns() // 1_000_000)
        self._rng = rng or random.Random()
        self._retry_backoff = ExponentialBackoff(
            min(retry_backoff_ms, retry_backoff_max_ms), 2, retry_backoff_max_ms, 0.2, self._rng
        )
        self._topics: dict[str, TopicQueues] = {}
        self._topics_lock = threading.Lock()
        self.incomplete = IncompleteBatches()
        self._batch_ids = itertools.count(1)
        self._flushes_in_progress = 0
        self._flush_lock = threading.Lock()
        self._drain_index: dict[int, int] = {}
        # node id → (topic, partition) → index in cluster.partitions_for_node, for the cluster
        # last drained with (drain's few-pending-batches path)
        self._positions_cluster: Cluster | None = None
        self._positions: dict[int, dict[tuple[str, int], int]] = {}
        self._next_expiry_ms = 0  # by ready(): when the oldest queued batch expires
        self._muted: set[TopicPartition] = set()
        self.closed = False
        self.more_ready = False
        """Set by ``drain`` when it left batches behind (request full, or more per partition)."""
        self.wakeup: Callable[[], object] = lambda: None
        """Called (outside locks) when a new batch was created: the Sender may need to run."""

    # ---- topics ------------------------------------------------------------------------

    def topic_queues(self, topic: str) -> TopicQueues:
        queues = self._topics.get(topic)
        if queues is None:
            with self._topics_lock:
                queues = self._topics.get(topic)
                if queues is None:
                    queues = TopicQueues(topic, self.batch_size, self._rng)
                    self._topics = {**self._topics, topic: queues}  # copy on write
        return queues

    def update_cluster(self, cluster: Cluster) -> None:
        """New metadata: partition counts and the partitions the sticky partitioner may use."""
        for queues in self._topics.values():
            self.update_topic(queues, cluster)

    @staticmethod
    def update_topic(queues: TopicQueues, cluster: Cluster) -> None:
        count = cluster.partition_count_for_topic(queues.topic)
        if not count:
            return
        available = [
            info.partition for info in cluster.available_partitions_for_topic(queues.topic)
        ]
        with queues.lock:
            queues.resize(count)
            queues.sticky.update_partitions(queues.num_partitions, available)

    # ---- append (callers' threads) -------------------------------------------------------

    def append(  # noqa: PLR0917 (the per-record hot path passes positionally)
        self,
        queues: TopicQueues,
        partition: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: Callback | None,
        max_block_ms: int,
        size_estimate: int,
    ) -> FutureRecordMetadata:
        """Add a record; ``partition`` -1 means the topic's sticky partition.

        ``size_estimate`` is the record's upper-bound size as a one-record batch (sizes a
        new batch, and counts towards the sticky partition's bytes). Returns the record's
        future. Blocks only when a new batch needs memory and ``buffer.memory`` is full.
        """
        if headers is None:
            headers = _NO_HEADERS
        lock = queues.lock
        lock.acquire()  # not ``with``: acquire, try/finally, release costs half as much
        try:
            if self.closed:
                raise IllegalStateError("cannot send after the producer is closed")
            sticky = queues.sticky if partition < 0 else None
            if sticky is not None:
                partition = sticky.partition
            dq = queues.deques[partition]
            if dq:
                # the common case, inlined: the open batch has room (ProducerBatch.try_append)
                batch = dq[-1]
                delta = batch._append(timestamp_ms, key, value, headers)
                if delta >= 0:
                    # FutureRecordMetadata(batch.result, delta, timestamp_ms, key size,
                    # value size), its slots set here: a third of the cost of __init__
                    future = _new_object(FutureRecordMetadata)
                    future._produce_result = batch.result
                    future._offset_delta = delta
                    future._timestamp_ms = timestamp_ms
                    future._key_size = -1 if key is None else len(key)
                    future._value_size = -1 if value is None else len(value)
                    if callback is not None:
                        batch.add_callback(future, callback)
                    if sticky is not None:
                        produced = sticky.produced_bytes + size_estimate - BATCH_OVERHEAD
                        sticky.produced_bytes = produced
                        if produced >= sticky.sticky_bytes:
                            sticky.maybe_switch(batch)
                    return future
        finally:
            lock.release()
        return self._append_new_batch(
            queues,
            -1 if sticky is not None else partition,
            timestamp_ms,
            key,
            value,
            headers,
            callback,
            max_block_ms,
            size_estimate,
        )

    def append_bulk(  # noqa: PLR0917 (send_batch's call passes positionally)
        self,
        queues: TopicQueues,
        partitions: MutableSequence[int] | None,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        start: int,
        stop: int,
        results: list[ProduceResult | None],
        deltas: MutableSequence[int],
        max_block_ms: int,
    ) -> KafkaTimeoutError | None:
        """``send_batch``'s rows ``start``..``stop - 1``: each to its partition
        (``partitions[row]``, or -1 / ``partitions`` None: the topic's sticky partition),
        recording its batch result and offset delta. Rows are grouped by partition (order
        kept within each; keyless rows among keyed ones are given their sticky partition
        first, ``StickyPartitioner.assign``); each group fills the open batch in one call
        to the builder's ``append_rows`` (C), and the row that opens a new batch goes
        through ``append``, which waits for memory if need be. Returns None when every row
        went, or the ``KafkaTimeoutError`` that stopped it (``buffer.memory`` stayed full
        for ``max_block_ms``: the rows left have no result). The caller has checked the
        rows' types and sizes."""
        if partitions is not None:
            sticky_rows = partitions[start:stop].count(-1)
            if sticky_rows == stop - start:
                partitions = None  # every row sticky, in order
            elif sticky_rows:
                # keyless rows among keyed ones: they get their sticky partitions now, so
                # that each partition's rows stay in row order whichever group they came from
                with queues.lock:
                    assign = queues.sticky.assign
                    for row in range(start, stop):
                        if partitions[row] < 0:
                            key = None if keys is None else keys[row]
                            value = values[row]
                            size = estimate_size_upper_bound(key, value, _NO_HEADERS)
                            partitions[row] = assign(size - BATCH_OVERHEAD)
        if partitions is None:
            return self._append_group(
                queues, -1, None, start, stop, timestamps, keys, values, results, deltas,
                max_block_ms,
            )  # fmt: skip
        order = array("q", _ZERO) * (stop - start)
        for partition, first, last in group_rows(partitions, start, stop, order):
            error = self._append_group(
                queues,
                partition,
                order,
                first,
                last,
                timestamps,
                keys,
                values,
                results,
                deltas,
                max_block_ms,
            )
            if error is not None:
                return error
        return None

    def _append_group(  # noqa: PLR0917
        self,
        queues: TopicQueues,
        partition: int,
        rows: Sequence[int] | None,
        first: int,
        last: int,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        results: list[ProduceResult | None],
        deltas: MutableSequence[int],
        max_block_ms: int,
    ) -> KafkaTimeoutError | None:
        i = first
        while i < last:
            with queues.lock:
                if self.closed:
                    raise IllegalStateError("cannot send after the producer is closed")
                sticky = queues.sticky if partition < 0 else None
                dq = queues.deques[sticky.partition if sticky is not None else partition]
                batch = dq[-1] if dq else None
                if batch is not None and batch.records is None:  # open: fill it
                    builder = batch.builder
                    before = builder.size_in_bytes
                    i += builder.append_rows(
                        timestamps, keys, values, rows, i, last, results, deltas, batch.result
                    )
                    if sticky is not None:
                        sticky.produced_bytes += builder.size_in_bytes - before
                        if sticky.produced_bytes >= sticky.sticky_bytes:
                            sticky.maybe_switch(batch)
                    if i >= last:
                        return None
            # this row opens a new batch (possibly on another sticky partition)
            row = i if rows is None else rows[i]
            key = None if keys is None else keys[row]
            value = values[row]
            size = estimate_size_upper_bound(key, value, _NO_HEADERS)
            try:
                future = self.append(
                    queues, partition, timestamps[row], key, value, None, None, max_block_ms, size
                )
            except KafkaTimeoutError as exc:
                return exc
            results[row] = future._produce_result
            deltas[row] = future._offset_delta
            i += 1
        return None

    def _append_new_batch(  # noqa: PLR0917
        self,
        queues: TopicQueues,
        partition: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        callback: Callback | None,
        max_block_ms: int,
        size_estimate: int,
    ) -> FutureRecordMetadata:
        size = max(self.batch_size, size_estimate)
        self.pool.allocate(size, max_block_ms)
        reserved = size
        try:
            with queues.lock:
                if self.closed:
                    raise IllegalStateError("cannot send after the producer is closed")
                sticky = queues.sticky if partition < 0 else None
                if sticky is not None:
                    partition = sticky.partition
                dq = queues.deques[partition]
                batch = dq[-1] if dq else None
                future = (
                    batch.try_append(timestamp_ms, key, value, headers, callback)
                    if batch is not None
                    else None
                )
                if future is None:  # no other thread made room meanwhile: a new batch
                    batch_id = next(self._batch_ids)
                    batch = ProducerBatch(
                        queues.tps[partition],
                        self._new_builder(size),
                        self._monotonic_ms(),
                        size,
                        batch_id,
                    )
                    future = batch.try_append(timestamp_ms, key, value, headers, callback)
                    if future is None:
                        raise IllegalStateError(f"an empty batch for {batch.tp} refused a record")
                    dq.append(batch)
                    queues.queued += 1
                    reserved = 0
                    if self._tm is not None and self._tm.is_transactional:
                        self._tm.maybe_add_partition(batch.tp)
                    queues.last_batch_ms = batch.created_ms
                    self.incomplete.add(batch)
                if sticky is not None:
                    sticky.produced_bytes += size_estimate - BATCH_OVERHEAD
                    if sticky.produced_bytes >= sticky.sticky_bytes:
                        sticky.maybe_switch(batch)  # type: ignore[arg-type]
        finally:
            if reserved:
                self.pool.deallocate(reserved)
        if not reserved:
            self.wakeup()
        return future

    # ---- ready / drain (Sender thread) ---------------------------------------------------

    def ready(self, cluster: Cluster, now_ms: int) -> ReadyCheckResult:
        """Which nodes have something to send now, and when to check again."""
        ready_nodes: set[Node] = set()
        unknown: set[str] = set()
        delivery_timeout_ms = self.delivery_timeout_ms
        linger_ms = self.linger_ms
        next_delay_ms = next_expiry_ms = delivery_timeout_ms
        # Every batch is ready at once when memory is short, or on flush and close.
        all_ready = (
            self.pool.queued > 0
            or self._flushes_in_progress > 0
            or self.closed
            or (self._tm is not None and self._tm.is_completing)  # commit/abort: send all now
        )
        muted = self._muted
        leaders = cluster.leaders_by_partition()
        for queues in self._topics.values():
            if not queues.queued:
                continue
            with queues.lock:
                tps = queues.tps
                for index, dq in queues.deques.items():
                    if not dq:
                        continue
                    batch = dq[0]
                    created_ms = batch.created_ms
                    expiry_ms = created_ms + delivery_timeout_ms - now_ms
                    if expiry_ms < next_expiry_ms:  # noqa: PLR1730 -- min() is a call
                        next_expiry_ms = expiry_ms
                    tp = tps[index]
                    leader = leaders.get(tp)
                    if leader is None:
                        unknown.add(tp.topic)
                        continue
                    if leader in ready_nodes or (muted and tp in muted):
                        continue
                    if batch.in_retry:
                        if batch.retry_at_ms > now_ms:
                            next_delay_ms = min(next_delay_ms, batch.retry_at_ms - now_ms)
                            continue
                        ready_nodes.add(leader)
                        continue
                    waited_ms = now_ms - created_ms
                    if (
                        waited_ms >= linger_ms
                        or all_ready
                        or len(dq) > 1
                        or batch.builder.is_full()
                    ):
                        ready_nodes.add(leader)
                    else:
                        next_delay_ms = min(next_delay_ms, linger_ms - waited_ms)
        self._next_expiry_ms = now_ms + next_expiry_ms
        return ReadyCheckResult(ready_nodes, max(min(next_delay_ms, next_expiry_ms), 0), unknown)

    def drain(
        self, cluster: Cluster, nodes: Sequence[Node], max_request_size: int, now_ms: int
    ) -> dict[int, list[ProducerBatch]]:
        """Closed batches per node id: at most one per partition, up to ``max_request_size``.

        Each node starts where its previous drain stopped, so no partition starves.
        """
        drained: dict[int, list[ProducerBatch]] = {}
        self.more_ready = False
        for node in nodes:
            batches = self._drain_node(cluster, node, max_request_size, now_ms)
            if batches:
                drained[node.id] = batches
        return drained

    def _drain_node(
        self, cluster: Cluster, node: Node, max_request_size: int, now_ms: int
    ) -> list[ProducerBatch]:
        parts = cluster.partitions_for_node(node.id)
        if not parts:
            return []
        ready: list[ProducerBatch] = []
        size = 0
        count = len(parts)
        start = self._drain_index.get(node.id, 0) % count if count > 1 else 0
        tm = self._tm
        muted = self._muted
        topics = self._topics
        # Batches queued anywhere when the walk starts: once each is drained, every partition
        # left would be skipped, so the walk stops early.
        pending = 0
        for topic_queues in topics.values():
            pending += topic_queues.queued
        if not pending:
            self._drain_index[node.id] = (start + 1) % count
            return []
        walk: Iterable[tuple[int, PartitionInfo]]
        if pending <= _FEW_PENDING and count > _MANY_PARTITIONS:
            # One pending batch among hundreds of partitions is the common case at linger 0:
            # visit only the partitions holding batches, in the order of the full walk.
            walk = self._pending_steps(cluster, node.id, parts, start)
        else:
            walk = enumerate(parts[start:] + parts[:start] if start else parts)
        for step, info in walk:
            queues = topics.get(info.topic)
            if queues is None or not queues.queued:
                continue
            partition = info.partition
            if muted and (info.topic, partition) in muted:
                continue
            with queues.lock:
                dq = queues.deques.get(partition)
                if not dq:
                    continue
                first = dq[0]
                if first.in_retry and first.retry_at_ms > now_ms:
                    continue
                if ready and size + first.estimated_size_bytes > max_request_size:
                    self.more_ready = True
                    self._drain_index[node.id] = (start + step) % count
                    return self._close_all(ready)
                if tm is not None and not tm.can_send(queues.tps[partition], first):
                    continue
                batch = dq.popleft()
                queues.queued -= 1
                if dq:
                    self.more_ready = True
                if tm is not None:
                    tm.assign_sequence(batch)
            size += batch.estimated_size_bytes
            batch.drained_ms = max(batch.drained_ms, now_ms)
            ready.append(batch)
            pending -= 1
            if pending <= 0:
                break
        self._drain_index[node.id] = (start + 1) % count
        return self._close_all(ready)

    def _pending_steps(
        self, cluster: Cluster, node_id: int, parts: Sequence[PartitionInfo], start: int
    ) -> list[tuple[int, PartitionInfo]]:
        """(step of the full walk from ``start``, partition) for the node's partitions whose
        deques hold batches, in walk order: the only steps of that walk that drain anything."""
        if cluster is not self._positions_cluster:
            self._positions_cluster = cluster
            self._positions = {}
        positions = self._positions.get(node_id)
        if positions is None:
            positions = self._positions[node_id] = {
                (info.topic, info.partition): i for i, info in enumerate(parts)
            }
        count = len(parts)
        steps: list[tuple[int, PartitionInfo]] = []
        for topic, queues in self._topics.items():
            if not queues.queued:
                continue
            with queues.lock:
                held = [partition for partition, dq in queues.deques.items() if dq]
            for partition in held:
                position = positions.get((topic, partition))
                if position is not None:
                    steps.append(((position - start) % count, parts[position]))
        steps.sort(key=_first)
        return steps

    @staticmethod
    def _close_all(batches: list[ProducerBatch]) -> list[ProducerBatch]:
        for batch in batches:
            batch.close()
        return batches

    def mute(self, tp: TopicPartition) -> None:
        """max.in.flight=1 without idempotence: one batch per partition at a time."""
        self._muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        self._muted.discard(tp)

    # ---- retries, splits, expiry (Sender thread) -------------------------------------------

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put a batch back for a retry, after its backoff, in creation order."""
        backoff_ms = self._retry_backoff.backoff_ms(batch.attempts)
        batch.reenqueued(now_ms, backoff_ms)
        self._insert_in_order(batch)

    def _insert_in_order(self, batch: ProducerBatch) -> None:
        queues = self.topic_queues(batch.tp.topic)
        with queues.lock:
            queues.resize(batch.tp.partition + 1)
            dq = queues.deques[batch.tp.partition]
            index = len(dq)
            for position, other in enumerate(dq):
                if other.order > batch.order:
                    index = position
                    break
            dq.insert(index, batch)
            queues.queued += 1

    def split_and_reenqueue(self, batch: ProducerBatch, now_ms: int) -> list[ProducerBatch]:
        """MESSAGE_TOO_LARGE: re-batch into smaller pieces, first in line again.

        The pieces hold at most ``batch.size`` and at most half the failed batch's
        (uncompressed) size, so each split makes strictly smaller batches: a batch the
        broker refuses although it is under ``batch.size`` is not rebuilt as is, and
        repeated refusals end with one record per batch (which then fails).
        """
        data = batch.close()
        records = [(r.timestamp, r.key, r.value, r.headers) for r in RecordBatch(data).records()]
        target = split_target_bytes(batch, self.batch_size)
        children = batch.split(lambda: self._new_builder(target), records)
        if children:
            children[0].reserved_bytes = batch.reserved_bytes
        batch.reserved_bytes = 0
        if self._tm is not None:
            self._tm.on_split(batch, children)
        self.incomplete.replace(batch, children)
        for child in children:
            child.in_retry = True
            self._insert_in_order(child)
        return children

    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches older than ``delivery.timeout.ms``.

        Only looks when ``ready`` (called first in each Sender iteration) saw one due.
        """
        expired: list[ProducerBatch] = []
        if now_ms < self._next_expiry_ms:
            return expired
        limit_ms = self.delivery_timeout_ms
        for queues in self._topics.values():
            if not queues.queued:
                continue
            with queues.lock:
                for dq in queues.deques.values():
                    while dq and dq[0].has_reached_delivery_timeout(limit_ms, now_ms):
                        expired.append(dq.popleft())
                        queues.queued -= 1
        return expired

    # ---- completion, flush, close ------------------------------------------------------------

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch is done: forget it and give its memory back (Sender thread)."""
        self.incomplete.remove(batch)
        if batch.reserved_bytes:
            reserved, batch.reserved_bytes = batch.reserved_bytes, 0
            self.pool.deallocate(reserved)

    def begin_flush(self) -> int:
        """Make every batch ready now; returns the id of the newest batch to wait for."""
        with self._flush_lock:
            self._flushes_in_progress += 1
        return self.incomplete.last_batch_id

    def end_flush(self) -> None:
        with self._flush_lock:
            self._flushes_in_progress -= 1

    def await_flush_completion(self, up_to_batch_id: int, timeout_s: float | None) -> bool:
        """Wait until every batch created up to ``up_to_batch_id`` completed (False on
        timeout); split batches count as their original."""
        return self.incomplete.await_completion(up_to_batch_id, timeout_s)

    def has_undrained(self) -> bool:
        """Whether any batch is queued (a lock-free read of per-topic counters)."""
        for queues in self._topics.values():  # noqa: SIM110 -- any() + a generator costs more
            if queues.queued:
                return True
        return False

    def has_incomplete(self) -> bool:
        return bool(self.incomplete)

    def incomplete_batches(self) -> list[ProducerBatch]:
        return self.incomplete.copy()

    def topics_in_use(self, since_ms: int) -> list[str]:
        """Topics that got a new batch since ``since_ms`` (kept alive in the metadata)."""
        return [topic for topic, queues in self._topics.items() if queues.last_batch_ms >= since_ms]

    def abort_undrained(self) -> list[ProducerBatch]:
        """Remove every queued batch (close without waiting) and return them."""
        aborted: list[ProducerBatch] = []
        for queues in self._topics.values():
            with queues.lock:
                for dq in queues.deques.values():
                    aborted.extend(dq)
                    dq.clear()
                queues.queued = 0
        return aborted
