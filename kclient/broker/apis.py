"""Apis: the request handlers of one broker, dispatched by api key (Kafka's ``KafkaApis``).

Called on request handler (io) threads by ``RequestHandlerPool``. Each ``handle_*`` reads
the decoded request body, asks the controller / ReplicaManager, and hands a response to
the RequestChannel: ``SendResponse``, ``NoOpResponse`` (acks=0) or
``CloseConnectionResponse`` (an acks=0 Produce that failed, so the client notices).

Served: ApiVersions, Metadata (+ auto-creation: ``metadata_apis``), CreateTopics,
DeleteTopics (``topic_apis``), Produce, InitProducerId, Fetch (long poll through the
purgatory; read_committed), ListOffsets,
the consumer group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
OffsetCommit, OffsetFetch, ListGroups, DescribeGroups, DeleteGroups, OffsetDelete:
``group_apis`` over the broker's ``GroupCoordinator``) and the transaction APIs
(InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
TxnOffsetCommit: ``txn_apis`` over the broker's ``TransactionCoordinator``) and the client
quota APIs (DescribeClientQuotas, AlterClientQuotas: ``quota_apis``). Every answer carries
the client's throttle time when it is over a quota (``request_helper``).
Produce v0-v2 are advertised in ApiVersions but refused, as Kafka 4 does (KAFKA-18659:
librdkafka only compresses when it sees Produce v0).

SaslHandshake and SaslAuthenticate are advertised on SASL listeners only, SaslHandshake
as v0-v1 like Kafka 3 (librdkafka 2.0, Debian's kcat, turns SASL on only when it sees
v0 listed), though a v0 request (raw token frames to follow) is refused. The listener's
Processors answer both before authentication, and for re-authentication (KIP-368, when
``connections.max.reauth.ms`` is set; ``sasl_session``); those reaching the handlers come
from a connection with nothing (more) to authenticate: a SASL request on another
listener, a SaslHandshake after authentication with re-authentication off, or a
SaslAuthenticate without its SaslHandshake. They get a clean error:
UNSUPPORTED_SASL_MECHANISM with no mechanisms on a listener without SASL,
ILLEGAL_SASL_STATE after authentication.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection
from typing import Any

from kclient import errors
from kclient.broker.client_metrics import ClientMetricsApis, ClientMetricsManager
from kclient.broker.client_quotas import ClientQuotas
from kclient.broker.config import BrokerConfig
from kclient.broker.config_apis import ConfigApis
from kclient.broker.consumer_offsets import ConsumerOffsets
from kclient.broker.controller import Controller
from kclient.broker.fetch import FetchHandler
from kclient.broker.group_apis import GroupApis, coordinator_node, group_config
from kclient.broker.group_coordinator import GroupCoordinator
from kclient.broker.metadata_apis import MetadataApis
from kclient.broker.purgatory import DelayedOperationPurgatory
from kclient.broker.quota_apis import QuotaApis
from kclient.broker.quota_factory import QuotaManagers
from kclient.broker.replica_manager import ReplicaManager
from kclient.broker.request_channel import (
    CloseConnectionResponse,
    NoOpResponse,
    Request,
    RequestChannel,
    SendResponse,
)
from kclient.broker.request_helper import RequestHandlerHelper
from kclient.broker.topic_apis import TopicApis
from kclient.broker.txn_apis import TxnApis, finalized_features, max_versions
from kclient.broker.txn_coordinator import TransactionCoordinator
from kclient.broker.txn_markers import TransactionMarkerWriter
from kclient.broker.txn_offsets import PendingTxnOffsets
from kclient.broker.txn_state import TransactionStateManager
from kclient.protocol import SUPPORTED_VERSIONS, ApiKey
from kclient.protocol.frame import encode_response
from kclient.protocol.messages import RESPONSES
from kclient.protocol.schema import declared_keys

log = logging.getLogger(__name__)

#: Versions advertised in ApiVersions where they differ from what is decoded (KAFKA-18659).
_ADVERTISED_MIN = {int(ApiKey.PRODUCE): 0}

#: APIs whose responses say how long the client is throttled.
_THROTTLE_FIELD = frozenset(
    key for key, schema in RESPONSES.items() if "throttle_time_ms" in declared_keys(schema.fields)
)

#: APIs served on SASL listeners only.
_SASL_APIS = frozenset({int(ApiKey.SASL_HANDSHAKE), int(ApiKey.SASL_AUTHENTICATE)})
_REBOOTSTRAP_REQUIRED = (
    errors.RebootstrapRequiredError.code
)  # KIP-1242's answer to an ApiVersions meant for another node


def advertised_versions(
    sasl: bool = False, served: Collection[int] | None = None, transaction_version: int = 2
) -> list[dict[str, int]]:
    """The ``api_keys`` of an ApiVersions response: the declared APIs this broker serves
    (every declared one unless ``served`` says), the SASL APIs on a SASL listener only,
    the transaction APIs as far as ``transaction_version`` allows."""
    capped = max_versions(transaction_version)
    versions = {
        int(key): v
        for key, v in SUPPORTED_VERSIONS.items()
        if (sasl or key not in _SASL_APIS) and (served is None or key in served)
    }
    return [
        {
            "api_key": key,
            "min_version": _ADVERTISED_MIN.get(key, low),
            "max_version": capped.get(key, high),
        }
        for key, (low, high) in sorted(versions.items())
    ]


class Apis:
    """Kafka's ``KafkaApis`` for broker ``node_id``."""

    def __init__(
        self,
        node_id: int,
        controller: Controller,
        request_channel: RequestChannel,
        purgatory: DelayedOperationPurgatory,
        config: BrokerConfig,
        *,
        time_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        monotonic_ns: Callable[[], int] = time.monotonic_ns,
        group_coordinator: GroupCoordinator | None = None,
        txn_state: TransactionStateManager | None = None,
        pending_txn_offsets: PendingTxnOffsets | None = None,
        quotas: QuotaManagers | None = None,
        client_metrics: ClientMetricsManager | None = None,
    ) -> None:
        """``quotas``: the broker's client quota managers (fresh ones over the settings'
        defaults when not given);
        ``group_coordinator``: the broker's (a fresh one over in-memory offsets when
        not given, for tests of one broker); ``txn_state`` and ``pending_txn_offsets``:
        the cluster's transaction state and transactional group offsets (fresh in-memory
        ones when not given)."""
        self.node_id = node_id
        self.controller = controller
        self.channel = request_channel
        self.config = config
        self.replica_manager = ReplicaManager(node_id, controller, config)
        self._time_ms = time_ms
        self._monotonic_ns = monotonic_ns
        if quotas is None:
            quotas = QuotaManagers(
                ClientQuotas(config.quota_defaults()),
                num_samples=config.quota_window_num,
                window_size_seconds=config.quota_window_size_seconds,
            )
        self.quotas = quotas
        self.request_helper = RequestHandlerHelper(quotas)
        self._fetch = FetchHandler(
            self.replica_manager,
            purgatory,
            self._send,
            monotonic_ns=monotonic_ns,
            request_helper=self.request_helper,
        )
        if group_coordinator is None:
            group_coordinator = GroupCoordinator(
                node_id,
                group_config(config),
                ConsumerOffsets(),
                purgatory,
                is_coordinator=lambda group_id: coordinator_node(controller, group_id) == node_id,
                time_ms=time_ms,
                monotonic_ns=monotonic_ns,
            )
        self.group_coordinator = group_coordinator
        group_apis = GroupApis(group_coordinator, controller, self._send, monotonic_ns)
        if txn_state is None:
            txn_state = TransactionStateManager(max_timeout_ms=config.transaction_max_timeout_ms)
        if pending_txn_offsets is None:
            pending_txn_offsets = PendingTxnOffsets(group_coordinator.offsets)
        group_apis.unstable_offsets = pending_txn_offsets.has_pending
        self.txn_coordinator = TransactionCoordinator(
            node_id,
            txn_state,
            TransactionMarkerWriter(controller, pending_txn_offsets),
            controller.allocate_producer_id,
            is_coordinator=lambda txn_id: coordinator_node(controller, txn_id) == node_id,
            time_ms=time_ms,
            transaction_version=config.transaction_version,
        )
        self._txn_apis = TxnApis(
            self.txn_coordinator, group_coordinator, pending_txn_offsets, controller, self._send
        )
        self.replica_manager.txn_verifier = self._txn_apis.verify_transaction
        self._handlers: dict[int, Callable[[Request], None]] = {
            ApiKey.PRODUCE: self.handle_produce,
            ApiKey.FETCH: self._fetch.handle,
            ApiKey.LIST_OFFSETS: self.handle_list_offsets,
            ApiKey.API_VERSIONS: self.handle_api_versions,
            ApiKey.SASL_HANDSHAKE: self.handle_sasl_handshake,
            ApiKey.SASL_AUTHENTICATE: self.handle_sasl_authenticate,
            **group_apis.handlers(),
            **self._txn_apis.handlers(),
            **QuotaApis(quotas.quotas, self._send).handlers(),
            **MetadataApis(
                controller, config, self.request_helper, self._send, monotonic_ns=monotonic_ns
            ).handlers(),
            **TopicApis(
                controller,
                config,
                group_coordinator.offsets,
                self.request_helper,
                self._send,
                monotonic_ns=monotonic_ns,
            ).handlers(),
            **ConfigApis(node_id, controller, config, self._send).handlers(),
        }
        if client_metrics is not None:  # KIP-714, only when enabled (client_telemetry)
            self._handlers.update(ClientMetricsApis(node_id, client_metrics, self._send).handlers())
        self._api_keys = advertised_versions(
            sasl=config.sasl, served=self._handlers, transaction_version=config.transaction_version
        )
        self._features = finalized_features(config.transaction_version)

    def handle(self, request: Request) -> None:
        """Dispatch by api key; an unexpected error escapes to the handler thread."""
        try:
            handler = self._handlers.get(request.header.api_key)
            if handler is None:  # the Processor only queues declared apis
                log.warning("no handler for %r; closing its connection", request)
                self.channel.send_response(CloseConnectionResponse(request))
                return
            handler(request)
        finally:
            if request.api_local_complete_time_ns < 0:
                request.api_local_complete_time_ns = self._monotonic_ns()

    def _send(self, request: Request, body: dict[str, Any], version: int | None = None) -> None:
        """Answer ``request``, with its throttle time (quotas) in the body."""
        h = request.header
        throttle_ms = self.request_helper.finish(request, self._monotonic_ns())
        if throttle_ms > 0 and h.api_key in _THROTTLE_FIELD:
            body["throttle_time_ms"] = throttle_ms
        api_version = h.api_version if version is None else version
        buffers = encode_response(h.api_key, api_version, h.correlation_id, body)
        self.channel.send_response(SendResponse(request, buffers))

    # ---- ApiVersions -------------------------------------------------------------------

    def handle_api_versions(self, request: Request) -> None:
        if request.unsupported_version:
            request.error_count += 1
            body = {
                "error_code": errors.UnsupportedVersionError.code,
                "api_keys": self._api_keys,
            }
            self._send(request, body, version=0)
            return
        body = request.body or {}
        cluster_id = body.get("cluster_id")
        node_id = int(body.get("node_id", -1))  # type: ignore[call-overload]
        if cluster_id is not None and (
            cluster_id != self.config.cluster_id or (node_id >= 0 and node_id != self.node_id)
        ):
            # KIP-1242: the client meant another cluster, or another node of this one
            request.error_count += 1
            log.info(
                "%s: ApiVersions for node %d of cluster %r reached node %d of %r: "
                "REBOOTSTRAP_REQUIRED",
                request.client_address,
                node_id,
                cluster_id,
                self.node_id,
                self.config.cluster_id,
            )
            self._send(request, {"error_code": _REBOOTSTRAP_REQUIRED, "api_keys": []})
            return
        self._send(request, {"error_code": 0, "api_keys": self._api_keys, **self._features})

    # ---- SaslHandshake / SaslAuthenticate (no authentication to do) -------------------

    def handle_sasl_handshake(self, request: Request) -> None:
        """A SASL listener's Processor answers the handshake before authentication, and
        when it re-authenticates; here there is nothing (more) to authenticate."""
        request.error_count += 1
        if self.config.sasl:
            log.info(
                "%s: SaslHandshake after authentication, and re-authentication is off "
                "(connections.max.reauth.ms is 0)",
                request.client_address,
            )
            body = {
                "error_code": errors.IllegalSaslStateError.code,
                "mechanisms": list(self.config.sasl_enabled_mechanisms),
            }
        else:
            log.info(
                "%s: SaslHandshake on a %s listener, which has no SASL (the client needs "
                "security.protocol=%s)",
                request.client_address,
                self.config.security_protocol,
                "SSL" if self.config.tls else "PLAINTEXT",
            )
            body = {"error_code": errors.UnsupportedSaslMechanismError.code, "mechanisms": []}
        self._send(request, body)

    def handle_sasl_authenticate(self, request: Request) -> None:
        """As ``handle_sasl_handshake``: nothing (more) to authenticate here."""
        request.error_count += 1
        if not self.config.sasl:
            why = f"this {self.config.security_protocol} listener has no SASL"
        elif self.config.connections_max_reauth_ms:
            why = "already authenticated (re-authentication starts with SaslHandshake)"
        else:
            why = "already authenticated (re-authentication is off: connections.max.reauth.ms is 0)"
        self._send(
            request,
            {
                "error_code": errors.IllegalSaslStateError.code,
                "error_message": f"SaslAuthenticate unexpected: {why}",
                "auth_bytes": b"",
                "session_lifetime_ms": 0,
            },
        )

    # ---- Produce -----------------------------------------------------------------------

    def handle_produce(self, request: Request) -> None:
        body = request.parsed_body()
        version = request.header.api_version
        acks = body["acks"]
        now_ms = self._time_ms()
        by_id = version >= 13
        responses = []
        failed = 0
        leaders: set[int] = set()
        for topic_data in body["topic_data"]:
            topic = (
                self.controller.topic_by_id(topic_data["topic_id"])
                if by_id
                else self.controller.topic(topic_data["name"])
            )
            partitions = []
            for pd in topic_data["partition_data"]:
                index = pd["index"]
                code = 0
                if acks not in (0, 1, -1):
                    code = errors.InvalidRequiredAcksError.code
                elif by_id and topic is None:
                    code = errors.UnknownTopicIdError.code
                if code:
                    partitions.append({"index": index, "error_code": code, "base_offset": -1})
                    failed += 1
                    continue
                result = self.replica_manager.append(
                    topic,
                    index,
                    pd["records"],
                    produce_version=version,
                    now_ms=now_ms,
                    transactional_id=body.get("transactional_id"),
                )
                out: dict[str, Any] = {
                    "index": index,
                    "error_code": result.error_code,
                    "base_offset": result.base_offset,
                    "log_append_time_ms": result.log_append_time_ms,
                    "log_start_offset": result.log_start_offset,
                    "error_message": result.error_message,
                }
                if result.record_errors:
                    out["record_errors"] = [
                        {"batch_index": i, "batch_index_error_message": m}
                        for i, m in result.record_errors
                    ]
                if result.error_code:
                    failed += 1
                    if result.error_code == errors.NotLeaderOrFollowerError.code:
                        # as Kafka: no message (only record validation errors carry one);
                        # the leader hint (KIP-951) says where to go instead
                        out["error_message"] = None
                        out["current_leader"] = {
                            "leader_id": result.leader_id,
                            "leader_epoch": result.leader_epoch,
                        }
                        if result.leader_id >= 0:
                            leaders.add(result.leader_id)
                partitions.append(out)
            entry: dict[str, Any] = {"partition_responses": partitions}
            if by_id:
                entry["topic_id"] = topic_data["topic_id"]
            else:
                entry["name"] = topic_data["name"]
            responses.append(entry)
        request.error_count += failed
        self.request_helper.produce_throttle_time_ms(request, acks, self._monotonic_ns())
        if acks == 0:
            # no response; on error close the connection so the client refreshes metadata
            response = CloseConnectionResponse(request) if failed else NoOpResponse(request)
            self.channel.send_response(response)
            return
        out_body: dict[str, Any] = {"responses": responses}
        if leaders:
            out_body["node_endpoints"] = [
                {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                for b in self.controller.live_brokers()
                if b.node_id in leaders
            ]
        self._send(request, out_body)

    # ---- ListOffsets -------------------------------------------------------------------

    def handle_list_offsets(self, request: Request) -> None:
        body = request.parsed_body()
        read_committed = body.get("isolation_level", 0) == 1
        topics_out = []
        for t in body["topics"]:
            topic = self.controller.topic(t["name"])
            partitions = []
            for p in t["partitions"]:
                code, timestamp, offset, epoch = self.replica_manager.list_offset(
                    topic,
                    p["partition_index"],
                    p["timestamp"],
                    p.get("current_leader_epoch", -1),
                    read_committed,
                )
                if code:
                    request.error_count += 1
                partitions.append(
                    {
                        "partition_index": p["partition_index"],
                        "error_code": code,
                        "timestamp": timestamp,
                        "offset": offset,
                        "leader_epoch": epoch,
                    }
                )
            topics_out.append({"name": t["name"], "partitions": partitions})
        self._send(request, {"topics": topics_out})
