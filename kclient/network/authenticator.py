"""The client side of SASL on a connection: Kafka's ``SaslClientAuthenticator``.

Owned by the ``NetworkClient`` (its thread), which feeds it the SASL answers and acts on
what it returns. After ApiVersions, ``start`` sends SaslHandshake v1 naming the
mechanism; SaslAuthenticate rounds then carry the mechanism's tokens until it has nothing
more to say. When the broker gives the session a lifetime (KIP-368), the node is due to
authenticate again on the same connection at a random 85-95% of it, as Java does;
``reauthenticate_due`` starts those rounds. Failures come back as a reason text for the
client to close the connection with; secrets never appear in them. Credentials that
refresh themselves (OAUTHBEARER tokens, ``kclient.oauth``) are given their turn
(``maintain``) on the same schedule, so a token is refreshed before the sessions need it.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable, Mapping
from typing import Any

from kclient import errors
from kclient.network.api_versions import ApiVersions
from kclient.network.kafka_client import ClientRequest
from kclient.protocol import ApiKey
from kclient.sasl import Credentials, SaslMechanism, shorten

log = logging.getLogger(__name__)

NEVER_MS = 2**63 - 1

#: Sends an internal request: (request, now_ms).
SendInternal = Callable[[ClientRequest, int], None]
#: The host name a node's connection was made to (GSSAPI's service principal names it).
HostOf = Callable[[int], str]


class SaslClientAuthenticator:
    """Per-node SASL exchanges and re-authentication schedule of one client."""

    def __init__(
        self,
        credentials: Credentials,
        api_versions: ApiVersions,
        send: SendInternal,
        rng: random.Random,
        log_prefix: str = "",
        *,
        host_of: HostOf | None = None,
    ) -> None:
        self.credentials = credentials
        self._host_of = host_of
        self._api_versions = api_versions
        self._send = send
        self._rng = rng
        self._prefix = log_prefix
        self._exchanges: dict[int, SaslMechanism] = {}  # node → its exchange in progress
        self._reauthenticate_at_ms: dict[int, int] = {}
        #: when the credentials want their ``maintain`` (a token refresh; NEVER_MS: never)
        self._maintain_at_ms = NEVER_MS
        #: the earliest re-authentication or maintenance due (NEVER_MS: none)
        self.next_reauthentication_ms = NEVER_MS

    def start(self, node_id: int, now_ms: int) -> str | None:
        """Begin authenticating a node that answered ApiVersions; a failure reason if its
        broker cannot do SASL through SaslAuthenticate."""
        try:
            self._api_versions.latest_usable_version(node_id, ApiKey.SASL_HANDSHAKE, 1)
            self._api_versions.latest_usable_version(node_id, ApiKey.SASL_AUTHENTICATE)
        except errors.UnsupportedVersionError as exc:
            return (
                f"the broker does not speak SASL through SaslAuthenticate ({exc}); is it a SASL "
                "listener? check 'security.protocol'"
            )
        self._send_handshake(node_id, now_ms)
        return None

    def _send_handshake(self, node_id: int, now_ms: int) -> None:
        request = ClientRequest(
            node_id,
            ApiKey.SASL_HANDSHAKE,
            {"mechanism": self.credentials.mechanism},
            now_ms,
            min_version=1,
        )
        self._send(request, now_ms)

    def _send_token(self, node_id: int, token: bytes, now_ms: int) -> None:
        self._send(
            ClientRequest(node_id, ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token}, now_ms),
            now_ms,
        )

    def handle_handshake_response(
        self, node_id: int, body: Mapping[str, Any], now_ms: int
    ) -> str | None:
        """The broker's SaslHandshake answer; a failure reason if it refused the mechanism."""
        code = body["error_code"]
        if code:
            enabled = shorten(", ".join(body.get("mechanisms") or []) or "none")
            return (
                f"the broker does not enable SASL mechanism {self.credentials.mechanism} (it "
                f"enables: {enabled}; error {errors.for_code(code).name}): check "
                "'sasl.mechanism'"
            )
        try:
            host = self._host_of(node_id) if self._host_of is not None else ""
            exchange = self.credentials.new_exchange(host)
            token = exchange.initial_response()
        except errors.SaslAuthenticationError as exc:
            return str(exc)  # e.g. GSSAPI: no Kerberos credentials, the KDC unreachable
        self._schedule_maintenance(now_ms)
        self._exchanges[node_id] = exchange
        self._send_token(node_id, token, now_ms)
        return None

    def handle_authenticate_response(
        self, node_id: int, body: Mapping[str, Any], now_ms: int
    ) -> tuple[bool, str | None]:
        """A SaslAuthenticate answer: ``(authenticated, failure reason)``; both false/None
        while rounds remain (or when the connection was closed meanwhile)."""
        exchange = self._exchanges.get(node_id)
        if exchange is None:
            return False, None
        creds = self.credentials
        code = body["error_code"]
        if code:
            detail = shorten(body.get("error_message") or errors.for_code(code).name)
            who = f" as {creds.username!r}" if creds.username else ""
            return False, (
                f"authentication{who} with {creds.mechanism} failed: "
                f"{detail}; {creds.settings_hint}"
            )
        try:
            token = exchange.respond(bytes(body.get("auth_bytes") or b""))
        except errors.SaslAuthenticationError as exc:
            return False, str(exc)
        if token is not None:
            self._send_token(node_id, token, now_ms)
            return False, None
        del self._exchanges[node_id]
        lifetime_ms = body.get("session_lifetime_ms") or 0
        log.debug(
            "%sauthenticated to node %d as %r (%s; session lifetime %s)",
            self._prefix,
            node_id,
            creds.username,
            creds.mechanism,
            f"{lifetime_ms} ms" if lifetime_ms > 0 else "unlimited",
        )
        if lifetime_ms > 0:
            at_ms = now_ms + int(lifetime_ms * self._rng.uniform(0.85, 0.95))
            self._reauthenticate_at_ms[node_id] = at_ms
            self.next_reauthentication_ms = min(self.next_reauthentication_ms, at_ms)
        return True, None

    def reauthenticate_due(
        self,
        now_ms: int,
        may_start: Callable[[int], bool | None],
        starting: Callable[[int], None],
    ) -> None:
        """KIP-368: start the rounds of every node whose session is due. ``may_start(node)``
        says whether it can start now: True (READY with an idle channel), False (its
        channel is busy writing: wait a poll) or None (not READY: drop it);
        ``starting(node)`` marks it AUTHENTICATING."""
        if now_ms >= self._maintain_at_ms:
            self._maintain(now_ms)
        due = self._reauthenticate_at_ms
        for node_id, at_ms in list(due.items()):
            if at_ms > now_ms:
                continue
            ready = may_start(node_id)
            if ready is None:
                del due[node_id]  # no longer connected
                continue
            if not ready:
                continue
            del due[node_id]
            log.debug("%sre-authenticating to node %d (KIP-368)", self._prefix, node_id)
            starting(node_id)
            self._send_handshake(node_id, now_ms)
        next_ms = min(due.values(), default=NEVER_MS)
        # a node still due waits for its channel: look again in a millisecond, not at once
        next_ms = next_ms if next_ms > now_ms else now_ms + 1
        self.next_reauthentication_ms = min(next_ms, self._maintain_at_ms)

    def _maintain(self, now_ms: int) -> None:
        maintain = getattr(self.credentials, "maintain", None)
        if maintain is not None:
            maintain()
        self._maintain_at_ms = NEVER_MS
        self._schedule_maintenance(now_ms)

    def _schedule_maintenance(self, now_ms: int) -> None:
        """When the credentials next want ``maintain`` (a token's refresh time)."""
        delay = getattr(self.credentials, "maintenance_delay_ms", None)
        delay_ms = delay() if delay is not None else NEVER_MS
        if delay_ms == NEVER_MS:
            return
        # at least a second apart: a refresh under way reports no delay until it is done
        self._maintain_at_ms = now_ms + max(delay_ms, 1000)
        self.next_reauthentication_ms = min(self.next_reauthentication_ms, self._maintain_at_ms)

    def forget(self, node_id: int) -> None:
        """The node's connection is gone: drop its exchange and schedule."""
        self._exchanges.pop(node_id, None)
        self._reauthenticate_at_ms.pop(node_id, None)
