"""EmbeddedCluster / EmbeddedBroker: Kafka brokers inside this Python process.

The public entry points of ``kclient.broker``. An ``EmbeddedCluster`` runs N brokers
(node ids 0..N-1), each with its own port, SocketServer and threads, over one shared
in-process Controller (topics, leaders, logs), one purgatory, one ConsumerOffsets
(committed offsets and group records) and one transaction state (``txn_state``, and the
offsets of open transactions, ``txn_offsets``). Partition leaders are spread over the
brokers, and so are consumer groups and transactional ids: the coordinator of each is
chosen by a hash of its id (``consumer_offsets.coordinator_for``). ``stop_broker`` closes
a broker's listener and connections (clients see a real disconnect) after moving its
partitions, groups and transactional ids to live brokers; ``start_broker`` brings it back
on the same port, and it takes them back. ``EmbeddedBroker`` is the one-broker case.

Used from the caller's thread; every method is safe to call while clients are producing.

    with EmbeddedBroker() as broker:
        broker.create_topic("events", partitions=3)
        producer = KafkaProducer({"bootstrap.servers": broker.bootstrap_servers})
        ...
        assert [r.value for r in broker.read_records("events", 0)] == [...]
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from kclient import errors
from kclient.broker import consumer_protocol
from kclient.broker.client_metrics import ClientMetricsManager, ReceivedTelemetry
from kclient.broker.client_quota_manager import ClientQuotaMetrics
from kclient.broker.client_quotas import ClientQuotas, Entity, entity
from kclient.broker.config import BrokerConfig
from kclient.broker.consumer_offsets import ConsumerOffsets
from kclient.broker.controller import Controller, Partition, Topic
from kclient.broker.group_apis import coordinator_node
from kclient.broker.metrics import BrokerMetricsSnapshot
from kclient.broker.purgatory import DelayedOperationPurgatory
from kclient.broker.server import KafkaServer
from kclient.broker.txn_offsets import PendingTxnOffsets
from kclient.broker.txn_state import TransactionStateManager
from kclient.record import Record, RecordBatch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MemberDescription:
    """A member of a consumer group, as ``EmbeddedCluster.describe_group`` tells it."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    #: topic -> partitions assigned to the member (consumer protocol groups, once Stable)
    assignment: dict[str, list[int]]


@dataclass(frozen=True)
class GroupDescription:
    """A consumer group: its state (Empty, PreparingRebalance, CompletingRebalance,
    Stable, Dead), generation, members and which broker coordinates it."""

    group_id: str
    state: str
    protocol_type: str
    protocol: str  # the assignor of a Stable consumer group ("range", "roundrobin" ...)
    generation_id: int
    leader_id: str | None
    coordinator: int
    members: tuple[MemberDescription, ...]


class EmbeddedCluster:
    """N embedded brokers sharing one controller. A context manager.

    Settings are ``BrokerConfig`` fields (``log_dir``, ``num_partitions``,
    ``auto_create_topics``, ``num_network_threads``, ``message_max_bytes`` ...), given
    as a ``config`` or as keyword arguments. With ``port`` != 0 broker i listens on
    ``port + i``. TLS listeners: ``security_protocol="SSL"`` with
    ``ssl_keystore_location`` (and ``ssl_truststore_location`` +
    ``ssl_client_auth="required"`` for mutual TLS). SASL listeners:
    ``security_protocol="SASL_PLAINTEXT"`` (or ``"SASL_SSL"``) with
    ``sasl_users={"alice": "secret"}`` (and ``sasl_enabled_mechanisms``;
    ``connections_max_reauth_ms`` makes clients re-authenticate, KIP-368).
    """

    def __init__(
        self, brokers: int = 3, *, config: BrokerConfig | None = None, **settings: Any
    ) -> None:
        if brokers < 1:
            raise errors.ConfigError(f"an embedded cluster needs at least 1 broker, got {brokers}")
        self.config = (
            (config or BrokerConfig()).replace(**settings)
            if settings
            else (config or BrokerConfig())
        )
        # an SSL listener's PEM files are read now: a bad one fails here, naming its setting
        self.ssl_context = self.config.ssl_context()
        # a SASL listener's SCRAM credentials are derived once, here, for every broker
        self.sasl_server = self.config.sasl_server()
        self._lock = threading.RLock()
        self._started = False
        self._closed = False
        self.controller = Controller(self.config, range(brokers))
        self.consumer_offsets = ConsumerOffsets(self.config.log_dir)
        for topic in self.consumer_offsets.topics() - set(self.controller.topics):
            self.consumer_offsets.drop_topic(topic)  # deleted while the offsets were not told
        self.txn_state = TransactionStateManager(
            self.config.log_dir, max_timeout_ms=self.config.transaction_max_timeout_ms
        )
        self.pending_txn_offsets = PendingTxnOffsets(self.consumer_offsets, self.config.log_dir)
        self.client_quotas = ClientQuotas(self.config.quota_defaults(), self.config.log_dir)
        self.client_metrics = (
            ClientMetricsManager(
                self.config.client_telemetry_metrics,
                self.config.client_telemetry_push_interval_ms,
            )
            if self.config.client_telemetry
            else None
        )
        self.purgatory = DelayedOperationPurgatory("kclient-broker-fetch")
        self.controller.add_append_listener(self.purgatory.check_and_complete)
        base = self.config.port
        self.brokers: dict[int, KafkaServer] = {
            node_id: KafkaServer(
                node_id,
                self.config,
                self.controller,
                self.purgatory,
                base + node_id if base else 0,
                ssl_context=self.ssl_context,
                sasl_server=self.sasl_server,
                consumer_offsets=self.consumer_offsets,
                txn_state=self.txn_state,
                pending_txn_offsets=self.pending_txn_offsets,
                client_quotas=self.client_quotas,
                client_metrics=self.client_metrics,
            )
            for node_id in range(brokers)
        }

    # ---- lifecycle ---------------------------------------------------------------------

    def telemetry(self) -> list[ReceivedTelemetry]:
        """The metrics clients pushed (KIP-714), decoded, oldest first; needs
        ``client_telemetry=True`` (else an ``IllegalStateError`` says so)."""
        return self._client_metrics().received()

    def set_telemetry_subscription(self, metrics: Sequence[str], push_interval_ms: int) -> None:
        """Change the client-metrics subscription: metric name prefixes (``""``: all) and
        the push interval; clients pick it up at their next request."""
        self._client_metrics().set_subscription(tuple(metrics), push_interval_ms)

    def _client_metrics(self) -> ClientMetricsManager:
        if self.client_metrics is None:
            raise errors.IllegalStateError(
                "client telemetry is off for this broker: start it with client_telemetry=True"
            )
        return self.client_metrics

    def start(self) -> EmbeddedCluster:
        """Start every broker; returns self. Raises OSError if a port is taken."""
        with self._lock:
            if self._closed:
                raise errors.IllegalStateError("this embedded cluster was closed")
            if self._started:
                return self
            self.purgatory.start()
            self._started = True
            try:
                for server in self.brokers.values():
                    server.startup()
            except BaseException:
                self.close()
                raise
        return self

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop every broker, flush and close the logs. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for server in self.brokers.values():
                server.shutdown(timeout_s)
            self.purgatory.shutdown(timeout_s)
            self.controller.close()
            self.txn_state.close()
            self.pending_txn_offsets.close()
            self.consumer_offsets.close()

    stop = close

    def __enter__(self) -> EmbeddedCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- brokers -----------------------------------------------------------------------

    @property
    def security_protocol(self) -> str:
        """What clients set as ``security.protocol``: PLAINTEXT, SSL, SASL_PLAINTEXT or
        SASL_SSL."""
        return self.config.security_protocol

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of every running broker, comma-separated."""
        return ",".join(s.address for s in self.brokers.values() if s.is_running)

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def broker_address(self, node_id: int) -> str:
        return self._broker(node_id).address

    def is_running(self, node_id: int) -> bool:
        return self._broker(node_id).is_running

    def stop_broker(self, node_id: int) -> None:
        """Move the broker's leaderships to live replicas, then close its listener and
        connections. Acknowledged records stay readable from the new leaders."""
        with self._lock:
            self._broker(node_id).shutdown()
            self._groups_moved()

    def start_broker(self, node_id: int) -> None:
        """Restart a stopped broker on its port; it takes back its preferred leaderships."""
        with self._lock:
            if self._closed:
                raise errors.IllegalStateError("this embedded cluster was closed")
            self._broker(node_id).startup()
            self._groups_moved()

    def _groups_moved(self) -> None:
        """Coordination of some groups moved: their old coordinators let them go."""
        for server in self.brokers.values():
            coordinator = server.group_coordinator
            if coordinator is not None:
                coordinator.on_brokers_changed()

    def lose_answers(self, node_id: int, api_key: int, count: int = 1) -> None:
        """Fault injection for tests: broker ``node_id`` handles the next ``count``
        requests of ``api_key`` (e.g. ``ApiKey.PRODUCE``: the records are written) but
        closes the connection instead of answering, as if the network failed right after.
        A client that retries without idempotence then writes those records twice."""
        self._broker(node_id).lost_answers.lose(api_key, count)

    def answers_to_lose(self, node_id: int) -> int:
        """How many of the answers ``lose_answers`` asked for are still to be lost."""
        return self._broker(node_id).lost_answers.pending()

    def _broker(self, node_id: int) -> KafkaServer:
        try:
            return self.brokers[node_id]
        except KeyError:
            raise errors.ConfigError(
                f"no broker {node_id}; this cluster has brokers {self.broker_ids}"
            ) from None

    # ---- topics ------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
    ) -> None:
        """Create a topic (replication factor -1: every broker holds a replica)."""
        self.controller.create_topic(name, partitions, replication_factor, configs)

    def create_partitions(self, name: str, count: int) -> None:
        """Grow a topic to ``count`` partitions (as CreatePartitions does); producers and
        consumers see them at their next metadata refresh."""
        self.controller.create_partitions(name, count)

    def delete_topic(self, name: str) -> None:
        """Delete a topic, and every group's committed offsets of it."""
        topic = self.controller.delete_topic(name)
        self.consumer_offsets.drop_topic(name)
        for p in topic.partitions:
            self.controller.notify_append(p)

    def topics(self) -> dict[str, int]:
        """Topic name -> number of partitions."""
        with self.controller.lock:
            return {t.name: len(t.partitions) for t in self.controller.topics.values()}

    def leader(self, topic: str, partition: int = 0) -> int:
        """Node id of the partition's leader (-1 when no replica is live)."""
        return self._partition(topic, partition).leader_id

    def high_watermark(self, topic: str, partition: int = 0) -> int:
        """One past the last offset written (every written record is committed)."""
        p = self._partition(topic, partition)
        with p.lock:
            return p.log.high_watermark

    def read_batches(self, topic: str, partition: int = 0) -> list[RecordBatch]:
        """Every stored batch of a partition, as written (offsets assigned)."""
        p = self._partition(topic, partition)
        with p.lock:
            return list(p.log.iter_batches())

    def read_records(self, topic: str, partition: int = 0) -> list[Record]:
        """Every record of a partition (offset, timestamp, key, value, headers)."""
        return [r for batch in self.read_batches(topic, partition) for r in batch.records()]

    def _partition(self, topic: str, index: int) -> Partition:
        t: Topic | None = self.controller.topic(topic)
        if t is None:
            raise errors.UnknownTopicOrPartitionError(f"topic {topic!r} does not exist")
        if not 0 <= index < len(t.partitions):
            raise errors.UnknownTopicOrPartitionError(
                f"topic {topic!r} has {len(t.partitions)} partitions; there is no partition {index}"
            )
        return t.partitions[index]

    def producer_ids(self, topic: str, partition: int = 0) -> list[int]:
        """The producer ids whose state the partition keeps (forgotten after
        ``producer.id.expiration.ms`` idle)."""
        p = self._partition(topic, partition)
        with p.lock:
            return sorted(p.producer_state.entries)

    # ---- consumer groups ---------------------------------------------------------------

    def groups(self) -> dict[str, str]:
        """Group id -> state of every consumer group the cluster knows (with members, or
        with committed offsets)."""
        ids = set(self.consumer_offsets.group_ids())
        for server in self.brokers.values():
            coordinator = server.group_coordinator
            if coordinator is not None:
                with coordinator.lock:
                    ids.update(coordinator.groups)
        out = {}
        for group_id in sorted(ids):
            description = self.describe_group(group_id)
            if description is not None:
                out[group_id] = description.state
        return out

    def describe_group(self, group_id: str) -> GroupDescription | None:
        """A consumer group's state, generation and members (with their assignment), as
        its coordinator sees it; None when the group does not exist. Raises
        CoordinatorNotAvailableError when no broker is running."""
        node = coordinator_node(self.controller, group_id)
        server = self.brokers.get(node)
        coordinator = server.group_coordinator if server is not None else None
        if coordinator is None:
            raise errors.CoordinatorNotAvailableError(
                f"no broker is running to coordinate group {group_id!r}"
            )
        error, summary = coordinator.describe_group(group_id)
        if error:
            raise errors.for_code(error)(f"cannot describe group {group_id!r}")
        if summary is None:
            return None
        members = []
        for m in summary.members:
            try:
                assignment = consumer_protocol.assigned_partitions(m.assignment)
            except (ValueError, UnicodeDecodeError):
                assignment = {}  # not the consumer protocol
            members.append(
                MemberDescription(
                    m.member_id, m.group_instance_id, m.client_id, m.client_host, assignment
                )
            )
        return GroupDescription(
            summary.group_id,
            summary.state,
            summary.protocol_type,
            summary.protocol,
            summary.generation_id,
            summary.leader_id,
            node,
            tuple(members),
        )

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], int]:
        """(topic, partition) -> the offset the group committed (the next record it will
        consume); {} for a group without commits."""
        return {tp: o.offset for tp, o in self.consumer_offsets.offsets(group_id).items()}

    # ---- transactions ------------------------------------------------------------------

    def transaction_coordinator(self, transactional_id: str) -> int:
        """Node id of the broker coordinating ``transactional_id`` (-1: none is live)."""
        return coordinator_node(self.controller, transactional_id)

    def transactions(self) -> dict[str, str]:
        """Transactional id -> state (Empty, Ongoing, PrepareCommit, PrepareAbort,
        CompleteCommit, CompleteAbort) of every transactional id the cluster knows."""
        return {m.transactional_id: m.state.value for m in self.txn_state.transactions()}

    def last_stable_offset(self, topic: str, partition: int = 0) -> int:
        """Offsets below it are in no open transaction (what read_committed reads to)."""
        p = self._partition(topic, partition)
        with p.lock:
            return p.log.last_stable_offset

    # ---- client quotas -----------------------------------------------------------------

    def set_client_quotas(
        self,
        *,
        user: str | Literal[False] | None = False,
        client_id: str | Literal[False] | None = False,
        **quotas: float | None,
    ) -> None:
        """Set (a number) or remove (None) quotas of an entity, as AlterClientQuotas does:
        ``set_client_quotas(client_id="app", producer_byte_rate=1_000_000)``; None for
        ``user``/``client_id`` is the default entity (``<default>``), leaving one out
        leaves that part out. Keys: ``producer_byte_rate``, ``consumer_byte_rate``,
        ``request_percentage``, ``controller_mutation_rate``. ConfigError if refused."""
        self.client_quotas.set(entity(user, client_id), quotas)

    def client_quotas_of(self) -> dict[Entity, dict[str, float]]:
        """Every entity with quotas set (what DescribeClientQuotas shows)."""
        return {k: dict(v) for k, v in self.client_quotas.entities().items()}

    def quota_metrics(self, node_id: int | None = None) -> list[ClientQuotaMetrics]:
        """Per client with a quota: quota, measured rate, throttle count and time (of one
        broker, or of every broker)."""
        nodes = [node_id] if node_id is not None else list(self.brokers)
        return [m for n in nodes for m in self._broker(n).metrics_snapshot().client_quotas]

    # ---- metrics -----------------------------------------------------------------------

    def metrics(self) -> list[BrokerMetricsSnapshot]:
        """Request metrics of every broker (RequestsPerSec, TotalTimeMs ... per API)."""
        return [s.metrics_snapshot() for s in self.brokers.values()]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.bootstrap_servers or 'stopped'})"


class EmbeddedBroker(EmbeddedCluster):
    """One embedded broker (node id 0). ``port`` 0 (the default) picks a free port."""

    def __init__(self, *, config: BrokerConfig | None = None, **settings: Any) -> None:
        super().__init__(1, config=config, **settings)

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    @property
    def node_id(self) -> int:
        return 0

    @property
    def port(self) -> int:
        return self.brokers[0].port

    @property
    def host(self) -> str:
        return self.brokers[0].advertised_host
