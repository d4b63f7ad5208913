"""Topic configs are checked as Kafka checks them when a topic is created: a value its
config does not take (a LONG that is not a number, a boolean that is not true/false, an
unknown cleanup policy or compression type, a number out of bounds) is INVALID_CONFIG
naming the config, and nothing is created; valid values are stored and reported. Before,
only the two configs this broker applies were checked: ``retention.ms=abc`` was taken."""

from __future__ import annotations

from typing import Any

import pytest

from kclient import errors
from kclient.broker.topic_config import validate_topic_configs
from kclient.protocol import ApiKey

from .conftest import ApiHarness


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("retention.ms", "abc", r"'retention.ms' must be a whole number \(LONG\), got 'abc'"),
        ("retention.ms", "-2", r"'retention.ms' must be in -1\.\.9223372036854775807, got -2"),
        ("retention.ms", "1_000", "must be a whole number"),
        ("segment.bytes", "99999999999", r"must be in 14\.\.2147483647"),
        ("min.insync.replicas", "0", r"'min.insync.replicas' must be in 1\.\."),
        ("preallocate", "yes", "'preallocate' must be true or false, got 'yes'"),
        ("cleanup.policy", "compact,archive", "must be delete, compact or both"),
        ("compression.type", "brotli", "must be one of uncompressed, zstd, lz4, snappy"),
        ("min.cleanable.dirty.ratio", "1.5", "must be a number from 0 to 1"),
        ("message.timestamp.type", "Now", "must be one of CreateTime, LogAppendTime"),
        ("max.message.bytes", "0", r"'max.message.bytes' must be in 1\.\."),
        ("retention.hours", "5", "unknown topic config 'retention.hours'"),
    ],
)
def test_a_bad_value_is_invalid_config_naming_it(name: str, value: str, message: str) -> None:
    with pytest.raises(errors.InvalidConfigError, match=message):
        validate_topic_configs({name: value})


def test_kafkas_values_are_taken() -> None:
    validate_topic_configs(
        {
            "retention.ms": "-1",
            "retention.bytes": "-1",
            "segment.bytes": " 1073741824 ",
            "cleanup.policy": "compact,delete",
            "compression.type": "producer",
            "preallocate": "TRUE",
            "min.cleanable.dirty.ratio": "0.5",
            "message.timestamp.type": "LogAppendTime",
            "leader.replication.throttled.replicas": "0:1,1:2",
        }
    )


def create(h: ApiHarness, configs: dict[str, str]) -> dict[str, Any]:
    topic = {
        "name": "t",
        "num_partitions": 1,
        "replication_factor": 1,
        "assignments": [],
        "configs": [{"name": k, "value": v} for k, v in configs.items()],
    }
    body = h.call(ApiKey.CREATE_TOPICS, 7, {"topics": [topic], "timeout_ms": 1000})
    result: dict[str, Any] = body["topics"][0]
    return result


def test_create_topics_refuses_a_bad_value_and_creates_nothing(harness: ApiHarness) -> None:
    result = create(harness, {"cleanup.policy": "compact", "retention.ms": "abc"})
    assert result["error_code"] == errors.InvalidConfigError.code
    assert "'retention.ms' must be a whole number (LONG), got 'abc'" in result["error_message"]
    assert harness.controller.topic("t") is None
    result = create(harness, {"cleanup.policy": "compact", "retention.ms": "86400000"})
    assert result["error_code"] == 0
    reported = {c["name"]: c["value"] for c in result["configs"]}
    assert reported == {"cleanup.policy": "compact", "retention.ms": "86400000"}
