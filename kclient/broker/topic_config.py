"""Topic configs the embedded broker accepts: Kafka's ``LogConfig`` definitions (names,
types and the bounds Kafka checks), used to check CreateTopics' and the Python API's
configs before a topic is created.

Every Kafka topic config is accepted when its value is valid for its type (a bad value is
INVALID_CONFIG, as Kafka answers), stored and reported; only ``message.timestamp.type``
and ``max.message.bytes`` take effect here. An unknown name is INVALID_CONFIG too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from kclient import errors

TIMESTAMP_TYPE = "message.timestamp.type"
MAX_MESSAGE_BYTES = "max.message.bytes"

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_WHOLE = re.compile(r"[+-]?[0-9]+")


def _whole(
    bits: tuple[int, int], low: int | None = None, high: int | None = None
) -> Callable[[str, str], None]:
    kind = "INT" if bits == _INT32 else "LONG"

    def check(name: str, value: str) -> None:
        text = value.strip()
        if not _WHOLE.fullmatch(text):
            raise errors.InvalidConfigError(
                f"topic config {name!r} must be a whole number ({kind}), got {value!r}"
            )
        number = int(text)
        least = bits[0] if low is None else low
        most = bits[1] if high is None else high
        if not least <= number <= most:
            raise errors.InvalidConfigError(
                f"topic config {name!r} must be in {least}..{most}, got {number}"
            )

    return check


def _boolean(name: str, value: str) -> None:
    if value.strip().lower() not in ("true", "false"):
        raise errors.InvalidConfigError(
            f"topic config {name!r} must be true or false, got {value!r}"
        )


def _ratio(name: str, value: str) -> None:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0.0 <= number <= 1.0:
        raise errors.InvalidConfigError(
            f"topic config {name!r} must be a number from 0 to 1 (DOUBLE), got {value!r}"
        )


def _one_of(*choices: str) -> Callable[[str, str], None]:
    def check(name: str, value: str) -> None:
        if value not in choices:
            raise errors.InvalidConfigError(
                f"topic config {name!r} must be one of {', '.join(choices)}; got {value!r}"
            )

    return check


def _cleanup_policy(name: str, value: str) -> None:
    policies = [p.strip() for p in value.split(",")]
    if not value.strip() or any(p not in ("delete", "compact") for p in policies):
        raise errors.InvalidConfigError(
            f"topic config {name!r} must be delete, compact or both (comma-separated); "
            f"got {value!r}"
        )


def _any(name: str, value: str) -> None:
    pass


#: DescribeConfigs' ``ConfigType`` of a config (Kafka's ``ConfigDef.Type``).
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7

#: Each topic config: its ``ConfigType`` and the check of a value for it.
TOPIC_CONFIGS: Mapping[str, tuple[int, Callable[[str, str], None]]] = {
    "cleanup.policy": (LIST, _cleanup_policy),
    "compression.type": (
        STRING,
        _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
    ),
    "compression.gzip.level": (INT, _whole(_INT32, -1, 9)),
    "compression.lz4.level": (INT, _whole(_INT32, 1, 17)),
    "compression.zstd.level": (INT, _whole(_INT32, -131072, 22)),
    "delete.retention.ms": (LONG, _whole(_INT64, 0)),
    "file.delete.delay.ms": (LONG, _whole(_INT64, 0)),
    "flush.messages": (LONG, _whole(_INT64, 1)),
    "flush.ms": (LONG, _whole(_INT64, 0)),
    "follower.replication.throttled.replicas": (LIST, _any),
    "index.interval.bytes": (INT, _whole(_INT32, 0)),
    "leader.replication.throttled.replicas": (LIST, _any),
    "local.retention.bytes": (LONG, _whole(_INT64, -2)),
    "local.retention.ms": (LONG, _whole(_INT64, -2)),
    MAX_MESSAGE_BYTES: (INT, _whole(_INT32, 1)),
    "message.downconversion.enable": (BOOLEAN, _boolean),
    "message.format.version": (STRING, _any),
    "message.timestamp.after.max.ms": (LONG, _whole(_INT64, 0)),
    "message.timestamp.before.max.ms": (LONG, _whole(_INT64, 0)),
    "message.timestamp.difference.max.ms": (LONG, _whole(_INT64, 0)),
    TIMESTAMP_TYPE: (STRING, _one_of("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": (DOUBLE, _ratio),
    "min.compaction.lag.ms": (LONG, _whole(_INT64, 0)),
    "max.compaction.lag.ms": (LONG, _whole(_INT64, 1)),
    "min.insync.replicas": (INT, _whole(_INT32, 1)),
    "preallocate": (BOOLEAN, _boolean),
    "remote.storage.enable": (BOOLEAN, _boolean),
    "retention.bytes": (LONG, _whole(_INT64)),
    "retention.ms": (LONG, _whole(_INT64, -1)),
    "segment.bytes": (INT, _whole(_INT32, 14)),
    "segment.index.bytes": (INT, _whole(_INT32, 4)),
    "segment.jitter.ms": (LONG, _whole(_INT64, 0)),
    "segment.ms": (LONG, _whole(_INT64, 1)),
    "unclean.leader.election.enable": (BOOLEAN, _boolean),
}


def config_type(name: str) -> int:
    """The ``ConfigType`` DescribeConfigs reports for topic config ``name`` (STRING for a
    name this table does not hold)."""
    known = TOPIC_CONFIGS.get(name)
    return STRING if known is None else known[0]


def validate_topic_configs(configs: Mapping[str, str]) -> None:
    """INVALID_CONFIG for an unknown name or a value its config does not take."""
    for name, value in configs.items():
        known = TOPIC_CONFIGS.get(name)
        if known is None:
            raise errors.InvalidConfigError(f"unknown topic config {name!r}")
        known[1](name, value)
