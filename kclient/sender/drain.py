"""The Sender's side of ``RecordAccumulator``: Java's ``ready`` and ``drain``.

``BatchDrainer.ready`` tells which nodes lead a partition with a sendable batch (lingered
long enough, full, more than one queued, a retry past its backoff, or everything on
flush/close/short memory) and when to look again; ``drain`` takes at most one batch per
partition per node, up to the request size, starting each node where its last drain
stopped so no partition starves. Sender thread only; it takes each topic's lock while it
looks at that topic's deques.

Compiled with mypyc in the accelerated build (``kclient/_compiled.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from operator import itemgetter
from typing import NamedTuple

from kclient.network.cluster import Cluster, Node, PartitionInfo, TopicPartition
from kclient.sender.batch import ProducerBatch
from kclient.sender.idempotence import TransactionManager
from kclient.sender.topic_queues import TopicQueues

_FEW_PENDING = 8
_MANY_PARTITIONS = 8
"""At most ``_FEW_PENDING`` batches queued, over more than ``_MANY_PARTITIONS`` partitions
of a node: drain visits only the partitions holding them."""
_first = itemgetter(0)


class ReadyCheckResult(NamedTuple):
    """Java's ``ReadyCheckResult``.

    ``next_ready_check_delay_ms`` also covers the next delivery-timeout expiry, so the
    Sender wakes up to fail expired batches even when no leader is known.
    """

    ready_nodes: set[Node]
    next_ready_check_delay_ms: int
    unknown_leader_topics: frozenset[str] | set[str] = frozenset()


class BatchDrainer:
    """Ready checks and drains over the accumulator's topics; remembers where each node's
    drain stopped, the muted partitions, and when the oldest queued batch expires."""

    def __init__(self, transaction_manager: TransactionManager | None) -> None:
        self._tm = transaction_manager
        self._drain_index: dict[int, int] = {}
        # node id → (topic, partition) → index in cluster.partitions_for_node, for the cluster
        # last drained with (drain's few-pending-batches path)
        self._positions_cluster: Cluster | None = None
        self._positions: dict[int, dict[tuple[str, int], int]] = {}
        self.muted: set[TopicPartition] = set()
        self.next_expiry_ms = 0
        """By ``ready``: when the oldest queued batch reaches ``delivery.timeout.ms``."""
        self.more_ready = False
        """Set by ``drain`` when it left batches behind (request full, or more per partition)."""

    def ready(  # noqa: PLR0917
        self,
        topics: Mapping[str, TopicQueues],
        cluster: Cluster,
        now_ms: int,
        linger_ms: int,
        delivery_timeout_ms: int,
        all_ready: bool,
    ) -> ReadyCheckResult:
        """Which nodes have something to send now, and when to check again; ``all_ready``:
        every batch is ready at once (memory short, flush, close, transaction completing)."""
        ready_nodes: set[Node] = set()
        unknown: set[str] = set()
        next_delay_ms = next_expiry_ms = delivery_timeout_ms
        muted = self.muted
        leaders = cluster.leaders_by_partition()
        for queues in topics.values():
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
        self.next_expiry_ms = now_ms + next_expiry_ms
        return ReadyCheckResult(ready_nodes, max(min(next_delay_ms, next_expiry_ms), 0), unknown)

    def drain(
        self,
        topics: Mapping[str, TopicQueues],
        cluster: Cluster,
        nodes: Sequence[Node],
        max_request_size: int,
        now_ms: int,
    ) -> dict[int, list[ProducerBatch]]:
        """Closed batches per node id: at most one per partition, up to ``max_request_size``.

        Each node starts where its previous drain stopped, so no partition starves.
        """
        drained: dict[int, list[ProducerBatch]] = {}
        self.more_ready = False
        for node in nodes:
            batches = self._drain_node(topics, cluster, node, max_request_size, now_ms)
            if batches:
                drained[node.id] = batches
        return drained

    def _drain_node(
        self,
        topics: Mapping[str, TopicQueues],
        cluster: Cluster,
        node: Node,
        max_request_size: int,
        now_ms: int,
    ) -> list[ProducerBatch]:
        parts = cluster.partitions_for_node(node.id)
        if not parts:
            return []
        ready: list[ProducerBatch] = []
        size = 0
        count = len(parts)
        start = self._drain_index.get(node.id, 0) % count if count > 1 else 0
        muted = self.muted
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
            walk = self._pending_steps(topics, cluster, node.id, parts, start)
        else:
            walk = enumerate(parts[start:] + parts[:start] if start else parts)
        for step, info in walk:
            queues = topics.get(info.topic)
            if queues is None or not queues.queued:
                continue
            partition = info.partition
            if muted and (info.topic, partition) in muted:
                continue
            room = max_request_size - size if ready else None
            with queues.lock:
                taken = self._take_first(queues, partition, room, now_ms)
            if not isinstance(taken, ProducerBatch):
                if taken:  # it does not fit: this request is full
                    self.more_ready = True
                    self._drain_index[node.id] = (start + step) % count
                    return _close_all(ready)
                continue
            batch = taken
            size += batch.estimated_size_bytes
            batch.drained_ms = max(batch.drained_ms, now_ms)
            ready.append(batch)
            pending -= 1
            if pending <= 0:
                break
        self._drain_index[node.id] = (start + 1) % count
        return _close_all(ready)

    def _take_first(
        self, queues: TopicQueues, partition: int, room: int | None, now_ms: int
    ) -> ProducerBatch | bool:
        """The first batch of the partition's deque, taken (the caller holds the topic's
        lock); False when there is none to send now, True when it is larger than ``room``
        bytes (None: any size fits)."""
        dq = queues.deques.get(partition)
        if not dq:
            return False
        first = dq[0]
        if first.in_retry and first.retry_at_ms > now_ms:
            return False
        if room is not None and first.estimated_size_bytes > room:
            return True
        tm = self._tm
        if tm is not None and not tm.can_send(queues.tps[partition], first):
            return False
        batch = dq.popleft()
        queues.queued -= 1
        if dq:
            self.more_ready = True
        if tm is not None:
            tm.assign_sequence(batch)
        return batch

    def _pending_steps(
        self,
        topics: Mapping[str, TopicQueues],
        cluster: Cluster,
        node_id: int,
        parts: Sequence[PartitionInfo],
        start: int,
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
        for topic, queues in topics.items():
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


def _close_all(batches: list[ProducerBatch]) -> list[ProducerBatch]:
    for batch in batches:
        batch.close()
    return batches
