"""Processor: one network thread of the embedded broker (Kafka's ``SocketServer.Processor``).

Each Processor (``num.network.threads`` of them per listener, each its own thread) loops:
``configure_new_connections`` → ``process_new_responses`` → ``poll`` →
``process_completed_receives`` → ``process_completed_sends`` → ``process_disconnected``. A
completed receive is parsed into a ``Request`` (header and body), put on the shared
RequestChannel, and its connection stays muted until the response has been sent (or a
no-op response arrived) and, for a client over a quota, until its throttle time is over
(``throttled_channel``; an old request version's answer is held back that long instead).

Bad input closes only the offending connection, with one log line: a frame
``request_parser.parse_request`` refuses (unparseable, an unknown api key, an unsupported
version), a size outside 0..``socket.request.max.bytes``.
A request's buffer grows as its bytes arrive, from one ``MemoryPool`` per broker
(``queued.max.request.bytes``, see ``network_receive``).

An SSL listener (``security.protocol=SSL``) gives its Processors one ``SSLContext``: each
Processor wraps the connections handed to it (never the Acceptor, which must not block)
and its ServerSelector runs their handshakes without blocking; a failed handshake closes
only that connection.

A SASL listener (SASL_PLAINTEXT, SASL_SSL) gives its Processors one ``SaslServer``; each
new connection gets a ``SaslSession``, and until it has authenticated the Processor
itself (its base class ``ProcessorSasl``, ``processor_sasl.py``) answers SaslHandshake
and SaslAuthenticate (cheap: the SCRAM credentials were derived at start-up), lets
ApiVersions through to the handlers, and closes the connection, with one log line, on
any other request. A failed authentication is answered (SASL_AUTHENTICATION_FAILED,
UNSUPPORTED_SASL_MECHANISM ...) and the connection closed once the answer is out, as
Kafka does. Authenticated connections, and every connection of other listeners, take
the usual path (one ``is None`` check per request).

With ``connections.max.reauth.ms`` (KIP-368) an authenticated connection keeps its
session: a SaslHandshake on it starts a re-authentication, answered here like the first
authentication; once the session has expired, any request but SaslHandshake and
ApiVersions closes the connection, with one log line (one more ``is None`` check per
request for every connection).
"""

from __future__ import annotations

import itertools
import logging
import queue
import socket
import ssl
import threading
import time
from collections.abc import Callable

from kclient.broker.faults import LostAnswers
from kclient.broker.metrics import BrokerMetrics
from kclient.broker.network_receive import MemoryPool
from kclient.broker.processor_sasl import ProcessorSasl
from kclient.broker.request_channel import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    RequestChannel,
    Response,
    SendResponse,
)
from kclient.broker.request_parser import api_name, parse_request
from kclient.broker.sasl_server import SaslServer
from kclient.broker.sasl_session import DelayedAuthenticationFailures, SaslSession
from kclient.broker.selector import ServerSelector
from kclient.broker.throttled_channel import ThrottledChannels, client_throttles
from kclient.waker import Waker

log = logging.getLogger(__name__)

_POLL_TIMEOUT_S = 0.3


def _format_address(address: object) -> str:
    """``host:port`` for IP sockets, the path (or ``local``) for others (unit tests)."""
    if isinstance(address, tuple):
        return f"{address[0]}:{address[1]}"
    return str(address) or "local"


class Processor(ProcessorSasl):
    """One network thread: owns a ServerSelector and the connections handed to it."""

    def __init__(
        self,
        processor_id: int,
        request_channel: RequestChannel,
        *,
        max_request_bytes: int,
        connections_max_idle_ms: int = 600_000,
        memory_pool: MemoryPool | None = None,
        max_request_items: int | None = None,
        metrics: BrokerMetrics | None = None,
        connection_queue_size: int = 20,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
        name_prefix: str = "kclient-broker",
        ssl_context: ssl.SSLContext | None = None,
        sasl_server: SaslServer | None = None,
        lost_answers: LostAnswers | None = None,
    ) -> None:
        self.id = processor_id
        self._max_request_items = max_request_items
        self._lost_answers = lost_answers
        self._ssl_context = ssl_context
        self._sasl_server = sasl_server
        #: connection -> why: close once its response is sent (failed SASL exchanges)
        self._close_after_send: dict[str, str] = {}
        #: answers to failed authentications, held back (connection.failed.auth...delay.ms)
        self._delayed_failures: DelayedAuthenticationFailures[SendResponse] | None = (
            DelayedAuthenticationFailures(sasl_server.failed_authentication_delay_ms)
            if sasl_server is not None and sasl_server.failed_authentication_delay_ms > 0
            else None
        )
        self._channel = request_channel
        self._metrics = metrics
        self._monotonic_ns = monotonic_ns
        self.selector = ServerSelector(max_request_bytes, connections_max_idle_ms, pool=memory_pool)
        self._new_connections: queue.Queue[socket.socket] = queue.Queue(connection_queue_size)
        self._inflight: dict[str, Response] = {}
        #: connections muted for their throttle time (quotas), responses held back
        self._throttled: ThrottledChannels[SendResponse] = ThrottledChannels()
        self._waker = Waker()
        self._wakeup_pending = False
        self.selector.register_wakeup(self._waker)
        self._index = itertools.count()
        self._running = True
        self._closed = False
        self._thread = threading.Thread(
            target=self.run, name=f"{name_prefix}-network-thread-{processor_id}", daemon=True
        )
        request_channel.add_processor(processor_id, self.wakeup)

    # ---- called from other threads -------------------------------------------------

    def accept(self, sock: socket.socket, may_block: bool) -> bool:
        """Queue a new connection (Acceptor thread). False when the queue is full."""
        try:
            if may_block:
                self._new_connections.put(sock, timeout=1.0)
            else:
                self._new_connections.put_nowait(sock)
        except queue.Full:
            return False
        self.wakeup()
        return True

    def wakeup(self) -> None:
        """Interrupt ``poll`` (any thread)."""
        if not self._wakeup_pending:
            self._wakeup_pending = True
            self._waker.wake()

    def start(self) -> None:
        self._thread.start()

    def initiate_shutdown(self) -> None:
        self._running = False
        self.wakeup()

    def await_shutdown(self, timeout_s: float = 5.0) -> None:
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)
        if not self._thread.is_alive():
            self.close()

    @property
    def connection_count(self) -> int:
        return len(self.selector.channels)

    # ---- the loop (Processor thread) -----------------------------------------------

    def run(self) -> None:
        try:
            while self._running:
                self._run_once_logged()
        finally:
            self.close()

    def _run_once_logged(self) -> None:
        try:
            self.run_once(_POLL_TIMEOUT_S)
        except Exception:  # like Kafka: log and keep the network thread alive
            log.exception("processor %d got an unexpected exception", self.id)

    def run_once(self, poll_timeout_s: float) -> None:
        """One iteration of the Processor loop (unit tests call this directly)."""
        self._wakeup_pending = False
        self.configure_new_connections()
        self.process_new_responses()
        if self._throttled:
            self._end_throttling(self._throttled)
        if self._delayed_failures:
            self._send_delayed_failures(self._delayed_failures)
        self.poll(poll_timeout_s)
        self.process_completed_receives()
        self.process_completed_sends()
        self.process_disconnected()

    def configure_new_connections(self) -> None:
        for _ in range(20):
            try:
                sock = self._new_connections.get_nowait()
            except queue.Empty:
                return
            try:
                local = _format_address(sock.getsockname())
                remote = _format_address(sock.getpeername())
                connection_id = f"{local}-{remote}-{next(self._index)}"
                if self._ssl_context is not None:
                    # wrapping does no I/O; the handshake runs in this thread's poll
                    sock.setblocking(False)
                    sock = self._ssl_context.wrap_socket(
                        sock, server_side=True, do_handshake_on_connect=False
                    )
                sasl = SaslSession(self._sasl_server) if self._sasl_server is not None else None
                self.selector.register(connection_id, sock, remote, self._monotonic_ns(), sasl)
            except (OSError, ValueError) as exc:
                log.info("processor %d dropped a new connection: %s", self.id, exc)
                sock.close()
                continue
            if self._metrics is not None:
                self._metrics.add_counts(connections=1)
            log.debug("processor %d listening to new connection %s", self.id, connection_id)

    def process_new_responses(self) -> None:
        while (response := self._channel.receive_response(self.id)) is not None:
            request = response.request
            connection_id = request.connection_id
            now_ns = self._monotonic_ns()
            if isinstance(response, SendResponse):
                lost = self._lost_answers
                if lost is not None and lost.take(request.header.api_key):
                    request.update_request_metrics(now_ns)
                    log.info(
                        "processor %d: losing the answer to %s from %s (lose_answers); "
                        "closing the connection",
                        self.id,
                        api_name(request.header.api_key),
                        request.connection_id,
                    )
                    self.selector.close(connection_id, "the answer was lost (lose_answers)")
                    continue
                throttle_ms = request.throttle_time_ms
                if throttle_ms > 0 and not client_throttles(
                    request.header.api_key, request.header.api_version
                ):
                    # a client of before KIP-219: its answer waits out the throttle time
                    self._throttled.hold(connection_id, now_ns, throttle_ms, response)
                    continue
                if throttle_ms > 0:
                    self._throttled.throttle(connection_id, now_ns, throttle_ms)
                if self.selector.send(connection_id, response.buffers, now_ns):
                    self._inflight[connection_id] = response
                else:
                    request.update_request_metrics(now_ns)
                if request.record_network_thread_time is not None:
                    sent_ns = self._monotonic_ns()
                    request.record_network_thread_time(sent_ns - now_ns, sent_ns)
            elif isinstance(response, NoOpResponse):
                request.update_request_metrics(now_ns)
                if request.throttle_time_ms > 0:  # acks=0 over its byte rate
                    self._throttled.throttle(connection_id, now_ns, request.throttle_time_ms)
                    self.selector.release_request_memory(connection_id)
                else:
                    self.selector.unmute(connection_id)
            elif isinstance(response, CloseConnectionResponse):
                request.update_request_metrics(now_ns)
                self.selector.close(connection_id, "closed by the broker after an error")
            else:  # pragma: no cover - exhaustive
                raise TypeError(f"unknown response kind {response!r}")

    def poll(self, timeout_s: float) -> None:
        if self.selector.completed_sends or self.selector.disconnected:
            timeout_s = 0.0
        else:
            if self._delayed_failures:
                timeout_s = self._delayed_failures.timeout_s(self._monotonic_ns(), timeout_s)
            if self._throttled:
                timeout_s = self._throttled.timeout_s(self._monotonic_ns(), timeout_s)
        before_in, before_out = self.selector.bytes_in, self.selector.bytes_out
        self.selector.poll(timeout_s, self._monotonic_ns())
        if self._metrics is not None:
            self._metrics.add_counts(
                bytes_in=self.selector.bytes_in - before_in,
                bytes_out=self.selector.bytes_out - before_out,
            )

    def process_completed_receives(self) -> None:
        receives = self.selector.completed_receives
        if not receives:
            return
        self.selector.completed_receives = []
        for connection_id, frame in receives:
            channel = self.selector.channel(connection_id)
            if channel is None:
                continue
            sasl = channel.sasl
            request = self._parse(
                connection_id, channel.peer, frame, sasl is not None, channel.principal
            )
            if request is None:
                continue
            if sasl is not None:
                if self._handle_sasl(channel, sasl, request):
                    continue
            elif channel.reauth_session is not None and self._check_session(
                channel, channel.reauth_session, request
            ):
                continue
            self.selector.mute(connection_id)
            while not self._channel.send_request(request, timeout_s=_POLL_TIMEOUT_S):
                if not self._running:
                    return

    def process_completed_sends(self) -> None:
        sends = self.selector.completed_sends
        if not sends:
            return
        self.selector.completed_sends = []
        now_ns = self._monotonic_ns()
        for send in sends:
            response = self._inflight.pop(send.destination, None)
            if response is not None:
                response.request.update_request_metrics(now_ns)
            if self._close_after_send:
                why = self._close_after_send.pop(send.destination, None)
                if why is not None:
                    self.selector.close(send.destination, why)
                    continue
            if self._throttled and self._throttled.is_throttled(send.destination, now_ns):
                # read again when the throttle time is over (_end_throttling)
                self.selector.release_request_memory(send.destination)
                continue
            self.selector.unmute(send.destination)

    def process_disconnected(self) -> None:
        gone = self.selector.disconnected
        if not gone:
            return
        self.selector.disconnected = []
        now_ns = self._monotonic_ns()
        for connection_id, reason in gone:
            log.debug("processor %d: connection %s closed (%s)", self.id, connection_id, reason)
            response = self._inflight.pop(connection_id, None)
            if response is not None:
                response.request.update_request_metrics(now_ns)
            if self._close_after_send:
                self._close_after_send.pop(connection_id, None)
            if self._throttled:
                held = self._throttled.forget(connection_id)
                if held is not None:
                    held.request.update_request_metrics(now_ns)
            if self._metrics is not None:
                self._metrics.add_counts(connections=-1)

    def _parse(
        self,
        connection_id: str,
        peer: str,
        frame: bytearray,
        sasl_pending: bool = False,
        principal: str = "ANONYMOUS",
    ) -> Request | None:
        """Parse a frame into a Request, or close the connection (one log line)."""
        start_ns = self._monotonic_ns()
        parsed = parse_request(
            frame,
            processor_id=self.id,
            connection_id=connection_id,
            peer=peer,
            start_time_ns=start_ns,
            max_request_items=self._max_request_items,
            metrics=self._metrics,
            sasl_pending=sasl_pending,
            principal=principal,
        )
        if isinstance(parsed, str):
            self._reject(connection_id, peer, parsed)
            return None
        parsed.network_thread_time_ns = self._monotonic_ns() - start_ns
        return parsed

    def _end_throttling(self, throttled: ThrottledChannels[SendResponse]) -> None:
        """Connections whose throttle time is over: send a response held back, or read
        again once the response is out."""
        now_ns = self._monotonic_ns()
        for connection_id, held in throttled.pop_due(now_ns):
            if held is not None:
                if self.selector.send(connection_id, held.buffers, now_ns):
                    self._inflight[connection_id] = held
                else:
                    held.request.update_request_metrics(now_ns)
            elif connection_id not in self._inflight:
                self.selector.unmute(connection_id)

    def _reject(self, connection_id: str, peer: str, why: str) -> None:
        log.warning("closing connection %s from %s: %s", connection_id, peer, why)
        self.selector.close(connection_id, why)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._channel.remove_processor(self.id)
        self.selector.close_all()
        self.process_disconnected()
        while not self._new_connections.empty():
            self._new_connections.get_nowait().close()
        self._waker.close()
