"""Blocking calls to a group or transaction coordinator from a process without a Sender:
the lookup-and-retry half of Java's ``TransactionManager`` (``FindCoordinatorHandler``,
``lookupCoordinator``) and of the ``Admin`` client's coordinator calls, as one loop.

``CoordinatorCalls.call(key_type, key, api_key, body, error_code)`` finds the coordinator
of ``key`` (FindCoordinator, any broker), sends the request there and answers the response
body once its error code is not one to retry: NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE
look the coordinator up again, COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS and
other retriable codes, lost connections and timed-out requests are retried after
``retry_backoff_ms``; everything stops with ``KafkaTimeoutError`` at ``timeout_ms`` (naming
the last problem). A broker that has no usable version of the API raises
``UnsupportedVersionError``. ``commit_offset_metadata`` / ``fetch_offset_metadata`` store
and read one committed group offset with its metadata string (OffsetCommit with generation
-1: a group without members, as ``Admin.alterConsumerGroupOffsets`` does).

Threads: the caller's thread owns the ``KafkaClient`` and runs the poll loop (as in
``network.utils``); nothing here is shared.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kclient import errors
from kclient.clock import Clock
from kclient.errors import KafkaTimeoutError
from kclient.network.kafka_client import ClientRequest, ClientResponse, KafkaClient
from kclient.network.metadata import Node
from kclient.protocol import ApiKey
from kclient.protocol.messages import find_coordinator

log = logging.getLogger(__name__)

_POLL_SLICE_MS = 100
_LOOK_UP_AGAIN = frozenset(
    {errors.NotCoordinatorError.code, errors.CoordinatorNotAvailableError.code}
)
#: OffsetCommit up to v8 and OffsetFetch up to v7: the versions that take a group without
#: members (generation -1) and one group per request on every broker since Kafka 2.x.
OFFSET_COMMIT_MAX_VERSION = 8
OFFSET_FETCH_MAX_VERSION = 7


class CoordinatorCalls:
    """Requests to coordinators through one client, with lookup, retries and a deadline."""

    def __init__(
        self,
        client: KafkaClient,
        clock: Clock,
        *,
        retry_backoff_ms: int = 100,
        log_prefix: str = "",
    ) -> None:
        self.client = client
        self.clock = clock
        self.retry_backoff_ms = retry_backoff_ms
        self._prefix = log_prefix
        self._coordinators: dict[tuple[int, str], Node] = {}
        self.last_problem = ""

    def call(
        self,
        key_type: int,
        key: str,
        api_key: ApiKey,
        body: Callable[[int], Mapping[str, Any]],
        error_code: Callable[[Mapping[str, Any]], int],
        *,
        timeout_ms: int,
        max_version: int | None = None,
    ) -> Mapping[str, Any]:
        """Send to ``key``'s coordinator until ``error_code(response)`` is 0 or not
        retriable; returns that response body."""
        deadline_ms = self.clock.monotonic_ms() + timeout_ms
        what = f"{ApiKey(api_key).name} for {key!r}"
        while True:
            node = self._coordinators.get((key_type, key))
            if node is None:
                node = self._find_coordinator(key_type, key, deadline_ms, what)
                if node is None:
                    self._back_off(deadline_ms, what)
                    continue
            response = self._send(node, api_key, body, deadline_ms, what, max_version=max_version)
            if response is None:
                self._coordinators.pop((key_type, key), None)
                self._back_off(deadline_ms, what)
                continue
            code = error_code(response)
            if code in _LOOK_UP_AGAIN:
                self._coordinators.pop((key_type, key), None)
            elif code == 0 or not errors.for_code(code).retriable:
                return response
            self.last_problem = f"{what}: {errors.error_name(code)} from node {node.id}"
            log.debug("%s%s; retrying", self._prefix, self.last_problem)
            self._back_off(deadline_ms, what)

    # ---- steps ------------------------------------------------------------------------------

    def _find_coordinator(
        self, key_type: int, key: str, deadline_ms: int, what: str
    ) -> Node | None:
        node = self.client.least_loaded_node(self.clock.monotonic_ms())
        if node is None:
            self.last_problem = f"{what}: no broker to ask for the coordinator"
            return None

        def body(version: int) -> dict[str, Any]:
            if version >= 4:
                return {"key_type": key_type, "coordinator_keys": [key]}
            return {"key": key, "key_type": key_type}

        response = self._send(node, ApiKey.FIND_COORDINATOR, body, deadline_ms, what, min_version=1)
        if response is None:
            return None
        entry: Mapping[str, Any] = (response.get("coordinators") or [response])[0]
        code = entry.get("error_code", 0)
        if code:
            error = errors.for_code(code)(
                f"FindCoordinator for {key!r}: {entry.get('error_message')}"
            )
            if not error.retriable:
                raise error
            self.last_problem = f"{what}: {error}"
            return None
        found = Node(entry["node_id"], entry["host"], entry["port"])
        self._coordinators[(key_type, key)] = found
        log.debug("%scoordinator of %r is %s", self._prefix, key, found)
        return found

    def _send(
        self,
        node: Node,
        api_key: ApiKey,
        body: Callable[[int], Mapping[str, Any]],
        deadline_ms: int,
        what: str,
        *,
        max_version: int | None = None,
        min_version: int | None = None,
    ) -> dict[str, Any] | None:
        """One request to ``node``: its response body, or None (not reachable, lost)."""
        client = self.client
        while not client.ready(node, self.clock.monotonic_ms()):
            if client.connection_failed(node):
                self.last_problem = f"{what}: node {node.id} at {node.address} not reachable"
                return None
            self._poll(deadline_ms, what)
        now_ms = self.clock.monotonic_ms()
        request = ClientRequest(
            node.id,
            api_key,
            body,
            now_ms,
            min_version=min_version,
            max_version=max_version,
            request_timeout_ms=max(1, deadline_ms - now_ms),
        )
        client.send(request, now_ms)
        while True:
            for response in self._poll(deadline_ms, what):
                if response.request is request:
                    return self._body_of(response, what)

    def _body_of(self, response: ClientResponse, what: str) -> dict[str, Any] | None:
        if response.version_mismatch is not None:
            raise errors.UnsupportedVersionError(
                f"{what}: the broker has no usable version ({response.version_mismatch}); "
                "it needs a broker with transactions and consumer groups (Kafka 0.11+, tansu)"
            )
        if response.body is None:
            self.last_problem = f"{what}: {response.error or 'disconnected'}"
        return response.body

    def _poll(self, deadline_ms: int, what: str) -> list[ClientResponse]:
        now_ms = self.clock.monotonic_ms()
        if now_ms >= deadline_ms:
            raise KafkaTimeoutError(
                f"{what} did not complete in time (last: {self.last_problem or 'no answer'})"
            )
        return self.client.poll(min(_POLL_SLICE_MS, deadline_ms - now_ms), now_ms)

    def _back_off(self, deadline_ms: int, what: str) -> None:
        now_ms = self.clock.monotonic_ms()
        if now_ms + self.retry_backoff_ms >= deadline_ms:
            raise KafkaTimeoutError(
                f"{what} did not complete in time (last: {self.last_problem or 'no answer'})"
            )
        self.clock.sleep_ms(self.retry_backoff_ms)


# ---- one committed offset with metadata, as a small durable record ---------------------------


def commit_offset_metadata(
    calls: CoordinatorCalls,
    group_id: str,
    topic: str,
    partition: int,
    *,
    offset: int,
    metadata: str,
    timeout_ms: int,
) -> None:
    """Commit ``offset`` with ``metadata`` for ``group_id`` (a group without members).
    Raises the broker's error, e.g. ``OffsetMetadataTooLargeError`` (the broker's
    ``offset.metadata.max.bytes``, 4096 by default)."""
    response = calls.call(
        find_coordinator.GROUP,
        group_id,
        ApiKey.OFFSET_COMMIT,
        lambda _version: {
            "group_id": group_id,
            "topics": [
                {
                    "name": topic,
                    "partitions": [
                        {
                            "partition_index": partition,
                            "committed_offset": offset,
                            "committed_metadata": metadata,
                        }
                    ],
                }
            ],
        },
        _commit_error,
        timeout_ms=timeout_ms,
        max_version=OFFSET_COMMIT_MAX_VERSION,
    )
    code = _commit_error(response)
    if code:
        raise errors.for_code(code)(
            f"OffsetCommit of group {group_id!r} for {topic}-{partition} (metadata of "
            f"{len(metadata.encode())} bytes)"
        )


def fetch_offset_metadata(
    calls: CoordinatorCalls, group_id: str, topic: str, partition: int, *, timeout_ms: int
) -> tuple[int, str] | None:
    """The committed offset and metadata of ``group_id`` for the partition, or None."""
    response = calls.call(
        find_coordinator.GROUP,
        group_id,
        ApiKey.OFFSET_FETCH,
        lambda _version: {
            "group_id": group_id,
            "topics": [{"name": topic, "partition_indexes": [partition]}],
        },
        _fetch_error,
        timeout_ms=timeout_ms,
        max_version=OFFSET_FETCH_MAX_VERSION,
    )
    code = _fetch_error(response)
    if code:
        raise errors.for_code(code)(f"OffsetFetch of group {group_id!r} for {topic}-{partition}")
    for entry in _partitions(response):
        if entry.get("committed_offset", -1) >= 0:
            return int(entry["committed_offset"]), str(entry.get("metadata") or "")
    return None


def _partitions(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [p for t in body.get("topics") or () for p in t.get("partitions") or ()]


def _commit_error(body: Mapping[str, Any]) -> int:
    return next((int(p.get("error_code", 0)) for p in _partitions(body) if p.get("error_code")), 0)


def _fetch_error(body: Mapping[str, Any]) -> int:
    return int(body.get("error_code", 0)) or _commit_error(body)
