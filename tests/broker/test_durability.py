"""What a broker with a log dir keeps across a restart, clean or not.

A "crash" is a copy of the log dir taken while the broker is running (what a kill -9
leaves behind: every write is in the files, nothing was closed or snapshotted); a
"restart" closes the broker and opens the same dir again.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from kclient.broker.__main__ import main as broker_main
from kclient.broker.metadata_store import LogDirError
from kclient.protocol import ApiKey
from kclient.record import iter_batches
from tests.broker.conftest import ApiHarness, batch


def init_producer_id(h: ApiHarness, node: int = 0) -> int:
    body = h.call(
        ApiKey.INIT_PRODUCER_ID,
        4,
        {"transactional_id": None, "transaction_timeout_ms": 60000},
        node,
    )
    assert body["error_code"] == 0
    producer_id: int = body["producer_id"]
    return producer_id


def value_at(h: ApiHarness, topic: str, offset: int) -> bytes | None:
    """The value of the record stored at ``offset``."""
    body = h.call(ApiKey.FETCH, 12, h.fetch_body(topic, offset))
    data = body["responses"][0]["partitions"][0]["records"]
    for b in iter_batches(data):
        for r in b.records():
            if r.offset == offset:
                return r.value
    raise AssertionError(f"no record at offset {offset}")


def crash_copy(log_dir: Path, into: Path) -> str:
    """The log dir as a kill -9 would leave it."""
    shutil.copytree(log_dir, into)
    return str(into)


def send(h: ApiHarness, producer_id: int, sequence: int, value: bytes) -> tuple[int, int]:
    r = h.produce(
        "t", batch([value], producer_id=producer_id, producer_epoch=0, base_sequence=sequence)
    )
    return r["error_code"], r["base_offset"]


@pytest.mark.parametrize("how", ["restart", "crash"])
def test_a_new_producer_after_a_restart_gets_an_unused_id_and_its_records_are_written(
    tmp_path: Path, make_harness: Any, how: str
) -> None:
    h = make_harness(log_dir=str(tmp_path / "a"))
    h.controller.create_topic("t", 1)
    first = init_producer_id(h)
    for seq in range(3):
        assert send(h, first, seq, b"first-%d" % seq) == (0, seq)
    if how == "crash":
        log_dir = crash_copy(tmp_path / "a", tmp_path / "b")
    else:
        h.close()
        log_dir = str(tmp_path / "a")
    again = make_harness(log_dir=log_dir)
    second = init_producer_id(again)
    assert second != first
    # before, the new producer got the old id and its record was answered as a duplicate
    # of the old producer's, with an offset holding the old producer's record
    error, offset = send(again, second, 0, b"second-0")
    assert (error, offset) == (0, 3)
    assert value_at(again, "t", offset) == b"second-0"


def test_two_producers_live_across_a_crash_keep_every_acknowledged_record(
    tmp_path: Path, make_harness: Any
) -> None:
    h = make_harness(log_dir=str(tmp_path / "a"), log_segment_bytes=1024)
    h.controller.create_topic("t", 1)
    old, acked = init_producer_id(h), {}
    for seq in range(20):  # several segments: snapshots at the rolls, then a tail to replay
        acked[b"old-%d" % seq] = send(h, old, seq, b"old-%d" % seq)
    again = make_harness(log_dir=crash_copy(tmp_path / "a", tmp_path / "b"))
    new = init_producer_id(again)
    for seq in range(20):
        acked[b"new-%d" % seq] = send(again, new, seq, b"new-%d" % seq)
        acked[b"old-%d" % (20 + seq)] = send(again, old, 20 + seq, b"old-%d" % (20 + seq))
    assert {error for error, _ in acked.values()} == {0}
    assert sorted(offset for _, offset in acked.values()) == list(range(60))
    for value, (_, offset) in acked.items():
        assert value_at(again, "t", offset) == value


@pytest.mark.parametrize("how", ["restart", "crash"])
def test_a_retry_after_a_restart_is_answered_with_its_first_offset(
    tmp_path: Path, make_harness: Any, how: str
) -> None:
    h = make_harness(log_dir=str(tmp_path / "a"), log_segment_bytes=1024)
    h.controller.create_topic("t", 1)
    pid = init_producer_id(h)
    for seq in range(12):
        send(h, pid, seq, b"v%d" % seq)
    if how == "crash":
        log_dir = crash_copy(tmp_path / "a", tmp_path / "b")
    else:
        h.close()
        log_dir = str(tmp_path / "a")
    again = make_harness(log_dir=log_dir, log_segment_bytes=1024)
    assert send(again, pid, 11, b"v11") == (0, 11)  # duplicate: not written twice
    assert send(again, pid, 12, b"v12") == (0, 12)
    assert send(again, pid, 14, b"v14")[0] != 0  # a gap is still a gap
    assert again.controller.partition("t", 0).log.high_watermark == 13


def test_a_snapshot_past_the_recovered_log_end_is_not_trusted(
    tmp_path: Path, make_harness: Any
) -> None:
    h = make_harness(log_dir=str(tmp_path))
    h.controller.create_topic("t", 1)
    pid = init_producer_id(h)
    for seq in range(3):
        send(h, pid, seq, b"v%d" % seq)
    h.close()  # a snapshot at offset 3
    (segment,) = (tmp_path / "t-0").glob("*.log")
    last = len(batch([b"v2"], producer_id=pid, producer_epoch=0, base_sequence=2))
    with segment.open("r+b") as f:  # the last batch is torn away
        f.truncate(segment.stat().st_size - last + 10)
    again = make_harness(log_dir=str(tmp_path))
    # the lost batch is written again, not answered as a duplicate at offset 2 of nothing
    assert send(again, pid, 2, b"v2") == (0, 2)
    assert value_at(again, "t", 2) == b"v2"


def test_leader_epochs_never_go_back_after_a_restart(tmp_path: Path, make_harness: Any) -> None:
    h = make_harness(2, log_dir=str(tmp_path))
    h.controller.create_topic("t", 1)
    leader = h.controller.partition("t", 0).leader_id
    h.controller.broker_stopped(leader)
    h.controller.broker_started(h.controller.endpoints[leader])
    epoch = h.controller.partition("t", 0).leader_epoch
    assert epoch >= 1
    h.close()
    again = make_harness(2, log_dir=str(tmp_path))
    assert again.controller.partition("t", 0).leader_epoch >= epoch


def test_producer_ids_are_unique_across_the_brokers_of_a_cluster(make_harness: Any) -> None:
    h = make_harness(3)
    ids = [init_producer_id(h, node) for node in (0, 1, 2, 0, 1, 2)]
    assert len(set(ids)) == len(ids)


def half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_damaged_topics_file_is_rebuilt_from_the_partition_directories(
    tmp_path: Path, make_harness: Any, caplog: pytest.LogCaptureFixture
) -> None:
    h = make_harness(log_dir=str(tmp_path))
    h.controller.create_topic("kept", 2)
    h.produce("kept", batch([b"x"]), partition=1)
    topic_id = h.controller.topic("kept").topic_id
    h.close()
    half(tmp_path / "topics.json")
    with caplog.at_level(logging.WARNING):
        again = make_harness(log_dir=str(tmp_path))
    assert "topics.json" in caplog.text
    topic = again.controller.topic("kept")
    assert (topic.topic_id, len(topic.partitions)) == (topic_id, 2)
    assert again.controller.partition("kept", 1).log.high_watermark == 1


def test_an_unrebuildable_log_dir_is_one_line_naming_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_harness: Any
) -> None:
    h = make_harness(log_dir=str(tmp_path))
    h.controller.create_topic("kept", 1)
    h.close()
    half(tmp_path / "topics.json")
    for metadata in tmp_path.glob("*/partition.metadata"):
        metadata.write_text("garbage")
    with pytest.raises(LogDirError, match="topics.json"):
        make_harness(log_dir=str(tmp_path))
    assert broker_main(["--listen", "127.0.0.1:0", "--log-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "topics.json" in err and "Traceback" not in err
