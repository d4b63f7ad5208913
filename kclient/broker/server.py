"""KafkaServer: one broker of the embedded cluster (Kafka's ``KafkaServer``/``BrokerServer``).

Wires a RequestChannel, a SocketServer (Acceptor + Processors), a RequestHandlerPool,
a GroupCoordinator, a TransactionCoordinator and Apis together for one node id, over the
cluster's shared Controller, purgatory, ConsumerOffsets and transaction state. The
listener is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (``BrokerConfig.security_protocol``);
Metadata advertises its host and port either way, so clients connect back with the same
protocol.
``startup``/``shutdown`` run on the caller's thread and may be repeated: a restarted
broker listens on the same port again.

Shutdown order (like Kafka's controlled shutdown): leadership moves away first (group
coordination with it: members waiting in JoinGroup/SyncGroup get NOT_COORDINATOR), then
the listener and every connection close (clients see a real disconnect), then the
handler threads stop. A restarted broker has a new GroupCoordinator, which loads its
groups from the ConsumerOffsets as requests name them.
"""

from __future__ import annotations

import logging
import ssl
import threading
import time

from kclient.broker.apis import Apis
from kclient.broker.client_metrics import ClientMetricsManager
from kclient.broker.client_quotas import ClientQuotas
from kclient.broker.config import BrokerConfig
from kclient.broker.consumer_offsets import ConsumerOffsets
from kclient.broker.controller import BrokerEndpoint, Controller
from kclient.broker.coordinator_timer import CoordinatorTimer
from kclient.broker.faults import LostAnswers
from kclient.broker.group_apis import coordinator_node, group_config
from kclient.broker.group_coordinator import GroupCoordinator
from kclient.broker.handler import RequestHandlerPool
from kclient.broker.metrics import BrokerMetrics, BrokerMetricsSnapshot
from kclient.broker.purgatory import DelayedOperationPurgatory
from kclient.broker.quota_factory import QuotaManagers
from kclient.broker.request_channel import RequestChannel
from kclient.broker.sasl_server import SaslServer
from kclient.broker.socket_server import SocketServer
from kclient.broker.txn_coordinator import TransactionCoordinator
from kclient.broker.txn_offsets import PendingTxnOffsets
from kclient.broker.txn_state import TransactionStateManager

log = logging.getLogger(__name__)

_WILDCARD_HOSTS = ("", "0.0.0.0", "::")
_PRODUCER_EXPIRATION = "producer-id-expiration"


class KafkaServer:
    """One broker: node id, listener, network threads, io threads, Apis."""

    def __init__(
        self,
        node_id: int,
        config: BrokerConfig,
        controller: Controller,
        purgatory: DelayedOperationPurgatory,
        port: int,
        *,
        ssl_context: ssl.SSLContext | None = None,
        sasl_server: SaslServer | None = None,
        consumer_offsets: ConsumerOffsets | None = None,
        txn_state: TransactionStateManager | None = None,
        pending_txn_offsets: PendingTxnOffsets | None = None,
        client_quotas: ClientQuotas | None = None,
        client_metrics: ClientMetricsManager | None = None,
    ) -> None:
        self.node_id = node_id
        self.config = config
        if client_metrics is None and config.client_telemetry:
            client_metrics = ClientMetricsManager(
                config.client_telemetry_metrics, config.client_telemetry_push_interval_ms
            )
        self.client_metrics = client_metrics
        """The cluster's KIP-714 state (None: not served)."""
        # an SSL listener's context, a SASL listener's users: given by the cluster (built
        # once), else built here
        self.ssl_context = ssl_context if ssl_context is not None else config.ssl_context()
        self.sasl_server = sasl_server if sasl_server is not None else config.sasl_server()
        self.controller = controller
        self.purgatory = purgatory
        self.host = config.host
        self.port = port
        self.metrics = BrokerMetrics(node_id, time.monotonic_ns())
        self._socket_server: SocketServer | None = None
        self.lost_answers = LostAnswers()  # kept across restarts
        self._handlers: RequestHandlerPool | None = None
        self.request_channel: RequestChannel | None = None
        self.consumer_offsets = (
            consumer_offsets if consumer_offsets is not None else ConsumerOffsets()
        )
        self.group_coordinator: GroupCoordinator | None = None
        self.txn_state = (
            txn_state
            if txn_state is not None
            else TransactionStateManager(max_timeout_ms=config.transaction_max_timeout_ms)
        )
        self.pending_txn_offsets = (
            pending_txn_offsets
            if pending_txn_offsets is not None
            else PendingTxnOffsets(self.consumer_offsets)
        )
        self.txn_coordinator: TransactionCoordinator | None = None
        self._timer_lock = threading.RLock()
        self._timer = CoordinatorTimer(purgatory, self._timer_lock, time.monotonic_ns)
        #: the cluster's quota configuration; usage is measured here, per broker, and the
        #: measurements are kept across a restart of this broker
        self.client_quotas = (
            client_quotas
            if client_quotas is not None
            else ClientQuotas(config.quota_defaults(), config.log_dir)
        )
        self.quota_managers = QuotaManagers(
            self.client_quotas,
            num_samples=config.quota_window_num,
            window_size_seconds=config.quota_window_size_seconds,
        )
        self.metrics.set_client_quotas_source(self.quota_managers.metrics)

    @property
    def is_running(self) -> bool:
        return self._socket_server is not None

    @property
    def advertised_host(self) -> str:
        return "127.0.0.1" if self.host in _WILDCARD_HOSTS else self.host

    @property
    def address(self) -> str:
        return f"{self.advertised_host}:{self.port}"

    def startup(self) -> None:
        if self._socket_server is not None:
            return
        cfg = self.config
        prefix = f"kclient-broker-{self.node_id}"
        channel = RequestChannel(cfg.queued_max_requests, self.metrics)
        socket_server = SocketServer(
            self.host,
            self.port,
            channel,
            num_network_threads=cfg.num_network_threads,
            max_request_bytes=cfg.socket_request_max_bytes,
            connections_max_idle_ms=cfg.connections_max_idle_ms,
            queued_max_request_bytes=cfg.queued_max_request_bytes,
            max_request_items=cfg.max_request_items,
            metrics=self.metrics,
            name_prefix=prefix,
            ssl_context=self.ssl_context,
            sasl_server=self.sasl_server,
            lost_answers=self.lost_answers,
        )
        self.port = socket_server.port
        node_id, controller = self.node_id, self.controller
        coordinator = GroupCoordinator(
            node_id,
            group_config(cfg),
            self.consumer_offsets,
            self.purgatory,
            is_coordinator=lambda group_id: coordinator_node(controller, group_id) == node_id,
        )
        apis = Apis(
            node_id,
            controller,
            channel,
            self.purgatory,
            cfg,
            group_coordinator=coordinator,
            txn_state=self.txn_state,
            pending_txn_offsets=self.pending_txn_offsets,
            quotas=self.quota_managers,
            client_metrics=self.client_metrics,
        )
        handlers = RequestHandlerPool(channel, apis, cfg.num_io_threads, name_prefix=prefix)
        handlers.start()
        self.request_channel = channel
        self.group_coordinator = coordinator
        self._socket_server = socket_server
        self._handlers = handlers
        self.controller.broker_started(
            BrokerEndpoint(self.node_id, self.advertised_host, self.port)
        )
        self.txn_coordinator = apis.txn_coordinator
        apis.txn_coordinator.startup(
            self.purgatory,
            cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            time.monotonic_ns,
            expiration_ms=cfg.transactional_id_expiration_ms,
            expiration_interval_ms=cfg.transaction_remove_expired_transaction_cleanup_interval_ms,
        )
        self._schedule_producer_expiration()
        # requests are served only now, with the leaderships this broker retakes already
        # its own (Kafka enables request processing once the broker has caught up): before,
        # a restarted broker answered NOT_LEADER_OR_FOLLOWER with a leader hint that its
        # own election made stale a moment later, sending clients back and forth
        socket_server.start()
        log.info(
            "broker %d listening on %s://%s", self.node_id, cfg.security_protocol, self.address
        )

    def _schedule_producer_expiration(self) -> None:
        """Every ``producer.id.expiration.check.interval.ms``, forget the producers idle
        for ``producer.id.expiration.ms`` in the partitions this broker leads (Kafka's
        LogManager task)."""
        cfg, timer = self.config, self._timer
        interval_ms = cfg.producer_id_expiration_check_interval_ms

        def check() -> None:
            self.controller.remove_expired_producers(
                self.node_id, time.time_ns() // 1_000_000, cfg.producer_id_expiration_ms
            )
            timer.schedule(_PRODUCER_EXPIRATION, interval_ms, check)

        with self._timer_lock:
            timer.schedule(_PRODUCER_EXPIRATION, interval_ms, check)

    def shutdown(self, timeout_s: float = 5.0) -> None:
        socket_server, handlers = self._socket_server, self._handlers
        if socket_server is None or handlers is None:
            return
        with self._timer_lock:
            self._timer.cancel_all()
        self.controller.broker_stopped(self.node_id)
        if self.group_coordinator is not None:
            self.group_coordinator.shutdown()
            self.group_coordinator = None
        if self.txn_coordinator is not None:
            self.txn_coordinator.shutdown()
            self.txn_coordinator = None
        socket_server.shutdown(timeout_s)
        handlers.shutdown(timeout_s)
        self._socket_server = None
        self._handlers = None
        self.request_channel = None
        log.info("broker %d stopped", self.node_id)

    def metrics_snapshot(self) -> BrokerMetricsSnapshot:
        return self.metrics.snapshot(time.monotonic_ns())

    @property
    def connection_count(self) -> int:
        return self._socket_server.connection_count if self._socket_server else 0
