"""Type stub of the C accelerator (``_speedups.c``); see kclient.record.builder and .batch."""

from collections.abc import Callable, Iterator, MutableSequence, Sequence
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

_C_API: object
"""The record layer's C API for the sender's C (a capsule, ``_capi.h``)."""
