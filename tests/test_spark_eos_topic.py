"""The exactly-once sink checks its topic on the driver before any task runs (issue 31,
item 2): a topic the cluster creates on first use is created there (a Metadata request
that allows it, as a producer's first send); a cluster that does not create it fails at
once naming the topic and what to do (before: the tasks ran, then every OffsetCommit of the
sink's state was retried until 'max.block.ms', 72 s, ran out)."""

from __future__ import annotations

import pytest

from kclient import errors
from kclient.spark.eos_task import check_target_topic
from kclient.testing import MockClock
from kclient.testing.client import MockClient, metadata_update_with

UNKNOWN = errors.UnknownTopicOrPartitionError.code
LEADER_NOT_AVAILABLE = errors.LeaderNotAvailableError.code


def _client(*answers: dict[str, object]) -> tuple[MockClock, MockClient]:
    clock = MockClock(auto_tick_ms=1)
    client = MockClient(clock, metadata_update_with(1, {"other": 1}))
    for answer in answers:
        client.prepare_metadata_update(answer)
    return clock, client


def test_a_topic_that_exists_passes_at_once() -> None:
    clock, client = _client(metadata_update_with(1, {"out": 3}))
    check_target_topic(client, clock, "out", 60_000)
    assert clock.monotonic_ms() < 1_000


def test_a_cluster_that_creates_topics_on_first_use_creates_it() -> None:
    clock, client = _client(
        metadata_update_with(1, {"other": 1}, topic_errors={"out": LEADER_NOT_AVAILABLE}),
        metadata_update_with(1, {"out": 1}),
    )
    asked: list[object] = []
    original = client.metadata.new_metadata_request

    def recording(now_ms: int):  # type: ignore[no-untyped-def]
        wanted = original(now_ms)
        asked.append(wanted.body.get("allow_auto_topic_creation"))
        return wanted

    client.metadata.new_metadata_request = recording  # type: ignore[method-assign]
    check_target_topic(client, clock, "out", 60_000)
    assert asked and all(asked)  # the cluster was allowed to create it


def test_a_topic_the_cluster_will_not_create_fails_at_once_naming_it() -> None:
    clock, client = _client(
        *[metadata_update_with(1, {"other": 1}, topic_errors={"out": UNKNOWN})] * 100
    )
    with pytest.raises(errors.UnknownTopicOrPartitionError) as info:
        check_target_topic(client, clock, "out", 60_000)
    assert clock.monotonic_ms() < 1_000  # not max.block.ms
    text = str(info.value)
    assert "'out'" in text and "does not exist" in text
    assert "create it first" in text and "auto.create.topics.enable" in text


def test_a_refused_name_is_said_at_once() -> None:
    clock, client = _client(
        metadata_update_with(1, {}, topic_errors={"bad name!": errors.InvalidTopicError.code})
    )
    with pytest.raises(errors.InvalidTopicError, match="cannot write to topic 'bad name!'"):
        check_target_topic(client, clock, "bad name!", 60_000)


def test_a_topic_without_a_leader_times_out_at_max_block_ms() -> None:
    clock, client = _client(
        *[metadata_update_with(1, {"out": 1}, leaders={("out", 0): -1})] * 10_000
    )
    with pytest.raises(errors.KafkaTimeoutError, match="no leader within 2000 ms"):
        check_target_topic(client, clock, "out", 2_000)
