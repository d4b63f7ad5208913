"""Produce v13 (KIP-516): topics named by id when the metadata gave every topic one.

As Java's ``Sender``: each topic goes with the id its metadata has; the answer names topics
by id and is matched back by the ids the request was sent with. UNKNOWN_TOPIC_ID is
retriable and refreshes the metadata; a topic deleted and made again under its name has a
new id, which the retry carries (and its leader epochs start again).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kclient import errors
from kclient.network.cluster import TopicPartition
from kclient.network.kafka_client import ClientRequest
from kclient.testing.client import metadata_update_with
from tests.sender.sender_helpers import Harness, make, produce_response

A = uuid.UUID("6a1f7c1e-0d35-4c11-8a49-0f3e2a9b7d11")
B = uuid.UUID("0b8e55d2-31c4-4f0e-9d7a-5c2f1e6a4b22")
UNKNOWN_TOPIC_ID = errors.UnknownTopicIdError.code


def topics_of(request: ClientRequest) -> list[dict[str, Any]]:
    return list(request.body["topic_data"])


def by_id(parts: dict[tuple[uuid.UUID, int], tuple[int, int]]) -> dict[str, Any]:
    """A v13 answer: topics by id only, ``parts[(id, partition)] = (error, base offset)``."""
    answer = produce_response({(str(i), p): v for (i, p), v in parts.items()})
    for topic in answer["responses"]:
        topic["topic_id"] = uuid.UUID(topic.pop("name"))
    return answer


def leader_epoch(h: Harness) -> int | None:
    info = h.client.metadata.fetch().partition(TopicPartition("t", 0))
    assert info is not None
    return info.leader_epoch


def test_every_topic_with_an_id_lets_the_request_use_v13() -> None:
    h = make(topics={"t": 1, "u": 1}, topic_ids={"t": A, "u": B})
    h.send("t", 0)
    h.send("u", 0)
    h.run()
    (request,) = h.produce_requests()
    assert request.max_version == 13
    assert {(t["name"], t["topic_id"]) for t in topics_of(request)} == {("t", A), ("u", B)}


def test_one_topic_without_an_id_keeps_the_request_at_v12() -> None:
    h = make(topics={"t": 1, "u": 1}, topic_ids={"t": A})  # "u": the zero uuid, no id
    h.send("t", 0)
    h.send("u", 0)
    h.run()
    (request,) = h.produce_requests()
    assert request.max_version == 12


def test_a_v13_answer_is_matched_to_its_batch_by_the_topic_id() -> None:
    h = make(topics={"t": 2}, topic_ids={"t": A})
    (first,) = h.send("t", 0)
    (second,) = h.send("t", 1)
    h.run()
    assert len(h.produce_requests()) == 1
    h.client.respond(by_id({(A, 0): (0, 40), (A, 1): (0, 70)}))
    h.run()
    assert (first.result(0).offset, second.result(0).offset) == (40, 70)
    assert first.result(0).topic == "t"


def test_an_answer_for_an_id_not_in_the_request_leaves_the_batch_unanswered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = make(topics={"t": 1}, topic_ids={"t": A}, retries=0)
    (future,) = h.send("t", 0)
    h.run()
    h.client.respond(by_id({(B, 0): (0, 1)}))
    h.run()
    assert isinstance(future.exception(0), errors.NetworkExceptionError)
    assert f"produce response for {B}-0, which was not in the request" in caplog.text


def test_unknown_topic_id_is_retried_after_a_metadata_refresh() -> None:
    h = make(topics={"t": 1}, topic_ids={"t": A}, retry_backoff_ms=100, retry_backoff_max_ms=100)
    (future,) = h.send("t", 0)
    h.run()
    h.client.respond(by_id({(A, 0): (UNKNOWN_TOPIC_ID, -1)}))
    h.run()
    assert not future.done()
    assert h.client.metadata.update_requested()
    h.clock.advance(100)
    h.run(2)
    assert len(h.produce_requests()) == 1
    h.client.respond(by_id({(A, 0): (0, 9)}))
    h.run()
    assert future.result(0).offset == 9


def test_a_topic_made_again_under_its_name_gets_the_retry_with_its_new_id() -> None:
    """Java's behaviour: the old id's UNKNOWN_TOPIC_ID refreshes the metadata, which has the
    new id (and leader epochs from 0 again, not stale ones); the retry goes there."""
    h = make(topics={"t": 1}, topic_ids={"t": A}, retry_backoff_ms=100, retry_backoff_max_ms=100)
    metadata = h.client.metadata
    now_ms = h.clock.monotonic_ms()
    version = metadata.new_metadata_request(now_ms).request_version
    metadata.update(
        version,
        metadata_update_with(1, {"t": 1}, topic_ids={"t": A}, leader_epoch=5),
        False,
        now_ms,
    )
    assert leader_epoch(h) == 5
    (future,) = h.send("t", 0)
    h.run()
    (request,) = h.produce_requests()
    assert topics_of(request)[0]["topic_id"] == A
    h.client.respond(by_id({(A, 0): (UNKNOWN_TOPIC_ID, -1)}))
    h.run()
    assert metadata.update_requested()
    # the refresh is answered within the retry backoff: the topic has its new id
    now_ms = h.clock.monotonic_ms()
    version = metadata.new_metadata_request(now_ms).request_version
    metadata.update(version, metadata_update_with(1, {"t": 1}, topic_ids={"t": B}), False, now_ms)
    h.clock.advance(100)
    h.run()
    assert leader_epoch(h) == 0  # the new topic's, not kept as stale
    (retry,) = h.produce_requests()
    assert topics_of(retry)[0]["topic_id"] == B
    h.client.respond(by_id({(B, 0): (0, 0)}))
    h.run()
    assert future.result(0).offset == 0
