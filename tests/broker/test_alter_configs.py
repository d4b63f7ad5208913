"""IncrementalAlterConfigs on the embedded broker (Apis over a Controller, no sockets): a
topic's configs change key by key (set, delete, append to and subtract from a list), are
checked as CreateTopics checks them, take effect at once (a topic switched to
LogAppendTime stamps the next records with the broker's time) and survive a restart with
a log dir; ``validate_only`` changes nothing; bad operations, an unknown topic, a broker's
settings or a resource listed twice get Kafka's errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kclient import errors
from kclient.broker.config import BrokerConfig
from kclient.broker.controller import BrokerEndpoint, Controller
from kclient.protocol import ApiKey

from .conftest import NOW_MS, ApiHarness, batch

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def alter(
    h: ApiHarness,
    changes: list[tuple[str, int, str | None]],
    *,
    name: str = "t",
    kind: int = 2,
    validate_only: bool = False,
    version: int = 1,
) -> dict[str, Any]:
    resource = {
        "resource_type": kind,
        "resource_name": name,
        "configs": [{"name": n, "config_operation": op, "value": v} for n, op, v in changes],
    }
    body = {"resources": [resource], "validate_only": validate_only}
    (result,) = h.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body)["responses"]
    return result  # type: ignore[no-any-return]


@pytest.mark.parametrize("version", [0, 1])
def test_configs_change_key_by_key(harness: ApiHarness, version: int) -> None:
    harness.controller.create_topic("t", 1, configs={"cleanup.policy": "delete", "segment.ms": "9"})
    result = alter(
        harness,
        [
            ("retention.ms", SET, "5000"),
            ("segment.ms", DELETE, None),
            ("cleanup.policy", APPEND, "compact"),
        ],
        version=version,
    )
    assert (result["error_code"], result["resource_name"]) == (0, "t")
    assert harness.controller.topic("t").configs == {
        "cleanup.policy": "delete,compact",
        "retention.ms": "5000",
    }
    assert alter(harness, [("cleanup.policy", SUBTRACT, "delete")])["error_code"] == 0
    assert harness.controller.topic("t").configs["cleanup.policy"] == "compact"


def test_a_new_timestamp_type_takes_effect_at_once(harness: ApiHarness) -> None:
    harness.controller.create_topic("t", 1)
    assert harness.produce("t", batch([b"a"], timestamp_ms=5))["log_append_time_ms"] == -1
    assert alter(harness, [("message.timestamp.type", SET, "LogAppendTime")])["error_code"] == 0
    answer = harness.produce("t", batch([b"b"], timestamp_ms=5))
    assert answer["log_append_time_ms"] == NOW_MS


@pytest.mark.parametrize(
    ("changes", "error", "message"),
    [
        ([("retention.ms", SET, "abc")], errors.InvalidConfigError, "must be a whole number"),
        ([("retention.hours", SET, "5")], errors.InvalidConfigError, "unknown topic config"),
        ([("retention.ms", APPEND, "5")], errors.InvalidConfigError, "is not a list"),
        ([("retention.ms", SET, None)], errors.InvalidConfigError, "a null value"),
        ([("retention.ms", 7, "5")], errors.InvalidRequestError, "unknown operation 7"),
        (
            [("retention.ms", SET, "5"), ("retention.ms", DELETE, None)],
            errors.InvalidRequestError,
            "changed more than once",
        ),
    ],
)
def test_a_bad_change_is_refused_and_changes_nothing(
    harness: ApiHarness,
    changes: list[tuple[str, int, str | None]],
    error: type[errors.KafkaError],
    message: str,
) -> None:
    harness.controller.create_topic("t", 1, configs={"retention.ms": "1000"})
    result = alter(harness, changes)
    assert result["error_code"] == error.code
    assert message in result["error_message"]
    assert harness.controller.topic("t").configs == {"retention.ms": "1000"}


def test_validate_only_unknown_topics_and_broker_settings(harness: ApiHarness) -> None:
    harness.controller.create_topic("t", 1)
    assert alter(harness, [("retention.ms", SET, "5")], validate_only=True)["error_code"] == 0
    assert harness.controller.topic("t").configs == {}
    missing = alter(harness, [("retention.ms", SET, "5")], name="nope")
    assert missing["error_code"] == errors.UnknownTopicOrPartitionError.code
    broker = alter(harness, [("num.partitions", SET, "5")], kind=4, name="0")
    assert broker["error_code"] == errors.InvalidRequestError.code
    assert "static" in broker["error_message"]


def test_a_resource_listed_twice_is_refused(harness: ApiHarness) -> None:
    harness.controller.create_topic("t", 1)
    resource = {
        "resource_type": 2,
        "resource_name": "t",
        "configs": [{"name": "retention.ms", "config_operation": SET, "value": "5"}],
    }
    body = {"resources": [resource, resource], "validate_only": False}
    results = harness.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)["responses"]
    assert [r["error_code"] for r in results] == [errors.InvalidRequestError.code] * 2
    assert harness.controller.topic("t").configs == {}


def test_changed_configs_survive_a_restart_with_a_log_dir(tmp_path: Path) -> None:
    config = BrokerConfig(log_dir=str(tmp_path))
    first = Controller(config, [0])
    first.broker_started(BrokerEndpoint(0, "127.0.0.1", 9092))
    first.create_topic("t", 1)
    first.alter_topic_configs("t", {"retention.ms": "5000"})
    first.close()
    again = Controller(config, [0])
    assert again.topic("t").configs == {"retention.ms": "5000"}
    again.close()
