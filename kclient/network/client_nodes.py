"""The node side of ``NetworkClient`` (``kclient/network/client.py``): whether a node can
take a request or a connection, starting a connection (``initiate_connect``), the least
loaded node and what failed. ``ClientNodes`` is a base class of ``NetworkClient``.

The questions read ``ClusterConnectionStates``, ``InFlightRequests``, ``ApiVersions`` and
the selector, as Kafka's ``NetworkClient`` does for ``isReady``, ``connectionDelay``,
``leastLoadedNode`` and the like; what follows a connect (ApiVersions, SASL, READY) is in
``ConnectionLifecycle`` (``client_connections.py``). Same thread contract as the client: its
owning thread only, except ``connection_failures`` and ``no_broker_reachable_error`` (a
snapshot under a lock, from any thread).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kclient.errors import KafkaError
from kclient.network.connection_states import short_reason
from kclient.network.selector import describe_os_error, format_address

if TYPE_CHECKING:
    import random
    import threading
    from collections import deque

    from kclient.clock import Clock
    from kclient.errors import KafkaTimeoutError
    from kclient.network.api_versions import ApiVersions, NodeApiVersions
    from kclient.network.authenticator import SaslClientAuthenticator
    from kclient.network.bootstrap_refusals import BootstrapRefusals, BootstrapRefusedError
    from kclient.network.bootstrap_resolution import BootstrapResolution
    from kclient.network.connection_states import ClusterConnectionStates, ConnectionFailures
    from kclient.network.in_flight import InFlightRequests
    from kclient.network.kafka_client import ClientResponse
    from kclient.network.metadata import Metadata, Node
    from kclient.network.metadata_updater import DefaultMetadataUpdater
    from kclient.network.selector import Selectable
    from kclient.network.warn_limit import WarnLimiter

log = logging.getLogger("kclient.network.client")


class ClientNodes:
    """The node side of ``NetworkClient`` (see the module docstring)."""

    # set by NetworkClient.__init__; the classes between this one and NetworkClient
    # (UnansweredRequests, RequestWrites, ConnectionLifecycle) use them too
    _selector: Selectable
    _metadata: Metadata
    _clock: Clock
    _rng: random.Random
    _api_versions: ApiVersions
    _authenticator: SaslClientAuthenticator | None
    _prefix: str
    _checked: dict[int, int]
    _addresses: dict[int, str]
    _unanswered: dict[int, deque[int]]
    _aborted: list[ClientResponse]
    _correlation_id: int
    _before_api_versions_hint: str
    _first_request: dict[int, int]
    client_id: str
    request_timeout_ms: int
    connection_states: ClusterConnectionStates
    in_flight_requests: InFlightRequests
    metadata_updater: DefaultMetadataUpdater
    failures: ConnectionFailures
    bootstrap_refusals: BootstrapRefusals
    bootstrap_refused_timeout_ms: int
    bootstrap_resolution: BootstrapResolution
    cluster_check: bool
    warnings: WarnLimiter

    def _record_failure(
        self,
        node_id: int,
        reason: str,
        error: KafkaError | None = None,
        now_ms: int | None = None,
    ) -> None:
        """Remembers why a connection to a node failed (``ConnectionLifecycle``'s)."""
        raise NotImplementedError

    # ---- nodes and connections -------------------------------------------------------

    @property
    def metadata(self) -> Metadata:
        return self._metadata

    @property
    def release_before_blocking(self) -> list[threading.Lock]:
        return self._selector.release_before_select

    def is_ready(self, node: Node, now_ms: int) -> bool:
        # A due metadata refresh goes first: nodes look unready until it has been sent.
        return not self.metadata_updater.is_update_due(now_ms) and self.can_send_request(
            node.id, now_ms
        )

    def can_send_request(self, node_id: int, now_ms: int) -> bool:
        # READY and not throttled (ClusterConnectionStates.is_ready, read in place)
        throttle_until_ms = self.connection_states.ready_nodes.get(node_id)
        return (
            throttle_until_ms is not None
            and throttle_until_ms <= now_ms
            and self._selector.is_channel_ready(node_id)
            and self.in_flight_requests.can_send_more(node_id)
        )

    def connection_delay(self, node: Node, now_ms: int) -> int:
        return self.connection_states.connection_delay(node.id, now_ms)

    def poll_delay_ms(self, node: Node, now_ms: int) -> int:
        return self.connection_states.poll_delay_ms(node.id, now_ms)

    def is_any_node_connecting(self) -> bool:
        return self.connection_states.is_any_node_connecting()

    def can_connect(self, node_id: int, now_ms: int) -> bool:
        return self.connection_states.can_connect(node_id, now_ms)

    def connection_failed(self, node: Node) -> bool:
        return self.connection_states.is_disconnected(node.id)

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return self.in_flight_requests.in_flight_request_count(node_id)

    def has_in_flight_requests(self, node_id: int | None = None) -> bool:
        return not self.in_flight_requests.is_empty(node_id)

    def has_ready_nodes(self, now_ms: int) -> bool:
        return self.connection_states.has_ready_nodes(now_ms)

    def api_versions(self, node_id: int) -> NodeApiVersions | None:
        return self._api_versions.get(node_id)

    def least_loaded_node(self, now_ms: int) -> Node | None:
        """Fewest in-flight requests among ready nodes; else a connecting node; else the
        connectable node tried longest ago; None if every node is backing off."""
        nodes = self.metadata_updater.fetch_nodes()
        if not nodes:
            return None
        in_flight = None
        found_ready = found_connecting = found_can_connect = None
        offset = self._rng.randrange(len(nodes))
        for i in range(len(nodes)):
            node = nodes[(offset + i) % len(nodes)]
            if self.can_send_request(node.id, now_ms):
                count = self.in_flight_requests.in_flight_request_count(node.id)
                if count == 0:
                    return node
                if in_flight is None or count < in_flight:
                    in_flight, found_ready = count, node
            elif self.connection_states.is_preparing_connection(node.id):
                found_connecting = node
            elif self.connection_states.can_connect(node.id, now_ms) and (
                found_can_connect is None
                or self.connection_states.last_connect_attempt_ms(found_can_connect.id)
                > self.connection_states.last_connect_attempt_ms(node.id)
            ):
                found_can_connect = node
        return found_ready or found_connecting or found_can_connect

    # ---- failures, for people -----------------------------------------------------

    def connection_failures(self) -> dict[str, str]:
        """Every address whose last connection attempt failed, and why (thread-safe)."""
        return self.failures.snapshot()

    def no_broker_reachable_error(self, waited_ms: int) -> KafkaTimeoutError:
        """The error for a caller whose deadline passed with no broker answering: names
        every address tried and the last OS error for each (thread-safe)."""
        return self.failures.no_broker_reachable_error(waited_ms)

    def bootstrap_error(self, now_ms: int) -> KafkaError | None:
        """Why the first metadata wait must fail now, if it must: no bootstrap name
        resolved within ``bootstrap.resolve.timeout.ms`` (``BootstrapResolutionError``),
        or every bootstrap server refused connections for ``bootstrap.refused.timeout.ms``
        (``BootstrapRefusedError``); None otherwise (thread-safe)."""
        resolution = self.bootstrap_resolution
        if resolution.error is not None:
            return resolution.error
        if resolution.pending:  # no name resolved yet: bootstrap.resolve.timeout.ms's
            return None
        return self.bootstrap_refused_error(now_ms)

    def bootstrap_refused_error(self, now_ms: int) -> BootstrapRefusedError | None:
        """The error for a first metadata wait once every bootstrap server has refused
        connections for ``bootstrap.refused.timeout.ms`` and none ever accepted one (see
        ``bootstrap_refusals``); None otherwise (thread-safe)."""
        refusals = self.bootstrap_refusals
        limit_ms = self.bootstrap_refused_timeout_ms
        if limit_ms < 0 or refusals.ever_connected:
            return None
        cluster = self._metadata.fetch()
        if not cluster.is_bootstrap_configured:
            return None
        ids = [node.id for node in cluster.nodes]
        refused_ms = refusals.refused_for_ms(ids, now_ms)
        if refused_ms is None or refused_ms < limit_ms:
            return None
        return refusals.error(ids, refused_ms)

    # ---- connecting -----------------------------------------------------------------

    def initiate_connect(self, node: Node, now_ms: int) -> None:
        """Start a connection to the node (its next resolved address)."""
        self._checked.clear()
        self.connection_states.connecting(node.id, now_ms, node.host, node.port)
        self._addresses[node.id] = node.address
        try:
            family, ip, port = self.connection_states.current_address(node.id)
            if ip != node.host:
                self._addresses[node.id] = f"{node.address} ({format_address(ip, port)})"
            log.debug(
                "%sconnecting to node %d at %s", self._prefix, node.id, self._addresses[node.id]
            )
            self._selector.connect(node.id, ip, port, family, server_hostname=node.host)
        except (OSError, KafkaError) as exc:
            reason = describe_os_error(exc) if isinstance(exc, OSError) else str(exc)
            level, repeats = self.warnings.level(("connect", node.id), now_ms)
            log.log(level, "%scannot connect to node %s: %s%s", self._prefix, node, reason, repeats)
            self._record_failure(node.id, short_reason(reason), None, now_ms)
            self.connection_states.disconnected(node.id, now_ms)
            self.metadata_updater.handle_server_disconnect(now_ms, node.id)
