"""The client seam the Sender talks to: Kafka's ``KafkaClient``, ``ClientRequest`` and
``ClientResponse``.

``NetworkClient`` implements ``KafkaClient`` over sockets; ``kclient.testing.MockClient``
implements it with scripted responses. Requests, responses and version tables are plain
values; a ``KafkaClient`` itself belongs to one owning thread (only ``wakeup`` may be
called from others).

Every ``*_ms`` timestamp here is on the monotonic clock (``Clock.monotonic_ms()``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kclient.errors import BrokerResponseError, KafkaError, KafkaTimeoutError
from kclient.network.api_versions import NodeApiVersions, api_name
from kclient.network.metadata import Metadata, Node

RequestBody = Mapping[str, Any] | Callable[[int], Mapping[str, Any]]
"""A request body dict, or a function of the negotiated version that returns it."""


@dataclass(eq=False, slots=True)
class ClientRequest:
    """A request for one node, as the Sender hands it to ``KafkaClient.send``.

    ``body`` is a dict (snake_case Kafka field names) or ``body(version) -> dict`` when the
    content depends on the version chosen at send time. ``min_version``/``max_version``
    narrow the versions this request may use (e.g. Produce needs v3+ for record batch v2).
    ``request_timeout_ms`` None uses the client's ``request.timeout.ms``.
    ``expect_response`` False (acks=0) completes the request once it is written.
    """

    destination: int
    api_key: int
    body: RequestBody
    created_time_ms: int
    expect_response: bool = True
    callback: Callable[[ClientResponse], None] | None = field(default=None, repr=False)
    request_timeout_ms: int | None = None
    min_version: int | None = None
    max_version: int | None = None

    def body_for(self, version: int) -> Mapping[str, Any]:
        body = self.body
        return body(version) if callable(body) else body

    def __repr__(self) -> str:
        # never the body: it may be large, and a SaslAuthenticate body holds a password
        return (
            f"ClientRequest({api_name(self.api_key)} to node {self.destination}, "
            f"created at {self.created_time_ms} ms)"
        )


@dataclass(eq=False, slots=True)
class ClientResponse:
    """How a request ended: with a response body, or disconnected, timed out, or refused.

    Exactly one of these holds: ``body`` is a dict (the broker answered; for
    ``expect_response=False`` requests it is None and nothing else is set), or
    ``disconnected`` (``error`` says why; ``timed_out`` if ``request.timeout.ms`` or the
    connection-setup timeout expired), or ``version_mismatch`` (no version both sides
    support; nothing was sent).
    """

    request: ClientRequest
    body: dict[str, Any] | None
    received_time_ms: int
    api_version: int = -1
    correlation_id: int = -1
    disconnected: bool = False
    timed_out: bool = False
    version_mismatch: BrokerResponseError | None = None
    """UnsupportedVersionError when no version is usable."""
    error: KafkaError | None = None

    @property
    def destination(self) -> int:
        return self.request.destination

    @property
    def api_key(self) -> int:
        return self.request.api_key

    @property
    def request_latency_ms(self) -> int:
        return self.received_time_ms - self.request.created_time_ms

    def on_complete(self) -> None:
        if self.request.callback is not None:
            self.request.callback(self)

    def __repr__(self) -> str:
        state = (
            "version mismatch"
            if self.version_mismatch is not None
            else "timed out"
            if self.timed_out
            else "disconnected"
            if self.disconnected
            else "ok"
        )
        return (
            f"ClientResponse({api_name(self.api_key)} v{self.api_version} to node "
            f"{self.destination}, correlation id {self.correlation_id}, {state})"
        )


new_client_request: Callable[..., ClientRequest] = ClientRequest
"""``ClientRequest(...)`` with all nine fields positional (the Sender's per-request
ProduceRequest)."""
new_client_response: Callable[..., ClientResponse] = ClientResponse
"""``ClientResponse(request, body, received_time_ms, api_version, correlation_id)`` (every
answered request)."""


class KafkaClient(Protocol):
    """What the Sender needs from a network client (Java's ``KafkaClient``).

    Thread contract: one owning thread calls everything; ``wakeup`` may be called from
    any thread to interrupt a blocked ``poll``. ``now_ms`` is ``Clock.monotonic_ms()``.
    """

    @property
    def metadata(self) -> Metadata:
        """The cluster metadata this client keeps up to date."""
        ...

    @property
    def release_before_blocking(self) -> list[threading.Lock]:
        """Locks the next ``poll`` releases (emptying the list) just before it blocks
        waiting for I/O: the owner appends the locks of threads waiting on work it
        completed, and they wake when this thread lets go of the GIL."""
        ...

    def ready(self, node: Node, now_ms: int) -> bool:
        """True if a request may be sent to the node now; otherwise start connecting to it."""
        ...

    def is_ready(self, node: Node, now_ms: int) -> bool:
        """True if a request may be sent to the node now (never starts a connection)."""
        ...

    def connection_delay(self, node: Node, now_ms: int) -> int:
        """Ms until a connection to the node may be attempted (reconnect backoff)."""
        ...

    def poll_delay_ms(self, node: Node, now_ms: int) -> int:
        """Ms to wait before sending to the node (throttle or reconnect backoff)."""
        ...

    def connection_failed(self, node: Node) -> bool:
        """True if the last connection attempt to the node failed."""
        ...

    def send(self, request: ClientRequest, now_ms: int) -> None:
        """Queue a request for a ready node; it is written by the next ``poll``."""
        ...

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        """Do network I/O for up to ``timeout_ms``; return (and call back) finished requests."""
        ...

    def poll_ready(self, now_ms: int) -> list[ClientResponse]:
        """``poll(0, now_ms)`` when a socket is known to be ready; may skip the periodic
        work (metadata updates) that the next ``poll`` does anyway."""
        ...

    def disconnect(self, node_id: int) -> None:
        """Close the node's connection; its in-flight requests end as disconnected."""
        ...

    def least_loaded_node(self, now_ms: int) -> Node | None:
        """The node with the fewest in-flight requests that is ready or may be connected."""
        ...

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        """Requests awaiting a response, to one node or to all."""
        ...

    def has_in_flight_requests(self, node_id: int | None = None) -> bool: ...

    def has_ready_nodes(self, now_ms: int) -> bool: ...

    def api_versions(self, node_id: int) -> NodeApiVersions | None:
        """The versions the node supports, once its ApiVersions exchange is done."""
        ...

    def connection_failures(self) -> dict[str, str]:
        """Address → why the last connection attempt to it failed. Any thread."""
        ...

    def no_broker_reachable_error(self, waited_ms: int) -> KafkaTimeoutError:
        """The error for a caller whose deadline passed with no broker answering, naming
        every address tried and its last OS error. Any thread."""
        ...

    def wakeup(self) -> None:
        """Interrupt a blocked ``poll``. Safe from any thread."""
        ...

    def close(self) -> None:
        """Close every connection; the client can't be used afterwards."""
        ...
