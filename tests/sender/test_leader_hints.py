"""KIP-951: a Produce answer that says NOT_LEADER_OR_FOLLOWER (or FENCED_LEADER_EPOCH) and
names the partition's new leader moves the batch there at once, without the retry backoff
and without a metadata refresh; a hint that is stale, names the answering node or a node
nobody knows is not followed (backoff and refresh, as without hints)."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.network.cluster import Node, TopicPartition
from kclient.network.metadata import Metadata
from kclient.testing.client import metadata_update_with
from tests.sender.sender_helpers import Harness, make, ok, partitions_in, produce_response

NOT_LEADER = errors.NotLeaderOrFollowerError.code
FENCED = errors.FencedLeaderEpochError.code
TP = TopicPartition("t", 0)


def hinted(
    h: Harness,
    *,
    leader_id: int,
    epoch: int,
    code: int = NOT_LEADER,
    endpoints: list[dict[str, Any]] | None = None,
) -> None:
    """Answer the oldest Produce request: every partition ``code`` with the leader hint."""
    (request, *_) = h.produce_requests()
    answer = produce_response(
        {tp: (code, -1) for tp in partitions_in(request)},
        current_leader={"leader_id": leader_id, "leader_epoch": epoch},
    )
    if endpoints is not None:
        answer["node_endpoints"] = endpoints
    h.client.respond_to(request, answer)


def started(nodes: int = 3) -> tuple[Harness, Any]:
    """A producer whose one record's first Produce request went to node 0, epoch 0."""
    h = make(nodes=nodes, topics={"t": 1}, leaders={("t", 0): 0})
    (future,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    assert request.destination == 0
    return h, future


@pytest.mark.parametrize("code", [NOT_LEADER, FENCED])
def test_the_retry_goes_to_the_named_leader_at_once_without_a_refresh(code: int) -> None:
    h, future = started()
    version = h.client.metadata.update_version
    hinted(h, leader_id=2, epoch=1, code=code)
    h.run()  # the answer: the metadata moves the partition to node 2
    assert not h.client.metadata.update_requested()
    h.run()  # no clock advance: no retry backoff
    (retry,) = h.produce_requests()
    assert retry.destination == 2
    assert h.client.metadata.fetch().partition(TP).leader_epoch == 1  # type: ignore[union-attr]
    h.client.respond_to(retry, ok(retry, base_offset=41))
    h.run()
    assert future.result(0).offset == 41
    assert h.client.metadata.update_version == version  # no Metadata request was answered
    assert h.sender.metrics.snapshot()["leader-hint-followed-total"] == 1


def test_a_new_leader_known_only_from_the_answers_endpoints_is_added() -> None:
    h, future = started(nodes=2)
    endpoint = {"node_id": 7, "host": "broker-7.example", "port": 9097, "rack": "r1"}
    hinted(h, leader_id=7, epoch=3, endpoints=[endpoint])
    h.run(2)
    (retry,) = h.produce_requests()
    assert retry.destination == 7
    cluster = h.client.metadata.fetch()
    assert cluster.node_by_id(7) == Node(7, "broker-7.example", 9097, "r1")
    assert cluster.leader_for(TP) == Node(7, "broker-7.example", 9097, "r1")
    h.client.respond_to(retry, ok(retry, base_offset=3))
    h.run()
    assert future.result(0).offset == 3


@pytest.mark.parametrize(
    ("leader_id", "epoch", "why"),
    [
        (2, 0, "an epoch not newer than the known one"),
        (0, 1, "the answering node itself"),
        (9, 1, "a node neither the metadata nor the answer knows"),
        (-1, -1, "no leader (-1, -1)"),
    ],
)
def test_a_hint_that_cannot_be_followed_waits_for_the_backoff_and_a_refresh(
    leader_id: int, epoch: int, why: str
) -> None:
    h, future = started()
    hinted(h, leader_id=leader_id, epoch=epoch)
    h.run()
    assert h.client.metadata.update_requested() or h.client.metadata.update_version > 1, why
    assert h.client.metadata.fetch().leader_for(TP) == Node(0, "localhost", 9092), why
    h.run()
    assert h.produce_requests() == [], f"{why}: retried before the backoff"
    h.clock.advance(100)
    h.run()
    (retry,) = h.produce_requests()
    assert retry.destination == 0, why
    h.client.respond_to(retry, ok(retry, base_offset=8))
    h.run()
    assert future.result(0).offset == 8, why
    assert h.sender.metrics.snapshot()["leader-hint-followed-total"] == 0, why


def test_batches_in_flight_to_the_old_leader_all_follow_the_same_hint() -> None:
    h = make(nodes=3, topics={"t": 1}, leaders={("t", 0): 0}, batch_size=200)
    futures = []
    for _ in range(3):  # three requests in flight to node 0 (max in flight 5)
        futures += h.send("t", 0, value=b"x" * 150)
        h.run()
    assert [r.destination for r in h.produce_requests()] == [0, 0, 0]
    for _ in range(3):  # each answer names node 1, epoch 4: the first moves it, the rest agree
        hinted(h, leader_id=1, epoch=4)
        h.run()
    assert not h.client.metadata.update_requested()
    h.run()
    retries = h.produce_requests()
    assert [r.destination for r in retries] == [1] * len(retries) and retries
    assert h.sender.metrics.snapshot()["leader-hint-followed-total"] == 3
    while h.produce_requests():
        request = h.produce_requests()[0]
        h.client.respond_to(request, ok(request, base_offset=10 * len(futures)))
        h.run()
    assert all(f.done() and f.exception(0) is None for f in futures)


def test_a_hint_for_one_partition_leaves_the_others_where_they_are() -> None:
    h = make(nodes=3, topics={"t": 2}, leaders={("t", 0): 0, ("t", 1): 0})
    h.send("t", 0)
    h.send("t", 1)
    h.run()
    (request,) = h.produce_requests()
    answer = produce_response({("t", 0): (NOT_LEADER, -1), ("t", 1): (0, 5)})
    answer["responses"][0]["partition_responses"][0]["current_leader"] = {
        "leader_id": 2,
        "leader_epoch": 1,
    }
    h.client.respond_to(request, answer)
    h.run(2)
    (retry,) = h.produce_requests()
    assert retry.destination == 2 and partitions_in(retry) == [("t", 0)]
    cluster = h.client.metadata.fetch()
    assert cluster.leader_for(TopicPartition("t", 1)) == Node(1 - 1, "localhost", 9092)


# ---- Metadata.update_partition_leadership itself ------------------------------------------


def metadata(nodes: int = 3) -> Metadata:
    m = Metadata()
    m.add("t", 0)
    m.update(0, metadata_update_with(nodes, {"t": 2}, leaders={("t", 0): 0, ("t", 1): 1}), False, 0)
    return m


def test_only_newer_epochs_of_known_partitions_on_known_nodes_are_taken() -> None:
    m = metadata()
    before = m.fetch()
    followed = m.update_partition_leadership(
        {
            TopicPartition("t", 0): (2, 1),  # newer: taken
            TopicPartition("t", 1): (2, 0),  # same epoch, another leader: stale
            TopicPartition("t", 5): (2, 9),  # a partition the metadata does not have
            TopicPartition("u", 0): (2, 9),  # a topic it does not have
        },
        [],
    )
    assert followed == {TopicPartition("t", 0)}
    after = m.fetch()
    assert after is not before
    assert after.leader_for(TopicPartition("t", 0)) == Node(2, "localhost", 9094)
    assert after.partition(TopicPartition("t", 0)).leader_epoch == 1  # type: ignore[union-attr]
    assert after.leader_for(TopicPartition("t", 1)) == Node(1, "localhost", 9093)
    assert [p.partition for p in after.partitions_for_node(2)] == [0]
    assert after.topics == {"t"}


def test_an_older_metadata_response_does_not_undo_a_followed_hint() -> None:
    m = metadata()
    m.update_partition_leadership({TopicPartition("t", 0): (2, 3)}, [])
    stale = metadata_update_with(3, {"t": 2}, leaders={("t", 0): 0, ("t", 1): 1})  # epoch 0
    m.update(0, stale, False, 10)
    assert m.fetch().leader_for(TopicPartition("t", 0)) == Node(2, "localhost", 9094)


def test_endpoints_replace_known_nodes_and_nothing_changes_for_a_known_hint() -> None:
    m = metadata()
    moved = Node(1, "elsewhere", 19093)
    followed = m.update_partition_leadership({TopicPartition("t", 1): (1, 0)}, [moved])
    assert followed == {TopicPartition("t", 1)}  # already its leader at that epoch
    cluster = m.fetch()
    assert cluster.node_by_id(1) == moved
    assert cluster.leader_for(TopicPartition("t", 1)) == moved  # re-pointed to the new address
    unchanged = m.fetch()
    assert m.update_partition_leadership({TopicPartition("t", 1): (1, 0)}, [moved]) == {
        TopicPartition("t", 1)
    }
    assert m.fetch() is unchanged  # nothing new: the same Cluster
