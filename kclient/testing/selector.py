"""MockSelector: a ``Selectable`` with no sockets, scripted by the test (Kafka's ``MockSelector``).

Drive a ``NetworkClient`` with it to test connection handling, version negotiation,
timeouts and disconnects deterministically (pair it with ``MockClock``)::

    selector = MockSelector()
    selector.serve(ApiKey.API_VERSIONS, lambda request: api_versions_body())
    client = NetworkClient(selector, metadata, clock=clock)
    client.ready(node, clock.monotonic_ms())      # connect(): completes on the next poll
    client.poll(0, clock.monotonic_ms())          # connected → ApiVersions sent and answered
    selector.respond(node.id, {...})              # answer the oldest unanswered request

Nothing happens between polls: a ``poll`` completes every pending connect (unless
``block_connect``), every send (unless ``stall_sends``), delivers every queued response
to unmuted nodes, and reports every scripted disconnect. It never advances the clock;
``poll_timeouts_ms`` records what each poll was asked to wait.

Not thread-safe except ``wakeup`` (which only counts).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kclient.errors import IllegalStateError, KafkaConnectionError, KafkaError
from kclient.network.selector import NetworkReceive, NetworkSend, release_all
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.protocol.frame import (
    RequestHeader,
    decode_request,
    encode_response,
    frame_bytes,
)

#: KIP-714's APIs, which a broker lists only with a client-telemetry plugin.
TELEMETRY_APIS = frozenset({ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY})


@dataclass
class SentRequest:
    """A request the client wrote, decoded: header (api key, version, correlation id) and body."""

    node_id: int
    header: RequestHeader
    body: dict[str, Any]
    answered: bool = False

    @property
    def api_key(self) -> int:
        return self.header.api_key

    @property
    def api_version(self) -> int:
        return self.header.api_version


Responder = Callable[[SentRequest], Mapping[str, Any] | bytes | bytearray | None]
"""Returns a response body, raw response bytes (see ``response_payload``), or None."""


def response_payload(
    request: SentRequest,
    body: Mapping[str, Any],
    *,
    api_version: int | None = None,
    correlation_id: int | None = None,
) -> bytearray:
    """The bytes a broker would send back for ``request`` (without the size prefix).

    ``api_version`` encodes the body at another version (a broker answering an
    ApiVersions version it does not know uses v0); ``correlation_id`` lies about which
    request this answers.
    """
    frame = frame_bytes(
        encode_response(
            request.header.api_key,
            request.header.api_version if api_version is None else api_version,
            request.header.correlation_id if correlation_id is None else correlation_id,
            body,
        )
    )
    return bytearray(frame[4:])


class MockSelector:
    """A ``Selectable`` whose network is a script."""

    def __init__(self) -> None:
        self.completed_sends: list[NetworkSend] = []
        self.completed_receives: list[NetworkReceive] = []
        self.connected: list[int] = []
        self.disconnected: dict[int, KafkaError] = {}
        self.release_before_select: list[threading.Lock] = []
        self.poll_timeouts_ms: list[int] = []
        self.wakeups = 0
        self.sent: list[SentRequest] = []
        self.connect_attempts: list[tuple[int, str, int]] = []
        self.server_hostnames: list[str | None] = []
        """The name each connect attempt verifies the broker's certificate against."""
        self.closed = False
        self._channels: set[int] = set()
        self._pending_connects: list[int] = []
        self._blocked_connects: set[int] = set()
        self._refused: dict[int, str] = {}
        self._sends: dict[int, NetworkSend] = {}
        self._stalled: set[int] = set()
        self._receives: dict[int, deque[bytearray]] = {}
        self._muted: set[int] = set()
        self._server_disconnects: dict[int, KafkaError] = {}
        self._responders: dict[int, Responder] = {}

    # ---- scripting ----------------------------------------------------------------

    def block_connect(self, node_id: int) -> None:
        """Connections to the node stay pending until ``complete_connect`` (or forever)."""
        self._blocked_connects.add(node_id)

    def complete_connect(self, node_id: int) -> None:
        """Let a blocked connection complete on the next poll."""
        self._blocked_connects.discard(node_id)

    def refuse_connect(self, node_id: int, reason: str = "connection refused") -> None:
        """``connect`` to the node fails at once, as a refused TCP connect does."""
        self._refused[node_id] = reason

    def accept_connect(self, node_id: int) -> None:
        self._refused.pop(node_id, None)

    def stall_sends(self, node_id: int) -> None:
        """Sends to the node are not written (not completed) until ``release_sends``."""
        self._stalled.add(node_id)

    def release_sends(self, node_id: int) -> None:
        self._stalled.discard(node_id)

    def serve(self, api_key: int, responder: Responder) -> None:
        """Answer every request with this api key automatically, in the poll that writes it.

        ``responder(request)`` returns the response body, or None to leave it unanswered.
        """
        self._responders[int(api_key)] = responder

    def stop_serving(self, api_key: int) -> None:
        self._responders.pop(int(api_key), None)

    def respond(self, node_id: int, body: Mapping[str, Any]) -> SentRequest:
        """Answer the node's oldest unanswered request with ``body`` (delivered next poll)."""
        request = self.unanswered(node_id)[0] if self.unanswered(node_id) else None
        if request is None:
            raise IllegalStateError(f"node {node_id} has no unanswered request to respond to")
        request.answered = True
        self.receive(node_id, response_payload(request, body))
        return request

    def receive(self, node_id: int, payload: bytes | bytearray) -> None:
        """Queue raw response bytes (without size prefix) from the node for the next poll."""
        self._receives.setdefault(node_id, deque()).append(bytearray(payload))

    def server_disconnect(self, node_id: int, error: KafkaError | None = None) -> None:
        """The node drops the connection: reported in ``disconnected`` by the next poll."""
        self._server_disconnects[node_id] = error or KafkaConnectionError(
            f"node {node_id} at mock:{node_id} closed the connection"
        )

    # ---- inspection ---------------------------------------------------------------

    def requests(self, node_id: int | None = None, api_key: int | None = None) -> list[SentRequest]:
        """Every request written so far (to one node / of one api), oldest first."""
        return [
            r
            for r in self.sent
            if (node_id is None or r.node_id == node_id)
            and (api_key is None or r.api_key == api_key)
        ]

    def unanswered(self, node_id: int | None = None) -> list[SentRequest]:
        return [r for r in self.requests(node_id) if not r.answered]

    def is_connected(self, node_id: int) -> bool:
        return node_id in self._channels and node_id not in self._pending_connects

    # ---- Selectable -----------------------------------------------------------------

    def connect(
        self,
        node_id: int,
        host: str,
        port: int,
        family: int | None = None,
        server_hostname: str | None = None,
    ) -> None:
        if node_id in self._channels:
            raise IllegalStateError(f"there is already a connection to node {node_id}")
        self.connect_attempts.append((node_id, host, port))
        self.server_hostnames.append(server_hostname)
        reason = self._refused.get(node_id)
        if reason is not None:
            raise KafkaConnectionError(
                f"connection to node {node_id} at {host}:{port} failed: {reason}"
            )
        self._channels.add(node_id)
        self._pending_connects.append(node_id)

    def send(self, send: NetworkSend) -> None:
        node_id = send.destination
        if not self.is_connected(node_id):
            raise IllegalStateError(f"cannot send to node {node_id}: not connected")
        if node_id in self._sends:
            raise IllegalStateError(
                f"node {node_id} still has a send in progress; one send at a time"
            )
        self._sends[node_id] = send

    def poll(self, timeout_ms: int) -> None:
        if self.closed:
            raise IllegalStateError("the selector is closed")
        self.poll_timeouts_ms.append(timeout_ms)
        release_all(self.release_before_select)
        self.completed_sends = []
        self.completed_receives = []
        self.connected = []
        self.disconnected = {}
        for node_id in list(self._pending_connects):
            if node_id not in self._blocked_connects:
                self._pending_connects.remove(node_id)
                self.connected.append(node_id)
        for node_id, send in list(self._sends.items()):
            if node_id in self._stalled:
                continue
            del self._sends[node_id]
            send.remaining = 0
            self.completed_sends.append(send)
            self._record(send)
        for node_id, error in list(self._server_disconnects.items()):
            del self._server_disconnects[node_id]
            if node_id in self._channels:
                self._close(node_id)
                self.disconnected[node_id] = error
        for node_id, queue in self._receives.items():
            if node_id in self._muted or node_id not in self._channels:
                continue
            while queue:
                self.completed_receives.append(NetworkReceive(node_id, queue.popleft()))

    def _record(self, send: NetworkSend) -> None:
        data = send.remaining_bytes()
        header, body = decode_request(data[4:])
        request = SentRequest(send.destination, header, body)
        self.sent.append(request)
        responder = self._responders.get(header.api_key)
        if responder is not None:
            response = responder(request)
            if isinstance(response, bytes | bytearray):
                request.answered = True
                self.receive(send.destination, response)
            elif response is not None:
                request.answered = True
                self.receive(send.destination, response_payload(request, response))

    def mute(self, node_id: int) -> None:
        self._muted.add(node_id)

    def unmute(self, node_id: int) -> None:
        self._muted.discard(node_id)

    def is_channel_ready(self, node_id: int) -> bool:
        return self.is_connected(node_id)

    def wakeup(self) -> None:
        self.wakeups += 1

    def close(self, node_id: int | None = None) -> None:
        if node_id is None:
            for node in list(self._channels):
                self._close(node)
            self.closed = True
        else:
            self._close(node_id)

    def _close(self, node_id: int) -> None:
        self._channels.discard(node_id)
        if node_id in self._pending_connects:
            self._pending_connects.remove(node_id)
        self._sends.pop(node_id, None)
        self._receives.pop(node_id, None)
        for request in self.sent:
            if request.node_id == node_id:
                request.answered = True  # a new connection starts with nothing to answer


def api_versions_body(
    versions: Mapping[int, tuple[int, int]] | None = None, error_code: int = 0
) -> dict[str, Any]:
    """An ApiVersionsResponse body; by default the broker supports what kclient supports but
    KIP-714's APIs, as a broker without a client-telemetry plugin (a fake broker that
    listed them would be asked for a subscription it has no answer for)."""
    table = versions
    if table is None:
        table = {k: v for k, v in SUPPORTED_VERSIONS.items() if k not in TELEMETRY_APIS}
    return {
        "error_code": error_code,
        "api_keys": [
            {"api_key": int(k), "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(table.items())
        ],
        "throttle_time_ms": 0,
    }


__all__ = [
    "TELEMETRY_APIS",
    "MockSelector",
    "Responder",
    "SentRequest",
    "api_versions_body",
    "response_payload",
]
