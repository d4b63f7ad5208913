"""The declarations themselves: version table, naming, and rules Kafka's generator enforces."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kclient.protocol import SUPPORTED_VERSIONS, ApiKey, request_schema, response_schema
from kclient.protocol.codec import plan
from kclient.protocol.messages import REQUESTS, RESPONSES
from kclient.protocol.schema import MAX_VERSION, F, Field, Message, Versions, snake_case

# What Apache Kafka 4.1 accepts (kafka.apache.org/41/design/protocol; stable versions only).
KAFKA_4_1 = {
    ApiKey.PRODUCE: (3, 13),
    ApiKey.FETCH: (4, 18),
    ApiKey.LIST_OFFSETS: (1, 10),
    ApiKey.METADATA: (0, 13),
    ApiKey.API_VERSIONS: (0, 4),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 4),
    ApiKey.END_TXN: (0, 5),
    ApiKey.TXN_OFFSET_COMMIT: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.OFFSET_COMMIT: (2, 9),
    ApiKey.OFFSET_FETCH: (1, 9),
    ApiKey.FIND_COORDINATOR: (1, 6),
    ApiKey.JOIN_GROUP: (2, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 6),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
    ApiKey.WRITE_TXN_MARKERS: (0, 1),
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.GET_TELEMETRY_SUBSCRIPTIONS: (0, 0),
    ApiKey.PUSH_TELEMETRY: (0, 0),
}
# Group APIs declared below Kafka 4.1's KIP-896 baseline: kafka-python pinned to an old
# api_version (its BrokerVersionData tables) still sends these.
BELOW_BASELINE = {
    ApiKey.OFFSET_COMMIT: 0,
    ApiKey.OFFSET_FETCH: 0,
    ApiKey.FIND_COORDINATOR: 0,
    ApiKey.JOIN_GROUP: 0,
}
# Newer than Kafka 4.1: ApiVersions v5 (KIP-1242, the cluster check) from Kafka 4.4.
ABOVE_4_1 = {ApiKey.API_VERSIONS: 5}
FIRST_FLEXIBLE = {
    **{0: 9, 1: 12, 2: 6, 3: 9, 17: None, 18: 3, 19: 5, 20: 4, 22: 2, 36: 2, 37: 2, 32: 4, 44: 1},
    **{8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3, 42: 2, 47: None},
    **{24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 48: 1, 49: 1, 61: 0, 65: 0, 66: 0, 71: 0, 72: 0},
}


def test_supported_versions_are_kafka_4_1s_and_4_4s_api_versions_v5() -> None:
    expected = {
        key: (BELOW_BASELINE.get(key, low), ABOVE_4_1.get(key, high))
        for key, (low, high) in KAFKA_4_1.items()
    }
    assert expected == SUPPORTED_VERSIONS
    assert {int(k) for k in ApiKey} == {int(k) for k in KAFKA_4_1}


@pytest.mark.parametrize("api_key", list(ApiKey), ids=lambda k: k.name)
def test_request_and_response_agree_on_versions(api_key: ApiKey) -> None:
    request, response = request_schema(api_key), response_schema(api_key)
    assert request.api_key == response.api_key == api_key
    assert request.valid == response.valid
    first = FIRST_FLEXIBLE[api_key]
    expected = Versions.parse("none") if first is None else Versions(first, MAX_VERSION)
    assert request.flexible == response.flexible == expected
    assert request.name.endswith("Request") and response.name.endswith("Response")


def test_unknown_api_key_lookup_says_so() -> None:
    with pytest.raises(KeyError, match="api key 4"):
        request_schema(4)
    with pytest.raises(KeyError, match="api key 4"):
        response_schema(4)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("TopicData", "topic_data"),
        ("ThrottleTimeMs", "throttle_time_ms"),
        ("ErrorCode", "error_code"),
        ("IsrNodes", "isr_nodes"),
        ("Enable2Pc", "enable2_pc"),
        ("Acks", "acks"),
    ],
)
def test_snake_case_keys(name: str, key: str) -> None:
    assert snake_case(name) == key
    assert F(name, "int32", "0+").key == key


@pytest.mark.parametrize(
    ("text", "low", "high"), [("3+", 3, MAX_VERSION), ("0-12", 0, 12), ("7", 7, 7), ("none", 1, 0)]
)
def test_version_ranges(text: str, low: int, high: int) -> None:
    versions = Versions.parse(text)
    assert (versions.low, versions.high) == (low, high)
    assert str(versions) == text
    assert (low in versions) == (text != "none")


def test_declarations_refuse_inconsistent_fields() -> None:
    with pytest.raises(ValueError, match="unknown type"):
        F("Bad", "int42", "0+")
    with pytest.raises(ValueError, match="cannot have sub-fields"):
        F("Bad", "int32", "0+", fields=(F("X", "int8", "0+"),))
    with pytest.raises(ValueError, match="tag and tagged versions"):
        F("Bad", "int32", "0+", tagged="3+")


def _walk(fields: tuple[Field, ...]) -> Iterator[tuple[Field, tuple[Field, ...]]]:
    for fld in fields:
        yield fld, fields
        yield from _walk(fld.fields)


ALL = list(REQUESTS.values()) + list(RESPONSES.values())


@pytest.mark.parametrize("message", ALL, ids=lambda m: m.name)
def test_tagged_fields_follow_kafkas_rules(message: Message) -> None:
    for version in range(message.valid.low, message.valid.high + 1):
        for fld, siblings in _walk(message.fields):
            if fld.tag is None or version not in fld.tagged_versions:
                continue
            assert message.is_flexible(version), f"{fld.name} tagged in non-flexible v{version}"
            assert version in fld.versions
            tags = [s.tag for s in siblings if s.tag is not None and version in s.tagged_versions]
            assert len(tags) == len(set(tags)), f"duplicate tag among {fld.name}'s siblings"


@pytest.mark.parametrize("message", ALL, ids=lambda m: m.name)
def test_every_field_exists_in_some_supported_version(message: Message) -> None:
    for fld, _ in _walk(message.fields):
        assert fld.versions.low <= message.valid.high, f"{fld.name} is never used"
        assert fld.versions.high >= message.valid.low, f"{fld.name} is never used"


@pytest.mark.parametrize("message", ALL, ids=lambda m: m.name)
def test_plans_are_compiled_once_and_cached(message: Message) -> None:
    version = message.valid.high
    assert plan(message, version) is plan(message, version)
    assert plan(message, version).label == f"{message.name} v{version}"
