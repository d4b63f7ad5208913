"""Partition logs in memory and on disk: append, read, segments, recovery of torn tails."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kclient.broker.log import Log
from kclient.record import RecordBatchBuilder, assign_offsets, iter_batches


def batch(
    values: list[bytes], producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1
) -> bytes:
    builder = RecordBatchBuilder("none", batch_size=1 << 30)
    if producer_id >= 0:
        builder.set_producer_state(producer_id, producer_epoch, base_sequence)
    for i, value in enumerate(values):
        builder.append(1_700_000_000_000 + i, None, value)
    return builder.build()


def append(log: Log, values: list[bytes], **kw: Any) -> int:
    buf = bytearray(batch(values, **kw))
    base = log.log_end_offset
    assign_offsets(buf, base)
    last = base + len(values) - 1
    log.append(buf, [(0, len(buf), base, last, 0)])
    return base


def values(log: Log) -> list[bytes | None]:
    return [r.value for b in log.iter_batches() for r in b.records()]


def test_memory_log_reads_by_reference_from_the_batch_holding_the_offset() -> None:
    log = Log("t", 0, None, 1 << 20)
    append(log, [b"a", b"b"])
    append(log, [b"c"])
    assert log.high_watermark == 3
    first, second = log.read(0, 1 << 20, True)
    assert isinstance(first, memoryview)
    assert [b.base_offset for b in iter_batches(second)] == [2]
    assert [len(log.read(o, 1 << 20, True)) for o in (0, 1, 2, 3)] == [2, 2, 1, 0]
    assert log.bytes_after(2) == len(second)


def test_disk_log_survives_reopen_and_rolls_segments(tmp_path: Path) -> None:
    log = Log("t", 0, tmp_path / "t-0", segment_bytes=1024)
    for i in range(20):
        append(log, [b"%d" % i * 30])
    log.close()
    assert len(list((tmp_path / "t-0").glob("*.log"))) > 1
    again = Log("t", 0, tmp_path / "t-0", segment_bytes=1024)
    assert again.high_watermark == 20
    assert values(again) == [b"%d" % i * 30 for i in range(20)]
    append(again, [b"more"])
    assert b"more" in b"".join(bytes(b) for b in again.read(20, 1 << 20, True))
    again.close()


def test_recovery_truncates_a_torn_tail(tmp_path: Path) -> None:
    log = Log("t", 0, tmp_path / "t-0", segment_bytes=1 << 20)
    append(log, [b"kept"])
    append(log, [b"torn"])
    log.close()
    (segment,) = (tmp_path / "t-0").glob("*.log")
    size = segment.stat().st_size
    with open(segment, "r+b") as f:
        f.truncate(size - 5)  # the process died in the middle of the second write
    again = Log("t", 0, tmp_path / "t-0", segment_bytes=1 << 20)
    assert again.high_watermark == 1 and values(again) == [b"kept"]
    assert segment.stat().st_size < size - 5  # truncated at the last valid batch
    append(again, [b"next"])
    assert values(again) == [b"kept", b"next"]
    again.close()


def test_recovery_after_a_crash_stops_at_a_corrupt_batch(tmp_path: Path) -> None:
    log = Log("t", 0, tmp_path / "t-0", segment_bytes=1 << 20)
    append(log, [b"one"])
    append(log, [b"two"])
    append(log, [b"three"])
    log.close()
    for snapshot in (tmp_path / "t-0").glob("*.snapshot"):
        snapshot.unlink()  # as if the broker died before any snapshot: all is unchecked
    (segment,) = (tmp_path / "t-0").glob("*.log")
    data = bytearray(segment.read_bytes())
    first_size = len(batch([b"one"]))
    data[first_size + 70] ^= 0xFF  # a flipped bit inside the second batch
    segment.write_bytes(bytes(data))
    again = Log("t", 0, tmp_path / "t-0", segment_bytes=1 << 20)
    assert values(again) == [b"one"]
    again.close()


def test_recovered_producer_state_still_deduplicates(tmp_path: Path, make_harness: Any) -> None:
    h = make_harness(log_dir=str(tmp_path))
    h.controller.create_topic("t", 1)
    b0 = batch([b"a"], producer_id=77, producer_epoch=0, base_sequence=0)
    assert h.produce("t", b0)["base_offset"] == 0
    h.close()
    h2 = make_harness(log_dir=str(tmp_path))
    assert h2.controller.topic("t") is not None  # topics.json
    retry = h2.produce("t", b0)
    assert (retry["error_code"], retry["base_offset"]) == (0, 0)
    assert h2.controller.partition("t", 0).log.high_watermark == 1
    nxt = h2.produce("t", batch([b"b"], producer_id=77, producer_epoch=0, base_sequence=1))
    assert nxt["base_offset"] == 1


def test_delete_removes_the_files(tmp_path: Path) -> None:
    log = Log("t", 0, tmp_path / "t-0", segment_bytes=1 << 20)
    append(log, [b"x"])
    log.delete()
    assert not (tmp_path / "t-0").exists()
