"""Coordinator-epoch fencing of transaction markers (Kafka's ``TRANSACTION_COORDINATOR_FENCED``):
a partition refuses a marker from a coordinator older than the one that wrote the
producer's last marker there, across restarts (replayed log, snapshots, the state log)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kclient import errors
from kclient.broker.durable_file import seal
from kclient.broker.log import Log
from kclient.broker.producer_state import (
    _BATCH,
    _ENTRIES,
    _SNAPSHOT_HEAD,
    _SNAPSHOT_MAGIC,
    ProducerStateManager,
    snapshot_path,
)
from kclient.broker.txn_state import TransactionStateManager, txn_partition_for
from tests.broker.test_txn_log import append_txn


def _marker(log: Log, producer_id: int, coordinator_epoch: int, epoch: int = 0) -> int:
    return log.append_marker(
        producer_id=producer_id,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        committed=True,
        leader_epoch=0,
        now_ms=1,
    )


def test_a_marker_from_an_older_coordinator_is_refused_and_not_written() -> None:
    log = Log("t", 0, None, 1 << 20)
    append_txn(log, 1, [b"a"])
    _marker(log, 1, coordinator_epoch=3)
    append_txn(log, 1, [b"b"], seq=1)
    end = log.log_end_offset
    with pytest.raises(errors.TransactionCoordinatorFencedError):
        _marker(log, 1, coordinator_epoch=2)
    assert log.log_end_offset == end and log.last_stable_offset == 2  # still open
    assert _marker(log, 1, coordinator_epoch=3) == end  # the current coordinator may


@pytest.mark.parametrize("clean", [True, False])
def test_the_coordinator_epoch_of_a_producer_survives_a_restart(
    tmp_path: Path, clean: bool
) -> None:
    log = Log("t", 0, tmp_path, segment_bytes=120)  # small segments: snapshots on rolls
    append_txn(log, 1, [b"a" * 40])
    _marker(log, 1, coordinator_epoch=5)
    append_txn(log, 1, [b"b" * 40], seq=1)
    if clean:
        log.close()  # a snapshot holds it
    else:
        log.txn_index.close()
        for segment in log._segments:
            segment.close()  # the marker is replayed from the log
    again = Log("t", 0, tmp_path, segment_bytes=120, clean_shutdown=clean)
    with pytest.raises(errors.TransactionCoordinatorFencedError):
        _marker(again, 1, coordinator_epoch=4)
    _marker(again, 1, coordinator_epoch=5)
    again.close()


def test_a_version_2_snapshot_is_still_read(tmp_path: Path) -> None:
    v2 = _ENTRIES[2]
    body = _SNAPSHOT_HEAD.pack(7, 1) + v2.pack(9, 2, 1, -1) + _BATCH.pack(0, 4, 2, 6, 123)
    snapshot_path(tmp_path, 7).write_bytes(seal(_SNAPSHOT_MAGIC, 2, body))
    state = ProducerStateManager("t-0")
    assert state.load_snapshot(tmp_path, 7) == 7
    entry = state.entries[9]
    assert (entry.epoch, entry.last_seq, entry.coordinator_epoch) == (2, 4, -1)


def test_a_state_partitions_coordinator_epoch_never_goes_back_after_a_restart(
    tmp_path: Path,
) -> None:
    state = TransactionStateManager(tmp_path)
    assert state.coordinator_epoch("tx", 0) == 0
    assert state.coordinator_epoch("tx", 1) == 1  # broker 1 took the partition over
    state.close()
    reloaded = TransactionStateManager(tmp_path)
    assert reloaded.coordinator_epoch("tx", 1) == 1
    assert reloaded.coordinator_epoch("tx", 0) == 2
    assert txn_partition_for("tx") in reloaded._owners
    # a crash (no compaction): broker 0's takeover (epoch 2) is replayed from the records
    # log, so broker 1 taking the partition back gets 3, not its old 1 again
    reloaded._records.close()  # type: ignore[union-attr]
    assert TransactionStateManager(tmp_path).coordinator_epoch("tx", 1) == 3
