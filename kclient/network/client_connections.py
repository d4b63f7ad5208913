"""The connection side of ``NetworkClient`` (``kclient/network/client.py``): how a new
connection becomes READY and how a lost one is cleaned up.

``ConnectionLifecycle`` is a base class of ``NetworkClient``, holding what Kafka's
``NetworkClient`` does around a connection rather than a request: after the TCP (and TLS)
connect, ApiVersions, then SASL when configured (the exchange itself is in
``authenticator``), then READY; on a disconnect, a connection-setup timeout, a request
timeout or a protocol error, the node's in-flight requests come back as disconnected, the
failure is recorded for ``no_broker_reachable_error`` (with a hint when the listener seems
to speak TLS or SASL), and a metadata refresh is requested. Same thread contract as the
client: its owning thread only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kclient import errors
from kclient.errors import KafkaError, KafkaTimeoutError
from kclient.network.api_versions import api_name
from kclient.network.client_writes import RequestWrites
from kclient.network.cluster import Node
from kclient.network.connection_states import ConnectionState, short_reason
from kclient.network.kafka_client import ClientRequest, ClientResponse
from kclient.protocol import ApiKey

if TYPE_CHECKING:
    from kclient.network.in_flight import InFlightRequest

log = logging.getLogger("kclient.network.client")

_REBOOTSTRAP_REQUIRED = errors.RebootstrapRequiredError.code
"""An ApiVersions v5 answer from a broker that is not the cluster's node the client meant."""


class ConnectionLifecycle(RequestWrites):
    """Connection setup and teardown of ``NetworkClient`` (see the module docstring)."""

    def _record_failure(
        self,
        node_id: int,
        reason: str,
        error: KafkaError | None = None,
        now_ms: int | None = None,
    ) -> None:
        """Why the node's connection failed (``now_ms``: a connection attempt's end, which
        may be a bootstrap server's refusal)."""
        address = self._addresses.get(node_id)
        if address is None:
            node = self._metadata.fetch().node_by_id(node_id)
            address = node.address if node is not None else f"node {node_id}"
        self.failures.failed(address, reason, error)
        if now_ms is not None:
            self.bootstrap_refusals.attempt_failed(node_id, address, reason, now_ms)

    def _close_on_error(
        self,
        responses: list[ClientResponse],
        node_id: int,
        now_ms: int,
        error: KafkaError,
        request: InFlightRequest | None,
    ) -> None:
        """The node broke the protocol: close it and fail everything in flight to it."""
        log.warning("%s%s", self._prefix, error)
        self._selector.close(node_id)
        if request is not None:
            self._fail_request(request, responses, now_ms, error, False)
        self._process_disconnection(responses, node_id, now_ms, error)

    def _handle_api_versions_response(
        self,
        responses: list[ClientResponse],
        request: InFlightRequest,
        body: Mapping[str, Any],
        now_ms: int,
    ) -> None:
        node_id = request.destination
        try:
            versions = self._api_versions.handle_response(node_id, request.api_version, body)
        except errors.BrokerResponseError as error:
            if error.code == _REBOOTSTRAP_REQUIRED:
                log.warning(
                    "%snode %d at %s is not the node of cluster %s this client knows (a "
                    "misrouted connection, KIP-1242); disconnecting",
                    self._prefix,
                    node_id,
                    self._addresses.get(node_id, "?"),
                    self._metadata.fetch().cluster_id,
                )
                self.metadata_updater.rebootstrap_required(
                    f"a misrouted connection to node {node_id}"
                )
            else:
                log.warning("%s%s; disconnecting", self._prefix, error)
            self._selector.close(node_id)
            self._process_disconnection(responses, node_id, now_ms, error)
            return
        if versions is None:
            log.debug("%snode %d asks for an older ApiVersions request", self._prefix, node_id)
            return
        if self._authenticator is not None:
            self._start_sasl(responses, node_id, now_ms)
            return
        self._node_ready(node_id)

    def _node_ready(self, node_id: int) -> None:
        self._first_request[node_id] = self._correlation_id  # the next one to go out
        self.connection_states.ready(node_id)
        self.failures.succeeded(self._addresses.get(node_id, ""))
        self.bootstrap_refusals.connected()
        self.warnings.forget(("connect", node_id))
        log.debug("%snode %d is ready: %r", self._prefix, node_id, self._api_versions.get(node_id))

    # ---- SASL (the exchange itself is in ``authenticator``) ------------------------------

    def _start_sasl(self, responses: list[ClientResponse], node_id: int, now_ms: int) -> None:
        assert self._authenticator is not None
        self.connection_states.authenticating(node_id)
        reason = self._authenticator.start(node_id, now_ms)
        if reason is not None:
            self._sasl_failed(responses, node_id, now_ms, reason)

    def _send_internal_now(self, request: ClientRequest, now_ms: int) -> None:
        self._do_send(request, True, now_ms)

    def _handle_sasl_handshake_response(
        self, responses: list[ClientResponse], node_id: int, body: Mapping[str, Any], now_ms: int
    ) -> None:
        assert self._authenticator is not None
        reason = self._authenticator.handle_handshake_response(node_id, body, now_ms)
        if reason is not None:
            self._sasl_failed(responses, node_id, now_ms, reason)

    def _handle_sasl_authenticate_response(
        self, responses: list[ClientResponse], node_id: int, body: Mapping[str, Any], now_ms: int
    ) -> None:
        assert self._authenticator is not None
        done, reason = self._authenticator.handle_authenticate_response(node_id, body, now_ms)
        if reason is not None:
            self._sasl_failed(responses, node_id, now_ms, reason)
        elif done:
            self._metadata.fatal_error(None)
            self._node_ready(node_id)

    def _may_reauthenticate(self, node_id: int) -> bool | None:
        if self.connection_states.state(node_id) is not ConnectionState.READY:
            return None
        return self._selector.is_channel_ready(node_id)

    def _sasl_failed(
        self, responses: list[ClientResponse], node_id: int, now_ms: int, reason: str
    ) -> None:
        """Authentication failed: close, back off, and fail sends with the reason until a
        later attempt succeeds (Java's AUTHENTICATION_FAILED)."""
        address = self._addresses.get(node_id, f"node {node_id}")
        error = errors.SaslAuthenticationError(f"SASL with node {node_id} at {address}: {reason}")
        log.error("%s%s", self._prefix, error)
        if self._authenticator is not None:
            self._authenticator.forget(node_id)
        self._selector.close(node_id)
        self._record_failure(node_id, reason)
        self.connection_states.authentication_failed(node_id, now_ms)
        self._api_versions.remove(node_id)
        self._unanswered.pop(node_id, None)
        for request in self.in_flight_requests.clear_all(node_id):
            self._fail_request(request, responses, now_ms, error, False)
        self.metadata_updater.handle_server_disconnect(now_ms, node_id)
        self._metadata.fatal_error(error)

    def _handle_disconnections(self, responses: list[ClientResponse], now_ms: int) -> None:
        for node_id, error in self._selector.disconnected.items():
            if self.connection_states.state(node_id) is ConnectionState.CONNECTING:
                log.debug("%snode %d disconnected: %s", self._prefix, node_id, error)
            else:  # a connection that never was is warned of below
                log.info("%snode %d disconnected: %s", self._prefix, node_id, error)
            self._process_disconnection(responses, node_id, now_ms, error)

    def _handle_connections(self) -> None:
        for node_id in self._selector.connected:
            log.debug("%sconnected to node %d; fetching API versions", self._prefix, node_id)
            self.connection_states.checking_api_versions(node_id)
            self._api_versions.connected(node_id)

    def _handle_initiate_api_version_requests(self, now_ms: int) -> None:
        for node_id, version in self._api_versions.pending():
            if self._selector.is_channel_ready(node_id) and self.in_flight_requests.can_send_more(
                node_id
            ):
                self._api_versions.sent(node_id)
                cluster_id = self._metadata.fetch().cluster_id if self.cluster_check else None
                body = self._api_versions.request_body(cluster_id, node_id)
                self._api_versions.named(node_id, body["cluster_id"] is not None)
                request = ClientRequest(node_id, ApiKey.API_VERSIONS, body, now_ms)
                self._do_send(request, True, now_ms, version)

    def _handle_timed_out_connections(self, responses: list[ClientResponse], now_ms: int) -> None:
        for node_id in self.connection_states.nodes_with_connection_setup_timeout(now_ms):
            timeout_ms = self.connection_states.connection_setup_timeout_ms(node_id)
            address = self._addresses.get(node_id, f"node {node_id}")
            error = errors.KafkaConnectionError(
                f"connection to node {node_id} at {address} timed out after {timeout_ms} ms "
                "(socket.connection.setup.timeout.ms)"
            )
            log.info("%s%s", self._prefix, error)
            self._selector.close(node_id)
            self._process_disconnection(responses, node_id, now_ms, error, timed_out=True)

    def _handle_timed_out_requests(self, responses: list[ClientResponse], now_ms: int) -> None:
        for node_id in self.in_flight_requests.nodes_with_timed_out_requests(now_ms):
            oldest = min(
                (r for r in self.in_flight_requests if r.destination == node_id),
                key=lambda r: r.send_time_ms,
            )
            error = KafkaTimeoutError(
                f"{api_name(oldest.api_key)} request to node {node_id} got no response within "
                f"{oldest.request_timeout_ms} ms (request.timeout.ms); disconnected"
            )
            log.info("%s%s", self._prefix, error)
            self._selector.close(node_id)
            self._process_disconnection(responses, node_id, now_ms, error, timed_out=True)

    # ---- disconnection --------------------------------------------------------------

    def _process_disconnection(
        self,
        responses: list[ClientResponse],
        node_id: int,
        now_ms: int,
        error: KafkaError,
        *,
        timed_out: bool = False,
    ) -> None:
        self._unanswered.pop(node_id, None)
        if self._authenticator is not None:
            self._authenticator.forget(node_id)
        state = self.connection_states.state(node_id)
        if state in (
            ConnectionState.CONNECTING,
            ConnectionState.CHECKING_API_VERSIONS,
            ConnectionState.AUTHENTICATING,
        ):
            reason = short_reason(str(error))
            if state is ConnectionState.CHECKING_API_VERSIONS and not timed_out:
                # Dropped before answering ApiVersions: what a TLS listener does to plaintext.
                reason += self._before_api_versions_hint
                if self._api_versions.named_cluster(node_id):
                    # or a broker that cannot read a v5 request naming the cluster (tansu
                    # 0.6): the next connections to it leave the name out
                    log.info(
                        "%snode %d closed the connection on an ApiVersions naming cluster "
                        "%s (KIP-1242); connecting to it without the cluster check",
                        self._prefix,
                        node_id,
                        self._metadata.fetch().cluster_id,
                    )
                    self._api_versions.skip_cluster_check(node_id)
            self._record_failure(node_id, reason, error, now_ms)
            if state is ConnectionState.CONNECTING:
                level, repeats = self.warnings.level(("connect", node_id), now_ms)
                log.log(
                    level,
                    "%sconnection to node %d could not be established: %s%s",
                    self._prefix,
                    node_id,
                    error,
                    repeats,
                )
        requests = self.in_flight_requests.clear_all(node_id)
        first = self._first_request.pop(node_id, None)
        if state is ConnectionState.READY and isinstance(error, errors.ProtocolDecodeError):
            # it answered, but broke the protocol (e.g. a response over
            # receive.message.max.bytes): that is what a caller waiting in vain must read
            self._record_failure(node_id, short_reason(str(error)), error)
        elif (
            state is ConnectionState.READY
            and self._authenticator is None
            and not timed_out
            and requests
            and requests[0].correlation_id == first
        ):
            self._record_failure(
                node_id,
                f"{short_reason(str(error))} before answering any request after ApiVersions "
                "(a SASL listener? check 'security.protocol')",
            )
        if state is not None:
            self.connection_states.disconnected(node_id, now_ms)
        self._api_versions.remove(node_id)
        for request in requests:
            self._fail_request(request, responses, now_ms, error, timed_out)
        self.metadata_updater.handle_server_disconnect(now_ms, node_id)

    def _fail_request(
        self,
        request: InFlightRequest,
        responses: list[ClientResponse] | None,
        now_ms: int,
        error: KafkaError,
        timed_out: bool,
    ) -> None:
        if not request.is_internal:
            if responses is not None:
                responses.append(request.disconnected(now_ms, error, timed_out))
        elif request.api_key == ApiKey.METADATA:
            self.metadata_updater.handle_failed_request(now_ms, error)

    def all_unreachable(self, nodes: Sequence[Node]) -> bool:
        """Every one of ``nodes`` failed its last connection attempt and none is open."""
        states = self.connection_states
        return bool(nodes) and all(states.is_unreachable(node.id) for node in nodes)

    def disconnect_all(self) -> None:
        """Close every open connection (``disconnect`` each): a rebootstrap."""
        for node_id in self.connection_states.open_node_ids():
            self.disconnect(node_id)

    def disconnect(self, node_id: int) -> None:
        """Close the node's connection; its requests come back as disconnected next poll."""
        if self.connection_states.state(node_id) in (None, ConnectionState.DISCONNECTED):
            return
        log.info("%sclosing the connection to node %d on request", self._prefix, node_id)
        self._selector.close(node_id)
        now_ms = self._clock.monotonic_ms()
        error = errors.KafkaConnectionError(f"the client closed its connection to node {node_id}")
        for request in self.in_flight_requests.clear_all(node_id):
            self._fail_request(request, self._aborted, now_ms, error, False)
        self._api_versions.remove(node_id)
        if self._authenticator is not None:
            self._authenticator.forget(node_id)
        self.connection_states.disconnected(node_id, now_ms)
