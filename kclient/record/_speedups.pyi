"""Type stub of the C accelerator (``_speedups.c``); see kclient.record.builder and .batch."""

from collections.abc import Callable, Iterator, MutableSequence, Sequence
from types import TracebackType
from typing import Any

from kclient.record.batch import Record

class BinaryColumn(Sequence[bytes | None]):
    """An Arrow binary/string array read in place from its buffers (``_column.c``)."""

    def __init__(
        self,
        validity: Any,
        offsets: Any,
        data: Any,
        offset: int,
        length: int,
        wide: bool,
    ) -> None: ...
    def __len__(self) -> int: ...
    def __getitem__(self, row: int) -> bytes | None: ...  # type: ignore[override]
    @property
    def max_size(self) -> int: ...
    @property
    def null_count(self) -> int: ...

class RecordsWriter:
    """The per-record state and ``append`` of a RecordBatchBuilder (CRecordBatchBuilder)."""

    def append(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] = (),
    ) -> int: ...
    def append_rows(
        self,
        timestamps: Sequence[int],
        keys: Sequence[bytes | None] | None,
        values: Sequence[bytes | None],
        rows: Sequence[int] | None,
        start: int,
        stop: int,
        results: list[Any],
        deltas: MutableSequence[int],
        result: object,
        /,
    ) -> int: ...
    def is_full(self) -> bool: ...
    @property
    def record_count(self) -> int: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def base_timestamp(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def closed(self) -> bool: ...
    @property
    def _open_size(self) -> int: ...
    def _start(self, batch_size: int) -> None: ...
    def _close(self) -> bytes: ...

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

def decode_records(
    data: bytes | memoryview,
    count: int,
    base_offset: int,
    base_ts: int,
    log_append_time: int | None,
    record_class: type[Record],
    /,
) -> Iterator[Record]: ...
def set_header_encoder(fn: Callable[[Any], bytes], /) -> None: ...
def crc32c(data: bytes, table: bool = False, /) -> int: ...
