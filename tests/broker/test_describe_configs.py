"""DescribeConfigs on the embedded broker (Apis over a Controller, no sockets): a topic
lists the configs it was created with (source TOPIC_CONFIG) and the two this broker
applies with their defaults (DEFAULT_CONFIG); ``configuration_keys`` narrows the list;
synonyms name each value's source; a broker lists its own settings read-only; an unknown
topic, another broker's id or an unserved resource type get Kafka's error codes. Before,
admin clients got UNSUPPORTED_FEATURE."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.protocol import ApiKey

from .conftest import ApiHarness


def describe(
    h: ApiHarness,
    resources: list[tuple[int, str, list[str] | None]],
    *,
    version: int = 4,
    synonyms: bool = False,
    node: int = 0,
) -> list[dict[str, Any]]:
    body = {
        "resources": [
            {"resource_type": t, "resource_name": n, "configuration_keys": keys}
            for t, n, keys in resources
        ],
        "include_synonyms": synonyms,
        "include_documentation": False,
    }
    return h.call(ApiKey.DESCRIBE_CONFIGS, version, body, node)["results"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_a_topic_lists_its_own_configs_and_the_defaults_the_broker_applies(
    make_harness: Any, version: int
) -> None:
    h = make_harness(message_max_bytes=500_000)
    h.controller.create_topic("t", 1, configs={"cleanup.policy": "compact", "retention.ms": "1000"})
    (result,) = describe(h, [(2, "t", None)], version=version)
    assert (result["error_code"], result["resource_name"]) == (0, "t")
    got = {c["name"]: (c["value"], c["config_source"], c["read_only"]) for c in result["configs"]}
    assert got == {
        "cleanup.policy": ("compact", 1, False),
        "retention.ms": ("1000", 1, False),
        "max.message.bytes": ("500000", 5, False),
        "message.timestamp.type": ("CreateTime", 5, False),
    }
    types = {c["name"]: c.get("config_type") for c in result["configs"]}
    if version >= 3:  # BOOLEAN 1, STRING 2, INT 3, LONG 5, LIST 7
        assert types == {
            "cleanup.policy": 7,
            "retention.ms": 5,
            "max.message.bytes": 3,
            "message.timestamp.type": 2,
        }


def test_a_topics_own_timestamp_type_replaces_the_default(harness: ApiHarness) -> None:
    harness.controller.create_topic("t", 1, configs={"message.timestamp.type": "LogAppendTime"})
    (result,) = describe(harness, [(2, "t", ["message.timestamp.type"])], synonyms=True)
    assert result["configs"] == [
        {
            "name": "message.timestamp.type",
            "value": "LogAppendTime",
            "read_only": False,
            "config_source": 1,
            "is_sensitive": False,
            "synonyms": [{"name": "message.timestamp.type", "value": "LogAppendTime", "source": 1}],
            "config_type": 2,
            "documentation": None,
        }
    ]


def test_a_broker_lists_its_settings_read_only(make_harness: Any) -> None:
    h = make_harness(brokers=2, num_partitions=3)
    own, default = describe(h, [(4, "1", None), (4, "", ["num.partitions"])], node=1)
    settings = {c["name"]: (c["value"], c["read_only"], c["config_source"]) for c in own["configs"]}
    assert settings["num.partitions"] == ("3", True, 4)
    assert settings["auto.create.topics.enable"] == ("true", True, 4)
    assert [c["name"] for c in default["configs"]] == ["num.partitions"]


@pytest.mark.parametrize(
    ("resource", "error", "message"),
    [
        ((2, "nope", None), errors.UnknownTopicOrPartitionError, "topic 'nope' does not exist"),
        ((4, "1", None), errors.InvalidRequestError, "broker 0 describes its own configs"),
        ((8, "0", None), errors.InvalidRequestError, "resource type 8 is not served"),
    ],
)
def test_a_resource_it_cannot_describe_gets_kafkas_error(
    harness: ApiHarness,
    resource: tuple[int, str, None],
    error: type[errors.KafkaError],
    message: str,
) -> None:
    harness.controller.create_topic("t", 1)
    bad, good = describe(harness, [resource, (2, "t", None)])
    assert bad["error_code"] == error.code
    assert message in bad["error_message"]
    assert bad["configs"] == []
    assert good["error_code"] == 0
