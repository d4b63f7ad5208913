"""The embedded broker's Produce v13 (KIP-516): topics named by id, as Kafka 4.1+ serves it.

An id the broker does not know (never made, or the id of a topic deleted since, even if one
was made again under its name) is UNKNOWN_TOPIC_ID for each of its partitions; the answer
names topics by id.
"""

from __future__ import annotations

import uuid
from typing import Any

from kclient import errors
from kclient.protocol import ApiKey


def produce_by_id(harness: Any, topic_id: uuid.UUID, records: bytes) -> dict[str, Any]:
    return harness.call(
        ApiKey.PRODUCE,
        13,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 30_000,
            "topic_data": [
                {"topic_id": topic_id, "partition_data": [{"index": 0, "records": records}]}
            ],
        },
    )


def test_v13_writes_to_the_topic_of_the_id(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    topic_id = harness.controller.topic("t").topic_id
    body = produce_by_id(harness, topic_id, make_batch([b"a", b"b"]))
    (topic,) = body["responses"]
    assert topic == {"topic_id": topic_id, "partition_responses": topic["partition_responses"]}
    (part,) = topic["partition_responses"]
    assert (part["error_code"], part["base_offset"]) == (0, 0)
    assert harness.controller.partition("t", 0).log.high_watermark == 2


def test_an_unknown_or_deleted_id_is_unknown_topic_id(harness: Any, make_batch: Any) -> None:
    harness.controller.create_topic("t", 1)
    old_id = harness.controller.topic("t").topic_id
    unknown = produce_by_id(harness, uuid.uuid4(), make_batch([b"a"]))
    assert unknown["responses"][0]["partition_responses"][0]["error_code"] == (
        errors.UnknownTopicIdError.code
    )
    harness.controller.delete_topic("t")
    harness.controller.create_topic("t", 1)  # the same name, a new id
    new_id = harness.controller.topic("t").topic_id
    assert new_id != old_id
    stale = produce_by_id(harness, old_id, make_batch([b"a"]))
    assert stale["responses"][0]["topic_id"] == old_id
    assert stale["responses"][0]["partition_responses"][0]["error_code"] == (
        errors.UnknownTopicIdError.code
    )
    assert harness.controller.partition("t", 0).log.high_watermark == 0
    fresh = produce_by_id(harness, new_id, make_batch([b"a"]))
    assert fresh["responses"][0]["partition_responses"][0]["error_code"] == 0
