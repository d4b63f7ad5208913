from collections.abc import MutableSequence, Sequence
from typing import Any

def murmur2(data: bytes | bytearray | memoryview, /) -> int: ...
def keyed_partition(key: bytes | bytearray | memoryview, num_partitions: int, /) -> int: ...
def keyed_partitions(
    keys: Sequence[bytes | None] | None,
    explicit: Sequence[Any] | None,
    num_partitions: int,
    start: int,
    stop: int,
    out: MutableSequence[int],
    /,
) -> int: ...
def group_rows(
    partitions: Sequence[int], start: int, stop: int, order: MutableSequence[int], /
) -> list[tuple[int, int, int]]: ...
