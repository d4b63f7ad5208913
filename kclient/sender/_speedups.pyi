"""Type stub of the sender's C accelerator (``_speedups.c``); see kclient.sender.appender."""

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

class Lock:
    """A mutex with ``threading.Lock``'s API that ``Appender.append`` takes in C."""

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

class Appender:
    """``RecordAccumulator.append``'s common case in C (``kclient.sender.appender``)."""

    closed: bool
    def __init__(
        self,
        future: type,
        batch_overhead: int,
        closed_error: type[BaseException],
        time_ns: Callable[[], int],
    ) -> None: ...
    def append(
        self,
        queues: Any,
        partition: int,
        timestamp_ms: int | None,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        callback: Any,
        size_estimate: int,
        /,
    ) -> Any: ...
    def configure_send(
        self,
        queues_by_topic: dict[str, Any],
        max_record_bytes: int,
        keyed_partition: Callable[[bytes, int], int] | None,
        sticky_keyless: bool,
        open_batch: Callable[..., Any] | None = None,
        /,
    ) -> None: ...
    def send_open(
        self,
        topic: str,
        value: object,
        key: object,
        partition: object,
        timestamp_ms: int | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        callback: Any,
        /,
    ) -> Any: ...

class SendCall:
    """A producer's ``send`` (``kclient.sender.appender.fast_send``): ``send_open``
    without a Python frame, else ``general(producer, ...)``; unbindable calls go to
    ``send(producer, ...)``."""

    def __init__(
        self,
        appender: Appender,
        producer_ref: Any,
        send: Callable[..., Any],
        general: Callable[..., Any],
    ) -> None: ...
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...

class RecordFutureFields:
    """A record future's data (``kclient.sender.future.RecordFutureFields``), in C."""

    produce_result: Any
    offset_delta: int
    timestamp_ms: int
    key_size: int
    value_size: int
    def __init__(
        self,
        produce_result: Any,
        offset_delta: int,
        timestamp_ms: int,
        key_size: int = -1,
        value_size: int = -1,
    ) -> None: ...

class TopicQueuesFields:
    """What the Appender uses of a topic's queues (``kclient.sender.topic_queues``), in C."""

    lock: Any
    deques: Any
    sticky: Any
    num_partitions: int

class StickyFields:
    """The sticky partitioner's state (``kclient.sender.partitioner``), in C."""

    partition: int
    produced_bytes: int
    sticky_bytes: int

class BatchFields:
    """What the Appender uses of a batch (``kclient.sender.batch``), in C."""

    builder: Any
    records: bytes | None
    result: Any
