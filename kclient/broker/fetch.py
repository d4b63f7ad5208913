"""Fetch: ``handleFetchRequest`` and ``DelayedFetch`` (long poll) of Kafka's broker.

Runs on request handler threads; a parked fetch completes on the appending thread or on
the purgatory's expiration reaper (see ``purgatory``). A fetch is answered at once when
``max_wait_ms`` <= 0, when at least ``min_bytes`` can be returned, or when a partition
would answer with an error (unknown, not leader, offset out of range); otherwise it
waits for an append to one of its partitions or for ``max_wait_ms``.

Stored batches go into the response by reference (memoryviews of the log, or one
``pread`` per contiguous run on disk), exactly as they were written; an answer holds at
most ``fetch.max.bytes`` (55 MiB), whatever the request's ``max_bytes`` (but always the
first batch, so that a consumer makes progress). Fetch sessions
(KIP-227) are not kept: every response says session 0, so clients send full fetches.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kclient import errors
from kclient.broker.controller import Topic
from kclient.broker.purgatory import DelayedOperation, DelayedOperationPurgatory
from kclient.broker.replica_manager import ReplicaManager
from kclient.broker.request_channel import Request
from kclient.broker.request_helper import RequestHandlerHelper

_NOT_LEADER = errors.NotLeaderOrFollowerError.code
_LEADER_ERRORS = (
    _NOT_LEADER,
    errors.FencedLeaderEpochError.code,
    errors.UnknownLeaderEpochError.code,
)


@dataclass(slots=True)
class _PartitionFetch:
    topic_key: Any  # the name (v4-12) or the topic id (v13+) as the request said it
    topic: Topic | None
    index: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int


class FetchHandler:
    """Answers Fetch requests for one broker, parking long polls in the purgatory."""

    def __init__(
        self,
        replica_manager: ReplicaManager,
        purgatory: DelayedOperationPurgatory,
        send: Callable[[Request, dict[str, Any]], None],
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
        request_helper: RequestHandlerHelper | None = None,
    ) -> None:
        self._rm = replica_manager
        self._helper = request_helper if request_helper is not None else RequestHandlerHelper(None)
        self._purgatory = purgatory
        self._send = send
        self._monotonic_ns = monotonic_ns

    def handle(self, request: Request) -> None:
        body = request.body
        assert body is not None
        version = request.header.api_version
        if body.get("session_id", 0) != 0:
            request.error_count += 1
            self._send(
                request,
                {
                    "error_code": errors.FetchSessionIdNotFoundError.code,
                    "session_id": 0,
                    "responses": [],
                },
            )
            return
        by_id = version >= 13
        controller = self._rm.controller
        fetches: list[_PartitionFetch] = []
        for t in body["topics"]:
            key = t["topic_id"] if by_id else t["topic"]
            topic = controller.topic_by_id(key) if by_id else controller.topic(key)
            fetches.extend(
                _PartitionFetch(
                    key,
                    topic,
                    p["partition"],
                    p["fetch_offset"],
                    p["partition_max_bytes"],
                    p.get("current_leader_epoch", -1),
                )
                for p in t["partitions"]
            )
        max_wait_ms = body["max_wait_ms"]
        min_bytes = body["min_bytes"]
        read_committed = body.get("isolation_level", 0) == 1

        def respond(expired: bool = False) -> None:
            if request.api_local_complete_time_ns >= 0:
                request.api_remote_complete_time_ns = self._monotonic_ns()
            out, size = self._build(request, fetches, body, by_id, read_committed)
            if self._helper.fetch_throttle_time_ms(request, size, self._monotonic_ns()) > 0:
                # over a quota: no records this time (the client waits, then asks again)
                out = {"error_code": 0, "session_id": 0, "responses": []}
            self._send(request, out)

        def ready() -> bool:
            return self._ready(fetches, min_bytes, read_committed)

        if max_wait_ms <= 0 or min_bytes <= 0 or not fetches or ready():
            respond()
            return
        keys = [
            f.topic.partitions[f.index]
            for f in fetches
            if f.topic is not None and 0 <= f.index < len(f.topic.partitions)
        ]
        deadline_ns = self._monotonic_ns() + max_wait_ms * 1_000_000
        op = DelayedOperation(deadline_ns, ready, respond)
        self._purgatory.try_complete_else_watch(op, keys)

    def _ready(self, fetches: list[_PartitionFetch], min_bytes: int, read_committed: bool) -> bool:
        total = 0
        for f in fetches:
            n = self._rm.fetchable_bytes(f.topic, f.index, f.fetch_offset, read_committed)
            if n < 0:
                return True
            total += n
            if total >= min_bytes:
                return True
        return False

    def _build(
        self,
        request: Request,
        fetches: list[_PartitionFetch],
        body: dict[str, Any],
        by_id: bool,
        read_committed: bool,
    ) -> tuple[dict[str, Any], int]:
        """The response body and the bytes of records in it."""
        # fetch.max.bytes caps what a request may ask for (Kafka: KIP-74), and so does a
        # consumer byte-rate quota (what one window of it allows)
        remaining = min(body.get("max_bytes", 0x7FFFFFFF), self._rm.config.fetch_max_bytes)
        quota_bytes = self._helper.fetch_max_bytes(request)
        if quota_bytes < remaining:
            remaining = int(quota_bytes)
        total = 0
        topics: list[dict[str, Any]] = []
        by_key: dict[Any, list[dict[str, Any]]] = {}
        for f in fetches:
            if by_id and f.topic is None:
                result_code, hw, log_start, records, size = (
                    errors.UnknownTopicIdError.code,
                    -1,
                    -1,
                    [],
                    0,
                )
                leader = (-1, -1)
                lso, aborted = -1, None
            else:
                r = self._rm.read(
                    f.topic,
                    f.index,
                    f.fetch_offset,
                    max(0, min(f.max_bytes, remaining)),
                    min_one_batch=total == 0,
                    current_leader_epoch=f.current_leader_epoch,
                    read_committed=read_committed,
                )
                lso, aborted = r.last_stable_offset, r.aborted_transactions
                result_code, hw, log_start, records, size = (
                    r.error_code,
                    r.high_watermark,
                    r.log_start_offset,
                    r.records,
                    r.size,
                )
                leader = (r.leader_id, r.leader_epoch)
            remaining -= size
            total += size
            if result_code:
                request.error_count += 1
            partition: dict[str, Any] = {
                "partition_index": f.index,
                "error_code": result_code,
                "high_watermark": hw,
                "last_stable_offset": lso if lso >= 0 else hw,
                "log_start_offset": log_start,
                "aborted_transactions": None
                if aborted is None
                else [
                    {"producer_id": a.producer_id, "first_offset": a.first_offset} for a in aborted
                ],
                "records": records,
            }
            if result_code in _LEADER_ERRORS:
                partition["current_leader"] = {"leader_id": leader[0], "leader_epoch": leader[1]}
            parts = by_key.get(f.topic_key)
            if parts is None:
                parts = by_key[f.topic_key] = []
                entry: dict[str, Any] = {"partitions": parts}
                entry["topic_id" if by_id else "topic"] = f.topic_key
                topics.append(entry)
            parts.append(partition)
        return {"error_code": 0, "session_id": 0, "responses": topics}, total
