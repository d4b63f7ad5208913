"""SASL on a Processor's network thread: the part of Kafka's ``SocketServer.Processor``
(with ``SaslServerAuthenticator``) that answers SaslHandshake and SaslAuthenticate itself.

``ProcessorSasl`` is a base class of ``Processor`` (``kclient/broker/processor.py``),
holding only these steps. A connection of a SASL listener that has yet to authenticate has
its SaslHandshake and SaslAuthenticate answered here (ApiVersions takes the usual path);
a failed authentication is answered, after ``connection.failed.authentication.delay.ms``
when set, and the connection closed once the answer is out. On an authenticated
connection with a session lifetime (``connections.max.reauth.ms``, KIP-368) a
SaslHandshake starts a re-authentication, and after expiry anything but ApiVersions
closes the connection, with one log line. The Processor's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kclient.broker.request_channel import Request, Response, SendResponse
from kclient.broker.sasl_session import DelayedAuthenticationFailures, SaslReply, SaslSession
from kclient.broker.server_channel import ServerChannel
from kclient.protocol import ApiKey
from kclient.protocol.frame import encode_response

if TYPE_CHECKING:
    from kclient.broker.metrics import BrokerMetrics
    from kclient.broker.selector import ServerSelector

log = logging.getLogger(__name__)


class ProcessorSasl:
    """The SASL steps of ``Processor`` (see the module docstring)."""

    if TYPE_CHECKING:  # set by Processor.__init__
        selector: ServerSelector
        _metrics: BrokerMetrics | None
        _monotonic_ns: Callable[[], int]
        _inflight: dict[str, Response]
        _close_after_send: dict[str, str]
        _delayed_failures: DelayedAuthenticationFailures[SendResponse] | None

        def _reject(self, connection_id: str, peer: str, why: str) -> None: ...

    def _handle_sasl(self, channel: ServerChannel, session: SaslSession, request: Request) -> bool:
        """Answer a SASL request here, on the network thread; False for an ApiVersions
        request, which takes the usual path."""
        header = request.header
        api_key = header.api_key
        if api_key == ApiKey.API_VERSIONS:
            if session.accepts_api_versions:
                return False
            self._reject(
                channel.id, channel.peer, "request ApiVersions in the middle of the SASL exchange"
            )
            return True
        body = request.body
        assert body is not None
        if api_key == ApiKey.SASL_HANDSHAKE:
            reply = session.handshake(header.api_version, body["mechanism"])
        else:
            reply = session.authenticate(bytes(body["auth_bytes"]), request.start_time_ns)
        self._send_sasl_reply(channel, session, request, reply)
        return True

    def _check_session(
        self, channel: ServerChannel, session: SaslSession, request: Request
    ) -> bool:
        """A request on an authenticated connection whose session expires: True when
        handled here (a SaslHandshake begins a re-authentication; after expiry, anything
        but ApiVersions closes the connection), False to take the usual path."""
        api_key = request.header.api_key
        now_ns = request.start_time_ns
        if api_key == ApiKey.SASL_HANDSHAKE:
            self.selector.reauthenticating(channel.id, now_ns)
            return self._handle_sasl(channel, session, request)
        if session.admits(api_key, now_ns):
            return False
        log.info(
            "closing connection %s from %s: its SASL session (user %r) expired %d ms ago "
            "without re-authentication (connections.max.reauth.ms is %d; an OAUTHBEARER "
            "session ends with its token); got %s",
            channel.id,
            channel.peer,
            session.username,
            (now_ns - session.expiry_ns) // 1_000_000,
            session.lifetime_ms,
            request.api_name,
        )
        if self._metrics is not None:
            self._metrics.add_counts(expired_connections_killed=1)
        self.selector.close(
            channel.id, "SASL session expired (its token, or connections.max.reauth.ms)"
        )
        return True

    def _send_sasl_reply(
        self, channel: ServerChannel, session: SaslSession, request: Request, reply: SaslReply
    ) -> None:
        header = request.header
        now_ns = self._monotonic_ns()
        request.request_dequeue_time_ns = now_ns
        request.api_local_complete_time_ns = now_ns
        request.response_complete_time_ns = now_ns
        request.response_dequeue_time_ns = now_ns
        if reply.failure is not None:
            request.error_count += 1
            log.warning(
                "SASL %s of %s failed (connection %s, mechanism %s, user %r): %s",
                "re-authentication" if session.reauthenticating else "authentication",
                channel.peer,
                channel.id,
                session.mechanism,
                session.username,
                reply.failure,
            )
            self._close_after_send[channel.id] = f"SASL authentication failed: {reply.failure}"
        elif reply.authenticated:
            self.selector.authenticated(channel.id)
            if reply.reauthenticated and self._metrics is not None:
                self._metrics.add_counts(successful_reauthentications=1)
            log.debug(
                "%s %s as %r with %s (connection %s)",
                channel.peer,
                "re-authenticated" if reply.reauthenticated else "authenticated",
                session.username,
                session.mechanism,
                channel.id,
            )
        buffers = encode_response(
            header.api_key, header.api_version, header.correlation_id, reply.body
        )
        delayed = self._delayed_failures
        if reply.failure is not None and delayed is not None:
            # answered after the delay; the connection stays muted, the others are served
            due_ns = delayed.add(now_ns, SendResponse(request, buffers))
            session.deadline_ns = max(session.deadline_ns, due_ns + 1_000_000_000)
            return
        self._send_reply(channel.id, SendResponse(request, buffers), now_ns)

    def _send_reply(self, connection_id: str, response: SendResponse, now_ns: int) -> None:
        if self.selector.send(connection_id, response.buffers, now_ns):
            self._inflight[connection_id] = response
        else:  # closed meanwhile
            self._close_after_send.pop(connection_id, None)
            response.request.update_request_metrics(now_ns)

    def _send_delayed_failures(self, delayed: DelayedAuthenticationFailures[SendResponse]) -> None:
        now_ns = self._monotonic_ns()
        for response in delayed.pop_due(now_ns):
            self._send_reply(response.request.connection_id, response, now_ns)
