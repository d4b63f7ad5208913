import importlib
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kclient.sender.partitioner import StickyPartitioner, keyed_partition, murmur2, to_positive

# Kafka's UtilsTest.testMurmur2 vectors.
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def test_murmur2_matches_java_vectors() -> None:
    for data, expected in JAVA_VECTORS.items():
        assert murmur2(data) == expected, data


def test_to_positive_clears_the_sign_bit_like_java() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-2147483648) == 0
    assert to_positive(5) == 5


def _reference_murmur2(data: bytes) -> int:
    """A literal transcription of Java's Utils.murmur2 with 32-bit wrap-around."""

    def i32(x: int) -> int:
        x &= 0xFFFFFFFF
        return x - (1 << 32) if x >= 1 << 31 else x

    def ushr(x: int, n: int) -> int:
        return (x & 0xFFFFFFFF) >> n

    length = len(data)
    m, r = 0x5BD1E995, 24
    h = i32(0x9747B28C ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = data[i4] + (data[i4 + 1] << 8) + (data[i4 + 2] << 16) + (data[i4 + 3] << 24)
        k = i32(k * m)
        k ^= ushr(k, r)
        k = i32(k * m)
        h = i32(h * m)
        h = i32(h ^ k)
    rest = length % 4
    base = length & ~3
    if rest == 3:
        h = i32(h ^ (data[base + 2] << 16))
    if rest >= 2:
        h = i32(h ^ (data[base + 1] << 8))
    if rest >= 1:
        h = i32(h ^ data[base])
        h = i32(h * m)
    h = i32(h ^ ushr(h, 13))
    h = i32(h * m)
    return i32(h ^ ushr(h, 15))


@given(st.binary(max_size=64))
def test_murmur2_matches_a_literal_java_transcription(data: bytes) -> None:
    assert murmur2(data) == _reference_murmur2(data)


def test_keyed_partition_is_java_default_partitioner() -> None:
    assert keyed_partition(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
    assert keyed_partition(b"foobar", 7) == keyed_partition(b"foobar", 7)  # memoized path


class _Batch:
    def __init__(self, full: bool) -> None:
        self.full = full

    def is_full(self) -> bool:
        return self.full


def test_sticky_stays_until_batch_size_then_switches_when_batch_full() -> None:
    sticky = StickyPartitioner(100, random.Random(1))
    sticky.update_partitions(4, [0, 1, 2, 3])
    first = sticky.partition
    assert 0 <= first < 4
    sticky.on_append(60, _Batch(full=False))
    sticky.on_append(60, _Batch(full=False))  # 120 >= 100, but the batch still has room
    assert sticky.partition == first
    seen = set()
    for _ in range(50):
        sticky.on_append(100, _Batch(full=True))
        seen.add(sticky.partition)
    assert len(seen) > 1


def test_sticky_switches_at_twice_batch_size_regardless() -> None:
    sticky = StickyPartitioner(100, random.Random(3))
    sticky.update_partitions(1000, range(1000))
    first = sticky.partition
    sticky.on_append(199, _Batch(full=False))
    assert sticky.partition == first
    sticky.on_append(1, _Batch(full=False))
    assert sticky.partition != first  # 1 in 1000 chance of the same pick; seed fixed


def test_sticky_only_picks_partitions_with_a_leader() -> None:
    sticky = StickyPartitioner(1, random.Random(5))
    sticky.update_partitions(6, [2, 4])
    picks = set()
    for _ in range(40):
        sticky.on_append(10, _Batch(full=True))
        picks.add(sticky.partition)
    assert picks == {2, 4}


def test_sticky_moves_off_a_partition_that_lost_its_leader() -> None:
    sticky = StickyPartitioner(100, random.Random(2))
    sticky.update_partitions(3, [0, 1, 2])
    lost = sticky.partition
    remaining = [p for p in range(3) if p != lost]
    sticky.update_partitions(3, remaining)
    assert sticky.partition in remaining


def test_sticky_without_available_partitions_uses_all() -> None:
    sticky = StickyPartitioner(100, random.Random(2))
    sticky.update_partitions(3, [])
    assert 0 <= sticky.partition < 3


def test_the_c_partitioner_is_used_when_built_and_matches_java() -> None:
    from kclient.record import ACCELERATED
    from kclient.sender import partitioner

    c = importlib.import_module("kclient.sender._murmur2")
    # pip install builds the accelerator; KCLIENT_PURE_PYTHON=1 switches it off
    expected_impl = c.keyed_partition if ACCELERATED else partitioner._keyed_partition_python
    assert partitioner.keyed_partition is expected_impl
    for data, expected in JAVA_VECTORS.items():
        assert c.murmur2(data) == expected, data
        assert c.murmur2(bytearray(data)) == expected
        assert c.keyed_partition(data, 13) == (expected & 0x7FFFFFFF) % 13
    with pytest.raises(ValueError, match="num_partitions must be positive"):
        c.keyed_partition(b"k", 0)
    with pytest.raises(TypeError):
        c.murmur2("text")


@given(st.binary(max_size=300), st.integers(min_value=1, max_value=10_000))
def test_c_and_python_partitioners_agree(data: bytes, partitions: int) -> None:
    from kclient.sender import partitioner

    c = importlib.import_module("kclient.sender._murmur2")
    assert c.murmur2(data) == _reference_murmur2(data)
    assert c.keyed_partition(data, partitions) == partitioner._keyed_partition_python(
        data, partitions
    )
