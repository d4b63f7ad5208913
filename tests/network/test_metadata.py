"""Cluster (immutable, built from responses) and Metadata (refresh timing, topics, errors)."""

import random
import threading
from collections.abc import Callable

import pytest

from kclient import errors
from kclient.network.metadata import Cluster, Metadata, Node, TopicPartition
from kclient.testing import metadata_update_with

T0 = 1_000_000


def metadata(**kwargs: int) -> Metadata:
    return Metadata(
        refresh_backoff_ms=kwargs.get("backoff", 100),
        metadata_max_age_ms=kwargs.get("max_age", 300_000),
        metadata_max_idle_ms=kwargs.get("max_idle", 300_000),
    )


def refreshed(md: Metadata, body: dict[str, object], now_ms: int) -> None:
    request = md.new_metadata_request(now_ms)
    md.update(request.request_version, body, request.is_partial_update, now_ms)


def test_a_response_builds_a_cluster_with_leaders_replicas_and_controller() -> None:
    md = metadata()
    md.add("t", T0)
    refreshed(md, metadata_update_with(3, {"t": 4}), T0)
    cluster = md.fetch()
    assert [n.id for n in cluster.nodes] == [0, 1, 2]
    assert cluster.partition_count_for_topic("t") == 4
    assert cluster.leader_for(TopicPartition("t", 1)) == Node(1, "localhost", 9093)
    assert [p.partition for p in cluster.partitions_for_node(0)] == [0, 3]
    assert cluster.controller == Node(0, "localhost", 9092)
    assert cluster.cluster_id == "mock-cluster"


def test_an_update_replaces_the_cluster_and_leaves_the_old_one_untouched() -> None:
    md = metadata()
    md.add("t", T0)
    refreshed(md, metadata_update_with(2, {"t": 2}), T0)
    before = md.fetch()
    refreshed(md, metadata_update_with(2, {"t": 2}, leaders={("t", 0): 1}), T0 + 10)
    after = md.fetch()
    assert before is not after
    assert before.leader_for(TopicPartition("t", 0)) == Node(0, "localhost", 9092)
    assert after.leader_for(TopicPartition("t", 0)) == Node(1, "localhost", 9093)


def test_partitions_without_a_leader_are_not_available() -> None:
    md = metadata()
    md.add("t", T0)
    refreshed(md, metadata_update_with(2, {"t": 3}, leaders={("t", 1): -1}), T0)
    cluster = md.fetch()
    assert cluster.partition_count_for_topic("t") == 3
    assert [p.partition for p in cluster.available_partitions_for_topic("t")] == [0, 2]
    assert cluster.leader_for(TopicPartition("t", 1)) is None


def test_bootstrap_nodes_get_negative_ids() -> None:
    cluster = Cluster.bootstrap([("a", 9092), ("b", 9093)])
    assert [(n.id, n.address) for n in cluster.nodes] == [(-1, "a:9092"), (-2, "b:9093")]
    assert cluster.is_bootstrap_configured


def test_a_refresh_is_due_after_metadata_max_age_ms() -> None:
    md = metadata(max_age=300_000)
    refreshed(md, metadata_update_with(1), T0)
    assert md.time_to_next_update(T0) == 300_000
    assert md.time_to_next_update(T0 + 299_999) == 1
    assert md.time_to_next_update(T0 + 300_000) == 0


def test_a_requested_update_waits_only_for_the_retry_backoff() -> None:
    md = metadata(backoff=100)
    refreshed(md, metadata_update_with(1), T0)
    md.request_update()
    assert md.update_requested()
    assert md.time_to_next_update(T0 + 40) == 60
    assert md.time_to_next_update(T0 + 100) == 0
    refreshed(md, metadata_update_with(1), T0 + 100)
    assert not md.update_requested()


def test_a_failed_refresh_backs_off_before_the_next_attempt() -> None:
    md = metadata(backoff=100)
    md.request_update()
    md.failed_update(T0)
    assert 30 <= md.time_to_next_update(T0 + 50) <= 70  # 100 ms ± 20 % jitter
    assert md.time_to_next_update(T0 + 120) == 0
    assert md.update_requested()


def test_the_refresh_backoff_doubles_with_each_failure_in_a_row_up_to_the_maximum() -> None:
    md = Metadata(refresh_backoff_ms=100, refresh_backoff_max_ms=1000, rng=random.Random(7))
    md.request_update()
    waits = []
    now = T0
    for _ in range(7):
        md.failed_update(now)
        waits.append(md.time_to_next_update(now))
        now += waits[-1]
    for attempt, wait in enumerate(waits):
        expected = min(100 * 2**attempt, 1000)  # capped at retry.backoff.max.ms
        assert expected * 0.8 <= wait <= min(expected * 1.2, 1000), (attempt, waits)


def test_a_successful_refresh_resets_the_backoff() -> None:
    md = Metadata(refresh_backoff_ms=100, refresh_backoff_max_ms=1000)
    md.request_update()
    for i in range(5):
        md.failed_update(T0 + i * 1000)
    assert md.time_to_next_update(T0 + 4000) > 500  # backed off far beyond the base
    refreshed(md, metadata_update_with(1, {}), T0 + 5000)
    md.request_update()
    assert md.time_to_next_update(T0 + 5000) == 100  # the base again, no jitter


def test_a_new_topic_is_fetched_at_once_with_a_partial_request() -> None:
    md = metadata(backoff=100)
    md.add("old", T0)
    refreshed(md, metadata_update_with(1, {"old": 1}), T0)
    md.add("new", T0 + 1)
    assert md.time_to_next_update(T0 + 1) == 0  # new topics skip the backoff
    request = md.new_metadata_request(T0 + 1)
    assert request.is_partial_update
    assert request.body["topics"] == [{"name": "new"}]
    md.update(request.request_version, metadata_update_with(1, {"new": 2}), True, T0 + 1)
    assert md.fetch().topics == {"old", "new"}  # the partial update kept "old"
    assert not md.update_requested()


def test_a_full_request_names_every_topic_in_use() -> None:
    md = metadata()
    md.add("b", T0)
    md.add("a", T0)
    md.request_update()
    request = md.new_metadata_request(T0)
    assert not request.is_partial_update
    assert request.body == {
        "topics": [{"name": "a"}, {"name": "b"}],
        "allow_auto_topic_creation": True,
    }


def test_topics_not_used_for_metadata_max_idle_ms_expire() -> None:
    md = metadata(max_idle=60_000)
    md.add("busy", T0)
    md.add("idle", T0)
    refreshed(md, metadata_update_with(1, {"busy": 1, "idle": 1}), T0)
    md.add("busy", T0 + 50_000)
    refreshed(md, metadata_update_with(1, {"busy": 1, "idle": 1}), T0 + 60_000)
    assert md.topics() == {"busy"}
    assert md.fetch().topics == {"busy"}


def test_unknown_topic_is_recorded_but_not_fatal() -> None:
    md = metadata()
    md.add("missing", T0)
    refreshed(md, metadata_update_with(1, topic_errors={"missing": 3}), T0)
    assert isinstance(md.topic_error("missing"), errors.UnknownTopicOrPartitionError)
    md.maybe_raise_for_topic("missing")  # not fatal: the caller keeps waiting
    assert md.update_requested()  # invalid metadata → refresh again


def test_invalid_and_unauthorized_topics_are_fatal_for_that_topic_only() -> None:
    md = metadata()
    for topic in ("bad name", "secret", "fine"):
        md.add(topic, T0)
    body = metadata_update_with(1, {"fine": 1}, topic_errors={"bad name": 17, "secret": 29})
    refreshed(md, body, T0)
    with pytest.raises(errors.InvalidTopicError, match="bad name"):
        md.maybe_raise_for_topic("bad name")
    with pytest.raises(errors.TopicAuthorizationFailedError, match="secret"):
        md.maybe_raise_for_topic("secret")
    md.maybe_raise_for_topic("fine")
    assert md.fetch().unauthorized_topics == {"secret"}
    assert md.fetch().invalid_topics == {"bad name"}


def test_a_response_with_an_older_leader_epoch_keeps_the_newer_leader() -> None:
    md = metadata()
    md.add("t", T0)
    newer = metadata_update_with(2, {"t": 1}, leaders={("t", 0): 1})
    newer["topics"][0]["partitions"][0]["leader_epoch"] = 5
    refreshed(md, newer, T0)
    stale = metadata_update_with(2, {"t": 1}, leaders={("t", 0): 0})
    stale["topics"][0]["partitions"][0]["leader_epoch"] = 4
    refreshed(md, stale, T0 + 10)
    assert md.fetch().leader_for(TopicPartition("t", 0)) == Node(1, "localhost", 9093)
    assert md.update_requested()


class ReportedWait:
    """``Metadata``'s ``wait_for`` that reports a caller is about to wait.

    The report is made with the metadata lock held, and the wait releases it, so an update
    or error the test makes after ``wait_until_blocked`` reaches a waiting caller. The
    caller's own timeout stays (only a safety net in these tests).
    """

    def __init__(self) -> None:
        self.blocked = threading.Event()

    def __call__(
        self, condition: threading.Condition, predicate: Callable[[], bool], timeout_s: float | None
    ) -> bool:
        if not predicate():
            self.blocked.set()
        return condition.wait_for(predicate, timeout_s)

    def wait_until_blocked(self) -> None:
        assert self.blocked.wait(10), "await_update never blocked"  # a safety net only


def test_await_update_wakes_when_another_thread_updates() -> None:
    waits = ReportedWait()
    md = Metadata(wait_for=waits)
    version = md.update_version
    woke: list[bool] = []
    waiter = threading.Thread(
        target=lambda: woke.append(md.await_update(version, 60_000)), daemon=True
    )
    waiter.start()
    waits.wait_until_blocked()
    refreshed(md, metadata_update_with(1), T0)
    waiter.join(10)
    assert woke == [True]  # woken by the update, long before its 60 s timeout
    assert not md.await_update(md.update_version, 0)  # no newer update: times out


def test_await_update_raises_a_fatal_error() -> None:
    md = metadata()
    md.fatal_error(errors.ClusterAuthorizationFailedError("not allowed"))
    with pytest.raises(errors.ClusterAuthorizationFailedError):
        md.await_update(md.update_version, 1000)


def test_a_fatal_error_wakes_a_waiter_at_once_and_clearing_it_ends_it() -> None:
    waits = ReportedWait()
    md = Metadata(wait_for=waits)
    raised: list[BaseException] = []

    def wait() -> None:
        try:
            md.await_update(md.update_version, 60_000)  # far longer than the join below
        except errors.KafkaError as exc:
            raised.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waits.wait_until_blocked()
    md.fatal_error(errors.SaslAuthenticationError("wrong password"))
    waiter.join(10)
    assert not waiter.is_alive()
    assert isinstance(raised[0], errors.SaslAuthenticationError)
    md.fatal_error(None)
    md.maybe_raise_for_topic("t")  # cleared: nothing raised


# ---- a partition costs little (a topic may have hundreds of thousands) -------------------


def test_partitions_share_their_replica_tuples_and_their_keys() -> None:
    md = metadata()
    md.add("t", T0)
    refreshed(md, metadata_update_with(3, {"t": 300}), T0)
    cluster = md.fetch()
    infos = cluster.partitions_for_topic("t")
    assert infos[0].replicas is infos[3].replicas  # same leader, same one-node tuple
    assert not hasattr(infos[0], "__dict__")  # slots
    leaders = cluster.leaders_by_partition()
    for info in infos[:5]:
        key = next(k for k in leaders if k == info.topic_partition)
        assert key is info.topic_partition  # one TopicPartition per partition, shared


def test_a_topic_whose_partitions_are_not_0_to_n_is_still_found_by_index() -> None:
    body = metadata_update_with(2, {"t": 6})
    partitions = body["topics"][0]["partitions"]
    body["topics"][0]["partitions"] = [partitions[5], partitions[2], partitions[0]]
    md = metadata()
    md.add("t", T0)
    refreshed(md, body, T0)
    cluster = md.fetch()
    assert [p.partition for p in cluster.partitions_for_topic("t")] == [0, 2, 5]
    found = cluster.partition(TopicPartition("t", 5))
    assert found is not None and found.partition == 5
    assert cluster.leader_for(TopicPartition("t", 2)) == Node(0, "localhost", 9092)
    assert cluster.partition(TopicPartition("t", 1)) is None
    assert cluster.partition(TopicPartition("t", 6)) is None
    assert cluster.partition(TopicPartition("t", -1)) is None
    assert cluster.partition(TopicPartition("nope", 0)) is None
