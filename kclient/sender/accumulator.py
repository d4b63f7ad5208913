"""RecordAccumulator: Java's ``RecordAccumulator`` — per-partition queues of batches.

Callers' threads ``append`` (under the topic's lock, once per record); the Sender thread
calls ``ready``, ``drain`` (both in ``kclient.sender.drain``), ``expired_batches``,
``reenqueue`` and ``split_and_reenqueue``. ``begin_flush`` / ``await_flush_completion`` run
on the thread calling ``flush``. A topic's deques and sticky partitioner are a
``TopicQueues`` (``kclient.sender.topic_queues``).

Locking: one lock per topic guards that topic's deques and its sticky partitioner. The
common path of ``append`` — the open batch has room — takes only that lock. A new batch
reserves memory from the ``BufferPool`` *outside* the lock (it may block up to
``max.block.ms``), then takes the lock again. Batches are built (encoded, compressed)
by the Sender after they left the deque, outside any lock.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections.abc import Callable, Sequence

from kclient.errors import IllegalStateError
from kclient.network.cluster import Cluster, Node, TopicPartition
from kclient.network.connection_states import ExponentialBackoff
from kclient.record import RecordBatch
from kclient.sender import append_rows
from kclient.sender.appender import Appender, make_appender
from kclient.sender.batch import BatchBuilder, Callback, Header, ProducerBatch
from kclient.sender.buffer_pool import BufferPool
from kclient.sender.drain import BatchDrainer, ReadyCheckResult
from kclient.sender.future import FutureRecordMetadata
from kclient.sender.idempotence import TransactionManager
from kclient.sender.incomplete import IncompleteBatches
from kclient.sender.topic_queues import (
    BATCH_OVERHEAD,
    NO_HEADERS,
    TopicQueues,
)

log = logging.getLogger(__name__)

_ZERO = (0,)


def split_target_bytes(batch: ProducerBatch, batch_size: int) -> int:
    """The size of the batches a refused (MESSAGE_TOO_LARGE) batch is split into: at most
    ``batch.size`` and at most half the refused batch, so that every split shrinks."""
    size = batch.uncompressed_bytes or batch.estimated_size_bytes
    return max(1, min(batch_size, size // 2))


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
        wall_time_ns: Callable[[], int] = time.time_ns,
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
        self._wall_time_ns = wall_time_ns
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
        self._drainer = BatchDrainer(transaction_manager)
        self.appender: Appender = make_appender(wall_time_ns)
        """The common case of ``append`` (an open batch with room), in C when built."""
        self.wakeup: Callable[[], object] = lambda: None
        """Called (outside locks) when a new batch was created: the Sender may need to run."""

    @property
    def closed(self) -> bool:
        """Set when the producer closes (any thread); ``append`` then raises."""
        return self.appender.closed

    @closed.setter
    def closed(self, closed: bool) -> None:
        self.appender.closed = closed

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
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: Callback | None,
        max_block_ms: int,
        size_estimate: int,
    ) -> FutureRecordMetadata:
        """Add a record; ``partition`` -1 means the topic's sticky partition, a
        ``timestamp_ms`` of None now by ``wall_time_ns``.

        ``size_estimate`` is the record's upper-bound size as a one-record batch (sizes a
        new batch, and counts towards the sticky partition's bytes). Returns the record's
        future. Blocks only when a new batch needs memory and ``buffer.memory`` is full.
        """
        future = self.appender.append(
            queues, partition, timestamp_ms, key, value, headers, callback, size_estimate
        )
        if future is not None:
            return future
        if headers is None:
            headers = NO_HEADERS
        if timestamp_ms is None:
            timestamp_ms = self._wall_time_ns() // 1_000_000
        return self._append_new_batch(
            queues,
            partition,
            timestamp_ms,
            key,
            value,
            headers,
            callback,
            max_block_ms,
            size_estimate,
        )

    #: ``send_batch``'s rows ``start``..``stop - 1`` (``kclient.sender.append_rows``).
    append_bulk = append_rows.append_bulk

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
        return self._open_batch(
            queues, partition, timestamp_ms, key, value, headers, callback, size, size_estimate
        )

    def open_batch_now(  # noqa: PLR0917 (the C send_open calls it positionally)
        self,
        queues: TopicQueues,
        partition: int,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header] | None,
        callback: Callback | None,
        size_estimate: int,
    ) -> FutureRecordMetadata | None:
        """``Appender.send_open``'s record when the open batch had no room: appended as
        ``append`` would, if ``buffer.memory`` has room for a new batch now; else None,
        nothing done (``send``'s general way then waits up to ``max.block.ms``)."""
        size = max(self.batch_size, size_estimate)
        if not self.pool.try_allocate(size):
            return None
        if timestamp_ms is None:
            timestamp_ms = self._wall_time_ns() // 1_000_000
        return self._open_batch(
            queues,
            partition,
            timestamp_ms,
            key,
            value,
            NO_HEADERS if headers is None else headers,
            callback,
            size,
            size_estimate,
        )

    def _open_batch(  # noqa: PLR0917
        self,
        queues: TopicQueues,
        partition: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[Header],
        callback: Callback | None,
        size: int,
        size_estimate: int,
    ) -> FutureRecordMetadata:
        """The record in the partition's open batch, or in a new one taking the ``size``
        bytes just reserved (given back when not used)."""
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
        # Every batch is ready at once when memory is short, or on flush and close.
        all_ready = (
            self.pool.queued > 0
            or self._flushes_in_progress > 0
            or self.closed
            or (self._tm is not None and self._tm.is_completing)  # commit/abort: send all now
        )
        return self._drainer.ready(
            self._topics, cluster, now_ms, self.linger_ms, self.delivery_timeout_ms, all_ready
        )

    def drain(
        self, cluster: Cluster, nodes: Sequence[Node], max_request_size: int, now_ms: int
    ) -> dict[int, list[ProducerBatch]]:
        """Closed batches per node id: at most one per partition, up to ``max_request_size``.

        Each node starts where its previous drain stopped, so no partition starves.
        """
        return self._drainer.drain(self._topics, cluster, nodes, max_request_size, now_ms)

    @property
    def more_ready(self) -> bool:
        """Set by ``drain`` when it left batches behind (request full, or more per partition)."""
        return self._drainer.more_ready

    def mute(self, tp: TopicPartition) -> None:
        """max.in.flight=1 without idempotence: one batch per partition at a time."""
        self._drainer.muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        self._drainer.muted.discard(tp)

    # ---- retries, splits, expiry (Sender thread) -------------------------------------------

    def reenqueue(self, batch: ProducerBatch, now_ms: int, skip_backoff: bool = False) -> None:
        """Put a batch back for a retry, after its backoff, in creation order.
        ``skip_backoff``: its partition has a new leader, so the retry goes there at once
        (KIP-951; Java skips the backoff of a batch whose leader changed)."""
        backoff_ms = 0 if skip_backoff else self._retry_backoff.backoff_ms(batch.attempts)
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
        if now_ms < self._drainer.next_expiry_ms:
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
