from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kclient.network.cluster import Cluster, Node, TopicPartition
from kclient.sender.batch import ProducerBatch
from kclient.sender.idempotence import TransactionManager
from kclient.sender.topic_queues import TopicQueues

def configure(
    topic_queues: type[Any],
    producer_batch: type[Any],
    partition_info: type[Any],
    cluster: type[Any],
    c_builder: type[Any] | None,
    lock: type[Any] | None,
    deque: type[Any],
    ready_result: type[tuple[Any, ...]],
    refuse: Callable[..., int],
    py_ready: Callable[..., Any],
    py_drain: Callable[..., Any],
    none_codec: object,
    crc32c: Callable[..., int],
    /,
) -> None: ...

class Drainer:
    _tm: TransactionManager | None
    _drain_index: dict[int, int]
    _positions_cluster: Cluster | None
    _positions: dict[int, dict[tuple[str, int], int]]
    muted: set[TopicPartition]
    next_expiry_ms: int
    more_ready: bool
    def __init__(self, transaction_manager: TransactionManager | None) -> None: ...
    def ready(
        self,
        topics: Mapping[str, TopicQueues],
        cluster: Cluster,
        now_ms: int,
        linger_ms: int,
        delivery_timeout_ms: int,
        all_ready: bool,
    ) -> Any: ...
    def drain(
        self,
        topics: Mapping[str, TopicQueues],
        cluster: Cluster,
        nodes: Sequence[Node],
        max_request_size: int,
        now_ms: int,
    ) -> dict[int, list[ProducerBatch]]: ...
