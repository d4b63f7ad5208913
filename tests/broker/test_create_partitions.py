"""CreatePartitions on the embedded broker (Apis over a Controller, no sockets): a topic
grows to the count asked for, its new partitions get leaders and take records, a log dir
keeps them across a restart; a smaller or equal count, an unknown topic, a topic listed
twice, replica assignments or a count over ``max.partitions.per.topic`` are refused with
Kafka's error codes; ``validate_only`` changes nothing; the partitions added count against
the controller mutation quota (strictly from v3)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from kclient import errors
from kclient.broker.config import BrokerConfig
from kclient.broker.controller import BrokerEndpoint, Controller
from kclient.protocol import ApiKey

from .conftest import ApiHarness, batch


def grow(
    h: ApiHarness,
    topics: list[dict[str, Any]],
    *,
    version: int = 3,
    validate_only: bool = False,
) -> dict[str, Any]:
    body = {"topics": topics, "timeout_ms": 1000, "validate_only": validate_only}
    return h.call(ApiKey.CREATE_PARTITIONS, version, body)  # type: ignore[no-any-return]


def codes(body: dict[str, Any]) -> list[int]:
    return [r["error_code"] for r in body["results"]]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_a_topic_grows_and_its_new_partitions_take_records(make_harness: Any, version: int) -> None:
    h = make_harness(brokers=3)
    h.controller.create_topic("t", 2, 2)
    body = grow(h, [{"name": "t", "count": 5, "assignments": None}], version=version)
    assert body["results"] == [{"name": "t", "error_code": 0, "error_message": None}]
    partitions = h.controller.topic("t").partitions
    assert [p.index for p in partitions] == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 and p.leader_id in p.replicas for p in partitions)
    assert len({p.leader_id for p in partitions}) == 3  # spread over the brokers
    metadata = h.call(ApiKey.METADATA, 9, {"topics": [{"name": "t"}]})
    (topic,) = metadata["topics"]
    assert sorted(p["partition_index"] for p in topic["partitions"]) == [0, 1, 2, 3, 4]
    for p in partitions[2:]:
        answer = h.produce("t", batch([b"new"]), partition=p.index, node=p.leader_id)
        assert (answer["error_code"], answer["base_offset"]) == (0, 0)


def test_validate_only_checks_and_changes_nothing(harness: ApiHarness) -> None:
    harness.controller.create_topic("t", 2)
    body = grow(harness, [{"name": "t", "count": 4, "assignments": None}], validate_only=True)
    assert codes(body) == [0]
    assert len(harness.controller.topic("t").partitions) == 2


@pytest.mark.parametrize(
    ("spec", "error", "message"),
    [
        (
            {"name": "t", "count": 1},
            errors.InvalidPartitionsError,
            "topic 't' has 2 partitions, more than the 1 asked for; partitions can only be added",
        ),
        ({"name": "t", "count": 2}, errors.InvalidPartitionsError, "already has 2 partitions"),
        ({"name": "nope", "count": 3}, errors.UnknownTopicOrPartitionError, "does not exist"),
        (
            {"name": "t", "count": 3, "assignments": [{"broker_ids": [0]}]},
            errors.InvalidReplicaAssignmentError,
            "replica assignments for new partitions are not supported",
        ),
        (
            {"name": "t", "count": 10_001},
            errors.InvalidPartitionsError,
            r"more than this broker allows per topic \('max.partitions.per.topic' is 10000\)",
        ),
    ],
)
def test_a_bad_request_is_refused_with_kafkas_error(
    harness: ApiHarness, spec: dict[str, Any], error: type[errors.KafkaError], message: str
) -> None:
    harness.controller.create_topic("t", 2)
    (result,) = grow(harness, [{"assignments": None} | spec])["results"]
    assert result["error_code"] == error.code
    assert result["error_message"] is not None
    assert re.search(message, result["error_message"])
    assert len(harness.controller.topic("t").partitions) == 2


def test_a_topic_listed_twice_is_refused(harness: ApiHarness) -> None:
    harness.controller.create_topic("t", 1)
    spec = {"name": "t", "count": 3, "assignments": None}
    assert codes(grow(harness, [spec, spec])) == [errors.InvalidRequestError.code] * 2
    assert len(harness.controller.topic("t").partitions) == 1


def test_v3_over_the_quota_is_refused_and_v2_is_grown_and_throttled(make_harness: Any) -> None:
    h = make_harness(quota_controller_mutation_rate=2)  # a burst of 20 partitions
    for name in ("a", "b", "c"):
        h.controller.create_topic(name, 1)
    specs = [{"name": n, "count": 16, "assignments": None} for n in ("a", "b", "c")]
    body = grow(h, specs, version=3)
    # a: 15 (5 left); b: 15 (10 below zero, accepted); c: refused
    assert codes(body) == [0, 0, errors.ThrottlingQuotaExceededError.code]
    assert [len(h.controller.topic(n).partitions) for n in "abc"] == [16, 16, 1]
    assert body["throttle_time_ms"] == 5000
    h2 = make_harness(quota_controller_mutation_rate=2)
    for name in ("a", "b", "c"):
        h2.controller.create_topic(name, 1)
    body = grow(h2, specs, version=2)
    assert codes(body) == [0, 0, 0]
    assert body["throttle_time_ms"] == 12_500  # 25 below zero at 2 a second


def test_the_new_partitions_survive_a_restart_with_a_log_dir(tmp_path: Path) -> None:
    config = BrokerConfig(log_dir=str(tmp_path))
    first = Controller(config, [0])
    first.broker_started(BrokerEndpoint(0, "127.0.0.1", 9092))
    first.create_topic("t", 1)
    assert first.create_partitions("t", 3) == 2
    first.close()
    again = Controller(config, [0])
    again.broker_started(BrokerEndpoint(0, "127.0.0.1", 9092))
    assert [p.index for p in again.topic("t").partitions] == [0, 1, 2]
    again.close()


def test_the_broker_advertises_create_partitions(harness: ApiHarness) -> None:
    body = harness.call(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    (key,) = [k for k in body["api_keys"] if k["api_key"] == ApiKey.CREATE_PARTITIONS]
    assert (key["min_version"], key["max_version"]) == (0, 3)
