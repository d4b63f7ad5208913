"""Partitioning: Java's ``Utils.murmur2`` / ``BuiltInPartitioner`` (KIP-794).

* Keyed records: ``toPositive(murmur2(key)) % num_partitions`` over all partitions, the
  same choice the Java producer (and librdkafka's ``murmur2_random``) makes.
* Keyless records: the built-in *uniform sticky* partitioner. All keyless records of a topic
  go to one partition until about ``batch.size`` bytes were produced to it, then a new one
  is picked at random among the partitions that have a leader.

``murmur2`` and ``keyed_partition`` are pure functions (any thread). A ``StickyPartitioner``
belongs to one topic's queues in the ``RecordAccumulator`` and is only used under that
topic's lock.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from kclient.record import ACCELERATED

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK32 = 0xFFFFFFFF
_WORDS: dict[int, struct.Struct] = {}
_CACHE_LIMIT = 4096
_cache: dict[bytes, int] = {}


def murmur2(data: bytes) -> int:
    """Java's ``Utils.murmur2``: the 32-bit MurmurHash2 of ``data`` as a signed int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    words = length >> 2
    if words:
        unpack = _WORDS.get(words)
        if unpack is None:
            unpack = _WORDS[words] = struct.Struct(f"<{words}I")
        for k in unpack.unpack_from(data):
            k = (k * _M) & _MASK32
            k ^= k >> 24
            h = ((h * _M) & _MASK32) ^ ((k * _M) & _MASK32)
    tail = length & 3
    if tail:
        base = length - tail
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def to_positive(number: int) -> int:
    """Java's ``Utils.toPositive``: clear the sign bit (not ``abs``)."""
    return number & 0x7FFFFFFF


def _keyed_partition_python(key: bytes, num_partitions: int) -> int:
    """The partition Java's default partitioner picks for a serialized key.

    Hashes are memoized for recently seen keys (keys repeat in most workloads).
    """
    hashed = _cache.get(key)
    if hashed is None:
        if len(_cache) >= _CACHE_LIMIT:
            _cache.clear()
        hashed = _cache[key] = murmur2(key) & 0x7FFFFFFF
    return hashed % num_partitions


keyed_partition: Callable[[bytes, int], int] = _keyed_partition_python
"""``toPositive(murmur2(key)) % num_partitions``: in C when the accelerator is built."""
if ACCELERATED:
    try:
        from kclient.sender._murmur2 import keyed_partition as _keyed_partition_c
    except ImportError:  # built without the partitioner module
        pass
    else:
        keyed_partition = _keyed_partition_c


class _Batch(Protocol):
    def is_full(self) -> bool: ...


class StickyFields:
    """The sticky partitioner's state: the ``partition`` keyless records go to, the
    ``produced_bytes`` sent there since it was chosen and the ``sticky_bytes`` after which
    it may change. ``StickyPartitioner``'s base: with the accelerator built,
    ``kclient.sender._speedups.StickyFields``, a C struct the C ``Appender`` reads and
    counts in directly (kclient/sender/_fields.c); this class is the reference it follows."""

    __slots__ = ("partition", "produced_bytes", "sticky_bytes")

    partition: int
    produced_bytes: int
    sticky_bytes: int


if ACCELERATED and not TYPE_CHECKING:
    from kclient.sender._speedups import StickyFields  # the C one


class StickyPartitioner(StickyFields):
    """Java's ``BuiltInPartitioner`` for one topic (uniform sticky, no adaptive weighting).

    ``partition`` is the current sticky choice. The accumulator adds each record's bytes
    to ``produced_bytes`` and, once they reach ``sticky_bytes`` (``batch.size``), calls
    ``maybe_switch(open_batch)``: the next partition is chosen at random among the
    available ones (all partitions when none has a leader) once the open batch is full,
    or regardless once twice ``batch.size`` went to the current partition.
    """

    __slots__ = ("_available", "_num_partitions", "_random")

    def __init__(self, sticky_batch_size: int, rng: random.Random | None = None) -> None:
        self.sticky_bytes = max(sticky_batch_size, 1)
        self._random = rng or random.Random()
        self._available: Sequence[int] = ()
        self._num_partitions = 0
        self.produced_bytes = 0
        self.partition = -1

    def update_partitions(self, num_partitions: int, available: Sequence[int]) -> None:
        """New metadata: re-pick when the current partition is gone or lost its leader."""
        self._num_partitions = num_partitions
        self._available = tuple(available)
        gone = self.partition < 0 or self.partition >= num_partitions
        if gone or (self._available and self.partition not in self._available):
            self._next()

    def on_append(self, appended_bytes: int, batch: _Batch) -> None:
        """``appended_bytes`` went to the current partition, whose open batch is ``batch``."""
        self.produced_bytes += appended_bytes
        if self.produced_bytes >= self.sticky_bytes:
            self.maybe_switch(batch)

    def assign(self, record_bytes: int) -> int:
        """The partition of a keyless record placed before its batch is known (a
        ``send_batch`` mixing keyed and keyless rows): the current one, moving on once
        ``sticky_bytes`` went to it."""
        partition = self.partition
        self.produced_bytes += record_bytes
        if self.produced_bytes >= self.sticky_bytes:
            self._next()
        return partition

    def maybe_switch(self, batch: _Batch) -> None:
        if batch.is_full() or self.produced_bytes >= 2 * self.sticky_bytes:
            self._next()

    def _next(self) -> None:
        self.produced_bytes = 0
        if self._available:
            self.partition = self._available[self._random.randrange(len(self._available))]
        elif self._num_partitions > 0:
            self.partition = self._random.randrange(self._num_partitions)
        else:
            self.partition = -1
