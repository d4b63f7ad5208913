"""Metadata: the Metadata API of Kafka's ``KafkaApis`` (``handleTopicMetadataRequest``),
over the cluster's Controller.

Answers with the live brokers, the cluster and controller ids and the requested topics
(all of them for a null list, or an empty one at v0), by name or by topic id (v10+);
a missing topic is created when the request allows it and ``auto.create.topics.enable``
is on, counted against the client's controller mutation quota but never refused for it.
A partition without a live leader is LEADER_NOT_AVAILABLE. Run on request handler threads.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from kclient import errors
from kclient.broker.config import BrokerConfig
from kclient.broker.controller import Controller, Topic
from kclient.broker.request_channel import Request
from kclient.broker.request_helper import RequestHandlerHelper
from kclient.protocol import ApiKey

log = logging.getLogger(__name__)


class MetadataApis:
    """Metadata for one broker."""

    def __init__(
        self,
        controller: Controller,
        config: BrokerConfig,
        helper: RequestHandlerHelper,
        send: Callable[[Request, dict[str, Any]], None],
        *,
        monotonic_ns: Callable[[], int],
    ) -> None:
        self._controller = controller
        self._config = config
        self._helper = helper
        self._send = send
        self._monotonic_ns = monotonic_ns

    def handlers(self) -> dict[int, Callable[[Request], None]]:
        return {ApiKey.METADATA: self.handle_metadata}

    def handle_metadata(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        requested = body["topics"]
        allow_auto = bool(body.get("allow_auto_topic_creation", True))
        controller = self._controller
        topics_out: list[dict[str, Any]] = []
        if requested is None or (version == 0 and not requested):
            with controller.lock:
                selected = sorted(controller.topics.values(), key=lambda t: t.name)
            topics_out = [self._topic_metadata(t) for t in selected]
        else:
            for entry in requested:
                name = entry.get("name")
                if name is None:
                    topic = controller.topic_by_id(entry["topic_id"])
                    if topic is None:
                        topics_out.append(
                            self._topic_error(
                                None, errors.UnknownTopicIdError.code, entry["topic_id"]
                            )
                        )
                    else:
                        topics_out.append(self._topic_metadata(topic))
                    continue
                found: Topic | int | None = controller.topic(name)
                if found is None and allow_auto and self._config.auto_create_topics:
                    found = self._auto_create(name, request)
                if isinstance(found, Topic):
                    topics_out.append(self._topic_metadata(found))
                else:
                    code = (
                        found
                        if isinstance(found, int)
                        else errors.UnknownTopicOrPartitionError.code
                    )
                    topics_out.append(self._topic_error(name, code))
        request.error_count += sum(1 for t in topics_out if t["error_code"])
        self._send(
            request,
            {
                "brokers": [
                    {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                    for b in controller.live_brokers()
                ],
                "cluster_id": self._config.cluster_id,
                "controller_id": controller.controller_id(),
                "topics": topics_out,
            },
        )

    def _auto_create(self, name: str, request: Request) -> Topic | int:
        try:
            created = self._controller.create_topic(name)
            # counted against the client's controller mutation quota, never refused (as
            # Kafka's permissive quota for auto-creation)
            self._helper.controller_mutation_quota(request, 0x7FFF).record(
                len(created.partitions), self._monotonic_ns() // 1_000_000
            )
            return created
        except errors.TopicAlreadyExistsError:
            topic = self._controller.topic(name)
            return topic if topic is not None else errors.UnknownTopicOrPartitionError.code
        except errors.BrokerResponseError as exc:
            log.info("not auto-creating topic %r: %s", name, exc)
            return exc.code

    @staticmethod
    def _topic_error(name: str | None, code: int, topic_id: Any = None) -> dict[str, Any]:
        out: dict[str, Any] = {"error_code": code, "name": name, "partitions": []}
        if topic_id is not None:
            out["topic_id"] = topic_id
        return out

    def _topic_metadata(self, topic: Topic) -> dict[str, Any]:
        live = self._controller.live
        partitions = []
        for p in topic.partitions:
            leader = p.leader_id
            partitions.append(
                {
                    "error_code": 0 if leader >= 0 else errors.LeaderNotAvailableError.code,
                    "partition_index": p.index,
                    "leader_id": leader,
                    "leader_epoch": p.leader_epoch,
                    "replica_nodes": list(p.replicas),
                    "isr_nodes": [r for r in p.replicas if r in live],
                    "offline_replicas": [r for r in p.replicas if r not in live],
                }
            )
        return {
            "error_code": 0,
            "name": topic.name,
            "topic_id": topic.topic_id,
            "is_internal": False,
            "partitions": partitions,
        }
