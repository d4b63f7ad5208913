"""MockClient: a scripted ``KafkaClient`` for testing code that sends requests (Kafka's
``MockClient``), e.g. the producer's Sender.

No sockets and no encoding: a request handed to ``send`` is answered by the first
*prepared* response that fits it (same node and api key, if those were given; its
``matcher`` must then accept the body, otherwise ``send`` raises), or stays in flight
until the test calls ``respond``/``respond_to``/``disconnect``. Answers come back from
the next ``poll``, which also calls the requests' callbacks. Requests older than their
``request_timeout_ms`` are timed out by ``poll`` like ``NetworkClient`` does::

    client = MockClient(clock, metadata_update_with(num_nodes=1, topic_partitions={"t": 2}))
    node = client.metadata.fetch().nodes[0]
    client.prepare_response({"responses": [...]}, api_key=ApiKey.PRODUCE)
    sender.run_once()                   # ready() → send() → matched → poll() completes it
    assert client.requests == []        # nothing left in flight

Nodes are ready unless the test says otherwise (``blackout``, ``set_unreachable``,
``delay_ready``, ``throttle``, ``disconnect``). Metadata: when an update is due, ``poll``
applies the next ``prepare_metadata_update`` body, or re-applies the current cluster.

Thread contract as ``NetworkClient``: one owning thread; ``wakeup`` from any thread.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kclient import errors
from kclient.clock import Clock
from kclient.errors import IllegalStateError, KafkaConnectionError, KafkaTimeoutError
from kclient.network.api_versions import NodeApiVersions, api_name
from kclient.network.cluster import Cluster
from kclient.network.connection_states import ConnectionFailures
from kclient.network.kafka_client import ClientRequest, ClientResponse
from kclient.network.metadata import Metadata, Node
from kclient.network.selector import release_all
from kclient.protocol import SUPPORTED_VERSIONS
from kclient.testing.selector import TELEMETRY_APIS

Matcher = Callable[[Mapping[str, Any]], bool]


@dataclass
class _Prepared:
    body: dict[str, Any] | None
    api_key: int | None
    node_id: int | None
    matcher: Matcher | None
    disconnected: bool
    version_mismatch: bool


@dataclass
class _NodeState:
    connected: bool = False
    backing_off_until_ms: int = 0
    unreachable_until_ms: int = 0
    ready_delayed_until_ms: int = 0
    throttled_until_ms: int = 0
    attempts: int = 0
    disconnects: list[int] = field(default_factory=list)


class MockClient:
    """A ``KafkaClient`` whose brokers are a script."""

    def __init__(
        self,
        clock: Clock,
        metadata_response: Mapping[str, Any] | None = None,
        *,
        metadata: Metadata | None = None,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self._clock = clock
        self._metadata = metadata if metadata is not None else Metadata()
        if metadata_response is not None:
            now_ms = clock.monotonic_ms()
            for topic in metadata_response.get("topics") or ():
                self._metadata.add(topic["name"], now_ms)  # a producer would have added them
            request = self._metadata.new_metadata_request(now_ms)
            self._metadata.update(request.request_version, metadata_response, False, now_ms)
        self.request_timeout_ms = request_timeout_ms
        self.requests: deque[ClientRequest] = deque()
        """Requests sent and not answered yet, oldest first."""
        self.sent: list[ClientRequest] = []
        """Every request ever sent, oldest first."""
        self.wakeups = 0
        self.release_before_blocking: list[threading.Lock] = []
        """Released at the start of each ``poll`` (where a real client would block)."""
        self.closed = False
        self._nodes: dict[int, _NodeState] = {}
        self._prepared: deque[_Prepared] = deque()
        self._responses: deque[ClientResponse] = deque()
        self._metadata_updates: deque[Mapping[str, Any]] = deque()
        self._api_versions = NodeApiVersions(
            {int(k): v for k, v in SUPPORTED_VERSIONS.items() if k not in TELEMETRY_APIS}
        )
        """Every API kclient speaks but KIP-714's, as a broker without a client-telemetry
        plugin answers (``set_node_api_versions`` to change)."""
        self.failures = ConnectionFailures()

    # ---- scripting: responses -------------------------------------------------------

    def prepare_response(
        self,
        body: Mapping[str, Any] | None,
        *,
        api_key: int | None = None,
        node: int | Node | None = None,
        matcher: Matcher | None = None,
        disconnected: bool = False,
        version_mismatch: bool = False,
    ) -> None:
        """Answer a future request: the first one to ``node`` (any if None) with ``api_key``
        (any if None). ``matcher(body)`` must accept that request's body, else ``send``
        raises. ``disconnected`` fails it as a lost connection; ``version_mismatch`` as
        a version no broker supports."""
        self._prepared.append(
            _Prepared(
                dict(body) if body is not None else None,
                int(api_key) if api_key is not None else None,
                node.id if isinstance(node, Node) else node,
                matcher,
                disconnected,
                version_mismatch,
            )
        )

    def respond(self, body: Mapping[str, Any], *, node: int | None = None) -> ClientRequest:
        """Answer the oldest in-flight request (to ``node``, if given)."""
        for request in self.requests:
            if node is None or request.destination == node:
                self.respond_to(request, body)
                return request
        raise IllegalStateError(f"no in-flight request{'' if node is None else f' to {node}'}")

    def respond_to(
        self, request: ClientRequest, body: Mapping[str, Any] | None, *, disconnected: bool = False
    ) -> None:
        """Answer a specific in-flight request (delivered by the next poll)."""
        self.requests.remove(request)
        self._queue(request, dict(body) if body is not None else None, disconnected=disconnected)

    def has_pending_responses(self) -> bool:
        return bool(self._prepared)

    def prepare_metadata_update(self, body: Mapping[str, Any]) -> None:
        """The MetadataResponse body the next due metadata update will apply."""
        self._metadata_updates.append(body)

    def set_node_api_versions(self, versions: NodeApiVersions) -> None:
        """What every node supports (default: everything kclient supports)."""
        self._api_versions = versions

    # ---- scripting: nodes -------------------------------------------------------------

    def _node(self, node_id: int) -> _NodeState:
        state = self._nodes.get(node_id)
        if state is None:
            state = self._nodes[node_id] = _NodeState()
        return state

    def set_node_ready(self, node: int | Node) -> None:
        """Mark the node connected and ready at once."""
        self._node(node.id if isinstance(node, Node) else node).connected = True

    def blackout(self, node: int | Node, duration_ms: int) -> None:
        """The node is disconnected and in reconnect backoff for ``duration_ms``."""
        state = self._node(node.id if isinstance(node, Node) else node)
        state.connected = False
        state.backing_off_until_ms = self._clock.monotonic_ms() + duration_ms

    def set_unreachable(
        self, node: int | Node, duration_ms: int, reason: str = "connection refused"
    ) -> None:
        """Connection attempts to the node fail with ``reason`` for ``duration_ms`` (then
        100 ms backoff); ``connection_failures()`` reports it for the node's address."""
        node_id = node.id if isinstance(node, Node) else node
        known = self._metadata.fetch().node_by_id(node_id)
        self.failures.failed(known.address if known else f"node {node_id}", reason)
        state = self._node(node_id)
        state.connected = False
        state.unreachable_until_ms = self._clock.monotonic_ms() + duration_ms

    def delay_ready(self, node: int | Node, duration_ms: int) -> None:
        """A new connection to the node takes ``duration_ms`` to become ready."""
        state = self._node(node.id if isinstance(node, Node) else node)
        state.ready_delayed_until_ms = self._clock.monotonic_ms() + duration_ms

    def throttle(self, node: int | Node, duration_ms: int) -> None:
        """The broker asked us to hold back sends for ``duration_ms``."""
        state = self._node(node.id if isinstance(node, Node) else node)
        state.throttled_until_ms = self._clock.monotonic_ms() + duration_ms

    def disconnect(self, node_id: int) -> None:
        """Drop the node's connection: its in-flight requests come back disconnected."""
        self._disconnect(node_id, timed_out=False)

    def _disconnect(self, node_id: int, *, timed_out: bool) -> None:
        for request in [r for r in self.requests if r.destination == node_id]:
            self.requests.remove(request)
            self._queue(request, None, disconnected=True, timed_out=timed_out)
        state = self._node(node_id)
        state.connected = False
        state.disconnects.append(self._clock.monotonic_ms())

    # ---- KafkaClient ----------------------------------------------------------------

    @property
    def metadata(self) -> Metadata:
        return self._metadata

    def ready(self, node: Node, now_ms: int) -> bool:
        state = self._node(node.id)
        if state.connected:
            return state.throttled_until_ms <= now_ms
        if state.backing_off_until_ms > now_ms:
            return False
        state.attempts += 1
        if state.unreachable_until_ms > now_ms:
            state.backing_off_until_ms = now_ms + 100
            return False
        if state.ready_delayed_until_ms > now_ms:
            return False
        state.connected = True
        return state.throttled_until_ms <= now_ms

    def is_ready(self, node: Node, now_ms: int) -> bool:
        state = self._node(node.id)
        return state.connected and state.throttled_until_ms <= now_ms

    def connection_delay(self, node: Node, now_ms: int) -> int:
        state = self._node(node.id)
        if state.connected:
            return 2**63 - 1
        return max(0, state.backing_off_until_ms - now_ms)

    def poll_delay_ms(self, node: Node, now_ms: int) -> int:
        state = self._node(node.id)
        if state.throttled_until_ms > now_ms:
            return state.throttled_until_ms - now_ms
        return self.connection_delay(node, now_ms)

    def connection_failed(self, node: Node) -> bool:
        state = self._node(node.id)
        return not state.connected and state.backing_off_until_ms > self._clock.monotonic_ms()

    def send(self, request: ClientRequest, now_ms: int) -> None:
        if self.closed:
            raise IllegalStateError("the client is closed")
        if not self.is_ready(Node(request.destination, "mock", 0), now_ms):
            raise IllegalStateError(f"node {request.destination} is not ready for a request")
        self.sent.append(request)
        try:
            version = self._api_versions.latest_usable_version(
                request.api_key, request.min_version, request.max_version
            )
        except errors.UnsupportedVersionError as exc:
            self._responses.append(ClientResponse(request, None, now_ms, version_mismatch=exc))
            return
        body = request.body_for(version)
        for prepared in self._prepared:
            if prepared.node_id is not None and prepared.node_id != request.destination:
                continue
            if prepared.api_key is not None and prepared.api_key != request.api_key:
                continue
            if prepared.matcher is not None and not prepared.matcher(body):
                raise IllegalStateError(
                    f"the prepared response's matcher rejected the next {api_name(request.api_key)}"
                    f" request to node {request.destination}: {body!r}"
                )
            self._prepared.remove(prepared)
            if prepared.version_mismatch:
                mismatch = errors.UnsupportedVersionError(
                    f"{api_name(request.api_key)} v{version} (scripted)"
                )
                self._responses.append(
                    ClientResponse(request, None, now_ms, version, version_mismatch=mismatch)
                )
            else:
                self._queue(
                    request, prepared.body, disconnected=prepared.disconnected, version=version
                )
            return
        if not request.expect_response:
            self._queue(request, None, version=version)
            return
        self.requests.append(request)

    def poll_ready(self, now_ms: int) -> list[ClientResponse]:
        return self.poll(0, now_ms)

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        if self.closed:
            raise IllegalStateError("the client is closed")
        release_all(self.release_before_blocking)
        for request in list(self.requests):
            timeout = request.request_timeout_ms or self.request_timeout_ms
            if now_ms - request.created_time_ms >= timeout:
                self._disconnect(request.destination, timed_out=True)
        if self._metadata.time_to_next_update(now_ms) == 0 and self.least_loaded_node(now_ms):
            update = self._metadata_updates.popleft() if self._metadata_updates else None
            body = update if update is not None else cluster_response(self._metadata.fetch())
            wanted = self._metadata.new_metadata_request(now_ms)
            self._metadata.update(wanted.request_version, body, False, now_ms)
        responses = list(self._responses)
        self._responses.clear()
        for response in responses:
            response.on_complete()
        return responses

    def disconnect_all(self) -> None:
        for node_id in list(self._nodes):
            self.disconnect(node_id)

    def least_loaded_node(self, now_ms: int) -> Node | None:
        for node in self._metadata.fetch().nodes:
            if self._node(node.id).backing_off_until_ms <= now_ms:
                return node
        return None

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return sum(1 for r in self.requests if node_id is None or r.destination == node_id)

    def has_in_flight_requests(self, node_id: int | None = None) -> bool:
        return self.in_flight_request_count(node_id) > 0

    def api_versions(self, node_id: int) -> NodeApiVersions | None:
        return self._api_versions if self._node(node_id).connected else None

    def has_ready_nodes(self, now_ms: int) -> bool:
        return any(s.connected and s.throttled_until_ms <= now_ms for s in self._nodes.values())

    def connection_failures(self) -> dict[str, str]:
        return self.failures.snapshot()

    def no_broker_reachable_error(self, waited_ms: int) -> KafkaTimeoutError:
        return self.failures.no_broker_reachable_error(waited_ms)

    def wakeup(self) -> None:
        self.wakeups += 1

    def close(self) -> None:
        self.closed = True

    # ---- internals ------------------------------------------------------------------

    def _queue(
        self,
        request: ClientRequest,
        body: dict[str, Any] | None,
        *,
        disconnected: bool = False,
        timed_out: bool = False,
        version: int = -1,
    ) -> None:
        response = ClientResponse(request, body, self._clock.monotonic_ms(), version)
        if disconnected:
            response.body = None
            response.disconnected = True
            response.timed_out = timed_out
            response.error = (
                KafkaTimeoutError(f"request to node {request.destination} timed out (scripted)")
                if timed_out
                else KafkaConnectionError(f"node {request.destination} disconnected (scripted)")
            )
        self._responses.append(response)


def metadata_update_with(
    num_nodes: int = 1,
    topic_partitions: Mapping[str, int] | None = None,
    *,
    topic_errors: Mapping[str, int] | None = None,
    leaders: Mapping[tuple[str, int], int] | None = None,
    cluster_id: str = "mock-cluster",
    host: str = "localhost",
    first_port: int = 9092,
    topic_ids: Mapping[str, uuid.UUID] | None = None,
    leader_epoch: int = 0,
) -> dict[str, Any]:
    """A MetadataResponse body: ``num_nodes`` brokers (ids 0…), topics with partition
    counts, leaders round-robin (or as ``leaders[(topic, p)]``; -1 = no leader) of
    ``leader_epoch``, per-topic error codes (``topic_errors={"t": 3}`` for
    UNKNOWN_TOPIC_OR_PARTITION) and ids (``topic_ids``; the others have none, KIP-516)."""
    brokers = [
        {"node_id": i, "host": host, "port": first_port + i, "rack": None} for i in range(num_nodes)
    ]
    topics: list[dict[str, Any]] = []
    for topic, count in (topic_partitions or {}).items():
        partitions = []
        for p in range(count):
            leader = (leaders or {}).get((topic, p), p % num_nodes if num_nodes else -1)
            replicas = [leader] if leader >= 0 else []
            partitions.append(
                {
                    "error_code": 0,
                    "partition_index": p,
                    "leader_id": leader,
                    "leader_epoch": leader_epoch,
                    "replica_nodes": replicas,
                    "isr_nodes": replicas,
                    "offline_replicas": [],
                }
            )
        entry = {"error_code": 0, "name": topic, "is_internal": False, "partitions": partitions}
        if topic_ids is not None and topic in topic_ids:
            entry["topic_id"] = topic_ids[topic]
        topics.append(entry)
    for topic, code in (topic_errors or {}).items():
        topics.append({"error_code": code, "name": topic, "is_internal": False, "partitions": []})
    controller = 0 if num_nodes else -1
    return {
        "brokers": brokers,
        "cluster_id": cluster_id,
        "controller_id": controller,
        "topics": topics,
    }


def cluster_response(cluster: Cluster) -> dict[str, Any]:
    """The MetadataResponse body that describes ``cluster`` (inverse of Metadata.update)."""
    topics = []
    for topic in sorted(cluster.topics):
        partitions = [
            {
                "error_code": 0,
                "partition_index": info.partition,
                "leader_id": info.leader.id if info.leader is not None else -1,
                "leader_epoch": info.leader_epoch if info.leader_epoch is not None else -1,
                "replica_nodes": [n.id for n in info.replicas],
                "isr_nodes": [n.id for n in info.in_sync_replicas],
                "offline_replicas": [n.id for n in info.offline_replicas],
            }
            for info in cluster.partitions_for_topic(topic)
        ]
        topics.append(
            {
                "error_code": 0,
                "name": topic,
                "is_internal": topic in cluster.internal_topics,
                "partitions": partitions,
                **({"topic_id": cluster.topic_ids[topic]} if topic in cluster.topic_ids else {}),
            }
        )
    return {
        "brokers": [
            {"node_id": n.id, "host": n.host, "port": n.port, "rack": n.rack} for n in cluster.nodes
        ],
        "cluster_id": cluster.cluster_id,
        "controller_id": cluster.controller.id if cluster.controller is not None else -1,
        "topics": topics,
    }
