"""DescribeProducers and WriteTxnMarkers through Apis (no sockets, a fake clock): what an
admin tool sees of a partition's producers and how it aborts a hanging transaction
(Kafka's ``kafka-transactions.sh describe-producers`` / ``abort``)."""

from __future__ import annotations

from typing import Any

from kclient import errors
from kclient.protocol import ApiKey
from tests.broker.conftest import NOW_MS
from tests.broker.txn_harness import TxnClient, fetch, values

NONE = 0


def _describe(h: Any, topic: str, *partitions: int, node: int = 0) -> list[dict[str, Any]]:
    body = {"topics": [{"name": topic, "partition_indexes": list(partitions)}]}
    parts: list[dict[str, Any]] = h.call(ApiKey.DESCRIBE_PRODUCERS, 0, body, node)["topics"][0][
        "partitions"
    ]
    return parts


def _abort(h: Any, producer_id: int, epoch: int, coordinator_epoch: int, version: int = 1) -> int:
    body = {
        "markers": [
            {
                "producer_id": producer_id,
                "producer_epoch": epoch,
                "transaction_result": False,
                "topics": [{"name": "t", "partition_indexes": [0]}],
                "coordinator_epoch": coordinator_epoch,
            }
        ]
    }
    r = h.call(ApiKey.WRITE_TXN_MARKERS, version, body)
    code: int = r["markers"][0]["topics"][0]["partitions"][0]["error_code"]
    return code


def test_describe_producers_shows_each_producers_state_and_open_transaction(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    done = TxnClient(harness, "done")
    done.init()
    done.add_partitions(("t", 0))
    done.produce("t", [b"a", b"b"])
    assert done.end(commit=True) == NONE  # its marker at offset 2
    open_ = TxnClient(harness, "open")
    open_.init()
    open_.add_partitions(("t", 0))
    open_.produce("t", [b"c"])  # at offset 3, still open
    (partition,) = _describe(harness, "t", 0)
    assert partition["error_code"] == NONE
    by_id = {p["producer_id"]: p for p in partition["active_producers"]}
    assert by_id[done.producer_id] == {
        "producer_id": done.producer_id,
        "producer_epoch": 0,
        "last_sequence": 1,
        "last_timestamp": NOW_MS + 1,
        "coordinator_epoch": 0,
        "current_txn_start_offset": -1,
    }
    assert by_id[open_.producer_id]["current_txn_start_offset"] == 3
    assert by_id[open_.producer_id]["coordinator_epoch"] == -1  # no marker here yet


def test_describe_producers_of_a_partition_not_led_here_or_unknown(make_harness: Any) -> None:
    h = make_harness(brokers=2)
    h.controller.create_topic("t", 2)
    leaders = {i: h.controller.partition("t", i).leader_id for i in (0, 1)}
    other = next(i for i, leader in leaders.items() if leader != 0)
    parts = _describe(h, "t", other, 7)
    assert [p["error_code"] for p in parts] == [
        errors.NotLeaderOrFollowerError.code,
        errors.UnknownTopicOrPartitionError.code,
    ]


def test_an_admin_aborts_a_hanging_transaction_with_write_txn_markers(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    hanging = TxnClient(harness, "hanging")
    hanging.init()
    hanging.add_partitions(("t", 0))
    hanging.produce("t", [b"stuck"])
    later = TxnClient(harness, "later")
    later.init()
    later.add_partitions(("t", 0))
    later.produce("t", [b"after"])
    assert later.end(commit=True) == NONE
    # the open transaction holds read_committed consumers back
    assert values(fetch(harness, "t", read_committed=True)) == []
    (partition,) = _describe(harness, "t", 0)
    (state,) = [p for p in partition["active_producers"] if p["current_txn_start_offset"] >= 0]
    pid, epoch = state["producer_id"], state["producer_epoch"]
    # a stale epoch is refused and writes nothing
    assert _abort(harness, pid, epoch - 1, -1) == errors.InvalidProducerEpochError.code
    assert values(fetch(harness, "t", read_committed=True)) == []
    assert _abort(harness, pid, epoch, state["coordinator_epoch"], version=0) == NONE
    got = fetch(harness, "t", read_committed=True)
    assert values(got) == [b"after"]
    assert [a["producer_id"] for a in got["aborted_transactions"]] == [pid]
    (after,) = [
        p for p in _describe(harness, "t", 0)[0]["active_producers"] if p["producer_id"] == pid
    ]
    assert after["current_txn_start_offset"] == -1


def test_a_marker_from_an_older_coordinator_epoch_is_fenced(harness: Any) -> None:
    harness.controller.create_topic("t", 1)
    client = TxnClient(harness, "tx")
    client.init()
    client.add_partitions(("t", 0))
    client.produce("t", [b"a"])
    assert client.end(commit=True) == NONE
    harness.apis[0].txn_coordinator.markers.controller.partition("t", 0).producer_state.entries[
        client.producer_id
    ].coordinator_epoch = 4
    fenced = errors.TransactionCoordinatorFencedError.code
    assert _abort(harness, client.producer_id, client.epoch, 3) == fenced
    assert _abort(harness, client.producer_id, client.epoch, 4) == NONE
