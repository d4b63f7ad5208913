"""RequestChannel: where Processors and request handlers exchange work (Kafka's ``RequestChannel``).

* One bounded **request queue** shared by every Processor of a broker
  (``queued.max.requests``, default 500). Processor threads put (blocking when it is full,
  as Kafka does); request handler threads take.
* One **response queue per Processor**: a response goes back to the Processor that read
  its request, which is woken through the listener it registered (``add_processor``).
* Response kinds: ``SendResponse`` (bytes to write), ``NoOpResponse`` (acks=0: nothing
  to write, just unmute the connection), ``CloseConnectionResponse``.
* ``ShutdownRequest`` tells a handler thread to exit.

``Request`` carries the timestamps behind the request metrics (as Kafka's
``RequestChannel.Request`` does): start, dequeue, local complete, remote complete,
response complete, response dequeue, and ``update_request_metrics`` records them once the
Processor has sent the response.
"""

from __future__ import annotations

import collections
import queue
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final

from kclient.broker.metrics import BrokerMetrics
from kclient.protocol import RequestHeader

Buffer = bytes | bytearray | memoryview


def api_metric_name(api_key_name: str) -> str:
    """``'API_VERSIONS'`` -> ``'ApiVersions'`` (Kafka's metric/request names)."""
    return "".join(part.capitalize() for part in api_key_name.split("_"))


class Request:
    """A request read by a Processor, with its parsed header and body.

    ``body`` is the decoded request dict (None only for an ApiVersions request of a version
    this broker does not support: ``unsupported_version`` is then True). ``frame`` is the
    bytes of the request; record fields in ``body`` are views into it.
    ``throttle_time_ms`` > 0 makes the Processor keep the connection muted that long after
    the response (``throttled_channel``).
    """

    __slots__ = (
        "api_local_complete_time_ns",
        "api_name",
        "api_remote_complete_time_ns",
        "body",
        "client_address",
        "connection_id",
        "error_count",
        "frame",
        "header",
        "metrics",
        "network_thread_time_ns",
        "principal",
        "processor",
        "record_network_thread_time",
        "request_dequeue_time_ns",
        "response_complete_time_ns",
        "response_dequeue_time_ns",
        "start_time_ns",
        "throttle_time_ms",
        "unsupported_version",
    )

    def parsed_body(self) -> dict[str, Any]:
        """``body`` for a handler: every request that reaches one was parsed."""
        assert self.body is not None
        return self.body

    def __init__(
        self,
        *,
        processor: int,
        connection_id: str,
        header: RequestHeader,
        body: dict[str, Any] | None,
        frame: Buffer,
        start_time_ns: int,
        metrics: BrokerMetrics | None = None,
        api_name: str = "",
        client_address: str = "",
        unsupported_version: bool = False,
        principal: str = "ANONYMOUS",
    ) -> None:
        self.processor = processor
        self.connection_id = connection_id
        self.header = header
        self.body = body
        self.frame = frame
        self.start_time_ns = start_time_ns
        self.metrics = metrics
        self.api_name = api_name or str(header.api_key)
        self.client_address = client_address
        self.unsupported_version = unsupported_version
        #: the authenticated user (SASL), else ``ANONYMOUS``: whose quotas apply
        self.principal = principal
        #: how long the client is throttled after this response (quotas); -1 until the
        #: handler has decided (Kafka's ``apiThrottleTimeMs``)
        self.throttle_time_ms = -1
        #: what reading the request cost its Processor (counted in the request quota)
        self.network_thread_time_ns = 0
        #: with a request quota: told what sending the answer cost the Processor
        #: (``elapsed_ns, now_ns``), counted for the client's next requests (Kafka's
        #: ``recordNetworkThreadTimeCallback``)
        self.record_network_thread_time: Callable[[int, int], None] | None = None
        self.request_dequeue_time_ns = -1
        self.api_local_complete_time_ns = -1
        self.api_remote_complete_time_ns = -1
        self.response_complete_time_ns = -1
        self.response_dequeue_time_ns = -1
        self.error_count = 0

    @property
    def size_bytes(self) -> int:
        return len(self.frame)

    def update_request_metrics(self, now_ns: int) -> None:
        """Record this request's timings (Processor thread, once its response is done)."""
        if self.metrics is None:
            return
        api = self.metrics.for_api(self.api_name)
        local_ns = self.api_local_complete_time_ns
        if local_ns < 0:
            local_ns = self.response_complete_time_ns
        remote_ns = self.api_remote_complete_time_ns
        if remote_ns < 0:
            remote_ns = local_ns
        api.record(
            now_ns=now_ns,
            start_ns=self.start_time_ns,
            dequeue_ns=self.request_dequeue_time_ns,
            local_complete_ns=local_ns,
            remote_complete_ns=remote_ns,
            response_complete_ns=self.response_complete_time_ns,
            response_dequeue_ns=self.response_dequeue_time_ns,
        )
        if self.error_count:
            api.errors_per_sec.mark(now_ns, self.error_count)

    def __repr__(self) -> str:
        h = self.header
        return (
            f"Request({self.api_name} v{h.api_version} corr={h.correlation_id} "
            f"client={h.client_id!r} conn={self.connection_id} processor={self.processor})"
        )


class _ShutdownRequest:
    """Tells one request handler thread to exit (Kafka's ``ShutdownRequest``)."""

    def __repr__(self) -> str:
        return "ShutdownRequest"


ShutdownRequest: Final = _ShutdownRequest()


class Response:
    """Base of the response kinds; every response knows its request (and so its Processor)."""

    __slots__ = ("request",)

    def __init__(self, request: Request) -> None:
        self.request = request

    @property
    def processor(self) -> int:
        return self.request.processor


class SendResponse(Response):
    """Bytes to write back: a list of buffers, size prefix included."""

    __slots__ = ("buffers",)

    def __init__(self, request: Request, buffers: Sequence[Buffer]) -> None:
        super().__init__(request)
        self.buffers = buffers

    def __repr__(self) -> str:
        return f"SendResponse({self.request!r}, {sum(len(b) for b in self.buffers)} bytes)"


class NoOpResponse(Response):
    """Nothing to send (acks=0 Produce): the Processor only unmutes the connection."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"NoOpResponse({self.request!r})"


class CloseConnectionResponse(Response):
    """Close the connection the request came from (e.g. an acks=0 Produce that failed)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"CloseConnectionResponse({self.request!r})"


class ResponseQueue:
    """One Processor's response queue plus the callback that wakes that Processor."""

    __slots__ = ("_items", "wakeup")

    def __init__(self, wakeup: Callable[[], None]) -> None:
        self._items: collections.deque[Response] = collections.deque()
        self.wakeup = wakeup

    def put(self, response: Response) -> None:
        self._items.append(response)
        self.wakeup()

    def poll(self) -> Response | None:
        try:
            return self._items.popleft()
        except IndexError:
            return None

    def __len__(self) -> int:
        return len(self._items)


class RequestChannel:
    """The bounded request queue and the per-Processor response queues of one broker."""

    def __init__(
        self,
        queue_size: int,
        metrics: BrokerMetrics | None = None,
        monotonic_ns: Callable[[], int] | None = None,
    ) -> None:
        self.queue_size = queue_size
        self.metrics = metrics
        self._monotonic_ns = monotonic_ns or time.monotonic_ns
        self._request_queue: queue.Queue[Request | _ShutdownRequest] = queue.Queue(queue_size)
        self._response_queues: dict[int, ResponseQueue] = {}
        self._lock = threading.Lock()
        if metrics is not None:
            metrics.set_request_queue_gauge(self.request_queue_size)

    # ---- processors ------------------------------------------------------------------

    def add_processor(self, processor_id: int, wakeup: Callable[[], None]) -> None:
        """Register a Processor: its response queue and the callback that wakes it."""
        with self._lock:
            if processor_id in self._response_queues:
                raise ValueError(f"processor {processor_id} is already registered")
            rq = self._response_queues[processor_id] = ResponseQueue(wakeup)
        if self.metrics is not None:
            self.metrics.add_response_queue_gauge(processor_id, rq.__len__)

    def remove_processor(self, processor_id: int) -> None:
        with self._lock:
            self._response_queues.pop(processor_id, None)
        if self.metrics is not None:
            self.metrics.remove_response_queue_gauge(processor_id)

    # ---- requests --------------------------------------------------------------------

    def send_request(self, request: Request, timeout_s: float | None = None) -> bool:
        """Queue a request, blocking while the queue is full (up to ``timeout_s``).

        Returns False when the queue stayed full for ``timeout_s``.
        """
        try:
            self._request_queue.put(request, timeout=timeout_s)
        except queue.Full:
            return False
        return True

    def receive_request(self, timeout_s: float) -> Request | _ShutdownRequest | None:
        """The next request, or None after ``timeout_s`` (request handler threads)."""
        try:
            item = self._request_queue.get(timeout=timeout_s)
        except queue.Empty:
            return None
        if isinstance(item, Request):
            item.request_dequeue_time_ns = self._monotonic_ns()
        return item

    def send_shutdown_request(self) -> None:
        """Queue one ShutdownRequest (call once per handler thread)."""
        self._request_queue.put(ShutdownRequest)

    def request_queue_size(self) -> int:
        return self._request_queue.qsize()

    def clear_requests(self) -> list[Request]:
        """Drop every queued request (shutdown); returns what was dropped."""
        dropped: list[Request] = []
        while True:
            try:
                item = self._request_queue.get_nowait()
            except queue.Empty:
                return dropped
            if isinstance(item, Request):
                dropped.append(item)

    # ---- responses -------------------------------------------------------------------

    def send_response(self, response: Response) -> None:
        """Hand a response to the Processor that read its request (any thread).

        A response for a Processor that is gone (broker stopping) is dropped.
        """
        request = response.request
        now_ns = self._monotonic_ns()
        request.response_complete_time_ns = now_ns
        if request.api_local_complete_time_ns < 0:
            request.api_local_complete_time_ns = now_ns
        rq = self._response_queues.get(response.processor)
        if rq is not None:
            rq.put(response)

    def receive_response(self, processor_id: int) -> Response | None:
        """The next response for a Processor, or None (that Processor's thread)."""
        rq = self._response_queues.get(processor_id)
        if rq is None:
            return None
        response = rq.poll()
        if response is not None:
            response.request.response_dequeue_time_ns = self._monotonic_ns()
        return response
