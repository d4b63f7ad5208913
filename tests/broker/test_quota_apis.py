"""DescribeClientQuotas and AlterClientQuotas through Apis: what an admin client sees, and
that a quota set this way governs the next request (Apis, no sockets)."""

from __future__ import annotations

from typing import Any

from kclient import errors
from kclient.broker.client_quotas import entity
from kclient.protocol import ApiKey

from .conftest import ApiHarness, batch


def alter(h: ApiHarness, entries: list[Any], validate_only: bool = False, version: int = 1) -> Any:
    return h.call(
        ApiKey.ALTER_CLIENT_QUOTAS, version, {"entries": entries, "validate_only": validate_only}
    )["entries"]


def entry(ops: dict[str, float | None], **names: str | None) -> dict[str, Any]:
    return {
        "entity": [
            {"entity_type": kind.replace("_", "-"), "entity_name": name}
            for kind, name in names.items()
        ],
        "ops": [
            {"key": k, "value": 0.0 if v is None else v, "remove": v is None}
            for k, v in ops.items()
        ],
    }


def describe(h: ApiHarness, components: list[Any], strict: bool = False, version: int = 1) -> Any:
    return h.call(
        ApiKey.DESCRIBE_CLIENT_QUOTAS, version, {"components": components, "strict": strict}
    )


def test_alter_then_describe(harness: ApiHarness) -> None:
    results = alter(
        harness,
        [
            entry({"producer_byte_rate": 1024, "request_percentage": 50.5}, user="alice"),
            entry({"consumer_byte_rate": 2048}, user=None, client_id="app"),
        ],
    )
    assert [r["error_code"] for r in results] == [0, 0]
    assert results[1]["entity"] == [
        {"entity_type": "user", "entity_name": None},
        {"entity_type": "client-id", "entity_name": "app"},
    ]
    body = describe(harness, [])
    assert body["error_code"] == 0
    assert body["entries"] == [
        {
            "entity": [
                {"entity_type": "client-id", "entity_name": "app"},
                {"entity_type": "user", "entity_name": None},
            ],
            "values": [{"key": "consumer_byte_rate", "value": 2048.0}],
        },
        {
            "entity": [{"entity_type": "user", "entity_name": "alice"}],
            "values": [
                {"key": "producer_byte_rate", "value": 1024.0},
                {"key": "request_percentage", "value": 50.5},
            ],
        },
    ]
    only_alice = describe(harness, [{"entity_type": "user", "match_type": 0, "match": "alice"}])
    assert len(only_alice["entries"]) == 1
    # v0 (not flexible) says the same
    assert describe(harness, [], version=0)["entries"] == body["entries"]


def test_a_bad_entry_is_refused_with_its_reason_and_the_others_apply(harness: ApiHarness) -> None:
    results = alter(
        harness,
        [
            entry({"producer_byte_rate": 1.5}, client_id="a"),
            entry({"producer_byte_rate": 100}, client_id="b"),
            entry({"bytes_per_second": 100}, client_id="c"),
            entry({"producer_byte_rate": 100}, group="g"),
        ],
    )
    assert [r["error_code"] for r in results] == [errors.InvalidRequestError.code, 0] + [
        errors.InvalidRequestError.code
    ] * 2
    assert "must be an integer" in results[0]["error_message"]
    assert "Invalid configuration key bytes_per_second" in results[2]["error_message"]
    assert "Unhandled client quota entity type: group" in results[3]["error_message"]
    assert results[1]["error_message"] is None
    assert harness.client_quotas.entities() == {entity(client_id="b"): {"producer_byte_rate": 100}}


def test_validate_only_changes_nothing(harness: ApiHarness) -> None:
    results = alter(harness, [entry({"producer_byte_rate": 100}, client_id="b")], True)
    assert results[0]["error_code"] == 0
    assert harness.client_quotas.entities() == {}


def test_a_bad_filter_is_an_error_with_no_entries(harness: ApiHarness) -> None:
    body = describe(harness, [{"entity_type": "user", "match_type": 0, "match": None}])
    assert body["error_code"] == errors.InvalidRequestError.code
    assert "MATCH_TYPE_EXACT" in body["error_message"]
    assert body["entries"] is None


def test_a_quota_altered_by_an_admin_throttles_the_next_produce(harness: ApiHarness) -> None:
    harness.controller.create_topic("t", 1)
    alter(harness, [entry({"producer_byte_rate": 100}, client_id="app")])
    body = {
        "acks": 1,
        "timeout_ms": 1000,
        "topic_data": [
            {"name": "t", "partition_data": [{"index": 0, "records": batch([b"x" * 2000])}]}
        ],
    }
    request = harness.request(ApiKey.PRODUCE, 9, body, "app")
    harness.handle(request)
    assert request.throttle_time_ms > 0
    alter(harness, [entry({"producer_byte_rate": None}, client_id="app")])
    request = harness.request(ApiKey.PRODUCE, 9, body, "app")
    harness.handle(request)
    assert request.throttle_time_ms == 0
