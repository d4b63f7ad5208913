"""Committed offsets and group records under --log-dir: what a restart (clean, or after
kill -9) brings back."""

from __future__ import annotations

from pathlib import Path

from kclient.broker.consumer_offsets import (
    DIRECTORY,
    ConsumerOffsets,
    OffsetAndMetadata,
    StoredGroup,
    StoredMember,
    partition_for,
)
from kclient.broker.durable_records import RECORDS_FILE, SNAPSHOT_FILE

GROUP = StoredGroup(
    "consumer",
    4,
    "range",
    "m-1",
    1_700_000_000_000,
    (StoredMember("m-1", "i-1", "app", "/127.0.0.1", 30_000, 10_000, b"sub\x00", b"asg\xff"),),
)


def written(log_dir: Path) -> ConsumerOffsets:
    offsets = ConsumerOffsets(log_dir)
    for group in ("a", "b", "c"):
        offsets.claim(group, 0)
    offsets.commit("a", 0, {("t", 0): OffsetAndMetadata(10, 2, "meta", 111)})
    offsets.commit("a", 0, {("t", 0): OffsetAndMetadata(12, 3, "later", 222)})
    offsets.commit("a", 0, {("gone", 1): OffsetAndMetadata(5), ("t", 1): OffsetAndMetadata(7)})
    offsets.store_group("a", 0, GROUP)
    offsets.commit("b", 0, {("t", 0): OffsetAndMetadata(1)})
    offsets.delete_group("b", 0)
    offsets.commit("c", 0, {("t", 0): OffsetAndMetadata(3), ("t", 2): OffsetAndMetadata(4)})
    offsets.delete_offsets("c", 0, [("t", 2)])
    offsets.drop_topic("gone")
    return offsets


def expect_restored(offsets: ConsumerOffsets) -> None:
    assert offsets.offsets("a") == {
        ("t", 0): OffsetAndMetadata(12, 3, "later", 222),
        ("t", 1): OffsetAndMetadata(7),
    }
    assert offsets.group("a") == GROUP
    assert offsets.group_ids() == ["a", "c"]
    assert offsets.offsets("c") == {("t", 0): OffsetAndMetadata(3)}


def test_everything_committed_survives_a_clean_restart(tmp_path: Path) -> None:
    written(tmp_path).close()
    expect_restored(ConsumerOffsets(tmp_path))


def test_everything_answered_survives_a_crash_without_close(tmp_path: Path) -> None:
    written(tmp_path)  # never closed: only the records log holds the changes
    assert (tmp_path / DIRECTORY / RECORDS_FILE).stat().st_size > 0
    expect_restored(ConsumerOffsets(tmp_path))


def test_a_write_torn_by_a_crash_is_dropped_and_the_rest_kept(tmp_path: Path) -> None:
    written(tmp_path)
    records = tmp_path / DIRECTORY / RECORDS_FILE
    with records.open("ab") as f:
        f.write(b"\x00\x00\x00\x40\x12\x34")  # a frame header and part of its body
    restored = ConsumerOffsets(tmp_path)
    expect_restored(restored)
    # the next commit after the restart is readable too
    restored.claim("a", 0)
    restored.commit("a", 0, {("t", 0): OffsetAndMetadata(99)})
    assert ConsumerOffsets(tmp_path).offsets("a")[("t", 0)].offset == 99


def test_a_record_failing_its_checksum_is_not_applied(tmp_path: Path) -> None:
    written(tmp_path)
    body = b'{"k":"offsets","g":"a","o":[["t",0,1000,-1,"",0]]}'
    with (tmp_path / DIRECTORY / RECORDS_FILE).open("ab") as f:
        f.write(len(body).to_bytes(4, "big") + b"\x00\x00\x00\x01" + body)
    expect_restored(ConsumerOffsets(tmp_path))


def test_a_damaged_snapshot_is_kept_aside_not_trusted(tmp_path: Path) -> None:
    written(tmp_path).close()
    snapshot = tmp_path / DIRECTORY / SNAPSHOT_FILE
    data = bytearray(snapshot.read_bytes())
    data[-3] ^= 0xFF
    snapshot.write_bytes(bytes(data))
    restored = ConsumerOffsets(tmp_path)
    assert restored.group_ids() == []
    assert (tmp_path / DIRECTORY / (SNAPSHOT_FILE + ".damaged")).exists()


def test_without_a_log_dir_nothing_is_written(tmp_path: Path) -> None:
    offsets = ConsumerOffsets()
    offsets.claim("a", 0)
    offsets.commit("a", 0, {("t", 0): OffsetAndMetadata(1)})
    assert offsets.offsets("a")[("t", 0)].offset == 1
    assert list(tmp_path.iterdir()) == []


def test_groups_hash_onto_kafkas_consumer_offsets_partitions() -> None:
    # Java: "g1".hashCode() = 3242; negative hash codes: Kafka takes Utils.abs (not the
    # low 31 bits): "my-group".hashCode() = -1906497762 -> 1906497762 % 50
    assert partition_for("g1") == 42
    assert partition_for("my-group") == 12
    assert partition_for("orders") == 31  # "orders".hashCode() == -1008770331
    assert partition_for("polygenelubricants") == 0  # hashCode() == Integer.MIN_VALUE
