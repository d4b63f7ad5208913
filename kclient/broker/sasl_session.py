"""SaslSession: the SASL state of one connection of a SASL listener (Kafka's
``SaslServerAuthenticator`` with its ``ReauthInfo``). Owned by the connection's Processor
thread; sans-I/O: it answers with response bodies, the Processor encodes, sends and closes.

Kafka's order: optional ApiVersions, SaslHandshake v1 naming an enabled mechanism, then
SaslAuthenticate rounds until the mechanism is complete. Anything else fails the
connection. ``deadline_ns`` (set by the selector) bounds each exchange.

Re-authentication (KIP-368), when the listener's ``connections.max.reauth.ms`` is > 0:

* A successful SaslAuthenticate starts a session of that lifetime, sent to v1+ clients as
  ``session_lifetime_ms``: the smaller of the setting and the credential's own lifetime,
  as Kafka. Only OAUTHBEARER tokens have one (their ``exp``): their sessions end with the
  token even when ``connections.max.reauth.ms`` is 0, and may re-authenticate.
  SaslAuthenticate v0 has no such field: such a client is simply closed once its session
  has expired.
* After ``expiry_ns`` the connection may only re-authenticate: ``admits`` lets through
  SaslHandshake and ApiVersions; anything else makes the Processor close the connection.
* On an authenticated connection, SaslHandshake then SaslAuthenticate round(s)
  re-authenticate. As in Kafka the mechanism and the user cannot change: another one
  fails with SASL_AUTHENTICATION_FAILED, and the connection closes, as after a wrong
  password. Success renews the session: a full lifetime from then.

Unlike Kafka, a connection may re-authenticate more often than once a second (Kafka
refuses that, which only matters for lifetimes near a second, as in tests).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from kclient import errors
from kclient.broker.sasl_server import SaslExchange, SaslFailure, SaslServer, loggable_name
from kclient.protocol import ApiKey

__all__ = ["DelayedAuthenticationFailures", "SaslReply", "SaslSession"]

#: What an authenticated connection may still send once its session has expired.
ALLOWED_AFTER_EXPIRY: Final = frozenset({int(ApiKey.SASL_HANDSHAKE), int(ApiKey.API_VERSIONS)})

_NS_PER_MS = 1_000_000
_T = TypeVar("_T")


@dataclass(frozen=True)
class SaslReply:
    """What to answer to a SaslHandshake / SaslAuthenticate request.

    ``close``: close the connection once this is sent. ``failure``: why the exchange
    failed, for the one log line. ``authenticated``: the connection may now send any
    request; ``reauthenticated``: and it had authenticated before (KIP-368).
    """

    body: dict[str, Any]
    close: bool = False
    failure: str | None = None
    authenticated: bool = False
    reauthenticated: bool = False


_HANDSHAKE, _AUTHENTICATE, _FAILED, _DONE = "handshake", "authenticate", "failed", "done"


class SaslSession:
    """One connection's authentication, then (with ``connections.max.reauth.ms``) its
    authenticated session: when it expires, and its re-authentications."""

    __slots__ = (
        "_exchange",
        "_lifetime_ms",
        "_mechanism",
        "_principal",
        "_refusal",
        "_server",
        "_state",
        "deadline_ns",
        "expiry_ns",
        "reauthenticating",
        "requested_mechanism",
    )

    def __init__(self, server: SaslServer) -> None:
        self._server = server
        self._lifetime_ms = server.connections_max_reauth_ms
        self._state = _HANDSHAKE
        self._exchange: SaslExchange | None = None
        self.requested_mechanism: str | None = None
        self.deadline_ns = 0
        #: Monotonic time the authenticated session ends (0: never, or not authenticated).
        self.expiry_ns = 0
        #: The current (or last) exchange re-authenticates an authenticated connection.
        self.reauthenticating = False
        #: The user and mechanism that authenticated: a re-authentication keeps them.
        self._principal: str | None = None
        self._mechanism: str | None = None
        #: (log reason, client message) to fail the re-authentication's first token with.
        self._refusal: tuple[str, str] | None = None

    @property
    def max_receive_size(self) -> int:
        return self._server.max_receive_size

    @property
    def lifetime_ms(self) -> int:
        """``connections.max.reauth.ms``: how long an authenticated session lasts (0: ever)."""
        return self._lifetime_ms

    @property
    def expires(self) -> bool:
        """Authenticated sessions expire, and may re-authenticate (KIP-368)."""
        return self._lifetime_ms > 0 or self.expiry_ns != 0

    @property
    def accepts_api_versions(self) -> bool:
        """ApiVersions may come before SaslHandshake, not in the middle of the exchange."""
        return self._state == _HANDSHAKE

    @property
    def in_progress(self) -> bool:
        """A mechanism was chosen and the exchange has not ended."""
        return self._state == _AUTHENTICATE

    @property
    def failed(self) -> bool:
        """The exchange failed: the connection closes once the error response is out."""
        return self._state == _FAILED

    @property
    def authenticated(self) -> bool:
        return self._state == _DONE

    @property
    def mechanism(self) -> str | None:
        return self.requested_mechanism

    @property
    def username(self) -> str | None:
        """The claimed user (bounded in length, for log lines), once the client named it."""
        name = self._exchange.username if self._exchange is not None else None
        return loggable_name(name) if name is not None else None

    def expired(self, now_ns: int) -> bool:
        """The authenticated session has outlived ``connections.max.reauth.ms``."""
        return self.expiry_ns != 0 and now_ns >= self.expiry_ns

    def admits(self, api_key: int, now_ns: int) -> bool:
        """Whether an authenticated connection may send this request now: anything until
        its session expires, then only what re-authenticates (and ApiVersions)."""
        return api_key in ALLOWED_AFTER_EXPIRY or not self.expired(now_ns)

    def handshake(self, version: int, mechanism: str) -> SaslReply:
        """SaslHandshake: choose the mechanism (re-authenticating, if authenticated)."""
        enabled = list(self._server.mechanisms)
        self.requested_mechanism = loggable_name(mechanism)
        reauthentication = self._state == _DONE and self.expires
        if self._state != _HANDSHAKE and not reauthentication:
            return self._fail(
                {"error_code": errors.IllegalSaslStateError.code, "mechanisms": enabled},
                "SaslHandshake after authentication, and re-authentication is off "
                "(connections.max.reauth.ms is 0)"
                if self._state == _DONE
                else "SaslHandshake in the middle of the SASL exchange",
            )
        self.reauthenticating = reauthentication
        if version < 1:
            return self._fail(
                {"error_code": errors.UnsupportedVersionError.code, "mechanisms": enabled},
                "SaslHandshake v0 (SASL tokens as raw frames) is not supported; the client must "
                "use SaslHandshake v1 and SaslAuthenticate (Kafka 1.0 and later)",
            )
        if mechanism not in enabled:
            return self._fail(
                {"error_code": errors.UnsupportedSaslMechanismError.code, "mechanisms": enabled},
                f"mechanism {loggable_name(mechanism)!r} is not enabled "
                f"(sasl.enabled.mechanisms: {','.join(enabled)})",
            )
        self._refusal = None
        if reauthentication and mechanism != self._mechanism:
            # as Kafka: the handshake succeeds, the exchange's first token fails
            self._refusal = (
                f"re-authentication with mechanism {mechanism}, but the connection "
                f"authenticated with {self._mechanism}",
                f"Re-authentication failed: the SASL mechanism cannot change from "
                f"{self._mechanism} to {mechanism}",
            )
        self._exchange = self._server.new_exchange(mechanism)
        self._state = _AUTHENTICATE
        return SaslReply({"error_code": 0, "mechanisms": enabled})

    def authenticate(self, token: bytes, now_ns: int) -> SaslReply:
        """SaslAuthenticate: one round of the chosen mechanism. ``now_ns`` (monotonic)
        starts the session's lifetime when this round completes the exchange."""
        exchange = self._exchange
        if self._state != _AUTHENTICATE or exchange is None:
            return self._fail(
                _authenticate_body(
                    errors.IllegalSaslStateError.code, "SaslAuthenticate before SaslHandshake"
                ),
                "SaslAuthenticate before a successful SaslHandshake",
            )
        if self._refusal is not None:
            reason, client_message = self._refusal
            return self._fail(
                _authenticate_body(errors.SaslAuthenticationFailedError.code, client_message),
                reason,
            )
        try:
            answer = exchange.evaluate(token)
        except SaslFailure as failure:
            return self._fail(
                _authenticate_body(
                    errors.SaslAuthenticationFailedError.code, failure.client_message
                ),
                failure.reason,
            )
        if not exchange.complete:
            return SaslReply(_authenticate_body(0, None, answer))
        if self.reauthenticating and exchange.username != self._principal:
            was, now = self._principal or "", exchange.username or ""
            return self._fail(
                _authenticate_body(
                    errors.SaslAuthenticationFailedError.code,
                    "Re-authentication failed: the user cannot change from "
                    f"{loggable_name(was)} to {loggable_name(now)}",
                ),
                f"re-authentication as user {loggable_name(now)!r}, but the connection "
                f"authenticated as {loggable_name(was)!r}",
            )
        self._state = _DONE
        self._principal = exchange.username
        self._mechanism = exchange.mechanism
        lifetime_ms = self._lifetime_ms
        credential_ms = getattr(exchange, "session_lifetime_ms", None)
        if credential_ms is not None:  # a token's: it already counts connections.max.reauth.ms
            lifetime_ms = credential_ms
        self.expiry_ns = now_ns + lifetime_ms * _NS_PER_MS if lifetime_ms else 0
        return SaslReply(
            _authenticate_body(0, None, answer, lifetime_ms),
            authenticated=True,
            reauthenticated=self.reauthenticating,
        )

    def _fail(self, body: dict[str, Any], reason: str) -> SaslReply:
        self._state = _FAILED
        return SaslReply(body, close=True, failure=reason)


def _authenticate_body(
    code: int, message: str | None, auth_bytes: bytes = b"", session_lifetime_ms: int = 0
) -> dict[str, Any]:
    # session_lifetime_ms (v1+; 0: the session never expires) is dropped by v0's encoder
    return {
        "error_code": code,
        "error_message": message,
        "auth_bytes": auth_bytes,
        "session_lifetime_ms": session_lifetime_ms,
    }


class DelayedAuthenticationFailures(Generic[_T]):
    """The answers to failed authentications, held back for
    ``connection.failed.authentication.delay.ms`` (Kafka's ``Selector`` keeps such
    connections in ``delayedClosingChannels``), so that a client guessing passwords gets
    one answer per delay and connection instead of thousands a second.

    Owned by one Processor thread, which keeps serving every other connection meanwhile:
    ``add`` parks an answer (the connection stays muted), ``pop_due`` hands back those
    whose time has come, ``timeout_s`` bounds the Processor's poll.
    """

    def __init__(self, delay_ms: int) -> None:
        self.delay_ms = delay_ms
        self._heap: list[tuple[int, int, _T]] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._heap)

    def add(self, now_ns: int, answer: _T) -> int:
        """Park ``answer``; returns the monotonic time it is due."""
        due_ns = now_ns + self.delay_ms * _NS_PER_MS
        heapq.heappush(self._heap, (due_ns, next(self._order), answer))
        return due_ns

    def pop_due(self, now_ns: int) -> list[_T]:
        """The parked answers due by ``now_ns``, oldest first."""
        heap = self._heap
        due: list[_T] = []
        while heap and heap[0][0] <= now_ns:
            due.append(heapq.heappop(heap)[2])
        return due

    def timeout_s(self, now_ns: int, timeout_s: float) -> float:
        """``timeout_s``, or less if an answer falls due sooner."""
        if not self._heap:
            return timeout_s
        return max(0.0, min(timeout_s, (self._heap[0][0] - now_ns) / 1e9))
