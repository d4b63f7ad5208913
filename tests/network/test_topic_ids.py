"""Topic ids in the producer's metadata (KIP-516): kept from Metadata answers (v10+) for
Produce v13; the zero uuid (Kafka's "unknown") is no id; a topic made again under its name
(a new id) starts its leader epochs again, as Java's ``Metadata`` does."""

from __future__ import annotations

import uuid

from kclient.network.metadata import Metadata, TopicPartition
from kclient.testing import metadata_update_with

T0 = 1_000_000
A = uuid.UUID("6a1f7c1e-0d35-4c11-8a49-0f3e2a9b7d11")
B = uuid.UUID("0b8e55d2-31c4-4f0e-9d7a-5c2f1e6a4b22")


def refreshed(md: Metadata, body: dict[str, object], now_ms: int) -> None:
    request = md.new_metadata_request(now_ms)
    md.update(request.request_version, body, request.is_partial_update, now_ms)


def test_each_topic_keeps_its_id_and_the_zero_uuid_is_none() -> None:
    md = Metadata()
    md.add("t", T0)
    md.add("u", T0)
    refreshed(
        md, metadata_update_with(1, {"t": 1, "u": 1}, topic_ids={"t": A, "u": uuid.UUID(int=0)}), T0
    )
    assert dict(md.fetch().topic_ids) == {"t": A}


def test_a_partial_update_keeps_the_ids_of_the_topics_it_does_not_name() -> None:
    md = Metadata()
    md.add("old", T0)
    refreshed(md, metadata_update_with(1, {"old": 1}, topic_ids={"old": A}), T0)
    md.add("new", T0 + 1)
    request = md.new_metadata_request(T0 + 1)
    assert request.is_partial_update
    body = metadata_update_with(1, {"new": 1}, topic_ids={"new": B})
    md.update(request.request_version, body, True, T0 + 1)
    assert dict(md.fetch().topic_ids) == {"old": A, "new": B}


def test_a_topic_made_again_starts_its_leader_epochs_again() -> None:
    md = Metadata()
    md.add("t", T0)
    refreshed(md, metadata_update_with(1, {"t": 1}, topic_ids={"t": A}, leader_epoch=7), T0)
    # the same id at an older epoch: a stale broker, the newer leader is kept
    refreshed(md, metadata_update_with(1, {"t": 1}, topic_ids={"t": A}, leader_epoch=3), T0 + 1)
    info = md.fetch().partition(TopicPartition("t", 0))
    assert info is not None and info.leader_epoch == 7
    # a new id: another topic of the same name, whose epochs start at 0
    refreshed(md, metadata_update_with(1, {"t": 1}, topic_ids={"t": B}, leader_epoch=0), T0 + 2)
    info = md.fetch().partition(TopicPartition("t", 0))
    assert info is not None and info.leader_epoch == 0
    assert md.fetch().topic_ids["t"] == B
