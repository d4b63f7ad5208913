"""Requests to brokers over non-blocking connections: Kafka's ``NetworkClient``.

Thread contract: one owning thread (the producer's Sender thread) calls every method;
``wakeup()`` may be called from any thread, and so may ``no_broker_reachable_error()``
and ``connection_failures()`` (they read a snapshot under a lock). ``now_ms`` is always
``Clock.monotonic_ms()``.

``ready(node, now_ms)`` starts a connection when needed. A new connection first sends
ApiVersions; the highest version both sides support is then used for every API (a broker
that answers UNSUPPORTED_VERSION to ApiVersions itself gets it again at the version it
names). Only then is the node READY for ``send``.

``poll(timeout_ms, now_ms)`` runs, in order: metadata update check → selector poll →
completed sends (requests that expect no response, e.g. acks=0, complete here) →
completed receives (matched by correlation id; a mismatch or undecodable response closes
the connection) → disconnections (in-flight requests on the node complete as
disconnected; a metadata refresh is requested) → new connections (ApiVersions) →
connection-setup timeouts → request timeouts (``request.timeout.ms``: the node is
disconnected) → callbacks. Every finished request is returned as a ``ClientResponse``.
"""

from __future__ import annotations

import logging
import random
import selectors
from collections import deque
from collections.abc import Sequence

from kclient import errors
from kclient.clock import SYSTEM_CLOCK, Clock
from kclient.errors import IllegalStateError
from kclient.network.api_versions import (
    ApiVersions,
    api_name,
    client_throttle_ms,
)
from kclient.network.authenticator import NEVER_MS, SaslClientAuthenticator
from kclient.network.bootstrap_refusals import BootstrapRefusals
from kclient.network.bootstrap_resolution import (
    BootstrapLookup,
    BootstrapResolution,
    bootstrap_lookup,
)
from kclient.network.client_connections import ConnectionLifecycle
from kclient.network.config import NetworkClientConfig, parse_bootstrap_servers
from kclient.network.connection_states import (
    ClusterConnectionStates,
    ConnectionFailures,
    Resolver,
    resolve_all,
)
from kclient.network.in_flight import InFlightRequests
from kclient.network.kafka_client import ClientRequest, ClientResponse
from kclient.network.metadata import Metadata, Node
from kclient.network.metadata_response import decode_metadata_response
from kclient.network.metadata_updater import DefaultMetadataUpdater
from kclient.network.selector import (
    KSelector,
    NetworkReceive,
    Selectable,
)
from kclient.network.warn_limit import WarnLimiter
from kclient.protocol import ApiKey
from kclient.protocol.frame import (
    decode_response,
    peek_correlation_id,
)

log = logging.getLogger(__name__)


class NetworkClient(ConnectionLifecycle):
    """``KafkaClient`` over real connections (or any ``Selectable``); connection setup
    and teardown are in ``ConnectionLifecycle`` (``client_connections.py``), the node
    queries and ``initiate_connect`` in ``ClientNodes`` (``client_nodes.py``) and what is
    kept of requests that expect no response in ``UnansweredRequests``
    (``client_unanswered.py``)."""

    # slots (the instance keeps its __dict__ for the rest)
    __slots__ = (
        "_aborted",
        "_api_versions",
        "_authenticator",
        "_checked",
        "_clock",
        "_closed",
        "_correlation_id",
        "_selector",
        "_unanswered",
        "client_id",
        "connection_states",
        "in_flight_requests",
        "metadata_updater",
        "request_timeout_ms",
    )

    def __init__(
        self,
        selector: Selectable,
        metadata: Metadata,
        config: NetworkClientConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
        resolver: Resolver = resolve_all,
        lookup: BootstrapLookup | None = None,
    ) -> None:
        self.config = config = config if config is not None else NetworkClientConfig()
        self._selector = selector
        self._metadata = metadata
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self.client_id = config.client_id
        self.request_timeout_ms = config.request_timeout_ms
        self.reconnect_backoff_ms = config.reconnect_backoff_ms
        self._prefix = f"[kclient clientId={config.client_id}] "
        self._before_api_versions_hint = (
            " before answering ApiVersions"
            if config.uses_tls
            else " before answering ApiVersions (a TLS listener? set 'security.protocol' to "
            f"{'SASL_SSL' if config.uses_sasl else 'SSL'})"
        )
        # node → correlation id of its first request once READY, to tell a connection
        # dropped before answering anything (what a SASL listener does to a plain client).
        self._first_request: dict[int, int] = {}
        self.connection_states = ClusterConnectionStates(
            config.reconnect_backoff_ms,
            config.reconnect_backoff_max_ms,
            config.socket_connection_setup_timeout_ms,
            config.socket_connection_setup_timeout_max_ms,
            rng=self._rng,
            resolver=resolver,
        )
        self.in_flight_requests = InFlightRequests(config.max_in_flight_requests_per_connection)
        self.metadata_updater = DefaultMetadataUpdater(
            self,
            metadata,
            self._prefix,
            recovery_rebootstrap=config.metadata_recovery_strategy == "rebootstrap",
            rebootstrap_trigger_ms=config.metadata_recovery_rebootstrap_trigger_ms,
        )
        self._api_versions = ApiVersions()
        self._authenticator = (
            SaslClientAuthenticator(
                config.sasl,
                self._api_versions,
                self._send_internal_now,
                self._rng,
                self._prefix,
                host_of=lambda node_id: self.connection_states.node_state(node_id).host,
            )
            if config.uses_sasl and config.sasl is not None
            else None
        )
        self._aborted: list[ClientResponse] = []
        # Correlation ids of recent requests that expected no response (acks=0), per node:
        # some Kafka-compatible brokers answer them anyway; such answers are dropped.
        self._unanswered: dict[int, deque[int]] = {}
        self._correlation_id = 0
        # node → the now_ms at which ``ready`` found it could take a request; ``send`` at
        # that same now_ms need not check again. Emptied by everything that could change
        # the answer: a send (the in-flight queue), a poll, a connect or a disconnect.
        self._checked: dict[int, int] = {}
        self._addresses: dict[int, str] = {}  # node → "host:port (ip)" of the current attempt
        self.failures = ConnectionFailures()
        self.bootstrap_refusals = BootstrapRefusals()
        self.bootstrap_refused_timeout_ms = config.bootstrap_refused_timeout_ms
        self.bootstrap_resolution = BootstrapResolution(
            metadata.bootstrap_addresses,
            lookup if lookup is not None else bootstrap_lookup(config.client_dns_lookup, resolver),
            timeout_ms=config.bootstrap_resolve_timeout_ms,
            retry_backoff_ms=config.retry_backoff_ms,
            log_prefix=self._prefix,
        )
        """``bootstrap.servers`` into the bootstrap nodes (``client.dns.lookup``,
        ``bootstrap.resolve.timeout.ms``): pending until a name resolves, when the
        timeout is above 0."""
        self.cluster_check = config.metadata_cluster_check_enable
        """``metadata.cluster.check.enable``: ApiVersions v5 names the cluster and node."""
        self.warnings = WarnLimiter()
        """Repeated connection warnings, rate-limited (the client's thread)."""
        self._closed = False

    @classmethod
    def create(
        cls,
        bootstrap_servers: str | Sequence[str],
        config: NetworkClientConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        metadata: Metadata | None = None,
        selector: selectors.BaseSelector | None = None,
        resolver: Resolver = resolve_all,
        lookup: BootstrapLookup | None = None,
        resolve_bootstrap: bool = True,
    ) -> NetworkClient:
        """A client over real sockets, bootstrapped from ``bootstrap.servers``.

        Pass the producer's ``metadata`` to share it with the caller threads; otherwise
        one is made from the config's metadata settings. ``selector``: see ``KSelector``;
        ``resolver``: how host names become addresses (``getaddrinfo`` by default);
        ``lookup``: how a bootstrap name becomes bootstrap entries (by default from
        ``client.dns.lookup`` and ``resolver``). With ``bootstrap.resolve.timeout.ms`` 0
        the names are resolved here (blocking), unless ``resolve_bootstrap`` is False
        (the caller then calls ``resolve_bootstrap_now`` before the first poll): raises
        ``ConfigError`` when none resolves.
        """
        config = config if config is not None else NetworkClientConfig()
        addresses = parse_bootstrap_servers(bootstrap_servers)
        if metadata is None:
            metadata = Metadata(
                refresh_backoff_ms=config.retry_backoff_ms,
                refresh_backoff_max_ms=config.retry_backoff_max_ms,
                metadata_max_age_ms=config.metadata_max_age_ms,
                metadata_max_idle_ms=config.metadata_max_idle_ms,
                log_prefix=f"[kclient clientId={config.client_id}] ",
            )
        metadata.bootstrap(addresses)
        kselector = KSelector(
            clock,
            connections_max_idle_ms=config.connections_max_idle_ms,
            send_buffer_bytes=config.send_buffer_bytes,
            receive_buffer_bytes=config.receive_buffer_bytes,
            max_receive_bytes=config.receive_message_max_bytes,
            log_prefix=f"[kclient clientId={config.client_id}] ",
            ssl_context=config.ssl_context if config.uses_tls else None,
            selector=selector,
        )
        client = cls(kselector, metadata, config, clock=clock, resolver=resolver, lookup=lookup)
        if not client.bootstrap_resolution.pending:  # bootstrap.resolve.timeout.ms 0
            if resolve_bootstrap:
                try:
                    client.resolve_bootstrap_now()
                except BaseException:
                    client.close()  # its selector too: no client was made
                    raise
            else:
                client.bootstrap_resolution.defer()
        return client

    def resolve_bootstrap_now(self) -> None:
        """``bootstrap.resolve.timeout.ms`` 0: resolve ``bootstrap.servers`` now and make
        the names that resolve the bootstrap nodes; ``ConfigError`` when none does."""
        self._bootstrap(self.bootstrap_resolution.resolve_at_creation())

    def _bootstrap(self, entries: list[tuple[str, int]]) -> None:
        if entries != list(self._metadata.bootstrap_addresses):
            self._metadata.bootstrap(entries)

    def _ensure_bootstrapped(self, now_ms: int) -> bool:
        """Java's ``ensureBootstrapped``, while ``bootstrap_resolution`` is pending: a
        resolution round when due; True once the bootstrap nodes are known. When the time
        is up, the metadata's waiters get ``BootstrapResolutionError``."""
        resolution = self.bootstrap_resolution
        had_error = resolution.error is not None
        entries = resolution.poll(now_ms)
        if entries is not None:
            self._bootstrap(entries)
            return True
        if resolution.error is not None and not had_error:
            log.error("%s%s", self._prefix, resolution.error)
            self._metadata.fatal_error(resolution.error)
        return False

    # ---- sending ---------------------------------------------------------------------

    def ready(self, node: Node, now_ms: int) -> bool:
        if not node.host or node.port < 0:
            raise IllegalStateError(f"cannot connect to node {node.id} without an address")
        # is_ready, with what send() may skip remembered
        if not self.metadata_updater.is_update_due(now_ms) and (
            self.can_send_request(node.id, now_ms)
        ):
            self._checked[node.id] = now_ms
            return True
        if self.connection_states.can_connect(node.id, now_ms) and (
            not self.bootstrap_resolution.pending
        ):
            self.initiate_connect(node, now_ms)
        return False

    def send(self, request: ClientRequest, now_ms: int) -> None:
        if self._closed:
            raise IllegalStateError("the network client is closed")
        node_id = request.destination
        if self._checked.get(node_id) != now_ms and not (self.can_send_request(node_id, now_ms)):
            raise IllegalStateError(
                f"node {request.destination} is not ready for a request: check "
                "ready(node, now_ms) before send()"
            )
        self._do_send(request, False, now_ms)

    def send_internal(self, request: ClientRequest, now_ms: int) -> None:
        """Send a request the client makes itself (Metadata, ApiVersions)."""
        self._do_send(request, True, now_ms)

    # ---- polling --------------------------------------------------------------------

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        aborted = self._poll_start()
        if aborted is not None:
            return aborted
        resolution = self.bootstrap_resolution
        if resolution.pending and not self._ensure_bootstrapped(now_ms):
            if resolution.error is None:  # the next round; nothing else to do meanwhile
                timeout_ms = min(timeout_ms, resolution.delay_ms(now_ms))
            return self._poll_io(timeout_ms)
        # the timeout: the least of the caller's and what is due next (comparisons, not min())
        metadata_timeout_ms = self.metadata_updater.maybe_update(now_ms)
        if metadata_timeout_ms < timeout_ms:  # noqa: PLR1730
            timeout_ms = metadata_timeout_ms
        in_flight = self.in_flight_requests
        if in_flight.count:
            request_timeout_ms = in_flight.next_timeout_ms(now_ms)
            if request_timeout_ms < timeout_ms:  # noqa: PLR1730
                timeout_ms = request_timeout_ms
        elif self.request_timeout_ms < timeout_ms:
            timeout_ms = self.request_timeout_ms
        states = self.connection_states
        if states.connecting_nodes:
            timeout_ms = min(timeout_ms, states.next_setup_timeout_ms(now_ms))
        auth = self._authenticator
        if auth is not None and auth.next_reauthentication_ms != NEVER_MS:
            timeout_ms = max(min(timeout_ms, auth.next_reauthentication_ms - now_ms), 0)
        return self._poll_io(timeout_ms)

    def poll_ready(self, now_ms: int) -> list[ClientResponse]:
        """``poll(0, now_ms)`` for I/O known to be ready (an event loop's callback): the
        same I/O and handling, without working out a timeout or starting a metadata
        update. The caller's next ``poll`` does both."""
        if self._closed or self._aborted:
            return self.poll(0, now_ms)  # its checks, its aborted requests
        self._checked.clear()  # the poll may change any node's readiness
        return self._poll_io(0)

    def _poll_start(self) -> list[ClientResponse] | None:
        """``poll``'s first checks; the aborted requests, if any, are its answer."""
        if self._closed:
            raise IllegalStateError("the network client is closed")
        checked = self._checked
        if checked:
            checked.clear()  # the poll may change any node's readiness
        if self._aborted:
            aborted, self._aborted = self._aborted, []
            self._complete(aborted)
            return aborted
        return None

    def _poll_io(self, timeout_ms: int) -> list[ClientResponse]:
        """The selector's poll and what it brings (answers, disconnects, connections,
        timeouts), answered through the requests' callbacks."""
        in_flight = self.in_flight_requests
        states = self.connection_states
        auth = self._authenticator
        selector = self._selector
        selector.poll(timeout_ms)
        now_ms = self._clock.monotonic_ms()
        responses: list[ClientResponse] = []
        # Each step runs only when the selector reported something for it (hot path).
        if selector.completed_sends:
            self._handle_completed_sends(responses, now_ms)
        receives = selector.completed_receives
        if receives:
            self._handle_completed_receives(responses, now_ms, receives)
        if selector.disconnected:
            self._handle_disconnections(responses, now_ms)
        if selector.connected:
            self._handle_connections()
        if self._api_versions.to_send:
            self._handle_initiate_api_version_requests(now_ms)
        if states.connecting_nodes:
            self._handle_timed_out_connections(responses, now_ms)
        if in_flight.count and now_ms >= in_flight.earliest_deadline_ms:
            self._handle_timed_out_requests(responses, now_ms)
        if auth is not None and now_ms >= auth.next_reauthentication_ms:
            auth.reauthenticate_due(
                now_ms, self._may_reauthenticate, self.connection_states.authenticating
            )
        if responses:
            self._complete(responses)
        return responses

    def _handle_completed_receives(
        self, responses: list[ClientResponse], now_ms: int, receives: Sequence[NetworkReceive]
    ) -> None:
        closed: set[int] | None = None
        in_flight = self.in_flight_requests
        for receive in receives:
            node_id = receive.source
            if closed is not None and node_id in closed:
                continue
            payload = receive.payload
            if self._unanswered and self._is_answer_to_unanswered(node_id, payload):
                continue
            request = in_flight.complete_next_or_none(node_id)
            try:
                if request is None:
                    raise errors.ProtocolDecodeError(
                        f"node {node_id} sent a response while no request was in flight; "
                        "closing the connection"
                    )
                correlation_id = peek_correlation_id(payload)
                if correlation_id != request.correlation_id:
                    raise errors.ProtocolDecodeError(
                        f"node {node_id} answered correlation id {correlation_id} but "
                        f"{request.correlation_id} ({api_name(request.api_key)}) was next; "
                        "closing the connection"
                    )
                if request.is_internal and request.api_key == ApiKey.METADATA:
                    # only the topics in use: a broker may answer with many more
                    in_use = self._metadata.topics()
                    _, body = decode_metadata_response(
                        request.api_version, payload, in_use.__contains__
                    )
                else:
                    _, body = decode_response(request.api_key, request.api_version, payload)
            except (errors.ProtocolDecodeError, errors.UnsupportedVersionError) as exc:
                self._close_on_error(responses, node_id, now_ms, exc, request)
                if closed is None:
                    closed = set()
                closed.add(node_id)
                continue
            api_key = request.api_key
            if body.get("throttle_time_ms"):  # usually absent or 0: skip the version check
                throttle_ms = client_throttle_ms(api_key, request.api_version, body)
                if throttle_ms > 0:
                    self.connection_states.throttle(node_id, now_ms + throttle_ms)
            if not request.is_internal:
                responses.append(request.completed(body, now_ms))
            elif api_key == ApiKey.METADATA:
                self.metadata_updater.handle_success_response(correlation_id, body, now_ms)
            elif api_key == ApiKey.API_VERSIONS:
                self._handle_api_versions_response(responses, request, body, now_ms)
            elif api_key == ApiKey.SASL_HANDSHAKE:
                self._handle_sasl_handshake_response(responses, node_id, body, now_ms)
            elif api_key == ApiKey.SASL_AUTHENTICATE:
                self._handle_sasl_authenticate_response(responses, node_id, body, now_ms)
            else:
                responses.append(request.completed(body, now_ms))

    # ---- lifecycle ------------------------------------------------------------------

    def disconnect(self, node_id: int) -> None:
        self._checked.clear()
        super().disconnect(node_id)

    def wakeup(self) -> None:
        self._selector.wakeup()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._selector.close()
        self.metadata_updater.close()

    def _complete(self, responses: list[ClientResponse]) -> None:
        for response in responses:
            callback = response.request.callback  # ClientResponse.on_complete, in place
            if callback is None:
                continue
            try:
                callback(response)
            except Exception as exc:  # one failing callback must not stop the rest
                self._callback_failed(exc)

    def _callback_failed(self, exc: Exception) -> None:
        """Logs a request completion callback's exception (``_complete``)."""
        log.error("%suncaught error in a request completion callback", self._prefix, exc_info=exc)
