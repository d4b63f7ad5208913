"""CreateTopics, CreatePartitions and DeleteTopics: the topic admin APIs of Kafka's
``KafkaApis`` / ``ControllerApis``, over the cluster's Controller.

CreateTopics checks every topic (name, count, replication factor, configs, the
``max.partitions.per.topic`` cap per topic and per request in all) before creating it;
CreatePartitions grows a topic to the count asked for (never shrinks it; replica
assignments are not taken); DeleteTopics drops the topic's committed offsets with it. All
three count the partitions they create or delete against the client's controller mutation
quota (KIP-599, ``controller_mutation_quota``): strictly from CreateTopics v6 /
CreatePartitions v3 / DeleteTopics v5 (a topic over the quota is refused with
THROTTLING_QUOTA_EXCEEDED and not changed), permissively before (changed, and the client
throttled). Run on request handler threads.
"""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

from kclient import errors
from kclient.broker.config import BrokerConfig
from kclient.broker.consumer_offsets import ConsumerOffsets
from kclient.broker.controller import Controller
from kclient.broker.request_channel import Request
from kclient.broker.request_helper import RequestHandlerHelper
from kclient.protocol import ApiKey


class TopicApis:
    """CreateTopics, CreatePartitions and DeleteTopics for one broker."""

    def __init__(
        self,
        controller: Controller,
        config: BrokerConfig,
        offsets: ConsumerOffsets,
        helper: RequestHandlerHelper,
        send: Callable[[Request, dict[str, Any]], None],
        *,
        monotonic_ns: Callable[[], int],
    ) -> None:
        self._controller = controller
        self._config = config
        self._offsets = offsets
        self._helper = helper
        self._send = send
        self._monotonic_ns = monotonic_ns

    def handlers(self) -> dict[int, Callable[[Request], None]]:
        return {
            ApiKey.CREATE_TOPICS: self.handle_create_topics,
            ApiKey.DELETE_TOPICS: self.handle_delete_topics,
            ApiKey.CREATE_PARTITIONS: self.handle_create_partitions,
        }

    def handle_create_topics(self, request: Request) -> None:
        body = request.parsed_body()
        validate_only = bool(body.get("validate_only", False))
        counts = collections.Counter(t["name"] for t in body["topics"])
        results = []
        cap = self._config.max_partitions_per_topic
        requested = 0  # partitions asked for so far in this request
        # KIP-599: partitions created count against the client's controller mutation
        # quota, strictly from v6 (a topic over it is refused) and permissively before
        quota = self._helper.controller_mutation_quota(request, 6)
        for spec in body["topics"]:
            name = spec["name"]
            result: dict[str, Any] = {"name": name, "error_code": 0}
            try:
                if counts[name] > 1:
                    raise errors.InvalidRequestError(f"topic {name!r} is listed more than once")
                asked = spec["num_partitions"]
                if asked == -1:
                    asked = self._config.num_partitions
                if 0 < asked <= cap:  # one over the cap is refused by create_topic
                    if requested + asked > cap:
                        raise errors.PolicyViolationError(
                            f"this request asks for more than {cap} partitions in all "
                            "('max.partitions.per.topic'); create the topics in several "
                            "requests"
                        )
                    requested += asked
                if spec["assignments"]:
                    raise errors.InvalidRequestError(
                        "manual replica assignments are not supported by the embedded broker"
                    )
                configs: dict[str, str] = {}
                for c in spec["configs"]:
                    if c["value"] is None:
                        raise errors.InvalidConfigError(f"topic config {c['name']!r} is null")
                    configs[c["name"]] = c["value"]
                if not validate_only:
                    # checked first, so that a refused topic counts nothing
                    self._controller.create_topic(
                        name,
                        spec["num_partitions"],
                        spec["replication_factor"],
                        configs,
                        validate_only=True,
                    )
                    quota.record(asked, self._monotonic_ns() // 1_000_000)
                topic = self._controller.create_topic(
                    name,
                    spec["num_partitions"],
                    spec["replication_factor"],
                    configs,
                    validate_only=validate_only,
                )
                result.update(
                    topic_id=topic.topic_id,
                    num_partitions=len(topic.partitions) or spec["num_partitions"],
                    replication_factor=len(topic.partitions[0].replicas)
                    if topic.partitions
                    else spec["replication_factor"],
                    configs=[
                        {
                            "name": k,
                            "value": v,
                            "read_only": False,
                            "config_source": 1,
                            "is_sensitive": False,
                        }
                        for k, v in sorted(topic.configs.items())
                    ],
                )
            except errors.BrokerResponseError as exc:
                request.error_count += 1
                result.update(error_code=exc.code, error_message=exc.detail or None)
            results.append(result)
        self._helper.controller_throttle_time_ms(request, quota, self._monotonic_ns())
        self._send(request, {"topics": results})

    def handle_create_partitions(self, request: Request) -> None:
        body = request.parsed_body()
        validate_only = bool(body.get("validate_only", False))
        counts = collections.Counter(t["name"] for t in body["topics"])
        quota = self._helper.controller_mutation_quota(request, 3)
        controller = self._controller
        results = []
        for spec in body["topics"]:
            name, count = spec["name"], spec["count"]
            result: dict[str, Any] = {"name": name, "error_code": 0, "error_message": None}
            try:
                if counts[name] > 1:
                    raise errors.InvalidRequestError(f"topic {name!r} is listed more than once")
                if spec.get("assignments"):
                    raise errors.InvalidReplicaAssignmentError(
                        "replica assignments for new partitions are not supported by the "
                        "embedded broker; leave them out"
                    )
                # checked first, so that a refused topic counts nothing
                added = controller.create_partitions(name, count, validate_only=True)
                if not validate_only:
                    quota.record(added, self._monotonic_ns() // 1_000_000)
                    controller.create_partitions(name, count)
            except errors.BrokerResponseError as exc:
                request.error_count += 1
                result.update(error_code=exc.code, error_message=exc.detail or None)
            results.append(result)
        self._helper.controller_throttle_time_ms(request, quota, self._monotonic_ns())
        self._send(request, {"results": results})

    def handle_delete_topics(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        if version >= 6:
            wanted = [(t["name"], t["topic_id"]) for t in body["topics"]]
        else:
            wanted = [(name, None) for name in body["topic_names"]]
        results = []
        # KIP-599: partitions deleted count too, strictly from v5
        quota = self._helper.controller_mutation_quota(request, 5)
        for name, topic_id in wanted:
            result: dict[str, Any] = {"name": name, "error_code": 0}
            try:
                if not self._config.delete_topic_enable:
                    raise errors.TopicDeletionDisabledError("delete.topic.enable is false")
                if name is None:
                    topic = self._controller.topic_by_id(topic_id)
                    if topic is None:
                        raise errors.UnknownTopicIdError(f"no topic has id {topic_id}")
                    name = result["name"] = topic.name
                existing = self._controller.topic(name)
                if existing is not None:
                    quota.record(len(existing.partitions), self._monotonic_ns() // 1_000_000)
                topic = self._controller.delete_topic(name)
                self._offsets.drop_topic(name)
                result["topic_id"] = topic.topic_id
                for p in topic.partitions:
                    self._controller.notify_append(p)  # wake fetches waiting on it
            except errors.BrokerResponseError as exc:
                request.error_count += 1
                result.update(error_code=exc.code, error_message=exc.detail or None)
                if topic_id is not None:
                    result["topic_id"] = topic_id
            results.append(result)
        self._helper.controller_throttle_time_ms(request, quota, self._monotonic_ns())
        self._send(request, {"responses": results})
