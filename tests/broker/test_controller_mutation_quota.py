"""The controller mutation quota (KIP-599): the token bucket, strict and permissive
quotas, and CreateTopics/DeleteTopics over it (Apis with a fake clock, no sockets)."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.broker.client_quotas import ClientQuotas, entity
from kclient.broker.controller_mutation_quota import ControllerMutationQuotaManager, TokenBucket
from kclient.broker.request_channel import SendResponse
from kclient.protocol import ApiKey
from kclient.protocol.types import ZERO_UUID

from .conftest import ApiHarness

T0 = 5_000_000


def test_the_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    bucket = TokenBucket(100, T0)
    bucket.record(150, 10, 100, T0)
    assert bucket.measure(10, 100, T0) == -50
    assert bucket.measure(10, 100, T0 + 5000) == 0
    assert bucket.measure(10, 100, T0 + 60_000) == 100  # never above the burst


def test_strict_refuses_once_the_bucket_is_below_zero_and_counts_nothing() -> None:
    quotas = ClientQuotas({"controller_mutation_rate": 10})  # burst: 10 windows * 10 = 100
    manager = ControllerMutationQuotaManager(quotas)
    quota = manager.new_quota_for("ANONYMOUS", "admin", strict=True)
    quota.record(150, T0)  # the bucket is not below zero yet: accepted, down to -50
    with pytest.raises(errors.ThrottlingQuotaExceededError, match="controller_mutation_rate"):
        quota.record(1, T0)
    assert quota.throttle_time_ms(T0) == 5000  # 50 tokens at 10 a second
    assert quota.throttle_time_ms(T0 + 2000) == 3000  # less what has passed
    # refused mutations were not counted: 5 s later the bucket is at zero and takes more
    manager.new_quota_for("ANONYMOUS", "admin", strict=True).record(10, T0 + 5000)  # no raise
    (m,) = manager.metrics(T0 + 5000)
    assert (m.quota_type, m.client_id, m.quota, m.throttle_count) == (
        "ControllerMutation",
        "admin",
        10,
        1,
    )


def test_permissive_accepts_and_throttles() -> None:
    manager = ControllerMutationQuotaManager(ClientQuotas({"controller_mutation_rate": 10}))
    quota = manager.new_quota_for("ANONYMOUS", "admin", strict=False)
    quota.record(100, T0)
    assert quota.throttle_time_ms(T0) == 0
    quota.record(30, T0)  # accepted, 30 below zero
    assert quota.throttle_time_ms(T0) == 3000


def test_without_a_quota_mutations_are_unbounded() -> None:
    quota = ControllerMutationQuotaManager(ClientQuotas()).new_quota_for("u", "c", strict=True)
    for _ in range(100):
        quota.record(10**6, T0)
    assert quota.throttle_time_ms(T0) == 0


def create(h: ApiHarness, names: list[str], partitions: int, version: int = 7) -> Any:
    body = {
        "topics": [
            {
                "name": n,
                "num_partitions": partitions,
                "replication_factor": 1,
                "assignments": [],
                "configs": [],
            }
            for n in names
        ],
        "timeout_ms": 1000,
        "validate_only": False,
    }
    request = h.request(ApiKey.CREATE_TOPICS, version, body, "admin")
    response = h.handle(request)
    assert isinstance(response, SendResponse)
    return request, h.decode(response)


def test_create_topics_v6_over_the_quota_is_refused_with_throttling_quota_exceeded(
    make_harness: Any,
) -> None:
    h = make_harness(quota_controller_mutation_rate=2)  # burst of 20 partitions
    request, body = create(h, ["a", "b", "c"], 15)
    codes = [t["error_code"] for t in body["topics"]]
    # a: 15 (5 left); b: 15 (10 below zero, accepted); c: refused
    assert codes == [0, 0, errors.ThrottlingQuotaExceededError.code]
    assert "throttling quota has been exceeded" in body["topics"][2]["error_message"]
    assert set(h.controller.topics) == {"a", "b"}
    assert body["throttle_time_ms"] == request.throttle_time_ms == 5000  # 10 at 2 a second
    # after waiting it out, the client may create again
    h.clock.advance(5000)
    _, body = create(h, ["c"], 1)
    assert body["topics"][0]["error_code"] == 0


def test_create_topics_v5_over_the_quota_is_created_and_throttled(make_harness: Any) -> None:
    h = make_harness(quota_controller_mutation_rate=2)
    request, body = create(h, ["a", "b", "c"], 15, version=5)
    assert [t["error_code"] for t in body["topics"]] == [0, 0, 0]
    assert body["throttle_time_ms"] == request.throttle_time_ms == 12_500  # 25 at 2 a second


def test_a_refused_topic_counts_nothing(make_harness: Any) -> None:
    h = make_harness(quota_controller_mutation_rate=2)
    h.controller.create_topic("a", 1)
    _, body = create(h, ["a", "bad name!"], 19)  # exists; invalid name
    assert [t["error_code"] for t in body["topics"]] != [0, 0]
    _, body = create(h, ["fresh"], 20)  # the whole burst is still there
    assert body["topics"][0]["error_code"] == 0 and body["throttle_time_ms"] == 0


def test_delete_topics_count_their_partitions(make_harness: Any) -> None:
    h = make_harness()
    for name in ("a", "b", "c"):
        h.controller.create_topic(name, 15)
    h.client_quotas.set(entity(client_id="admin"), {"controller_mutation_rate": 2})
    request = h.request(
        ApiKey.DELETE_TOPICS,
        6,
        {"topics": [{"name": n, "topic_id": ZERO_UUID} for n in "abc"], "timeout_ms": 1000},
        "admin",
    )
    response = h.handle(request)
    assert isinstance(response, SendResponse)
    body = h.decode(response)
    assert [t["error_code"] for t in body["responses"]] == [
        0,
        0,
        errors.ThrottlingQuotaExceededError.code,
    ]
    assert set(h.controller.topics) == {"c"}
    assert body["throttle_time_ms"] == 5000
