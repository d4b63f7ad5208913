"""RequestHandlerPool: ``num.io.threads`` threads taking requests and calling ``Apis.handle``.

Kafka's ``KafkaRequestHandler`` / ``KafkaRequestHandlerPool``. Each handler
thread loops on ``RequestChannel.receive_request`` and exits on a ``ShutdownRequest``.
An exception escaping ``Apis.handle`` is logged and answered by closing that one
connection; the thread keeps serving.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from kclient.broker.request_channel import (
    CloseConnectionResponse,
    Request,
    RequestChannel,
    ShutdownRequest,
)

log = logging.getLogger(__name__)


class RequestHandlerApis(Protocol):
    """What a handler thread calls (``Apis``; tests pass a stub)."""

    def handle(self, request: Request) -> None: ...


class RequestHandler:
    """One io thread (Kafka's ``KafkaRequestHandler``)."""

    def __init__(
        self,
        handler_id: int,
        request_channel: RequestChannel,
        apis: RequestHandlerApis,
        name_prefix: str = "kclient-broker",
    ) -> None:
        self.id = handler_id
        self._channel = request_channel
        self._apis = apis
        self.thread = threading.Thread(
            target=self.run, name=f"{name_prefix}-io-thread-{handler_id}", daemon=True
        )

    def run(self) -> None:
        while True:
            request = self._channel.receive_request(timeout_s=0.3)
            if request is None:
                continue
            if request is ShutdownRequest:
                return
            assert isinstance(request, Request)
            self.handle_one(request)

    def handle_one(self, request: Request) -> None:
        try:
            self._apis.handle(request)
        except Exception:
            log.exception("error handling %r; closing its connection", request)
            request.error_count += 1
            self._channel.send_response(CloseConnectionResponse(request))


class RequestHandlerPool:
    """``num.io.threads`` RequestHandlers over one RequestChannel."""

    def __init__(
        self,
        request_channel: RequestChannel,
        apis: RequestHandlerApis,
        num_threads: int,
        name_prefix: str = "kclient-broker",
    ) -> None:
        self._channel = request_channel
        self.handlers = [
            RequestHandler(i, request_channel, apis, name_prefix) for i in range(num_threads)
        ]

    def start(self) -> None:
        for h in self.handlers:
            h.thread.start()

    def shutdown(self, timeout_s: float = 5.0) -> None:
        """Drop queued requests, send one ShutdownRequest per thread, join them."""
        self._channel.clear_requests()
        alive = [h for h in self.handlers if h.thread.is_alive()]
        for _ in alive:
            self._channel.send_shutdown_request()
        for h in alive:
            h.thread.join(timeout_s)
