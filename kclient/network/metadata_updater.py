"""Keeps ``Metadata`` fresh through the client's own connections: Kafka's
``NetworkClient.DefaultMetadataUpdater``.

Owned by the thread that owns the ``NetworkClient`` (the producer's Sender thread).

``maybe_update(now_ms)`` runs at the start of every ``NetworkClient.poll``: when a refresh
is due (requested, or older than ``metadata.max.age.ms``, and past the retry backoff) and
none is in flight, it sends a MetadataRequest to the least-loaded node, connecting to one
first if no node is connected. It returns how long the poll may sleep before it needs to
run again. At most one metadata request is in flight at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kclient import errors
from kclient.errors import KafkaError
from kclient.network.connection_states import NO_DELAY_LIMIT_MS
from kclient.network.kafka_client import ClientRequest
from kclient.network.metadata import Metadata, Node
from kclient.protocol import ApiKey

log = logging.getLogger(__name__)

METADATA_MIN_VERSION = 1
_REBOOTSTRAP_REQUIRED = errors.RebootstrapRequiredError.code
"""KIP-1102's top-level error of a MetadataResponse (v13+): the client's metadata is stale,
start again from ``bootstrap.servers``."""
"""v0 reads an empty topic list as 'all topics'; v1+ as 'none' (what a producer means)."""


@dataclass(frozen=True)
class _InProgress:
    request_version: int
    is_partial_update: bool


class ConnectionsView(Protocol):
    """What the updater needs of the connections it shares (its owning ``NetworkClient``
    provides it): settings, the least-loaded node, and starting connections and sends."""

    request_timeout_ms: int
    reconnect_backoff_ms: int

    def least_loaded_node(self, now_ms: int) -> Node | None: ...

    def can_send_request(self, node_id: int, now_ms: int) -> bool: ...

    def is_any_node_connecting(self) -> bool: ...

    def can_connect(self, node_id: int, now_ms: int) -> bool: ...

    def initiate_connect(self, node: Node, now_ms: int) -> None: ...

    def send_internal(self, request: ClientRequest, now_ms: int) -> None: ...

    def all_unreachable(self, nodes: Sequence[Node]) -> bool: ...

    def disconnect_all(self) -> None: ...


class DefaultMetadataUpdater:
    """Sends MetadataRequests for a ``NetworkClient`` and applies the responses."""

    # slots: NetworkClient's ready and poll in C (``_client_ready.c``, ``_client_poll.c``)
    # read ``_in_progress`` and ``metadata`` in place
    __slots__ = (
        "_attempt_start_ms",
        "_client",
        "_in_progress",
        "_prefix",
        "_required",
        "metadata",
        "rebootstrap_trigger_ms",
        "recovery_rebootstrap",
    )

    def __init__(
        self,
        client: ConnectionsView,
        metadata: Metadata,
        log_prefix: str = "",
        *,
        recovery_rebootstrap: bool = True,
        rebootstrap_trigger_ms: int = 300_000,
    ) -> None:
        self._client = client
        self.metadata = metadata
        self._prefix = log_prefix
        self._in_progress: _InProgress | None = None
        self.recovery_rebootstrap = recovery_rebootstrap
        """``metadata.recovery.strategy=rebootstrap`` (KIP-899): when no known broker can
        be reached, or no metadata came for ``rebootstrap_trigger_ms`` (KIP-1102), or a
        broker answers REBOOTSTRAP_REQUIRED, start again from ``bootstrap.servers``."""
        self.rebootstrap_trigger_ms = rebootstrap_trigger_ms
        """``metadata.recovery.rebootstrap.trigger.ms``."""
        self._required: str | None = None
        """Why a broker asked for a rebootstrap (REBOOTSTRAP_REQUIRED), until it is done."""
        self._attempt_start_ms: int | None = None
        """When the refreshes that have not succeeded yet began (None: the last one
        succeeded, or none was wanted since)."""

    def fetch_nodes(self) -> tuple[Node, ...]:
        return self.metadata.fetch().nodes

    def is_update_due(self, now_ms: int) -> bool:
        return self._in_progress is None and self.metadata.time_to_next_update(now_ms) == 0

    def maybe_update(self, now_ms: int) -> int:
        """Start a refresh if one is due; return ms until this should be called again: no
        later than ``metadata.recovery.rebootstrap.trigger.ms`` after the refreshes that
        have not succeeded began, even while one waits for its answer."""
        timeout_ms = self._update_if_due(now_ms)
        started_ms = self._attempt_start_ms
        if self.recovery_rebootstrap and started_ms is not None:
            trigger_in_ms = started_ms + self.rebootstrap_trigger_ms - now_ms
            if trigger_in_ms < timeout_ms:
                timeout_ms = max(trigger_in_ms, 1)
        return timeout_ms

    def _update_if_due(self, now_ms: int) -> int:
        """``maybe_update`` but for the trigger's deadline."""
        timeout_ms = self.metadata.time_to_next_update(now_ms)
        if self._in_progress is not None:  # wait for its answer (or its request timeout)
            wait_for_fetch_ms = self._client.request_timeout_ms
            if wait_for_fetch_ms > timeout_ms:  # noqa: PLR1730 -- max() is a call
                timeout_ms = wait_for_fetch_ms
        started_ms = self._attempt_start_ms
        if self._required is not None:
            self._rebootstrap(now_ms, self._required)
            timeout_ms = 0
        elif (
            self.recovery_rebootstrap
            and started_ms is not None
            and now_ms - started_ms >= self.rebootstrap_trigger_ms
        ):
            self._rebootstrap(now_ms, f"no metadata for {now_ms - started_ms} ms")
            timeout_ms = 0
        if timeout_ms > 0:
            return timeout_ms
        if not self.fetch_nodes():
            return self._client.reconnect_backoff_ms  # nothing to ask (no bootstrap yet)
        if started_ms is None:
            self._attempt_start_ms = now_ms
        if (
            self.recovery_rebootstrap
            and not self.metadata.fetch().is_bootstrap_configured
            and self._client.all_unreachable(self.fetch_nodes())
        ):
            self._rebootstrap(now_ms, "every known broker failed its last connection attempt")
        node = self._client.least_loaded_node(now_ms)
        if node is None:
            log.debug("%sno node available for a metadata request", self._prefix)
            return self._client.reconnect_backoff_ms
        return self._maybe_update(now_ms, node)

    def rebootstrap_required(self, why: str) -> None:
        """A broker said this client's metadata is stale (REBOOTSTRAP_REQUIRED, in a
        Metadata or ApiVersions answer, ``why``): rebootstrap at the next poll if the
        strategy is ``rebootstrap``, else refresh."""
        if self.recovery_rebootstrap:
            self._required = why
        self.metadata.request_update()

    def _rebootstrap(self, now_ms: int, why: str) -> bool:
        """Close every connection (their requests fail as disconnected, and batches are
        retried) and go back to ``bootstrap.servers``; False if the metadata already is the
        bootstrap list (nothing to forget)."""
        if self.metadata.fetch().is_bootstrap_configured or not self.metadata.bootstrap_addresses:
            self._attempt_start_ms = now_ms
            self._required = None
            return False
        self._required = None
        log.warning("%s%s: rebootstrapping (metadata.recovery.strategy)", self._prefix, why)
        self._client.disconnect_all()
        self._in_progress = None
        self._attempt_start_ms = now_ms
        return self.metadata.rebootstrap()

    def _maybe_update(self, now_ms: int, node: Node) -> int:
        client = self._client
        if client.can_send_request(node.id, now_ms):
            request = self.metadata.new_metadata_request(now_ms)
            log.debug("%ssending metadata request %s to node %s", self._prefix, request.body, node)
            client.send_internal(
                ClientRequest(
                    node.id,
                    ApiKey.METADATA,
                    request.body,
                    now_ms,
                    min_version=METADATA_MIN_VERSION,
                ),
                now_ms,
            )
            self._in_progress = _InProgress(request.request_version, request.is_partial_update)
            return client.request_timeout_ms
        if client.is_any_node_connecting():
            # Wait for the connection under way rather than opening more.
            return client.reconnect_backoff_ms
        if client.can_connect(node.id, now_ms):
            log.debug("%sconnecting to node %s for a metadata request", self._prefix, node)
            client.initiate_connect(node, now_ms)
            return client.reconnect_backoff_ms
        # Connected but the connection is busy, or checking API versions: a network
        # event will tell us when it becomes usable.
        return NO_DELAY_LIMIT_MS

    def handle_server_disconnect(self, now_ms: int, node_id: int) -> None:
        cluster = self.metadata.fetch()
        if cluster.is_bootstrap_configured:
            node = cluster.node_by_id(node_id)
            if node is not None:  # the client warned already (rate-limited)
                log.debug("%sbootstrap broker %s disconnected", self._prefix, node.address)
        if self.is_update_due(now_ms):
            self.handle_failed_request(now_ms, None)  # back off before the next attempt
        self.metadata.request_update()  # the disconnect may mean our metadata is stale

    def handle_failed_request(self, now_ms: int, error: KafkaError | None) -> None:
        if error is not None and not error.retriable:
            log.warning("%smetadata request failed: %s", self._prefix, error)
        self.metadata.failed_update(now_ms)
        self._in_progress = None

    def handle_success_response(
        self, correlation_id: int, body: Mapping[str, Any], now_ms: int
    ) -> None:
        in_progress = self._in_progress
        self._in_progress = None
        code = body.get("error_code", 0)
        if code == _REBOOTSTRAP_REQUIRED and self.recovery_rebootstrap:
            log.warning(
                "%smetadata response (correlation id %d): REBOOTSTRAP_REQUIRED",
                self._prefix,
                correlation_id,
            )
            self.rebootstrap_required(f"a metadata response (correlation id {correlation_id})")
            return
        if code:
            log.warning(
                "%smetadata response (correlation id %d) has error %s",
                self._prefix,
                correlation_id,
                errors.error_name(code),
            )
            self.metadata.failed_update(now_ms)
            return
        if not body.get("brokers"):
            # A broker that is still starting may answer with no brokers: retry later.
            log.debug("%signoring metadata response with no brokers", self._prefix)
            self.metadata.failed_update(now_ms)
            return
        self._attempt_start_ms = None
        if in_progress is None:
            log.debug("%sunexpected metadata response %d", self._prefix, correlation_id)
            self.metadata.update(-1, body, False, now_ms)
            return
        self.metadata.update(
            in_progress.request_version, body, in_progress.is_partial_update, now_ms
        )

    def close(self) -> None:
        self.metadata.close()
