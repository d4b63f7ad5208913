"""Per-node connection state and reconnect backoff: Kafka's ``ClusterConnectionStates``.

Owned by the thread that owns the ``NetworkClient`` (the producer's Sender thread); not
thread-safe.

Each node moves through an explicit table of allowed transitions (``ALLOWED_TRANSITIONS``)::

    DISCONNECTED ──connecting──▶ CONNECTING ──connected──▶ CHECKING_API_VERSIONS ──▶ READY
         ▲                           │                             │                  │
         └──────────── disconnected ─┴─────────────────────────────┴──────────────────┘

With SASL, CHECKING_API_VERSIONS → AUTHENTICATING → READY; a READY node whose SASL session
is about to expire goes back to AUTHENTICATING while it re-authenticates (KIP-368).

A transition outside the table is a bug in the caller and raises ``IllegalStateError``.

Backoff follows Java's ``ExponentialBackoff``: after the n-th consecutive failure a node
may be retried after ``reconnect.backoff.ms * 2**n`` (capped at ``reconnect.backoff.max.ms``)
with ±20% jitter; success resets it. The connection-setup timeout grows the same way from
``socket.connection.setup.timeout.ms`` to ``socket.connection.setup.timeout.max.ms``.

A node's host name is resolved when a connection is first attempted; each later attempt
moves to the next resolved address, and the name is resolved again once all were tried
(Java's ``use_all_dns_ips``).
"""

from __future__ import annotations

import enum
import math
import random
import re
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kclient.errors import IllegalStateError, KafkaError, KafkaTimeoutError

NO_DELAY_LIMIT_MS = 2**63 - 1
"""'Wait until some network event happens': the delay for nodes that are connecting or ready."""

Address = tuple[int, str, int]
"""A resolved address: (socket family, ip literal, port)."""

Resolver = Callable[[str, int], list[Address]]


def resolve_all(host: str, port: int) -> list[Address]:
    """Every distinct TCP address ``host`` resolves to, in resolver order.

    Raises ``OSError`` (``socket.gaierror``) when the name does not resolve.
    """
    return stream_addresses(host, socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))


def stream_addresses(host: str, infos: Iterable[tuple[Any, ...]]) -> list[Address]:
    """The distinct IPv4/IPv6 addresses of ``getaddrinfo``'s answer ``infos`` for ``host``,
    in its order; ``socket.gaierror`` when there is none."""
    seen: list[Address] = []
    for family, _type, _proto, _canon, sockaddr in infos:
        if family not in (socket.AF_INET, socket.AF_INET6):
            continue
        address = (int(family), str(sockaddr[0]), int(sockaddr[1]))
        if address not in seen:
            seen.append(address)
    if not seen:
        raise socket.gaierror(socket.EAI_NONAME, f"no IPv4/IPv6 address for {host}")
    return seen


class ConnectionState(enum.Enum):
    DISCONNECTED = "DISCONNECTED"
    CONNECTING = "CONNECTING"
    CHECKING_API_VERSIONS = "CHECKING_API_VERSIONS"
    AUTHENTICATING = "AUTHENTICATING"  # SASL: SaslHandshake and SaslAuthenticate rounds
    READY = "READY"
    AUTHENTICATION_FAILED = "AUTHENTICATION_FAILED"

    @property
    def is_disconnected(self) -> bool:
        return self in (ConnectionState.DISCONNECTED, ConnectionState.AUTHENTICATION_FAILED)

    @property
    def is_connected(self) -> bool:
        return self in (
            ConnectionState.CHECKING_API_VERSIONS,
            ConnectionState.AUTHENTICATING,
            ConnectionState.READY,
        )


_S = ConnectionState
ALLOWED_TRANSITIONS: dict[ConnectionState, frozenset[ConnectionState]] = {
    _S.DISCONNECTED: frozenset({_S.CONNECTING}),
    _S.CONNECTING: frozenset({_S.CHECKING_API_VERSIONS, _S.DISCONNECTED, _S.AUTHENTICATION_FAILED}),
    _S.CHECKING_API_VERSIONS: frozenset(
        {_S.READY, _S.AUTHENTICATING, _S.DISCONNECTED, _S.AUTHENTICATION_FAILED}
    ),
    _S.AUTHENTICATING: frozenset({_S.READY, _S.DISCONNECTED, _S.AUTHENTICATION_FAILED}),
    _S.READY: frozenset({_S.DISCONNECTED, _S.AUTHENTICATING}),  # SASL re-authentication
    _S.AUTHENTICATION_FAILED: frozenset({_S.CONNECTING}),
}
"""Which state may follow which. Anything else is a bug and raises IllegalStateError."""


class ExponentialBackoff:
    """Java's ``ExponentialBackoff``: ``initial * multiplier**attempts`` capped, with jitter."""

    def __init__(
        self,
        initial_ms: int,
        multiplier: float,
        max_ms: int,
        jitter: float,
        rng: random.Random | None = None,
    ) -> None:
        self.initial_ms = initial_ms
        self.multiplier = multiplier
        self.max_ms = max_ms
        self.jitter = jitter
        self._rng = rng if rng is not None else random.Random()
        self._exp_max = (
            math.log(max_ms / max(1, initial_ms)) / math.log(multiplier)
            if max_ms > initial_ms
            else 0.0
        )

    def backoff_ms(self, attempts: int) -> int:
        """The delay after ``attempts`` consecutive failures (0 → about ``initial_ms``)."""
        if self._exp_max == 0.0:
            return self.initial_ms
        term = self.initial_ms * self.multiplier ** min(float(attempts), self._exp_max)
        factor = self._rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter > 0 else 1.0
        return min(int(term * factor), self.max_ms)


@dataclass
class NodeConnectionState:
    """What ClusterConnectionStates knows about one node."""

    state: ConnectionState
    last_connect_attempt_ms: int
    reconnect_backoff_ms: int
    connection_setup_timeout_ms: int
    host: str
    port: int
    failed_attempts: int = 0
    failed_connect_attempts: int = 0
    throttle_until_ms: int = 0
    addresses: list[Address] = field(default_factory=list)
    address_index: int = 0

    def move_to_next_address(self) -> None:
        if not self.addresses:
            return  # resolved again by the next current_address()
        self.address_index = (self.address_index + 1) % len(self.addresses)
        if self.address_index == 0:
            self.addresses = []  # every address was tried: resolve the name again next time


class ClusterConnectionStates:
    """The connection state of every node this client has tried to talk to."""

    __slots__ = (
        "_resolver",
        "_states",
        "connecting_nodes",
        "connection_setup_timeout",
        "ready_nodes",
        "reconnect_backoff",
    )

    def __init__(
        self,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        connection_setup_timeout_ms: int = 10_000,
        connection_setup_timeout_max_ms: int = 30_000,
        *,
        rng: random.Random | None = None,
        resolver: Resolver = resolve_all,
    ) -> None:
        rng = rng if rng is not None else random.Random()
        self.reconnect_backoff = ExponentialBackoff(
            reconnect_backoff_ms, 2, reconnect_backoff_max_ms, 0.2, rng
        )
        self.connection_setup_timeout = ExponentialBackoff(
            connection_setup_timeout_ms, 2, connection_setup_timeout_max_ms, 0.2, rng
        )
        self._resolver = resolver
        self._states: dict[int, NodeConnectionState] = {}
        self.connecting_nodes: set[int] = set()
        self.ready_nodes: dict[int, int] = {}
        """READY node → its ``throttle_until_ms`` (read-only outside this class): what
        ``is_ready`` reads, kept by the transitions and ``throttle``, for the client's
        per-request check."""

    # ---- queries -------------------------------------------------------------------

    def node_state(self, node_id: int) -> NodeConnectionState:
        state = self._states.get(node_id)
        if state is None:
            raise IllegalStateError(f"no connection state for node {node_id}")
        return state

    def state(self, node_id: int) -> ConnectionState | None:
        """The node's state, or None if no connection was ever attempted."""
        state = self._states.get(node_id)
        return state.state if state is not None else None

    def is_unreachable(self, node_id: int) -> bool:
        """The node's last connection attempt failed (refused, timed out, no such host)
        and nothing is open to it now; False for a node never tried."""
        state = self._states.get(node_id)
        return (
            state is not None
            and state.state is ConnectionState.DISCONNECTED
            and state.failed_connect_attempts > 0
        )

    def open_node_ids(self) -> list[int]:
        """The nodes with a connection open or being opened (any state but DISCONNECTED)."""
        return [
            node_id
            for node_id, state in self._states.items()
            if state.state is not ConnectionState.DISCONNECTED
        ]

    def can_connect(self, node_id: int, now_ms: int) -> bool:
        """True if a connection may be started now (never tried, or backoff has passed)."""
        state = self._states.get(node_id)
        if state is None:
            return True
        return (
            state.state.is_disconnected
            and now_ms - state.last_connect_attempt_ms >= state.reconnect_backoff_ms
        )

    def is_blacked_out(self, node_id: int, now_ms: int) -> bool:
        """True while a disconnected node is still inside its reconnect backoff."""
        state = self._states.get(node_id)
        return (
            state is not None
            and state.state.is_disconnected
            and now_ms - state.last_connect_attempt_ms < state.reconnect_backoff_ms
        )

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        """Milliseconds until a connection may be attempted.

        0 for a node never tried; the remaining backoff for a disconnected node; and
        ``NO_DELAY_LIMIT_MS`` while connecting or connected, because a network event will
        wake the poll when something changes.
        """
        state = self._states.get(node_id)
        if state is None:
            return 0
        if state.state.is_disconnected:
            waited_ms = now_ms - state.last_connect_attempt_ms
            return max(state.reconnect_backoff_ms - waited_ms, 0)
        return NO_DELAY_LIMIT_MS

    def throttle_delay_ms(self, node_id: int, now_ms: int) -> int:
        state = self._states.get(node_id)
        if state is None or state.throttle_until_ms <= now_ms:
            return 0
        return state.throttle_until_ms - now_ms

    def poll_delay_ms(self, node_id: int, now_ms: int) -> int:
        """How long a caller that wants to send to the node should wait (throttle or backoff)."""
        throttle_ms = self.throttle_delay_ms(node_id, now_ms)
        if self.is_connected(node_id) and throttle_ms > 0:
            return throttle_ms
        return self.connection_delay(node_id, now_ms)

    def is_connecting(self, node_id: int) -> bool:
        return self.state(node_id) is ConnectionState.CONNECTING

    def is_preparing_connection(self, node_id: int) -> bool:
        """Connecting, or connected and still checking API versions or authenticating."""
        return self.state(node_id) in (
            ConnectionState.CONNECTING,
            ConnectionState.CHECKING_API_VERSIONS,
            ConnectionState.AUTHENTICATING,
        )

    def is_connected(self, node_id: int) -> bool:
        state = self.state(node_id)
        return state is not None and state.is_connected

    def is_ready(self, node_id: int, now_ms: int) -> bool:
        """READY and not throttled by the broker."""
        throttle_until_ms = self.ready_nodes.get(node_id)
        return throttle_until_ms is not None and throttle_until_ms <= now_ms

    def is_disconnected(self, node_id: int) -> bool:
        state = self.state(node_id)
        return state is not None and state.is_disconnected

    def has_ready_nodes(self, now_ms: int) -> bool:
        return any(self.is_ready(node_id, now_ms) for node_id in self._states)

    def is_any_node_connecting(self) -> bool:
        return bool(self.connecting_nodes)

    def last_connect_attempt_ms(self, node_id: int) -> int:
        state = self._states.get(node_id)
        return state.last_connect_attempt_ms if state is not None else 0

    def connection_setup_timeout_ms(self, node_id: int) -> int:
        return self.node_state(node_id).connection_setup_timeout_ms

    def is_connection_setup_timeout(self, node_id: int, now_ms: int) -> bool:
        state = self.node_state(node_id)
        if state.state is not ConnectionState.CONNECTING:
            raise IllegalStateError(f"node {node_id} is not connecting (it is {state.state.name})")
        return now_ms - state.last_connect_attempt_ms > state.connection_setup_timeout_ms

    def next_setup_timeout_ms(self, now_ms: int) -> int:
        """Ms until the earliest connection-setup timeout (``NO_DELAY_LIMIT_MS`` if none)."""
        if not self.connecting_nodes:
            return NO_DELAY_LIMIT_MS
        deadline_ms = min(
            (
                self._states[n].last_connect_attempt_ms
                + self._states[n].connection_setup_timeout_ms
                + 1
                for n in self.connecting_nodes
            ),
            default=now_ms + NO_DELAY_LIMIT_MS,
        )
        return max(0, deadline_ms - now_ms)

    def nodes_with_connection_setup_timeout(self, now_ms: int) -> list[int]:
        """Nodes whose connection attempt has lasted longer than their setup timeout."""
        if not self.connecting_nodes:
            return []
        return [n for n in self.connecting_nodes if self.is_connection_setup_timeout(n, now_ms)]

    # ---- addresses -----------------------------------------------------------------

    def current_address(self, node_id: int) -> Address:
        """The address to connect to; resolves the host name when needed (may raise OSError)."""
        state = self.node_state(node_id)
        if not state.addresses:
            state.addresses = list(self._resolver(state.host, state.port))
            state.address_index = 0
        return state.addresses[state.address_index]

    # ---- transitions ---------------------------------------------------------------

    def connecting(self, node_id: int, now_ms: int, host: str, port: int) -> None:
        """A connection attempt to ``host:port`` starts now."""
        state = self._states.get(node_id)
        if state is not None and (state.host, state.port) == (host, port):
            self._transition(node_id, state, ConnectionState.CONNECTING)
            state.last_connect_attempt_ms = now_ms
            state.move_to_next_address()
        else:
            # First attempt, or the node moved to a new host: start from scratch.
            if state is not None and not state.state.is_disconnected:
                raise IllegalStateError(
                    f"node {node_id} changed address to {host}:{port} while {state.state.name}"
                )
            self._states[node_id] = NodeConnectionState(
                state=ConnectionState.CONNECTING,
                last_connect_attempt_ms=now_ms,
                reconnect_backoff_ms=self.reconnect_backoff.backoff_ms(0),
                connection_setup_timeout_ms=self.connection_setup_timeout.backoff_ms(0),
                host=host,
                port=port,
            )
        self.connecting_nodes.add(node_id)

    def checking_api_versions(self, node_id: int) -> None:
        """The TCP connection is up; the ApiVersions exchange begins."""
        state = self.node_state(node_id)
        self._transition(node_id, state, ConnectionState.CHECKING_API_VERSIONS)
        self.connecting_nodes.discard(node_id)

    def authenticating(self, node_id: int) -> None:
        """API versions are known, or the SASL session is ending: a SASL exchange begins."""
        self._transition(node_id, self.node_state(node_id), ConnectionState.AUTHENTICATING)

    def ready(self, node_id: int) -> None:
        """API versions are known: requests may be sent. Resets the backoff."""
        state = self.node_state(node_id)
        self._transition(node_id, state, ConnectionState.READY)
        state.failed_attempts = 0
        state.failed_connect_attempts = 0
        state.reconnect_backoff_ms = self.reconnect_backoff.backoff_ms(0)
        state.connection_setup_timeout_ms = self.connection_setup_timeout.backoff_ms(0)
        self.connecting_nodes.discard(node_id)

    def disconnected(self, node_id: int, now_ms: int) -> None:
        """The connection failed or was closed; the reconnect backoff grows."""
        state = self.node_state(node_id)
        if state.state is ConnectionState.DISCONNECTED:
            return  # closing an already closed connection is harmless
        was_connected = state.state.is_connected
        self._transition(node_id, state, ConnectionState.DISCONNECTED)
        state.last_connect_attempt_ms = now_ms
        state.reconnect_backoff_ms = self.reconnect_backoff.backoff_ms(state.failed_attempts)
        state.failed_attempts += 1
        if node_id in self.connecting_nodes:
            self.connecting_nodes.discard(node_id)
            state.failed_connect_attempts += 1
            state.connection_setup_timeout_ms = self.connection_setup_timeout.backoff_ms(
                state.failed_connect_attempts
            )
        else:
            state.failed_connect_attempts = 0
            state.connection_setup_timeout_ms = self.connection_setup_timeout.backoff_ms(0)
        if was_connected:
            state.addresses = []  # the broker may have moved: resolve its name again

    def authentication_failed(self, node_id: int, now_ms: int) -> None:
        state = self.node_state(node_id)
        self._transition(node_id, state, ConnectionState.AUTHENTICATION_FAILED)
        self.connecting_nodes.discard(node_id)
        state.last_connect_attempt_ms = now_ms
        state.reconnect_backoff_ms = self.reconnect_backoff.backoff_ms(state.failed_attempts)
        state.failed_attempts += 1

    def throttle(self, node_id: int, throttle_until_ms: int) -> None:
        """The broker asked us not to send to it before ``throttle_until_ms``."""
        state = self._states.get(node_id)
        if state is not None and state.throttle_until_ms < throttle_until_ms:
            state.throttle_until_ms = throttle_until_ms
            if node_id in self.ready_nodes:
                self.ready_nodes[node_id] = throttle_until_ms

    def remove(self, node_id: int) -> None:
        self._states.pop(node_id, None)
        self.connecting_nodes.discard(node_id)
        self.ready_nodes.pop(node_id, None)

    def _transition(self, node_id: int, state: NodeConnectionState, new: ConnectionState) -> None:
        if new not in ALLOWED_TRANSITIONS[state.state]:
            raise IllegalStateError(
                f"node {node_id}: connection state cannot go from {state.state.name} to {new.name}"
            )
        state.state = new
        if new is ConnectionState.READY:
            self.ready_nodes[node_id] = state.throttle_until_ms
        else:
            self.ready_nodes.pop(node_id, None)


_NODE_AT = re.compile(r"^node -?\d+ at \S+ ")


def short_reason(text: str) -> str:
    """'connection to node -1 at h:1 failed: connection refused' → 'connection refused';
    'node -1 at h:1 closed the connection' → 'closed the connection' (the address is
    named next to the reason already)."""
    for marker in (" failed: ", " lost: "):
        if marker in text:
            return text.split(marker, 1)[1]
    return _NODE_AT.sub("", text, count=1)


class ConnectionFailures:
    """Why the last connection attempt to each address failed, for error messages.

    Written by the owning thread; read by any thread (a caller whose deadline passed).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reasons: dict[str, str] = {}
        self._errors: dict[str, KafkaError] = {}  # address → the typed error, if one

    def failed(self, address: str, reason: str, error: KafkaError | None = None) -> None:
        with self._lock:
            self._reasons.pop(address, None)  # keep the most recent failure last
            self._reasons[address] = reason
            if error is None:
                self._errors.pop(address, None)
            else:
                self._errors[address] = error

    def succeeded(self, address: str) -> None:
        with self._lock:
            self._reasons.pop(address, None)
            self._errors.pop(address, None)

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self._reasons)

    def no_broker_reachable_error(self, waited_ms: int) -> KafkaTimeoutError:
        """'no broker reachable after 5 s (127.0.0.1:9092: connection refused; …)'."""
        with self._lock:
            reasons = dict(self._reasons)
            latest = self._errors.get(next(reversed(reasons), ""))
        if reasons:
            tried = "; ".join(f"{address}: {why}" for address, why in reasons.items())
        else:
            tried = "no connection attempt has finished yet"
        timeout = KafkaTimeoutError(
            f"no broker reachable after {waited_ms / 1000:g} s ({tried}). Check "
            "'bootstrap.servers' and that the brokers are running and reachable."
        )
        # the typed error behind the most recent failure (e.g. a ProtocolDecodeError from
        # a port that does not speak Kafka), for callers that look at the cause
        timeout.__cause__ = latest
        return timeout
