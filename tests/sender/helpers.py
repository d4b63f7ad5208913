"""Shared builders for the sender unit tests."""

from __future__ import annotations

import random
import threading

from kclient.network.cluster import Cluster, Node, PartitionInfo
from kclient.record import CompressionType, RecordBatchBuilder
from kclient.sender.accumulator import RecordAccumulator
from kclient.sender.buffer_pool import BufferPool
from kclient.sender.idempotence import TransactionManager
from kclient.testing import MockClock

NODE0 = Node(0, "127.0.0.1", 9092)
NODE1 = Node(1, "127.0.0.1", 9093)


def cluster(leaders: dict[str, list[Node | None]]) -> Cluster:
    """A cluster where ``leaders[topic][p]`` leads partition p (None = no leader)."""
    partitions = [
        PartitionInfo(topic, p, leader)
        for topic, nodes in leaders.items()
        for p, leader in enumerate(nodes)
    ]
    return Cluster([NODE0, NODE1], partitions)


def mock_wait(clock: MockClock) -> object:
    def wait(condition: threading.Condition, timeout_ms: int) -> None:
        clock.advance(timeout_ms)

    return wait


def accumulator(
    clock: MockClock,
    *,
    batch_size: int = 1024,
    linger_ms: int = 10,
    buffer_memory: int = 1 << 20,
    delivery_timeout_ms: int = 120_000,
    retry_backoff_ms: int = 100,
    retry_backoff_max_ms: int = 100,
    compression: CompressionType = CompressionType.NONE,
    tm: TransactionManager | None = None,
    real_wait: bool = False,
    transactional: bool = False,
) -> RecordAccumulator:
    """An accumulator on a mock clock; blocking for memory times out at once unless
    ``real_wait`` (then it blocks until memory is freed or the pool is closed)."""
    wait = None if real_wait else mock_wait(clock)
    pool = BufferPool(buffer_memory, clock, wait=wait)  # type: ignore[arg-type]
    return RecordAccumulator(
        batch_size=batch_size,
        linger_ms=linger_ms,
        retry_backoff_ms=retry_backoff_ms,
        retry_backoff_max_ms=retry_backoff_max_ms,
        delivery_timeout_ms=delivery_timeout_ms,
        pool=pool,
        builder_factory=lambda size: RecordBatchBuilder(
            compression, size, is_transactional=transactional
        ),
        transaction_manager=tm,
        monotonic_ms=clock.monotonic_ms,
        wall_time_ns=lambda: clock.time_ms() * 1_000_000,
        rng=random.Random(7),
    )
