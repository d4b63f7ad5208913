"""The in-process controller shared by every broker of an EmbeddedCluster.

Plays the part of Kafka's controller + metadata cache: the registered brokers and which
are live, the topics (name, topic id, per-topic configs) and their partitions (replicas,
leader, leader epoch, log), and producer id allocation (``ProducerIdManager``). With a log
dir, topics and leader epochs are kept by the ``MetadataStore`` (``topics.json`` and a
``partition.metadata`` per partition directory), so a restart brings back every topic
with leader epochs above those clients have seen.

Replicas share one in-process ``Log`` per partition, so every live replica is always in
sync: moving leadership (a broker stops) never loses an acknowledged record. Leaders
are spread round-robin over the brokers; a stopped broker's partitions move to the next
live replica (leader epoch + 1); a started broker takes back the partitions it is the
preferred (first) replica of, like Kafka's preferred leader election.

Thread-safety: topic/broker changes hold ``Controller.lock``; each ``Partition`` has its
own lock, held for appends and leadership changes of that partition.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from kclient import errors
from kclient.broker.config import BrokerConfig
from kclient.broker.log import Log
from kclient.broker.metadata_store import MetadataStore, TopicRecord, write_partition_metadata
from kclient.broker.producer_id_manager import ProducerIdManager
from kclient.broker.producer_state import ProducerStateManager
from kclient.broker.topic_changes import TopicChanges
from kclient.broker.topic_config import MAX_MESSAGE_BYTES, TIMESTAMP_TYPE, validate_topic_configs

log = logging.getLogger(__name__)

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME_LENGTH = 249


def validate_topic_name(name: str | None) -> None:
    """Kafka's ``Topic.validate``: raises INVALID_TOPIC_EXCEPTION with the reason."""
    if not name:
        raise errors.InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise errors.InvalidTopicError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise errors.InvalidTopicError(
            f"topic name is {len(name)} characters, the maximum is {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _TOPIC_NAME.match(name):
        raise errors.InvalidTopicError(
            f"topic name {name!r} may only contain ASCII letters, digits, '.', '_' and '-'"
        )


@dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


class Partition:
    """One topic-partition: replicas, leader, leader epoch, its log and producer state."""

    def __init__(self, topic: Topic, index: int, replicas: list[int], log_: Log) -> None:
        self.topic = topic
        self.index = index
        self.replicas = replicas
        self.leader_id = -1
        self.leader_epoch = -1  # the first election makes it 0
        self.log = log_
        self.lock = threading.Lock()

    @property
    def producer_state(self) -> ProducerStateManager:
        return self.log.producer_state

    @property
    def name(self) -> str:
        return f"{self.topic.name}-{self.index}"

    def __repr__(self) -> str:
        return f"Partition({self.name}, leader={self.leader_id}, epoch={self.leader_epoch})"


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    configs: dict[str, str]
    partitions: list[Partition] = field(default_factory=list)
    deleted: bool = False

    @property
    def log_append_time(self) -> bool:
        return self.configs.get(TIMESTAMP_TYPE) == "LogAppendTime"

    def max_message_bytes(self, default: int) -> int:
        value = self.configs.get(MAX_MESSAGE_BYTES)
        return int(value) if value is not None else default


class Controller(TopicChanges):
    """Cluster metadata and partition logs, shared by the brokers of one process; a topic
    grows or changes its configs in ``TopicChanges`` (``topic_changes.py``)."""

    def __init__(self, config: BrokerConfig, broker_ids: Iterable[int]) -> None:
        self.config = config
        self.broker_ids = sorted(broker_ids)
        if not self.broker_ids:
            raise ValueError("a cluster needs at least one broker")
        self.lock = threading.RLock()
        self.endpoints: dict[int, BrokerEndpoint] = {}
        self.live: set[int] = set()
        self.topics: dict[str, Topic] = {}
        #: each topic's name with '.' as '_' (how metrics name it) → the topic's name
        self._by_metric_name: dict[str, str] = {}
        self.topics_by_id: dict[uuid.UUID, Topic] = {}
        self._next_leader_start = 0
        #: names of topics whose logs are being opened (outside the lock)
        self._creating: set[str] = set()
        self._append_listeners: list[Callable[[Partition], object]] = []
        self.log_dir = Path(config.log_dir) if config.log_dir else None
        self._store: MetadataStore | None = None
        self._clean_shutdown = False
        if self.log_dir is not None:
            self.log_dir.mkdir(parents=True, exist_ok=True)
            self._store = MetadataStore(self.log_dir)
            self._clean_shutdown = self._store.take_clean_shutdown_marker()
        self.producer_ids = ProducerIdManager(self.log_dir)
        if self._store is not None:
            self._load_topics(self._store)
            self.producer_ids.recovered(
                max(
                    (p.producer_state.max_producer_id() for p in self._all_partitions()), default=-1
                )
            )

    # ---- brokers -----------------------------------------------------------------------

    def broker_started(self, endpoint: BrokerEndpoint) -> None:
        """A broker is serving: register it, elect leaders it should (re)take."""
        with self.lock:
            self.endpoints[endpoint.node_id] = endpoint
            self.live.add(endpoint.node_id)
            elected = False
            for partition in self._all_partitions():
                with partition.lock:
                    preferred = partition.replicas[0]
                    if partition.leader_id == -1 or (
                        preferred == endpoint.node_id and partition.leader_id != preferred
                    ):
                        elected |= self._elect(partition)
            if elected:
                self._save_topics()

    def broker_stopped(self, node_id: int) -> None:
        """A broker stopped: move the leadership of its partitions to live replicas."""
        with self.lock:
            self.live.discard(node_id)
            elected = False
            for partition in self._all_partitions():
                with partition.lock:
                    if partition.leader_id == node_id:
                        elected |= self._elect(partition)
            if elected:
                self._save_topics()

    def _elect(self, partition: Partition) -> bool:
        """Preferred live replica becomes leader (caller holds the partition lock);
        whether the leader changed (the new epoch is then to be saved)."""
        leader = next((r for r in partition.replicas if r in self.live), -1)
        if leader == partition.leader_id:
            return False
        partition.leader_id = leader
        partition.leader_epoch += 1
        log.info("%s: leader is now %d (epoch %d)", partition.name, leader, partition.leader_epoch)
        return True

    def live_brokers(self) -> list[BrokerEndpoint]:
        with self.lock:
            return [self.endpoints[i] for i in sorted(self.live)]

    def controller_id(self) -> int:
        with self.lock:
            return min(self.live) if self.live else -1

    # ---- topics ------------------------------------------------------------------------

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: dict[str, str] | None = None,
        *,
        validate_only: bool = False,
    ) -> Topic:
        """Create a topic (CreateTopics, auto-creation, the Python API). Raises the Kafka
        error for a bad name, count, replication factor or config, or an existing topic."""
        validate_topic_name(name)
        configs = dict(configs or {})
        validate_topic_configs(configs)
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if num_partitions <= 0:
            raise errors.InvalidPartitionsError(
                f"number of partitions must be at least 1, got {num_partitions}"
            )
        if num_partitions > self.config.max_partitions_per_topic:
            raise errors.InvalidPartitionsError(
                f"{num_partitions} partitions is more than this broker allows per topic "
                f"('max.partitions.per.topic' is {self.config.max_partitions_per_topic})"
            )
        n_brokers = len(self.broker_ids)
        if replication_factor == -1:
            replication_factor = n_brokers
        if replication_factor <= 0 or replication_factor > n_brokers:
            raise errors.InvalidReplicationFactorError(
                f"replication factor {replication_factor} is not in 1..{n_brokers} "
                f"(the cluster has {n_brokers} brokers)"
            )
        with self.lock:
            existing = self.topics.get(name)
            if existing is not None or name in self._creating:
                raise errors.TopicAlreadyExistsError(f"topic {name!r} already exists")
            collision = name.replace(".", "_")
            others = [self._by_metric_name.get(collision)]  # a dict: no walk over the topics
            others += [n for n in self._creating if n.replace(".", "_") == collision]
            for other in others:
                if other is not None:
                    raise errors.InvalidTopicError(
                        f"topic {name!r} collides with existing topic {other!r} "
                        "('.' and '_' are the same in metric names)"
                    )
            topic = Topic(name, uuid.uuid4(), configs)
            if validate_only:
                return topic
            start = self._next_leader_start
            self._next_leader_start += 1
            self._creating.add(name)  # the name is taken while its logs are opened
        # the logs (directories and files, with a log dir) are opened without the lock, so
        # that Metadata and other requests go on meanwhile; a crash now leaves directories
        # of a topic not in topics.json, which start-up removes
        try:
            try:
                for p in range(num_partitions):
                    topic.partitions.append(
                        self._new_partition(topic, p, start, replication_factor)
                    )
            except OSError as exc:
                self._unregister(topic)
                raise errors.KafkaStorageError(f"cannot create topic {name!r}: {exc}") from exc
            with self.lock:
                try:
                    self._register(topic)
                    self._save_topics()  # the topic exists once this is written
                except OSError as exc:
                    self._unregister(topic)
                    raise errors.KafkaStorageError(f"cannot create topic {name!r}: {exc}") from exc
        finally:
            with self.lock:
                self._creating.discard(name)
        log.info("created topic %s with %d partitions", name, num_partitions)
        return topic

    def _register(self, topic: Topic) -> None:
        self.topics[topic.name] = topic
        self._by_metric_name[topic.name.replace(".", "_")] = topic.name
        self.topics_by_id[topic.topic_id] = topic
        for partition in topic.partitions:
            with partition.lock:
                self._elect(partition)

    def _unregister(self, topic: Topic) -> None:
        """Undo a topic creation that could not be stored."""
        if self.topics.get(topic.name) is topic:
            del self.topics[topic.name]
            self._by_metric_name.pop(topic.name.replace(".", "_"), None)
            self.topics_by_id.pop(topic.topic_id, None)
        for partition in topic.partitions:
            with partition.lock, contextlib.suppress(OSError):
                partition.leader_id = -1
                partition.log.delete()

    def delete_topic(self, name: str) -> Topic:
        with self.lock:
            topic = self.topics.pop(name, None)
            if topic is None:
                raise errors.UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
            self._by_metric_name.pop(name.replace(".", "_"), None)
            del self.topics_by_id[topic.topic_id]
            topic.deleted = True
            # gone from topics.json first: a crash before the files go leaves only strays
            self._save_topics()
            for partition in topic.partitions:
                with partition.lock:
                    partition.leader_id = -1
                    try:
                        partition.log.delete()
                    except OSError as exc:
                        log.warning("%s: its files could not be removed: %s", partition, exc)
        log.info("deleted topic %s", name)
        return topic

    def topic(self, name: str) -> Topic | None:
        return self.topics.get(name)

    def existing_topic(self, name: str) -> Topic:
        """The topic, or UNKNOWN_TOPIC_OR_PARTITION naming it."""
        topic = self.topics.get(name)
        if topic is None:
            raise errors.UnknownTopicOrPartitionError(f"topic {name!r} does not exist")
        return topic

    def topic_by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self.topics_by_id.get(topic_id)

    def partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    def _all_partitions(self) -> list[Partition]:
        return [p for t in self.topics.values() for p in t.partitions]

    # ---- producers, appends ------------------------------------------------------------

    def remove_expired_producers(self, node_id: int, now_ms: int, expiration_ms: int) -> int:
        """Forget, in the partitions broker ``node_id`` leads, the producers idle for
        ``expiration_ms`` (``producer.id.expiration.ms``); how many."""
        with self.lock:
            partitions = self._all_partitions()
        removed = 0
        for partition in partitions:
            with partition.lock:
                if partition.leader_id == node_id and not partition.topic.deleted:
                    removed += partition.producer_state.remove_expired_producers(
                        now_ms, expiration_ms
                    )
        if removed:
            log.info(
                "broker %d: forgot %d producer ids idle for %d ms (producer.id.expiration.ms)",
                node_id,
                removed,
                expiration_ms,
            )
        return removed

    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, for the life of the log dir. Raises
        KafkaStorageError when the id block cannot be recorded."""
        try:
            return self.producer_ids.next_id()
        except OSError as exc:
            raise errors.KafkaStorageError(f"cannot reserve producer ids: {exc}") from exc

    def add_append_listener(self, listener: Callable[[Partition], object]) -> None:
        """Called (on the appending thread) after records were appended to a partition."""
        self._append_listeners.append(listener)

    def notify_append(self, partition: Partition) -> None:
        for listener in list(self._append_listeners):
            listener(partition)

    # ---- persistence -------------------------------------------------------------------

    def _new_partition(
        self, topic: Topic, index: int, start: int, replication_factor: int
    ) -> Partition:
        """Partition ``index`` of ``topic``, its log opened (files created with a log dir);
        its replicas the next ``replication_factor`` brokers from ``start + index``, so that
        a topic's leaders go round the brokers."""
        n_brokers = len(self.broker_ids)
        replicas = [
            self.broker_ids[(start + index + i) % n_brokers] for i in range(replication_factor)
        ]
        return Partition(topic, index, replicas, self._open_log(topic.name, index, topic.topic_id))

    def _open_log(self, topic: str, index: int, topic_id: uuid.UUID) -> Log:
        if self._store is None:
            return Log(topic, index, None, self.config.log_segment_bytes)
        directory = self._store.partition_dir(topic, index)
        write_partition_metadata(directory, topic, topic_id, index)
        return Log(
            topic,
            index,
            directory,
            self.config.log_segment_bytes,
            clean_shutdown=self._clean_shutdown,
        )

    def _save_topics(self) -> None:
        """Rewrite the topic metadata (with the current leader epochs). Raises OSError."""
        if self._store is None:
            return
        self._store.save(
            [
                TopicRecord(
                    t.name,
                    t.topic_id,
                    t.configs,
                    [p.replicas for p in t.partitions],
                    [p.leader_epoch for p in t.partitions],
                )
                for t in self.topics.values()
            ]
        )

    def _load_topics(self, store: MetadataStore) -> None:
        stored = store.load()
        store.remove_strays(stored)
        for record in stored:
            topic = Topic(record.name, record.topic_id, dict(record.configs))
            for index, replicas in enumerate(record.replicas):
                replicas = [r for r in replicas if r in self.broker_ids] or [
                    self.broker_ids[index % len(self.broker_ids)]
                ]
                partition = Partition(
                    topic, index, replicas, self._open_log(record.name, index, record.topic_id)
                )
                if index < len(record.leader_epochs):
                    # the next election makes it one more than any epoch clients have seen
                    partition.leader_epoch = max(-1, record.leader_epochs[index])
                topic.partitions.append(partition)
            self._register(topic)
            self._next_leader_start += 1
        log.info(
            "recovered %d topics from %s (%s shutdown)",
            len(self.topics),
            self.log_dir,
            "clean" if self._clean_shutdown else "unclean",
        )

    def close(self) -> None:
        """Flush and close every log, then mark the shutdown clean (process shutdown)."""
        with self.lock:
            for partition in self._all_partitions():
                with partition.lock:
                    partition.log.close()
            if self._store is not None:
                try:
                    self._save_topics()
                    self._store.mark_clean_shutdown()
                except OSError as exc:
                    log.warning("the next start will check the logs: %s", exc)
