"""DescribeConfigs and IncrementalAlterConfigs: Kafka's ``ConfigHelper`` and
``ConfigAdminManager`` for the embedded broker's topics and its own settings.

A topic resource lists the configs the topic was created with (source TOPIC_CONFIG), then
the two this broker applies to every topic, ``message.timestamp.type`` and
``max.message.bytes``, with their defaults (DEFAULT_CONFIG) when the topic did not set
them; Kafka's defaults of the configs this broker stores but does not apply are not
listed. A broker resource (this broker's id, or "" for the cluster default) lists the
broker's settings, read-only (STATIC_BROKER_CONFIG). ``ConfigurationKeys`` narrows the
list; ``IncludeSynonyms`` adds each value's source as its one synonym. Other resource
types get INVALID_REQUEST.

IncrementalAlterConfigs changes a topic's configs key by key (set, delete, and append or
subtract for list configs), checks the result as CreateTopics does, and stores it; it
takes effect at once. A broker's settings are static (set when it starts): altering them
is INVALID_REQUEST. Run on request handler threads.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterable
from typing import Any

from kclient import errors
from kclient.broker.config import BrokerConfig
from kclient.broker.controller import Controller
from kclient.broker.request_channel import Request
from kclient.broker.topic_config import (
    INT,
    LIST,
    MAX_MESSAGE_BYTES,
    STRING,
    TIMESTAMP_TYPE,
    config_type,
)
from kclient.protocol import ApiKey

TOPIC, BROKER = 2, 4
SOURCE_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT = 1, 4, 5
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class ConfigApis:
    """DescribeConfigs for broker ``node_id``."""

    def __init__(
        self,
        node_id: int,
        controller: Controller,
        config: BrokerConfig,
        send: Callable[[Request, dict[str, Any]], None],
    ) -> None:
        self._node_id = node_id
        self._controller = controller
        self._config = config
        self._send = send

    def handlers(self) -> dict[int, Callable[[Request], None]]:
        return {
            ApiKey.DESCRIBE_CONFIGS: self.handle_describe_configs,
            ApiKey.INCREMENTAL_ALTER_CONFIGS: self.handle_incremental_alter_configs,
        }

    def handle_incremental_alter_configs(self, request: Request) -> None:
        body = request.parsed_body()
        validate_only = bool(body.get("validate_only", False))
        listed = collections.Counter(
            (r["resource_type"], r["resource_name"]) for r in body["resources"]
        )
        results = []
        for resource in body["resources"]:
            kind, name = resource["resource_type"], resource["resource_name"]
            result = _result(kind, name)
            try:
                if listed[kind, name] > 1:
                    raise errors.InvalidRequestError(
                        f"resource {name!r} (type {kind}) is listed more than once"
                    )
                if kind == BROKER:
                    raise errors.InvalidRequestError(
                        "the embedded broker's settings are static: set them when it starts"
                    )
                if kind != TOPIC:
                    raise errors.InvalidRequestError(
                        f"resource type {kind} is not served by the embedded broker (topic 2)"
                    )
                controller = self._controller
                with controller.lock:  # read, change and store as one step
                    configs = _altered(controller.existing_topic(name).configs, resource["configs"])
                    controller.alter_topic_configs(name, configs, validate_only=validate_only)
            except errors.BrokerResponseError as exc:
                request.error_count += 1
                result.update(error_code=exc.code, error_message=exc.detail or None)
            results.append(result)
        self._send(request, {"responses": results})

    def handle_describe_configs(self, request: Request) -> None:
        body = request.parsed_body()
        synonyms = bool(body.get("include_synonyms", False))
        results = []
        for resource in body["resources"]:
            kind, name = resource["resource_type"], resource["resource_name"]
            result = _result(kind, name) | {"configs": []}
            try:
                entries = self._entries(kind, name)
                wanted = resource.get("configuration_keys")
                if wanted is not None:
                    keys = set(wanted)
                    entries = [e for e in entries if e[0] in keys]
                result["configs"] = [_described(entry, synonyms) for entry in entries]
            except errors.BrokerResponseError as exc:
                request.error_count += 1
                result.update(error_code=exc.code, error_message=exc.detail or None)
            results.append(result)
        self._send(request, {"results": results})

    def _entries(self, kind: int, name: str) -> list[tuple[str, str, int, bool, int]]:
        """(name, value, source, read only, type) of each config of the resource."""
        if kind == TOPIC:
            topic = self._controller.existing_topic(name)
            own = topic.configs.items()
            entries = [(k, v, SOURCE_TOPIC, False, config_type(k)) for k, v in own]
            applied = {
                TIMESTAMP_TYPE: ("CreateTime", STRING),
                MAX_MESSAGE_BYTES: (str(self._config.message_max_bytes), INT),
            }
            for key, (value, kind_code) in applied.items():
                if key not in topic.configs:
                    entries.append((key, value, SOURCE_DEFAULT, False, kind_code))
            return sorted(entries)
        if kind == BROKER:
            if name not in ("", str(self._node_id)):
                raise errors.InvalidRequestError(
                    f"broker {self._node_id} describes its own configs (resource name "
                    f"{self._node_id!r} or ''), not broker {name!r}'s"
                )
            settings = self._config.kafka_settings().items()
            return [(k, v, SOURCE_STATIC_BROKER, True, _broker_type(v)) for k, v in settings]
        raise errors.InvalidRequestError(
            f"resource type {kind} is not served by the embedded broker (topic 2, broker 4)"
        )


def _result(kind: int, name: str) -> dict[str, Any]:
    """A resource's answer before any error: DescribeConfigs' and IncrementalAlterConfigs'."""
    return {"error_code": 0, "error_message": None, "resource_type": kind, "resource_name": name}


def _altered(current: dict[str, str], changes: list[dict[str, Any]]) -> dict[str, str]:
    """``current`` with ``changes`` (IncrementalAlterConfigs' operations) applied."""
    names = collections.Counter(c["name"] for c in changes)
    configs = dict(current)
    for change in changes:
        name, op, value = change["name"], change["config_operation"], change["value"]
        if names[name] > 1:
            raise errors.InvalidRequestError(f"config {name!r} is changed more than once")
        if op == DELETE:
            configs.pop(name, None)
            continue
        if op not in (SET, APPEND, SUBTRACT):
            raise errors.InvalidRequestError(
                f"config {name!r}: unknown operation {op} (0 set, 1 delete, 2 append, 3 subtract)"
            )
        if value is None:
            raise errors.InvalidConfigError(f"config {name!r}: a null value to set")
        if op == SET:
            configs[name] = value
            continue
        if config_type(name) != LIST:
            raise errors.InvalidConfigError(
                f"config {name!r} is not a list: it can be set or deleted, not appended to "
                "or subtracted from"
            )
        items = [i for i in configs.get(name, "").split(",") if i]
        given = [i.strip() for i in value.split(",") if i.strip()]
        if op == APPEND:
            items += [i for i in given if i not in items]
        else:
            items = [i for i in items if i not in given]
        if items:
            configs[name] = ",".join(items)
        else:
            configs.pop(name, None)
    return configs


def _broker_type(value: str) -> int:
    return 1 if value in ("true", "false") else 5  # BOOLEAN, else a LONG/INT count


def _described(entry: tuple[str, str, int, bool, int], synonyms: bool) -> dict[str, Any]:
    name, value, source, read_only, kind = entry
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": list(_synonyms(name, value, source)) if synonyms else [],
        "config_type": kind,
        "documentation": None,
    }


def _synonyms(name: str, value: str, source: int) -> Iterable[dict[str, Any]]:
    yield {"name": name, "value": value, "source": source}
