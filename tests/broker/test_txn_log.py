"""Transactions in the partition log: last stable offset, markers, the aborted-transaction
index, read_committed Fetch / ListOffsets, and all of it after a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kclient import errors
from kclient.broker.log import Log
from kclient.broker.txn_index import AbortedTxn
from kclient.protocol import ApiKey
from kclient.record import assign_offsets, iter_batches
from tests.broker.txn_harness import TxnClient, fetch, txn_batch, values

NONE = 0


def append_txn(log: Log, producer_id: int, vals: list[bytes], seq: int = 0, epoch: int = 0) -> int:
    buf = bytearray(txn_batch(vals, producer_id, epoch, seq))
    base = log.log_end_offset
    assign_offsets(buf, base)
    last = base + len(vals) - 1
    log.append(buf, [(0, len(buf), base, last, 0)])
    info = log.producer_state.prepare()
    from kclient.broker.producer_state import BatchMetadata

    info.append(
        producer_id,
        epoch,
        BatchMetadata(seq, seq + len(vals) - 1, base, last, 0),
        transactional=True,
    )
    info.commit()
    return base


def marker(log: Log, producer_id: int, *, committed: bool, epoch: int = 0) -> int:
    return log.append_marker(
        producer_id=producer_id,
        producer_epoch=epoch,
        coordinator_epoch=0,
        committed=committed,
        leader_epoch=0,
        now_ms=1,
    )


def test_last_stable_offset_is_the_first_offset_of_the_earliest_open_transaction() -> None:
    log = Log("t", 0, None, 1 << 20)
    append_txn(log, 1, [b"a"])  # 0
    append_txn(log, 2, [b"b", b"c"])  # 1-2
    assert log.last_stable_offset == 0
    assert marker(log, 1, committed=True) == 3
    assert log.last_stable_offset == 1
    assert marker(log, 2, committed=False) == 4
    assert log.last_stable_offset == log.high_watermark == 5
    everything = log.bytes_after(0)
    assert log.aborted_transactions(0, everything) == [AbortedTxn(2, 1, 4, 5)]
    first_batch = len(log.read(0, 1, True)[0])  # offset 0 only: before the aborted one
    assert log.aborted_transactions(0, first_batch) == []
    assert log.aborted_transactions(5, 0) == []
    # a read up to the LSO ends before the open transaction's first batch
    log2 = Log("t", 1, None, 1 << 20)
    append_txn(log2, 1, [b"a"])
    marker(log2, 1, committed=True)
    append_txn(log2, 1, [b"b"], seq=1)
    read = log2.read(0, 1 << 20, True, log2.last_stable_offset)
    assert [b.base_offset for buf in read for b in iter_batches(buf)] == [0, 1]
    assert log2.bytes_after(0, log2.last_stable_offset) == sum(len(b) for b in read)


def test_open_transactions_and_aborted_index_survive_a_restart(tmp_path: Path) -> None:
    for clean in (True, False):
        d = tmp_path / f"t-{clean}"
        log = Log("t", 0, d, segment_bytes=200)  # small segments: snapshots on rolls
        append_txn(log, 1, [b"a" * 50])
        append_txn(log, 2, [b"b" * 50])
        marker(log, 2, committed=False)
        append_txn(log, 3, [b"c" * 50])
        marker(log, 1, committed=True)
        lso, aborted = log.last_stable_offset, log.aborted_transactions(0, log.bytes_after(0))
        if clean:
            log.close()
        else:
            log.txn_index.close()
            for s in log._segments:
                s.close()
        again = Log("t", 0, d, segment_bytes=200, clean_shutdown=clean)
        found = again.aborted_transactions(0, again.bytes_after(0))
        assert (again.last_stable_offset, found) == (lso, aborted)
        assert lso == 3 and aborted == [AbortedTxn(2, 1, 2, 0)]
        again.close()


def test_read_committed_list_offsets_answers_the_last_stable_offset(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_partitions(("t", 0))
    client.produce("t", [b"a", b"b"])

    def latest(isolation: int) -> int:
        r = harness.call(
            ApiKey.LIST_OFFSETS,
            5,
            {
                "replica_id": -1,
                "isolation_level": isolation,
                "topics": [{"name": "t", "partitions": [{"partition_index": 0, "timestamp": -1}]}],
            },
        )
        offset: int = r["topics"][0]["partitions"][0]["offset"]
        return offset

    assert (latest(1), latest(0)) == (0, 2)
    client.end(commit=True)
    assert (latest(1), latest(0)) == (3, 3)


def test_a_non_transactional_write_during_the_producers_transaction_is_refused(
    harness: Any,
) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_partitions(("t", 0))
    client.produce("t", [b"a"])
    plain = client.produce("t", [b"b"], transactional=False)
    assert plain["error_code"] == errors.InvalidTxnStateError.code


def test_a_read_committed_long_poll_completes_when_the_transaction_commits(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_partitions(("t", 0))
    client.produce("t", [b"a"])
    body = harness.fetch_body("t", 0, max_wait_ms=10_000)
    body["isolation_level"] = 1
    request = harness.request(ApiKey.FETCH, 11, body)
    harness.apis[0].handle(request)
    assert harness.channel.receive_response(0) is None  # waits: nothing stable yet
    coordinator = harness.apis[0].txn_coordinator
    assert coordinator.handle_end_txn("tx", client.producer_id, client.epoch, True).error == NONE
    response = harness.channel.receive_response(0)
    assert response is not None
    got = harness.decode(response)["responses"][0]["partitions"][0]
    assert values(got) == [b"a"]


def test_transaction_state_survives_a_restart_and_prepared_markers_are_written(
    tmp_path: Path, make_harness: Any
) -> None:
    from kclient.broker.txn_metadata import TransactionState
    from kclient.broker.txn_state import TransactionStateManager

    h = make_harness(log_dir=str(tmp_path))
    state = TransactionStateManager(tmp_path)
    h.apis[0].txn_coordinator.state = state
    h.controller.create_topic("t", 1)
    client = TxnClient(h, "tx")
    client.init()
    client.add_partitions(("t", 0))
    client.produce("t", [b"a"])
    ongoing = state.get("tx")
    assert ongoing is not None
    # a crash after PrepareCommit was written, before any marker
    state.put(ongoing.prepare_abort_or_commit(True, h.now_ms))
    reloaded = TransactionStateManager(tmp_path)
    prepared = reloaded.get("tx")
    assert prepared is not None and prepared.state is TransactionState.PREPARE_COMMIT
    assert prepared.partitions == {("t", 0)} and prepared.producer_epoch == 0
    coordinator = h.apis[0].txn_coordinator
    coordinator.state = reloaded
    assert values(fetch(h, "t", read_committed=True)) == []
    coordinator.complete_prepared()
    assert values(fetch(h, "t", read_committed=True)) == [b"a"]
    done = TransactionStateManager(tmp_path).get("tx")
    assert done is not None and done.state is TransactionState.COMPLETE_COMMIT


def test_a_batch_of_a_newer_epoch_keeps_the_open_transaction_unstable() -> None:
    from kclient.broker.producer_state import BatchMetadata, ProducerStateManager

    state = ProducerStateManager("t-0")
    info = state.prepare()
    info.append(1, 0, BatchMetadata(0, 0, 5, 5, 0), transactional=True)
    info.commit()
    info = state.prepare()
    info.append(1, 1, BatchMetadata(0, 0, 6, 6, 0))
    info.commit()
    assert state.first_unstable_offset() == 5
