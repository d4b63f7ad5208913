"""Requests sent (or being sent) and not yet answered, per node: Kafka's ``InFlightRequests``.

Owned by the thread that owns the ``NetworkClient`` (the producer's Sender thread); not
thread-safe.

Each node has a deque: new requests are appended on the right, responses complete the
oldest on the left, because a broker answers the requests of one connection in order.
The newest request is the one the node's channel is writing, so no other request may be
handed to the channel until it has been written completely (``can_send_more``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from kclient.errors import IllegalStateError, KafkaError
from kclient.network.connection_states import NO_DELAY_LIMIT_MS
from kclient.network.kafka_client import ClientRequest, ClientResponse, new_client_response


class _Send(Protocol):
    @property
    def completed(self) -> bool: ...


@dataclass(eq=False, slots=True)
class InFlightRequest:
    """One request handed to the selector: what was sent, when, and who waits for it."""

    destination: int
    api_key: int
    api_version: int
    correlation_id: int
    send: _Send
    send_time_ms: int
    created_time_ms: int
    request_timeout_ms: int
    request: ClientRequest
    """The ``ClientRequest`` this was sent for."""
    expect_response: bool = True
    is_internal: bool = False
    """Sent by the client itself (ApiVersions, Metadata): not returned to the caller."""

    def has_timed_out(self, now_ms: int) -> bool:
        return max(0, now_ms - self.send_time_ms) > self.request_timeout_ms

    def completed(self, body: dict[str, Any] | None, now_ms: int) -> ClientResponse:
        """The caller's response: answered (or written, when no response is expected)."""
        return new_client_response(
            self.request, body, now_ms, self.api_version, self.correlation_id
        )

    def disconnected(self, now_ms: int, error: KafkaError, timed_out: bool) -> ClientResponse:
        """The caller's response when the connection went away before the answer came."""
        response = self.completed(None, now_ms)
        response.disconnected = True
        response.timed_out = timed_out
        response.error = error
        return response


class InFlightRequests:
    """Per-node deques of requests that were sent and not yet answered."""

    __slots__ = (
        "_deadline_exact",
        "_requests",
        "count",
        "earliest_deadline_ms",
        "max_in_flight_requests_per_connection",
    )

    def __init__(self, max_in_flight_requests_per_connection: int = 5) -> None:
        if max_in_flight_requests_per_connection < 1:
            raise ValueError(
                "max.in.flight.requests.per.connection must be at least 1, "
                f"got {max_in_flight_requests_per_connection}"
            )
        self.max_in_flight_requests_per_connection = max_in_flight_requests_per_connection
        self._requests: dict[int, deque[InFlightRequest]] = {}
        self.count = 0
        """Requests pending over all nodes (read-only outside this class)."""
        self.earliest_deadline_ms = NO_DELAY_LIMIT_MS
        """No request times out before this: a lower bound, exact while ``_deadline_exact``."""
        self._deadline_exact = True
        """No request was removed since the deadline was last exact (an ``add`` to an empty
        set, or ``next_timeout_ms``): ``next_timeout_ms`` need not walk the requests."""

    def add(self, request: InFlightRequest) -> None:
        """Record a request just handed to the node's channel (it becomes the newest)."""
        queue = self._requests.get(request.destination)
        if queue is None:
            queue = self._requests[request.destination] = deque()
        queue.append(request)
        deadline_ms = request.send_time_ms + request.request_timeout_ms + 1
        if self.count:
            self.earliest_deadline_ms = min(self.earliest_deadline_ms, deadline_ms)
        else:  # the only one: its deadline is the earliest
            self.earliest_deadline_ms = deadline_ms
            self._deadline_exact = True
        self.count += 1

    def _queue(self, node_id: int) -> deque[InFlightRequest]:
        queue = self._requests.get(node_id)
        if not queue:
            raise IllegalStateError(f"no in-flight requests for node {node_id}")
        return queue

    def complete_next(self, node_id: int) -> InFlightRequest:
        """Remove and return the oldest request to the node (the one a response answers)."""
        request = self._queue(node_id).popleft()
        self.count -= 1
        self._deadline_exact = False
        return request

    def complete_next_or_none(self, node_id: int) -> InFlightRequest | None:
        """Like ``complete_next``, but None when nothing is in flight to the node."""
        queue = self._requests.get(node_id)
        if not queue:
            return None
        self.count -= 1
        self._deadline_exact = False
        return queue.popleft()

    def last_sent(self, node_id: int) -> InFlightRequest:
        """The newest request to the node."""
        return self._queue(node_id)[-1]

    def complete_last_sent(self, node_id: int) -> InFlightRequest:
        """Remove and return the newest request (one that expects no response, e.g. acks=0)."""
        request = self._queue(node_id).pop()
        self.count -= 1
        self._deadline_exact = False
        return request

    def can_send_more(self, node_id: int) -> bool:
        """True if the newest request is fully written and fewer than the maximum are pending."""
        queue = self._requests.get(node_id)
        return not queue or (
            queue[-1].send.completed and len(queue) < self.max_in_flight_requests_per_connection
        )

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        """Requests pending for one node, or for all nodes when ``node_id`` is None."""
        if node_id is None:
            return self.count
        queue = self._requests.get(node_id)
        return len(queue) if queue else 0

    def is_empty(self, node_id: int | None = None) -> bool:
        return self.in_flight_request_count(node_id) == 0

    def clear_all(self, node_id: int) -> list[InFlightRequest]:
        """Remove every request to the node, oldest first (the node disconnected)."""
        queue = self._requests.pop(node_id, None)
        if not queue:
            return []
        self.count -= len(queue)
        self._deadline_exact = False
        return list(queue)

    def nodes_with_timed_out_requests(self, now_ms: int) -> list[int]:
        """Nodes with at least one request pending longer than its request timeout."""
        if not self.count:
            return []
        return [
            node_id
            for node_id, queue in self._requests.items()
            if any(request.has_timed_out(now_ms) for request in queue)
        ]

    def next_timeout_ms(self, now_ms: int) -> int:
        """Ms until the earliest request times out (``NO_DELAY_LIMIT_MS`` if none is pending)."""
        if not self.count:
            return NO_DELAY_LIMIT_MS
        if self._deadline_exact:  # min(earliest - now, the limit), not below 0
            remaining_ms = self.earliest_deadline_ms - now_ms
            if remaining_ms <= 0:
                return 0
            return remaining_ms if remaining_ms < NO_DELAY_LIMIT_MS else NO_DELAY_LIMIT_MS
        deadline_ms = now_ms + NO_DELAY_LIMIT_MS
        for queue in self._requests.values():
            for r in queue:
                request_deadline_ms = r.send_time_ms + r.request_timeout_ms + 1
                if request_deadline_ms < deadline_ms:  # noqa: PLR1730 -- min() is a call
                    deadline_ms = request_deadline_ms
        self.earliest_deadline_ms = deadline_ms
        self._deadline_exact = deadline_ms < now_ms + NO_DELAY_LIMIT_MS  # not capped
        return deadline_ms - now_ms if deadline_ms > now_ms else 0

    def __iter__(self) -> Iterator[InFlightRequest]:
        for queue in self._requests.values():
            yield from queue
